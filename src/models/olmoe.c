/* OLMoE: Llama with an RMSNorm over the whole q and k projections and sparse
 * MoE MLPs (softmax router, top-k renormalised only when norm_topk_prob). */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    bool norm;
    if (mx_arch_hf_defaults(a, c) || mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_i32(c, "num_experts", 64, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 8, 1, MX_MAX_EXPERTS, &s->top_k) || mx_cfg_bool(c, "norm_topk_prob", false, &norm))
        return -1;
    /* OLMoE clamps q/k/v after the q/k norms; the attention block clamps before them */
    if (mx_cfg_get(c, "clip_qkv")) return mx_set_err("%s: clip_qkv is not supported for olmoe (clamped after the q/k norms)", c->file);
    a->qk_norm_spec = a->norm;
    a->qk_norm = MX_QKNORM_FULL;
    a->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->names.k_norm = "model.layers.%d.self_attn.k_norm";
    s->ffn = a->ffn;
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = norm ? 1 : 0;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.mlp.gate";
    s->experts = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.%d.gate_proj", .up = "model.layers.%d.mlp.experts.%d.up_proj",
                                   .down = "model.layers.%d.mlp.experts.%d.down_proj"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.switch_mlp.gate_proj", .up = "model.layers.%d.mlp.switch_mlp.up_proj",
                               .down = "model.layers.%d.mlp.switch_mlp.down_proj"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(olmoe, .name = "olmoe", .features = "llama + full-projection q/k rmsnorm, sparse moe (softmax top-k)", .configure = configure)
