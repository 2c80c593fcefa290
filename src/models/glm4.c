/* GLM-4: GLM with a norm after each sublayer (sandwich norms):
 * h += post_self_attn_layernorm(attn(input_layernorm(h)));
 * h += post_mlp_layernorm(mlp(post_attention_layernorm(h))). */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    (void)c;
    a->names.post_attn_norm = "model.layers.%d.post_self_attn_layernorm";
    a->names.post_ffn_norm = "model.layers.%d.post_mlp_layernorm";
    return 0;
}

MX_FAMILY(glm4, .name = "glm4", .base = "glm", .features = "glm + post-attention and post-mlp norms", .configure = configure)
