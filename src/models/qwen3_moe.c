/* Qwen3-MoE: Qwen3 (per-head q/k RMSNorm) with Qwen2-MoE's sparse blocks and
 * no shared expert. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) { return mx_qwen_moe_configure(a, c, 128, 8, 768); }

MX_FAMILY(qwen3_moe, .name = "qwen3_moe", .base = "qwen3", .features = "qwen3 + sparse moe (softmax top-k, optional renormalisation)",
          .configure = configure)
