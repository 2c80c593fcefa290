/* Qwen3-MoE: Qwen3 (per-head q/k RMSNorm) with Qwen2-MoE's sparse blocks and
 * no shared expert. */
#include "family.h"

int qwen_moe_configure(mx_arch *a, const mx_cfg *c, int def_experts, int def_topk, int def_ffn);
int qwen3_configure(mx_arch *a, const mx_cfg *c);

static int configure(mx_arch *a, const mx_cfg *c) {
    return qwen3_configure(a, c) || qwen_moe_configure(a, c, 128, 8, 768) ? -1 : 0;
}

MX_FAMILY(qwen3_moe, .name = "qwen3_moe", .features = "qwen3 + sparse moe (softmax top-k, optional renormalisation)",
          .configure = configure)
