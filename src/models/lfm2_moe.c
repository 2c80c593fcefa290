/* LFM2-MoE: LFM2's short-conv / attention hybrid (the dense SwiGLU at its
 * configured width) where the layers from num_dense_layers on have an MoE:
 * sigmoid router scores, experts chosen on score + expert_bias (when
 * use_expert_bias) and weighted by their score, renormalised to sum 1
 * (+1e-6) when norm_topk_prob, times routed_scaling_factor; SwiGLU experts
 * (w1 gate, w3 up, w2 down). */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int dense;
    bool norm, bias;
    if (mx_cfg_i32(c, "intermediate_size", 7168, 1, 1 << 20, &a->ffn) || /* never auto-adjusted here */
        mx_cfg_i32(c, "num_experts", 32, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 4, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 1792, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "num_dense_layers", 2, 0, MX_MAX_LAYERS, &dense) ||
        mx_cfg_bool(c, "norm_topk_prob", true, &norm) || mx_cfg_bool(c, "use_expert_bias", true, &bias) ||
        mx_cfg_f32(c, "routed_scaling_factor", 1.0f, 0, 1e6f, &s->routed_scale))
        return -1;
    s->route = MX_ROUTE_SIGMOID;
    s->norm_p = norm ? 1 : 0;
    s->norm_eps = 1e-6f;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.feed_forward.gate";
    s->score_bias = bias ? "model.layers.%d.feed_forward.expert_bias" : NULL;
    s->experts = (mx_expert_names){.gate = "model.layers.%d.feed_forward.experts.%d.w1", .up = "model.layers.%d.feed_forward.experts.%d.w3",
                                   .down = "model.layers.%d.feed_forward.experts.%d.w2"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.feed_forward.switch_mlp.gate_proj",
                               .up = "model.layers.%d.feed_forward.switch_mlp.up_proj",
                               .down = "model.layers.%d.feed_forward.switch_mlp.down_proj"};
    for (int i = dense; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(lfm2_moe, .name = "lfm2_moe", .base = "lfm2",
          .features = "lfm2 + moe after num_dense_layers (sigmoid router, expert bias for selection, renormalised, routed scale)",
          .configure = configure)
