/* StableLM: Llama with LayerNorm (bias, layer_norm_eps), partial rotary, q/k/v
 * biases when use_qkv_bias, an optional per-head LayerNorm (no bias) on q and
 * k with one weight per head (qk_layernorm), and when use_parallel_residual a
 * parallel block on input_layernorm alone. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    bool qkv_bias, qk_ln, par;
    if (mx_arch_hf_defaults(a, c) || mx_cfg_f32(c, "layer_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_bool(c, "use_qkv_bias", false, &qkv_bias) || mx_cfg_bool(c, "qk_layernorm", false, &qk_ln) ||
        mx_cfg_bool(c, "use_parallel_residual", false, &par))
        return -1;
    if (mx_arch_rope_defaults(a, c, 10000, 0.25)) return -1; /* StableLmConfig's partial_rotary_factor */
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = true;
    a->q_bias = a->k_bias = a->v_bias = qkv_bias;
    a->o_bias = false;
    if (qk_ln) {
        a->qk_norm = MX_QKNORM_HEAD_EACH;
        a->qk_norm_spec = a->norm;
        a->qk_norm_spec.bias = false;
        a->names.q_norm = "model.layers.%d.self_attn.q_layernorm.norms.%d";
        a->names.k_norm = "model.layers.%d.self_attn.k_layernorm.norms.%d";
    }
    if (par) {
        a->residual = MX_RES_PARALLEL;
        a->names.ffn_norm = NULL;
    }
    return 0;
}

MX_FAMILY(stablelm, .name = "stablelm", .features = "layernorm, partial rotary, qkv bias, per-head q/k layernorm, optional parallel block",
          .configure = configure)
