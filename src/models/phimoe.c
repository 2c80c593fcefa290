/* PhiMoE: Mixtral's layout with LayerNorms (weight and bias, eps
 * rms_norm_eps), optional attention and lm_head biases, and the sparsemixer
 * top-2 router. Its longrope carries explicit short/long mscales. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    if (mx_cfg_i32(c, "num_local_experts", 16, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_bool(c, "lm_head_bias", false, &a->lm_head_bias) ||
        mx_cfg_f32(c, "router_jitter_noise", 0.01f, 0, 1, &s->jitter_eps))
        return -1;
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = true;
    s->route = MX_ROUTE_SPARSEMIXER;
    s->norm_p = 0;
    json_t *rs = mx_cfg_get(c, "rope_scaling");
    if (rs) { /* HF PhiMoE: cos/sin times short_mscale or long_mscale (by length), not longrope's own factor */
        mx_cfg r = {rs, NULL, c->file};
        double sm, lm;
        if (mx_cfg_float(&r, "short_mscale", -1, 1e-6, 1e6, &sm) || mx_cfg_float(&r, "long_mscale", -1, 1e-6, 1e6, &lm)) return -1;
        if (sm >= 0 || lm >= 0) {
            if (sm != lm) return mx_set_err("%s: rope_scaling: distinct short_mscale %g and long_mscale %g are not supported", c->file, sm, lm);
            a->rope_decl[0].attn_factor = sm;
        }
    }
    return 0;
}

MX_FAMILY(phimoe, .name = "phimoe", .base = "mixtral", .features = "mixtral + layernorm, attention/lm-head biases, sparsemixer top-2 router",
          .configure = configure)
