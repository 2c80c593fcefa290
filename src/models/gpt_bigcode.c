/* GPTBigCode (StarCoder 1, SantaCoder): GPT-2 with ordinary [out, in] Linear
 * weights and, when multi_query, one shared k/v head: c_attn gives
 * [q | k | v] with k and v one head wide; without multi_query c_attn is laid
 * out per head (unlike GPT-2). */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    bool mq, scale;
    if (mx_cfg_bool(c, "multi_query", true, &mq) || mx_cfg_bool(c, "scale_attn_weights", true, &scale))
        return -1;
    if (!scale) a->attn->scale = 1;
    a->conv1d = false;
    if (mq) a->attn->n_kv_heads = 1;
    else a->attn->qkv_layout = MX_QKV_GROUPED; /* without MQA c_attn is per head [q | k | v] */
    return 0;
}

MX_FAMILY(gpt_bigcode, .name = "gpt_bigcode", .base = "gpt2", .features = "gpt2 + multi-query attention, Linear layout",
          .configure = configure)
