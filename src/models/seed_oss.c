/* Seed-OSS: Llama with q/k/v biases (attention_bias, on by default), an o_proj
 * bias of its own (attention_out_bias) and head_dim 128 by default. */
#include "family.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    bool qkv_bias, o_bias;
    if (mx_cfg_bool(c, "attention_bias", true, &qkv_bias) || mx_cfg_bool(c, "attention_out_bias", false, &o_bias)) return -1;
    if (mx_cfg_absent(c, "head_dim")) { /* absent: the config class default; null: hidden / heads */
        a->attn->head_dim = 128;
        a->attn->scale = 1.0f / sqrtf((float)a->attn->head_dim);
    }
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = qkv_bias;
    a->attn->o_bias = o_bias;
    return 0;
}

MX_FAMILY(seed_oss, .name = "seed_oss", .base = "llama", .features = "llama + q/k/v biases, separate o_proj bias, head_dim 128 default",
          .configure = configure)
