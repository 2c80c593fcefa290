/* StarCoder2: Llama's layout with LayerNorm (bias, norm_epsilon), biases on
 * every projection (use_bias), a plain MLP c_fc -> act -> c_proj, a sliding
 * window on every layer, and a tied head by default. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    int w;
    bool bias, tied;
    if (mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w) ||
        mx_cfg_f32(c, "norm_epsilon", 1e-5f, 0, 1, &a->norm.eps) || mx_cfg_bool(c, "use_bias", true, &bias) ||
        mx_cfg_bool(c, "tie_word_embeddings", true, &tied) || mx_arch_act_default(a, c, "gelu_pytorch_tanh"))
        return -1;
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = true;
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = a->attn->o_bias = a->mlp_bias = bias;
    a->tied = tied;
    a->mlp = MX_MLP_PLAIN;
    a->names.gate = NULL;
    a->names.up = "model.layers.%d.mlp.c_fc";
    a->names.down = "model.layers.%d.mlp.c_proj";
    mx_arch_set_window_all(a, w);
    return 0;
}

MX_FAMILY(starcoder2, .name = "starcoder2", .base = "llama", .features = "layernorm, biases, gelu mlp, sliding window, tied head",
          .configure = configure)
