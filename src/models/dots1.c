/* dots.llm1 (dots1): Qwen3 attention (per-head q/k RMSNorm before rope;
 * layer_types sliding/full, by default sliding from max_window_layers on when
 * sliding_window is set) with the DeepSeek-V3 MoE (sigmoid, correction bias,
 * groups, renormalised iff norm_topk_prob, routed scaling, shared experts,
 * dense first layers). */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 0, .top_k = 0, .ffn = 1408, .shared = 0, .n_group = 1, .topk_group = 1,
                                        .dense = 0, .scale = 1.0f, .norm = false};
    int w, from;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-6f, 0, 1, &a->norm.eps) ||
        mx_cfg_i32(c, "sliding_window", mx_cfg_absent(c, "sliding_window") ? 4096 : 0, 0, 1 << 30, &w) ||
        mx_cfg_i32(c, "max_window_layers", 62, 0, MX_MAX_LAYERS, &from))
        return -1;
    a->attn->qk_norm_spec = a->norm;
    mx_arch_set_window_all(a, 0); /* qwen3's use_sliding_window does not apply */
    int lt = mx_arch_layer_types(a, c, w);
    if (lt < 0) return -1;
    if (!lt && w > 0)
        for (int i = from; i < a->n_layers; i++) a->layers[i].window = w;
    if (!mx_cfg_has(c, "n_routed_experts") || !mx_cfg_has(c, "num_experts_per_tok"))
        return mx_set_err("%s: n_routed_experts and num_experts_per_tok are required", c->file);
    return mx_deepseek_moe_configure(a, c, &d);
}

MX_FAMILY(dots1, .name = "dots1", .base = "qwen3",
          .features = "qwen3 attention (per-head q/k norm, sliding layers) + deepseek-v3 moe (sigmoid, groups, correction bias, shared experts, dense first layers)",
          .configure = configure)
