/* OLMo: Llama with a LayerNorm that has neither weight nor bias (fixed eps
 * 1e-5, final norm included) and q, k, v clamped to +-clip_qkv. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 0, false, false, 1e-5f};
    a->attn->qk_norm_spec = a->norm;
    return mx_cfg_f32(c, "clip_qkv", 0, 0, 1e30f, &a->attn->clip_qkv);
}

MX_FAMILY(olmo, .name = "olmo", .base = "llama", .features = "llama + non-parametric layernorm, clip_qkv", .configure = configure)
