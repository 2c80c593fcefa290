/* Solar Open (Upstage): Llama attention (q/k/v biases iff attention_bias,
 * o_proj never one; rope over the whole head, theta 1e6 by default) with the
 * DeepSeek-V3 MoE (sigmoid, correction bias, groups, renormalised iff
 * norm_topk_prob, routed scaling, shared experts; groups left out masked to
 * -inf) in EVERY layer (the config has no dense layers). A
 * partial_rotary_factor below 1 is refused: the upstream attention rotates
 * the whole head and cannot run one. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 128, .top_k = 8, .ffn = 1280, .shared = 1, .n_group = 1, .topk_group = 1,
                                        .dense = 0, .scale = 1.0f, .norm = true};
    double partial = 1;
    json_t *rp = mx_cfg_get(c, "rope_parameters");
    mx_cfg rpc = {rp, NULL, c->file};
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_cfg_i32(c, "head_dim", 128, 1, 1 << 14, &a->attn->head_dim) ||
        mx_cfg_float(c, "partial_rotary_factor", 1, 0, 1, &partial) ||
        (json_is_object(rp) && mx_cfg_float(&rpc, "partial_rotary_factor", partial, 0, 1, &partial)) ||
        mx_deepseek_moe_configure(a, c, &d))
        return -1;
    if (partial < 1) return mx_set_err("%s: partial_rotary_factor %g: Solar Open rotates the whole head (a smaller factor is not supported)", c->file, partial);
    a->attn->scale = 1.0f / sqrtf((float)a->attn->head_dim);
    a->attn->o_bias = false;
    a->rope_decl[0] = (mx_rope_decl){.theta = 1e6, .dim = a->attn->head_dim};
    a->moe.group_mask_inf = true;
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe; /* first_k_dense_replace is not read upstream */
    return 0;
}

MX_FAMILY(solar_open, .name = "solar_open", .base = "llama",
          .features = "llama attention; deepseek-v3 moe (sigmoid, groups, correction bias, shared experts) in every layer",
          .configure = configure)
