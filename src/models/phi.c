/* Phi (1, 1.5, 2): a parallel block (attention and MLP both read
 * input_layernorm(h)), LayerNorm with bias, partial rotary, biases on every
 * projection, a plain GELU MLP fc1 -> act -> fc2, and an lm_head bias. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    bool qk_ln;
    if (mx_cfg_f32(c, "layer_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_bool(c, "qk_layernorm", false, &qk_ln) || mx_arch_act_default(a, c, "gelu_new"))
        return -1;
    a->rope_decl[0].partial = 0.5;
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = true;
    a->attn->qk_norm_spec = a->norm;
    if (qk_ln) {
        a->attn->qk_norm = MX_QKNORM_HEAD;
        a->attn->names.q_norm = "model.layers.%d.self_attn.q_layernorm";
        a->attn->names.k_norm = "model.layers.%d.self_attn.k_layernorm";
    }
    a->residual = MX_RES_PARALLEL;
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = a->attn->o_bias = a->mlp_bias = a->lm_head_bias = true;
    a->mlp = MX_MLP_PLAIN;
    a->names.final_norm = "model.final_layernorm";
    a->attn->names.o = "model.layers.%d.self_attn.dense";
    a->names.ffn_norm = a->names.gate = NULL;
    a->names.up = "model.layers.%d.mlp.fc1";
    a->names.down = "model.layers.%d.mlp.fc2";
    return 0;
}

MX_FAMILY(phi, .name = "phi", .base = "llama", .features = "parallel block, layernorm, partial rotary, biases, gelu mlp, lm_head bias",
          .configure = configure)
