/* Mamba2: Mamba with the SSD mixer (scalar A per head, grouped B/C, gated
 * RMSNorm), untied head by default. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

/* Reads the Mamba2 mixer keys shared by Mamba2 and the hybrids built on it. */
int mx_mamba2_ssm_config(mx_ssm_spec *s, const mx_cfg *c, int hidden, const char *eps_key) {
    double expand;
    bool rms;
    if (mx_cfg_float(c, "expand", 2, 1e-3, 64, &expand) ||
        mx_cfg_i32(c, "num_heads", 128, 1, 1 << 16, &s->n_heads) ||
        mx_cfg_i32(c, "head_dim", 64, 1, 1 << 16, &s->head_dim) ||
        mx_cfg_i32(c, "n_groups", 1, 1, 1 << 16, &s->n_groups) ||
        mx_cfg_i32(c, "state_size", 128, 1, 1 << 12, &s->d_state) ||
        mx_cfg_i32(c, "conv_kernel", 4, 1, 64, &s->d_conv) ||
        mx_cfg_bool(c, "use_bias", false, &s->in_bias) || mx_cfg_bool(c, "use_conv_bias", true, &s->conv_bias) ||
        mx_cfg_bool(c, "rms_norm", true, &rms) || mx_cfg_f32(c, eps_key, 1e-5f, 0, 1, &s->norm_eps))
        return MX_ERR;
    s->kind = MX_SSM_MAMBA2;
    s->d_inner = (int)(expand * hidden);
    if (s->d_inner != s->n_heads * s->head_dim)
        return mx_set_err("%s: expand * hidden_size = %d differs from num_heads * head_dim = %d", c->file, s->d_inner,
                          s->n_heads * s->head_dim);
    s->out_bias = s->in_bias;
    s->gated_norm = rms;
    s->norm_groups = 1;
    s->dt_min = 0;
    s->dt_max = INFINITY;
    return mx_ssm_time_step_limit(s, c);
}

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_mamba_configure_base(a, c, &mx_block_mamba2) || mx_cfg_bool(c, "tie_word_embeddings", false, &a->tied) ||
        mx_mamba2_ssm_config(&a->ssm, c, a->hidden, "layer_norm_epsilon"))
        return -1;
    a->ssm.act = a->act;
    a->ssm.prefix = "backbone.layers.%d.mixer";
    return 0;
}

MX_FAMILY(mamba2, .name = "mamba2", .features = "ssm: mamba-2 ssd scan (heads, groups), gated rmsnorm, untied head",
          .configure = configure)
