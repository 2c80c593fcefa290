/* OLMoE: Llama with an RMSNorm over the whole q and k projections (then
 * clip_qkv clamps q, k and v) and sparse MoE MLPs (softmax router, top-k
 * renormalised only when norm_topk_prob). */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    /* experts are intermediate_size wide; Qwen-MoE's router and expert layout otherwise */
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_qwen_moe_configure(a, c, 64, 8, a->ffn))
        return -1;
    if (mx_cfg_f32(c, "clip_qkv", 0, 0, 1e30f, &a->attn->clip_qkv)) return -1;
    a->attn->clip_after_qk_norm = true; /* OLMoE clamps q, k and v after the q/k norms */
    a->attn->qk_norm_spec = a->norm;
    a->attn->qk_norm = MX_QKNORM_FULL;
    a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    return 0;
}

MX_FAMILY(olmoe, .name = "olmoe", .base = "llama", .features = "llama + full-projection q/k rmsnorm, sparse moe (softmax top-k)", .configure = configure)
