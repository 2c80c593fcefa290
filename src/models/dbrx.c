/* DBRX: its own config layout (d_model, n_heads, n_layers, max_seq_len and
 * nested attn_config / ffn_config whose absent keys take the HF defaults),
 * bias-free LayerNorms, a fused Wqkv clamped to +-clip_qkv, and sparse MoE
 * MLPs: softmax router, top-k weights divided by their
 * moe_normalize_expert_weights-norm, experts stored as 2-D [E*I, H] tensors
 * w1 (gate), v1 (up) and w2 (down, stored [in, out]). */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    json_t *ja = mx_cfg_get(c, "attn_config"), *jf = mx_cfg_get(c, "ffn_config");
    if ((ja && !json_is_object(ja)) || (jf && !json_is_object(jf)))
        return mx_set_err("%s: attn_config and ffn_config must be objects", c->file);
    mx_cfg ac = {ja, NULL, c->file}, fc = {jf, NULL, c->file};
    double norm_p;
    int n_layers;
    if (mx_cfg_i32(c, "n_layers", 24, 1, MX_MAX_LAYERS, &n_layers) || mx_arch_layers(a, n_layers)) return -1;
    mx_attn_spec *at = a->attn;
    if (mx_cfg_i32(c, "d_model", 2048, 1, 1 << 18, &a->hidden) || mx_cfg_i32(c, "n_heads", 16, 1, 4096, &at->n_heads) ||
        mx_cfg_i32(c, "max_seq_len", 2048, 1, 1 << 26, &a->max_pos) ||
        mx_cfg_i32(c, "vocab_size", 32000, 1, 1 << 24, &a->vocab) || mx_cfg_bool(c, "tie_word_embeddings", false, &a->tied) ||
        mx_cfg_i32(&ac, "kv_n_heads", 1, 1, 4096, &at->n_kv_heads) || mx_cfg_f32(&ac, "clip_qkv", 0, 0, 1e9f, &at->clip_qkv) ||
        mx_cfg_i32(&fc, "ffn_hidden_size", 3584, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(&fc, "moe_num_experts", 4, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(&fc, "moe_top_k", 1, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_float(&fc, "moe_normalize_expert_weights", 1.0, 0, 1e3, &norm_p))
        return -1;
    if (jf && json_object_get(jf, "moe_normalize_expert_weights") && json_is_null(json_object_get(jf, "moe_normalize_expert_weights")))
        norm_p = 0; /* null: no renormalisation */
    if (a->hidden % at->n_heads || at->n_heads % at->n_kv_heads)
        return mx_set_err("%s: d_model %d, n_heads %d and kv_n_heads %d are inconsistent", c->file, a->hidden, at->n_heads, at->n_kv_heads);
    at->head_dim = a->hidden / at->n_heads;
    a->ffn = s->ffn;
    s->act = MX_ACT_SILU;
    json_t *act = jf ? json_object_get(jf, "ffn_act_fn") : NULL;
    if (act && !json_is_null(act)) {
        json_t *nm = json_is_object(act) ? json_object_get(act, "name") : NULL;
        if (nm && (!json_is_string(nm) || mx_act_parse(json_string_value(nm), &s->act)))
            return mx_set_err("%s: ffn_config.ffn_act_fn: unsupported activation", c->file);
    }
    a->act = s->act;
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, false, 1e-5f};
    a->pos = MX_POS_ROPE;
    a->n_rope = 1;
    a->rope_decl[0].section = "attn_config";
    at->scale = 1.0f / sqrtf((float)at->head_dim);
    a->embed_scale = a->logit_scale = a->residual_scale = 1;
    a->mlp = MX_MLP_GATED;
    a->bos_id = -1;
    a->names = (mx_names){.embed = "transformer.wte", .final_norm = "transformer.norm_f", .lm_head = "lm_head",
                          .attn_norm = "transformer.blocks.%d.norm_attn_norm.norm_1",
                          .ffn_norm = "transformer.blocks.%d.norm_attn_norm.norm_2"};
    at->names = (mx_attn_names){.qkv = "transformer.blocks.%d.norm_attn_norm.attn.Wqkv",
                                .o = "transformer.blocks.%d.norm_attn_norm.attn.out_proj"};
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = (float)norm_p;
    s->gated = true;
    s->router = "transformer.blocks.%d.ffn.router.layer";
    s->experts = (mx_expert_names){.gate = "transformer.blocks.%d.ffn.experts.mlp.w1", .up = "transformer.blocks.%d.ffn.experts.mlp.v1",
                                   .down = "transformer.blocks.%d.ffn.experts.mlp.w2", .transposed = MX_EXP_T_DOWN};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    mx_arch_ignore(a, "*rotary_emb.inv_freq");
    return 0;
}

MX_FAMILY(dbrx, .name = "dbrx", .features = "nested attn/ffn configs, bias-free layernorm, fused clipped qkv, moe (p-norm renormalised), 2-D stacked experts",
          .configure = configure)
