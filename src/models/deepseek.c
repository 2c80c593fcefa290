/* DeepSeek-MoE (model_type "deepseek": deepseek-moe-16b and its chat model,
 * modeling_deepseek.py of the deepseek-ai hub repos): Llama attention; layer i
 * is a MoE when n_routed_experts is set, i >= first_k_dense_replace and
 * i % moe_layer_freq == 0, else a dense SwiGLU of intermediate_size. MoE:
 * softmax router (mlp.gate), greedy top num_experts_per_tok, renormalised
 * (+1e-20) only when norm_topk_prob and more than one expert is chosen, no
 * routed scaling; SwiGLU experts of moe_intermediate_size plus shared experts
 * of moe_intermediate_size * n_shared_experts. Not an alias of llama: its
 * checkpoints carry MoE layers. No transformers class exists for it; the
 * fixture's reference comes from tools/pyref.py. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 0, .top_k = 0, .ffn = 1407, .shared = 0, .n_group = 1, .topk_group = 1,
                                        .dense = 0, .scale = 1.0f, .norm = false};
    int err = 0;
    const char *score = mx_cfg_str(c, "scoring_func", "softmax", &err);
    if (err || mx_deepseek_moe_configure(a, c, &d)) return -1;
    if (strcmp(score, "softmax")) return mx_set_err("%s: scoring_func '%s' is not supported (softmax)", c->file, score);
    mx_moe_spec *s = &a->moe;
    if (!mx_cfg_has(c, "n_routed_experts")) { /* no experts: every layer dense */
        for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_mlp;
        return 0;
    }
    if (!mx_cfg_has(c, "num_experts_per_tok")) return mx_set_err("%s: num_experts_per_tok is required with n_routed_experts", c->file);
    s->route = MX_ROUTE_SOFTMAX;
    s->score_bias = NULL;
    s->n_group = s->topk_group = 1;
    s->routed_scale = 1;
    if (s->top_k == 1) s->norm_p = 0;
    return 0;
}

MX_FAMILY(deepseek, .name = "deepseek", .base = "llama",
          .features = "llama attention + softmax top-k moe (renormalised iff norm_topk_prob), shared experts, dense first layers, moe_layer_freq",
          .configure = configure)
