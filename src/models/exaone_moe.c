/* EXAONE-MoE (K-EXAONE): EXAONE 4's attention (per-head q/k RMSNorm,
 * sliding layers with rope, NoPE full layers while a sliding window is set)
 * in Llama's pre-norm blocks, with mlp_layer_types dense (SwiGLU) / sparse
 * (default: dense below first_k_dense_replace): the DeepSeek-V3 MoE (sigmoid,
 * correction bias, groups with the ones left out masked to -inf,
 * renormalised iff norm_topk_prob, routed scaling) under EXAONE's keys
 * num_experts / num_shared_experts. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 64, .top_k = 8, .ffn = 1024, .shared = 1, .n_group = 1, .topk_group = 1,
                                        .dense = 1, .scale = 2.5f, .norm = true};
    mx_moe_spec *s = &a->moe;
    int n_shared;
    if (mx_deepseek_moe_configure(a, c, &d) || mx_cfg_i32(c, "num_experts", d.experts, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_shared_experts", d.shared, 0, 1 << 10, &n_shared) || mx_arch_mlp_layer_types(a, c, &mx_block_moe) < 0)
        return -1;
    s->shared_ffn = s->ffn * n_shared;
    s->group_mask_inf = true;
    a->names.attn_norm = "model.layers.%d.input_layernorm"; /* pre-norm, where EXAONE 4 post-norms */
    a->names.ffn_norm = "model.layers.%d.post_attention_layernorm";
    a->names.post_attn_norm = a->names.post_ffn_norm = NULL;
    return 0;
}

MX_FAMILY(exaone_moe, .name = "exaone_moe", .base = "exaone4",
          .features = "exaone4 attention (q/k norm, sliding rope layers, nope full layers) in pre-norm blocks; deepseek-v3 moe "
                      "(sigmoid, groups masked to -inf, correction bias, shared experts), dense layers",
          .configure = configure)
