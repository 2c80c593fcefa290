/* MiniMax-M2: GQA attention whose q and k are RMS-normed over the whole
 * projection (all heads together) before rope, rope on the first
 * partial_rotary_factor of each head (or rotary_dim), theta 5e6 and head_dim
 * 128 by default; every MLP a MoE: sigmoid router whose selection adds
 * e_score_correction_bias, weights renormalised to sum 1, no shared expert.
 * Experts fused (transformers v5: mlp.experts.gate_up_proj / down_proj), per
 * expert (the released checkpoints' block_sparse_moe.experts.<e>.w1/w3/w2,
 * read as mlp.*) or MLX's switch_mlp. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static const mx_rename renames[] = {{"model.layers.%d.block_sparse_moe.", "model.layers.%d.mlp.", 1}};

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_attn_spec *at = a->attn;
    mx_moe_spec *s = &a->moe;
    int rot;
    if (mx_cfg_i32(c, "head_dim", 128, 1, 1 << 14, &at->head_dim) || mx_cfg_i32(c, "rotary_dim", 0, 0, 2 * MX_ROPE_MAX_HALF, &rot) ||
        mx_cfg_i32(c, "num_local_experts", 256, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 8, 1, MX_MAX_EXPERTS, &s->top_k))
        return -1;
    at->scale = 1.0f / sqrtf((float)at->head_dim);
    at->qk_norm = MX_QKNORM_FULL;
    at->names.q_norm = "model.layers.%d.self_attn.q_norm";
    at->names.k_norm = "model.layers.%d.self_attn.k_norm";
    a->rope_decl[0] = (mx_rope_decl){.theta = 5e6, .dim = mx_cfg_absent(c, "partial_rotary_factor") ? rot : 0};
    s->ffn = a->ffn;
    s->route = MX_ROUTE_SIGMOID;
    s->norm_p = 1;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.mlp.gate";
    s->score_bias = "model.layers.%d.mlp.e_score_correction_bias";
    s->experts = (mx_expert_names){.gate_up = "model.layers.%d.mlp.experts.gate_up_proj", .down = "model.layers.%d.mlp.experts.down_proj"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.switch_mlp.gate_proj", .up = "model.layers.%d.mlp.switch_mlp.up_proj",
                               .down = "model.layers.%d.mlp.switch_mlp.down_proj"};
    s->alt2 = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.%d.w1", .up = "model.layers.%d.mlp.experts.%d.w3",
                                .down = "model.layers.%d.mlp.experts.%d.w2"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    a->renames = renames;
    a->n_renames = (int)MX_ARRAY_LEN(renames);
    return 0;
}

MX_FAMILY(minimax_m2, .name = "minimax_m2", .base = "llama",
          .features = "gqa with full-width q/k rmsnorm, partial rotary (theta 5e6); sigmoid moe with correction bias, renormalised",
          .configure = configure)
