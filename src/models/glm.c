/* GLM: Llama with q/k/v biases (o_proj none), interleaved partial rotary
 * (pairs (2i, 2i+1) over the first head_dim * partial_rotary_factor dims) and
 * a fused gate_up_proj ([gate | up]). GLM-4 builds on it. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    /* GlmConfig defaults: partial_rotary_factor 0.5, rms_norm_eps 1.5625e-7, attention_bias true */
    bool bias;
    if (mx_cfg_f32(c, "rms_norm_eps", 1.5625e-7f, 0, 1, &a->norm.eps) || mx_cfg_bool(c, "attention_bias", true, &bias))
        return -1;
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = bias;
    a->attn->o_bias = false;
    a->rope_decl[0] = (mx_rope_decl){.partial = 0.5, .interleaved = true};
    a->names.gate = a->names.up = NULL;
    a->names.gate_up = "model.layers.%d.mlp.gate_up_proj";
    return 0;
}

MX_FAMILY(glm, .name = "glm", .base = "llama", .features = "llama + qkv bias, interleaved partial rotary, fused gate_up",
          .configure = configure)
