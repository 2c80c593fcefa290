/* GLM-4.5 / 4.6 (glm4_moe): GQA attention with q/k/v biases (attention_bias;
 * o_proj never has one), optional per-head q/k RMSNorm (use_qk_norm), rope
 * rotate-half on the first partial_rotary_factor (0.5) of each head; the
 * DeepSeek-V3 MoE (sigmoid, correction bias, groups, renormalised, routed
 * scaling, shared experts, dense first layers) with GLM's class defaults; the
 * MTP layers after the last layer are ignored. glm4_moe_lite (GLM-4.7-Flash)
 * is latent attention, not this family. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 128, .top_k = 8, .ffn = 1408, .shared = 1, .n_group = 1, .topk_group = 1,
                                        .dense = 1, .scale = 1.0f, .norm = true};
    bool qk;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_cfg_bool(c, "use_qk_norm", false, &qk) ||
        mx_deepseek_moe_configure(a, c, &d))
        return -1;
    a->rope_decl[0] = (mx_rope_decl){.partial = 0.5};
    a->attn->o_bias = false;
    a->attn->qk_norm_spec = a->norm;
    if (qk) {
        a->attn->qk_norm = MX_QKNORM_HEAD;
        a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
        a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    }
    return 0;
}

MX_FAMILY(glm4_moe, .name = "glm4_moe", .base = "llama",
          .features = "gqa with qkv bias, optional q/k norm, partial rotary; deepseek-v3 moe (sigmoid, groups, correction bias, shared experts, dense first layers); mtp layers ignored",
          .configure = configure)
