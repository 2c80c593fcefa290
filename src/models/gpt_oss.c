/* GPT-OSS: Llama with q/k/v/o biases, a learned per-head attention sink
 * logit in every softmax, sliding/full layers from layer_types, and sparse
 * MoE MLPs: router with bias, top-k of the logits then softmax; experts with
 * biases and a clamped SwiGLU ((up + 1) * g * sigmoid(alpha g), g <= limit,
 * |up| <= limit). HF stores experts stacked as x @ W: gate_up_proj [E, H, 2I]
 * with gate/up in alternate columns, down_proj [E, I, H]; MLX splits them
 * into gate_proj / up_proj / down_proj [E, out, in]. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int w;
    if (mx_cfg_i32(c, "sliding_window", 128, 0, 1 << 30, &w) ||
        mx_cfg_i32(c, "num_local_experts", 128, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 4, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_f32(c, "swiglu_limit", 7.0f, 1e-6f, 1e9f, &s->swiglu_limit))
        return -1;
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    if (!r) /* HF default: sliding on even layers */
        for (int i = 0; i < a->n_layers; i++) a->layers[i].window = i % 2 == 0 ? w : 0;
    a->attn->names.sinks = "model.layers.%d.self_attn.sinks";
    s->ffn = a->ffn;
    s->route = MX_ROUTE_TOPK_SOFTMAX;
    s->router_bias = s->expert_bias = s->gated = true;
    s->gate_up_interleaved = true;
    s->swiglu_alpha = 1.702f;
    s->act = a->act;
    s->router = "model.layers.%d.mlp.router";
    s->experts = (mx_expert_names){.gate_up = "model.layers.%d.mlp.experts.gate_up_proj", .down = "model.layers.%d.mlp.experts.down_proj",
                                   .transposed = MX_EXP_T_GATE_UP | MX_EXP_T_DOWN};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.gate_proj", .up = "model.layers.%d.mlp.experts.up_proj",
                               .down = "model.layers.%d.mlp.experts.down_proj"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(gpt_oss, .name = "gpt_oss", .base = "llama", .features = "llama + attention sinks, sliding/full layers, moe with router/expert biases and clamped swiglu",
          .configure = configure)
