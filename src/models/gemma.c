/* Gemma: Llama with (1+w) RMSNorm, GeGLU, embeddings scaled by sqrt(hidden),
 * tied head. Gemma 2 and RecurrentGemma build on it. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    a->norm.offset = 1.0f;
    a->attn->qk_norm_spec = a->norm;
    int err = 0;
    /* hidden_activation wins over hidden_act (HF Gemma forces the tanh GELU) */
    const char *act = mx_cfg_str(c, "hidden_activation", NULL, &err);
    if (err) return -1;
    if (act && mx_act_parse(act, &a->act)) return mx_set_err("%s: hidden_activation: unsupported '%s'", c->file, act);
    if (!act) a->act = MX_ACT_GELU_TANH;
    bool tied;
    if (mx_cfg_bool(c, "tie_word_embeddings", true, &tied)) return -1;
    a->tied = tied;
    a->embed_scale = sqrtf((float)a->hidden);
    return 0;
}

MX_FAMILY(gemma, .name = "gemma", .base = "llama", .features = "rmsnorm (1+w), geglu, embedding scale, tied head",
          .configure = configure)
