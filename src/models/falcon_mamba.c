/* FalconMamba: Mamba with a weightless RMSNorm on dt, B and C. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_cfg_f32(c, "mixer_rms_eps", 1e-6f, 0, 1, &a->ssm.bcdt_eps)) return -1;
    a->ssm.bcdt_norm = true;
    return 0;
}

MX_FAMILY(falcon_mamba, .name = "falcon_mamba", .base = "mamba", .features = "mamba + weightless rmsnorm on B, C, dt", .configure = configure)
