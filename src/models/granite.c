/* Granite: Llama with muP-style multipliers: embeddings times
 * embedding_multiplier, sublayer outputs times residual_multiplier before
 * each residual add, attention scores scaled by attention_multiplier (not
 * 1/sqrt(head_dim)), logits divided by logits_scaling. All default to 1. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    float ls;
    if (mx_cfg_f32(c, "embedding_multiplier", 1, 0, 1e9f, &a->embed_scale) ||
        mx_cfg_f32(c, "residual_multiplier", 1, 0, 1e9f, &a->residual_scale) ||
        mx_cfg_f32(c, "attention_multiplier", 1, 0, 1e9f, &a->attn->scale) ||
        mx_cfg_f32(c, "logits_scaling", 1, 1e-9f, 1e9f, &ls))
        return -1;
    a->logit_scale = 1.0f / ls;
    return 0;
}

MX_FAMILY(granite, .name = "granite", .base = "llama", .features = "llama + embedding/residual/attention multipliers, logits scaling",
          .configure = configure)
