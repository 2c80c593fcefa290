/* Qwen3: Llama with a per-head RMSNorm on q and k before rope. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    a->attn->qk_norm = MX_QKNORM_HEAD;
    a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    bool use;
    int w;
    if (mx_cfg_bool(c, "use_sliding_window", false, &use) || mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w)) return -1;
    if (use && w > 0 && mx_arch_layer_types(a, c, w) < 0) return -1;
    return 0;
}

MX_FAMILY(qwen3, .name = "qwen3", .base = "llama", .features = "llama + per-head q/k rmsnorm", .configure = configure)
