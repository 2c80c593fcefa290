/* Cohere2-MoE (Command A / North): Cohere 2's parallel block (one input
 * norm feeding attention and MLP), interleaved rope on the sliding layers
 * and NoPE full layers, except that dense layers keep rope when
 * prefix_dense_sliding_window_pattern is 1; RMSNorm when rms_norm_eps is
 * set, else Cohere's bias-free LayerNorm; logits times logit_scale.
 * mlp_layer_types dense (SwiGLU of prefix_dense_intermediate_size) / sparse
 * (default: dense below first_k_dense_replace, whose layers follow their own
 * sliding pattern): router top-k of the logits, weights softmax over the k
 * (expert_selection_fn softmax) or their sigmoids, renormalised iff
 * norm_topk_prob (sigmoid); experts of intermediate_size; shared experts
 * added ("sum") or averaged with the routed output ("average"). */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int w, pattern, prefix_pattern, first_dense, n_shared, err = 0;
    bool norm;
    if (mx_cfg_i32(c, "sliding_window", 4096, 1, 1 << 30, &w) || mx_cfg_i32(c, "sliding_window_pattern", 4, 1, 1 << 20, &pattern) ||
        mx_cfg_i32(c, "prefix_dense_sliding_window_pattern", 1, 1, 1 << 20, &prefix_pattern) ||
        mx_cfg_i32(c, "first_k_dense_replace", 0, 0, MX_MAX_LAYERS, &first_dense) ||
        mx_cfg_i32(c, "num_experts", 8, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 2, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "num_shared_experts", 0, 0, 1 << 10, &n_shared) || mx_cfg_bool(c, "norm_topk_prob", true, &norm))
        return -1;
    s->ffn = a->ffn; /* the experts are intermediate_size wide, the dense layers prefix_dense_intermediate_size */
    if (mx_cfg_i32(c, "prefix_dense_intermediate_size", s->ffn, 1, 1 << 20, &a->ffn)) return -1;
    const char *comb = mx_cfg_str(c, "shared_expert_combination_strategy", "average", &err),
               *sel = mx_cfg_str(c, "expert_selection_fn", "softmax", &err);
    if (err) return -1;
    if (strcmp(comb, "average") && strcmp(comb, "sum"))
        return mx_set_err("%s: shared_expert_combination_strategy: '%s' (average or sum)", c->file, comb);
    if (strcmp(sel, "softmax") && strcmp(sel, "sigmoid")) return mx_set_err("%s: expert_selection_fn: '%s' (softmax or sigmoid)", c->file, sel);
    if (mx_cfg_get(c, "rms_norm_eps")) {
        float eps;
        if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &eps)) return -1;
        a->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, eps};
    }
    int lt = mx_arch_layer_types(a, c, w), mt = mx_arch_mlp_layer_types(a, c, &mx_block_moe);
    if (lt < 0 || mt < 0) return -1;
    for (int i = 0; i < a->n_layers; i++) {
        mx_layer_spec *ls = &a->layers[i];
        if (!lt) ls->window = i < first_dense ? ((i + 1) % prefix_pattern ? w : 0) : ((i - first_dense + 1) % pattern ? w : 0);
        if (!mt) ls->ffn = i < first_dense ? &mx_block_mlp : &mx_block_moe;
        ls->rope = ls->window > 0 || (ls->ffn == &mx_block_mlp && prefix_pattern == 1);
    }
    bool softmax = !strcmp(sel, "softmax");
    s->route = softmax ? MX_ROUTE_TOPK_SOFTMAX : MX_ROUTE_SIGMOID; /* top-k of the logits = of their sigmoids */
    s->norm_p = !softmax && norm ? 1 : 0;
    s->gated = true;
    s->act = a->act;
    s->shared_ffn = s->ffn * n_shared;
    if (n_shared && !strcmp(comb, "average")) s->routed_scale = s->shared_scale = 0.5f;
    s->router = "model.layers.%d.mlp.gate";
    mx_deepseek_moe_names(s);
    return 0;
}

MX_FAMILY(cohere2_moe, .name = "cohere2_moe", .base = "cohere2",
          .features = "cohere2 parallel block (sliding rope / nope full layers, dense layers with rope), rmsnorm or bias-free layernorm, "
                      "top-k softmax or sigmoid moe with shared experts summed or averaged, logit scale",
          .configure = configure)
