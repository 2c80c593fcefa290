/* Mellum (JetBrains): Qwen3 attention (per-head q/k RMSNorm before rope)
 * with layer_types sliding / full layers (all full by default), each type
 * with its own rope from rope_parameters (theta 5e5 full, 1e4 sliding by
 * default), and mlp_layer_types dense (SwiGLU) / sparse (all sparse by
 * default): softmax router over num_experts, top-k renormalised iff
 * norm_topk_prob, experts per expert, MLX's switch_mlp or fused into 3-D
 * tensors as transformers v5 saves them (experts.gate_up_proj [E, 2F, H],
 * experts.down_proj [E, H, F]), no shared expert. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int w, local;
    bool norm;
    if (mx_cfg_i32(c, "num_local_experts", 64, 1, MX_MAX_EXPERTS, &local) ||
        mx_cfg_i32(c, "num_experts", local, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 8, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 896, 1, 1 << 20, &s->ffn) || mx_cfg_bool(c, "norm_topk_prob", true, &norm) ||
        mx_cfg_i32(c, "sliding_window", 1024, 1, 1 << 30, &w))
        return -1;
    mx_arch_set_window_all(a, 0); /* qwen3's use_sliding_window does not apply */
    if (mx_arch_layer_types(a, c, w) < 0) return -1;
    mx_arch_rope_per_type(a, c, 500000.0, 10000.0);
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = norm ? 1 : 0;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.mlp.gate";
    mx_deepseek_moe_names(s);
    int r = mx_arch_mlp_layer_types(a, c, &mx_block_moe);
    if (r < 0) return -1;
    if (!r)
        for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(mellum, .name = "mellum", .base = "qwen3",
          .features = "qwen3 attention, sliding / full layers with a rope per type, dense / softmax-routed moe layers with fused 3-D experts",
          .configure = configure)
