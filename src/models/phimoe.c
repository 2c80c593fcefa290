/* PhiMoE: Mixtral's layout with LayerNorms (weight and bias, eps
 * rms_norm_eps), optional attention and lm_head biases, and the sparsemixer
 * top-2 router. Its longrope carries explicit short/long mscales. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int w;
    if (mx_arch_hf_defaults(a, c) || mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w) || mx_cfg_bool(c, "lm_head_bias", false, &a->lm_head_bias) ||
        mx_cfg_i32(c, "num_local_experts", 16, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 2, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_f32(c, "router_jitter_noise", 0.01f, 0, 1, &s->jitter_eps))
        return -1;
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = true;
    mx_arch_set_window_all(a, w);
    json_t *rs = mx_cfg_get(c, "rope_scaling");
    if (rs) { /* HF PhiMoE: cos/sin times short_mscale or long_mscale (by length), not longrope's own factor */
        mx_cfg r = {rs, NULL, c->file};
        double sm, lm;
        if (mx_cfg_float(&r, "short_mscale", -1, 0, 1e6, &sm) || mx_cfg_float(&r, "long_mscale", -1, 0, 1e6, &lm)) return -1;
        if (sm >= 0 || lm >= 0) {
            if (sm != lm) return mx_set_err("%s: rope_scaling: distinct short_mscale %g and long_mscale %g are not supported", c->file, sm, lm);
            a->rope[0].attn_factor = sm;
        }
    }
    s->ffn = a->ffn;
    s->route = MX_ROUTE_SPARSEMIXER;
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

MX_FAMILY(phimoe, .name = "phimoe", .features = "mixtral + layernorm, attention/lm-head biases, sparsemixer top-2 router",
          .configure = configure)
