/* GPT-2: learned positions, LayerNorm with bias, a plain GELU MLP, fused qkv,
 * biases everywhere, and Conv1D weights stored [in, out]. */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    float eps;
    int err = 0, n_layers, heads;
    if (mx_cfg_i32(c, "n_embd", 0, 1, 1 << 18, &a->hidden) || mx_cfg_i32(c, "n_layer", 0, 1, MX_MAX_LAYERS, &n_layers) ||
        mx_cfg_i32(c, "n_head", 0, 1, 4096, &heads) || mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 24, &a->vocab) ||
        mx_cfg_i32(c, "n_positions", 1024, 1, 1 << 26, &a->max_pos) || mx_cfg_f32(c, "layer_norm_epsilon", 1e-5f, 0, 1, &eps))
        return -1;
    if (!a->hidden || !n_layers || !heads || !a->vocab) return mx_set_err("%s: n_embd, n_layer, n_head and vocab_size are required", c->file);
    if (a->hidden % heads) return mx_set_err("%s: n_embd %d is not divisible by n_head %d", c->file, a->hidden, heads);
    if (mx_arch_layers(a, n_layers)) return -1;
    int hd = a->hidden / heads;
    *a->attn = (mx_attn_spec){.n_heads = heads, .n_kv_heads = heads, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd),
                              .q_bias = true, .o_bias = true,
                              .names = {.qkv = "transformer.h.%d.attn.c_attn", .o = "transformer.h.%d.attn.c_proj"}};
    if (mx_cfg_i32(c, "n_inner", 4 * a->hidden, 1, 1 << 20, &a->ffn)) return -1;
    const char *act = mx_cfg_str(c, "activation_function", "gelu_new", &err);
    if (err) return -1;
    if (mx_act_parse(act, &a->act)) return mx_set_err("%s: activation_function: unsupported '%s'", c->file, act);
    bool tied;
    if (mx_cfg_bool(c, "tie_word_embeddings", true, &tied)) return -1;
    a->tied = tied;
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, eps};
    a->mlp = MX_MLP_PLAIN;
    a->mlp_bias = true;
    a->conv1d = true;
    a->pos = MX_POS_LEARNED;
    a->embed_scale = a->logit_scale = a->residual_scale = 1;
    a->bos_id = -1;
    for (int i = 0; i < a->n_layers; i++) a->layers[i].rope = false;
    a->names = (mx_names){
        .embed = "transformer.wte", .pos_embed = "transformer.wpe", .final_norm = "transformer.ln_f", .lm_head = "lm_head",
        .attn_norm = "transformer.h.%d.ln_1", .ffn_norm = "transformer.h.%d.ln_2", .up = "transformer.h.%d.mlp.c_fc",
        .down = "transformer.h.%d.mlp.c_proj",
    };
    mx_arch_ignore(a, "transformer.h.*.attn.bias");
    mx_arch_ignore(a, "transformer.h.*.attn.masked_bias");
    return 0;
}

MX_FAMILY(gpt2, .name = "gpt2", .features = "learned positions, layernorm, gelu mlp, fused qkv, Conv1D layout",
          .configure = configure)
