/* Qwen3.5 (text): Qwen3-Next's hybrid (gated DeltaNet / gated attention,
 * (1+w) RMSNorms, partial rope, now from rope_parameters) with the DeltaNet
 * input projections split (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a).
 * qwen3_5_text is dense (a SwiGLU in every layer); qwen3_5_moe_text has an
 * MoE in every layer (softmax top-k, always renormalised, sigmoid-gated
 * shared expert) with the experts fused into 3-D tensors
 * (experts.gate_up_proj [E, 2F, H], experts.down_proj [E, H, F]). */
#include "family.h"
#include "../base/base.h"

static int configure_dense(mx_arch *a, const mx_cfg *c) {
    (void)c;
    a->deltanet.split_proj = true;
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_mlp; /* expert keys are not read, as in HF */
    return 0;
}

static int configure_moe(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    if (mx_cfg_i32(c, "num_experts", 256, 1, MX_MAX_EXPERTS, &s->n_experts) || /* Qwen3.5-MoE's defaults */
        mx_cfg_i32(c, "num_experts_per_tok", 8, 1, MX_MAX_EXPERTS, &s->top_k))
        return -1;
    a->deltanet.split_proj = true;
    s->norm_p = 1; /* always renormalised (norm_topk_prob is not read) */
    s->experts = (mx_expert_names){.gate_up = "model.layers.%d.mlp.experts.gate_up_proj", .down = "model.layers.%d.mlp.experts.down_proj"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(qwen3_5_text, .name = "qwen3_5_text", .aliases = MX_ALIASES("qwen3_5"), .base = "qwen3_next",
          .features = "hybrid: gated deltanet (split projections) / gated attention (partial rope, qk norm), (1+w) rmsnorm, swiglu",
          .configure = configure_dense)
MX_FAMILY(qwen3_5_moe_text, .name = "qwen3_5_moe_text", .aliases = MX_ALIASES("qwen3_5_moe"), .base = "qwen3_next",
          .features = "qwen3_5_text + moe in every layer (fused 3-D experts, renormalised top-k, gated shared expert)",
          .configure = configure_moe)
