/* Mixtral: Mistral whose every MLP is a sparse MoE of SwiGLU experts
 * (w1 gate, w3 up, w2 down): softmax router, top-k renormalised. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    if (mx_cfg_i32(c, "num_local_experts", 8, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 2, 1, MX_MAX_EXPERTS, &s->top_k))
        return -1;
    s->ffn = a->ffn;
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = 1;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.block_sparse_moe.gate";
    s->experts = (mx_expert_names){.gate = "model.layers.%d.block_sparse_moe.experts.%d.w1",
                                   .up = "model.layers.%d.block_sparse_moe.experts.%d.w3",
                                   .down = "model.layers.%d.block_sparse_moe.experts.%d.w2"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.block_sparse_moe.switch_mlp.gate_proj",
                               .up = "model.layers.%d.block_sparse_moe.switch_mlp.up_proj",
                               .down = "model.layers.%d.block_sparse_moe.switch_mlp.down_proj"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(mixtral, .name = "mixtral", .base = "mistral", .features = "mistral + sparse moe (softmax top-k, renormalised)", .configure = configure)
