/* StableLM: Llama with LayerNorm (bias, layer_norm_eps), partial rotary, q/k/v
 * biases when use_qkv_bias, an optional per-head LayerNorm (no bias) on q and
 * k with one weight per head (qk_layernorm), and when use_parallel_residual a
 * parallel block on input_layernorm alone. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    bool qkv_bias, qk_ln, par;
    if (mx_cfg_f32(c, "layer_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_bool(c, "use_qkv_bias", false, &qkv_bias) || mx_cfg_bool(c, "qk_layernorm", false, &qk_ln) ||
        mx_cfg_bool(c, "use_parallel_residual", false, &par))
        return -1;
    a->rope_decl[0].partial = 0.25; /* StableLmConfig's partial_rotary_factor */
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = true;
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = qkv_bias;
    a->attn->o_bias = false;
    if (qk_ln) {
        a->attn->qk_norm = MX_QKNORM_HEAD_EACH;
        a->attn->qk_norm_spec = a->norm;
        a->attn->qk_norm_spec.bias = false;
        a->attn->names.q_norm = "model.layers.%d.self_attn.q_layernorm.norms.%d";
        a->attn->names.k_norm = "model.layers.%d.self_attn.k_layernorm.norms.%d";
    }
    if (par) {
        a->residual = MX_RES_PARALLEL;
        a->names.ffn_norm = NULL;
    }
    return 0;
}

MX_FAMILY(stablelm, .name = "stablelm", .base = "llama", .features = "layernorm, partial rotary, qkv bias, per-head q/k layernorm, optional parallel block",
          .configure = configure)
