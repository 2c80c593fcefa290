/* GraniteMoE: Granite's multipliers (embedding, residual, attention scale,
 * logits divisor) with sparse MoE MLPs: top-k of the router logits then a
 * softmax over them; experts stored stacked, gate|up fused in input_linear
 * [E, 2I, H] and output_linear [E, H, I]. */
#include "family.h"
#include "../base/base.h"

/* Granite's sparse block: top-k then softmax, fused input_linear [gate|up],
 * output_linear (also Granite-MoE-Hybrid's). */
void mx_granite_moe_spec(mx_arch *a) {
    mx_moe_spec *s = &a->moe;
    s->ffn = a->ffn;
    s->route = MX_ROUTE_TOPK_SOFTMAX;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.block_sparse_moe.router.layer";
    s->experts = (mx_expert_names){.gate_up = "model.layers.%d.block_sparse_moe.input_linear",
                                   .down = "model.layers.%d.block_sparse_moe.output_linear"};
}

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    if (mx_cfg_i32(c, "num_local_experts", 8, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 2, 1, MX_MAX_EXPERTS, &s->top_k))
        return -1;
    mx_granite_moe_spec(a);
    s->alt = (mx_expert_names){.gate = "model.layers.%d.block_sparse_moe.switch_mlp.gate_proj",
                               .up = "model.layers.%d.block_sparse_moe.switch_mlp.up_proj",
                               .down = "model.layers.%d.block_sparse_moe.switch_mlp.down_proj"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(granitemoe, .name = "granitemoe", .base = "granite", .features = "granite multipliers + sparse moe (top-k then softmax), stacked fused experts",
          .configure = configure)
