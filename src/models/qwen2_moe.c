/* Qwen2-MoE: Qwen2 (q/k/v biases) whose MLPs are sparse MoE blocks: softmax
 * router, top-k renormalised only when norm_topk_prob, SwiGLU experts of
 * moe_intermediate_size, plus an always-on shared expert scaled by
 * sigmoid(shared_expert_gate x). Layers listed in mlp_only_layers, or off
 * the decoder_sparse_step grid, keep a dense MLP. Qwen3-MoE reuses
 * mx_qwen_moe_configure. */
#include "family.h"
#include "../base/base.h"

int mx_qwen_moe_configure(mx_arch *a, const mx_cfg *c, int def_experts, int def_topk, int def_ffn) {
    mx_moe_spec *s = &a->moe;
    bool norm;
    int step;
    if (mx_cfg_i32(c, "num_experts", def_experts, 0, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", def_topk, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", def_ffn, 1, 1 << 20, &s->ffn) || mx_cfg_bool(c, "norm_topk_prob", false, &norm) ||
        mx_cfg_i32(c, "decoder_sparse_step", 1, 1, 1 << 20, &step))
        return -1;
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = norm ? 1 : 0;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.mlp.gate";
    s->experts = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.%d.gate_proj", .up = "model.layers.%d.mlp.experts.%d.up_proj",
                                   .down = "model.layers.%d.mlp.experts.%d.down_proj"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.switch_mlp.gate_proj", .up = "model.layers.%d.mlp.switch_mlp.up_proj",
                               .down = "model.layers.%d.mlp.switch_mlp.down_proj"};
    json_t *only = mx_cfg_get(c, "mlp_only_layers");
    if (only && !json_is_array(only)) return mx_set_err("%s: mlp_only_layers: expected a list", c->file);
    for (int i = 0; i < a->n_layers; i++) {
        bool dense = s->n_experts == 0 || (i + 1) % step != 0;
        for (size_t k = 0; only && k < json_array_size(only); k++) {
            json_t *v = json_array_get(only, k);
            if (!json_is_integer(v)) return mx_set_err("%s: mlp_only_layers[%zu]: expected an integer", c->file, k);
            dense |= json_integer_value(v) == i;
        }
        a->layers[i].ffn = dense ? &mx_block_mlp : &mx_block_moe;
    }
    return 0;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_qwen_moe_configure(a, c, 60, 4, 1408) ||
        mx_cfg_i32(c, "shared_expert_intermediate_size", 5632, 0, 1 << 20, &a->moe.shared_ffn))
        return -1;
    a->moe.shared = (mx_expert_names){.gate = "model.layers.%d.mlp.shared_expert.gate_proj", .up = "model.layers.%d.mlp.shared_expert.up_proj",
                                      .down = "model.layers.%d.mlp.shared_expert.down_proj"};
    a->moe.shared_gate = "model.layers.%d.mlp.shared_expert_gate";
    return 0;
}

MX_FAMILY(qwen2_moe, .name = "qwen2_moe", .base = "qwen2", .features = "qwen2 + sparse moe (softmax top-k), sigmoid-gated shared expert, dense-layer list",
          .configure = configure)
