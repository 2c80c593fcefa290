/* GLM-4.7-Flash (glm4_moe_lite): DeepSeek-V3's latent attention (q LoRA,
 * interleaved rope on the rope slices unless rope_interleave is false) with
 * the DeepSeek-V3 MoE (sigmoid router with correction bias, group-limited
 * with the left-out groups' experts at -inf, renormalised, routed scaling,
 * shared experts) in the layers mlp_layer_types calls "sparse" (by default
 * all but the first), GLM's config class defaults; the MTP layer after the
 * last one is ignored. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_mla_defaults md = {.q_lora = 768, .kv_lora = 512, .nope = 192, .rope = 64, .v = 256, .interleave = true};
    static const mx_dsmoe_defaults d = {.experts = 64, .top_k = 4, .ffn = 1536, .shared = 1, .n_group = 1, .topk_group = 1,
                                        .dense = 1, .scale = 1.8f, .norm = true};
    int lt;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_deepseek_mla_configure(a, c, &md) || mx_deepseek_moe_configure(a, c, &d) ||
        (lt = mx_arch_mlp_layer_types(a, c, &mx_block_moe)) < 0)
        return -1;
    if (!lt) /* the class default, whatever first_k_dense_replace says */
        for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = i ? &mx_block_moe : &mx_block_mlp;
    a->moe.group_mask_inf = true;
    return 0;
}

MX_FAMILY(glm4_moe_lite, .name = "glm4_moe_lite", .base = "llama",
          .features = "mla (q lora, latent kv cache, interleaved rope slice); deepseek-v3 moe in mlp_layer_types' sparse layers (groups masked to -inf); mtp ignored",
          .configure = configure)
