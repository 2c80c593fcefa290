/* Qwen3-MoE: Qwen3 (per-head q/k RMSNorm) with Qwen2-MoE's sparse blocks and
 * no shared expert. */
#include "family.h"

int qwen_moe_configure(mx_arch *a, const mx_cfg *c, int def_experts, int def_topk, int def_ffn);

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_arch_hf_defaults(a, c) || qwen_moe_configure(a, c, 128, 8, 768)) return -1;
    a->qk_norm = MX_QKNORM_HEAD;
    a->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->names.k_norm = "model.layers.%d.self_attn.k_norm";
    bool use;
    int w;
    if (mx_cfg_bool(c, "use_sliding_window", false, &use) || mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w)) return -1;
    if (use && w > 0 && mx_arch_layer_types(a, c, w) < 0) return -1;
    return 0;
}

MX_FAMILY(qwen3_moe, .name = "qwen3_moe", .features = "qwen3 + sparse moe (softmax top-k, optional renormalisation)",
          .configure = configure)
