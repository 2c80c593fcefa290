/* phi-msft: the original Microsoft remote-code layout of phi-1/1.5/2. It is
 * the same model as transformers' Phi under other config keys (n_embd,
 * n_layer, n_head, n_head_kv, n_inner, n_positions, rotary_dim,
 * layer_norm_epsilon, activation_function) and tensor names
 * (transformer.embd.wte, transformer.h.<i>.{ln, mixer.Wqkv, mixer.out_proj,
 * mlp.fc1, mlp.fc2}, lm_head.{ln, linear}; Wqkv is the fused [q | k | v]):
 * the keys are read under their transformers names by the phi family, then
 * the names are this layout's. Phixtral (the same model_type with
 * num_local_experts) is a MoE this family does not implement. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_cfg_has(c, "num_local_experts")) return mx_set_err("%s: phi-msft with num_local_experts (Phixtral MoE) is not supported", c->file);
    static const char *keys[][2] = {{"n_embd", "hidden_size"}, {"n_layer", "num_hidden_layers"}, {"n_head", "num_attention_heads"},
                                    {"n_head_kv", "num_key_value_heads"}, {"n_inner", "intermediate_size"},
                                    {"n_positions", "max_position_embeddings"}, {"layer_norm_epsilon", "layer_norm_eps"},
                                    {"activation_function", "hidden_act"}, {"vocab_size", "vocab_size"},
                                    {"tie_word_embeddings", "tie_word_embeddings"}, {"bos_token_id", "bos_token_id"}};
    int E, nh, rot;
    if (mx_cfg_i32(c, "n_embd", 0, 1, 1 << 18, &E) || mx_cfg_i32(c, "n_head", 0, 1, 4096, &nh)) return -1;
    if (!E || !nh || E % nh) return mx_set_err("%s: n_embd and n_head are required, n_embd a multiple of n_head", c->file);
    if (mx_cfg_i32(c, "rotary_dim", 0, 2, E / nh, &rot)) return -1;
    if (rot % 2) return mx_set_err("%s: rotary_dim %d must be even", c->file, rot);
    json_t *t = json_object();
    if (!t) return mx_set_err("out of memory");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = mx_cfg_get(c, keys[i][0]);
        if (v) json_object_set(t, keys[i][1], v);
    }
    mx_cfg tc = {t, NULL, c->file};
    int rc = mx_family_configure(mx_family_find("phi"), a, &tc);
    json_decref(t);
    if (rc) return -1;
    a->rope_decl[0].dim = rot; /* the ropes are built again from this config, which has no partial_rotary_factor */
    a->names = (mx_names){.embed = "transformer.embd.wte", .final_norm = "lm_head.ln", .lm_head = "lm_head.linear",
                          .attn_norm = "transformer.h.%d.ln", .up = "transformer.h.%d.mlp.fc1", .down = "transformer.h.%d.mlp.fc2"};
    a->attn->names = (mx_attn_names){.qkv = "transformer.h.%d.mixer.Wqkv", .o = "transformer.h.%d.mixer.out_proj"};
    return 0;
}

MX_FAMILY(phi_msft, .name = "phi-msft", .features = "phi under its original remote-code keys and tensor names (fused Wqkv)",
          .configure = configure)
