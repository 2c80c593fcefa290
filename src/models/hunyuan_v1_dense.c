/* HunYuan v1 (dense): Llama whose per-head q/k RMSNorms (query_layernorm /
 * key_layernorm) act AFTER rope, and whose rope_scaling {type: dynamic,
 * alpha: a} is HunYuan's NTK-alpha rope: a fixed base
 * rope_theta * a^(head_dim / (head_dim - 2)) at every length (HF recomputes a
 * plain dynamic-NTK base past max_position_embeddings, losing alpha; the
 * released implementation keeps it). hunyuan_v1_moe builds on this family. */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    bool qk, cla;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_cfg_bool(c, "use_qk_norm", true, &qk) ||
        mx_cfg_bool(c, "use_cla", false, &cla))
        return -1;
    if (!qk) return mx_set_err("%s: use_qk_norm false is not supported (the HunYuan v1 attention always has q/k norms)", c->file);
    if (cla) return mx_set_err("%s: use_cla (cross-layer KV sharing) is not supported", c->file);
    json_t *rs = mx_cfg_get(c, "rope_scaling"), *rp = mx_cfg_get(c, "rope_parameters");
    if (!rs) rs = rp;
    json_t *type = rs ? json_object_get(rs, "rope_type") : NULL;
    if (!type && rs) type = json_object_get(rs, "type");
    if (rs && json_object_get(rs, "alpha") && json_is_string(type) && !strcmp(json_string_value(type), "dynamic")) {
        mx_cfg r = {rs, NULL, c->file};
        double alpha, theta;
        int hd = a->attn->head_dim;
        if (mx_cfg_float(&r, "alpha", 1, 1e-6, 1e9, &alpha) || mx_cfg_float(&r, "rope_theta", 10000.0, 1e-3, 1e15, &theta)) return -1;
        if (hd < 4) return mx_set_err("%s: head_dim %d is too small for the NTK-alpha rope", c->file, hd);
        double s = pow(alpha, (double)hd / (hd - 2));
        if (!isfinite(s * theta)) return mx_set_err("%s: rope_scaling.alpha %g gives an infinite rope base", c->file, alpha);
        /* the base times alpha^(d/(d-2)), no other scaling (rope_theta from rope_parameters when that is where it is) */
        a->rope_decl[0] = (mx_rope_decl){.theta = theta, .theta_scale = s, .plain = true};
    }
    a->attn->qk_norm_spec = a->norm;
    a->attn->qk_norm = MX_QKNORM_HEAD;
    a->attn->qk_norm_after_rope = true;
    a->attn->names.q_norm = "model.layers.%d.self_attn.query_layernorm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.key_layernorm";
    return 0;
}

MX_FAMILY(hunyuan_v1_dense, .name = "hunyuan_v1_dense", .base = "llama",
          .features = "llama + per-head q/k rmsnorm after rope, ntk-alpha rope", .configure = configure)
