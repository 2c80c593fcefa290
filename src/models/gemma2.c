/* Gemma 2: Gemma with sandwich norms, attention and final logit soft-capping,
 * query_pre_attn_scalar, and a sliding window on even layers. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    a->names.post_attn_norm = "model.layers.%d.post_attention_layernorm";
    a->names.ffn_norm = "model.layers.%d.pre_feedforward_layernorm";
    a->names.post_ffn_norm = "model.layers.%d.post_feedforward_layernorm";
    float qpas, w;
    if (mx_cfg_f32(c, "query_pre_attn_scalar", (float)a->attn->head_dim, 1e-6f, 1e9f, &qpas) ||
        mx_cfg_f32(c, "attn_logit_softcapping", 0, 0, 1e9f, &a->attn->softcap) ||
        mx_cfg_f32(c, "final_logit_softcapping", 0, 0, 1e9f, &a->final_softcap) ||
        mx_cfg_f32(c, "sliding_window", 4096, 0, 1e9f, &w))
        return -1;
    a->attn->scale = 1.0f / sqrtf(qpas);
    for (int i = 0; i < a->n_layers; i++) a->layers[i].window = i % 2 == 0 ? (int)w : 0;
    return 0;
}

MX_FAMILY(gemma2, .name = "gemma2", .base = "gemma", .features = "gemma + sandwich norms, attn/final softcap, alternating sliding window",
          .configure = configure)
