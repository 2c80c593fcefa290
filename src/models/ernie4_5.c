/* ERNIE 4.5 (dense): Llama with interleaved rope over the whole head,
 * rope_theta 5e5, head_dim 128 and tied embeddings by default, and use_bias
 * for every attention and MLP projection. A config with moe_num_experts > 0
 * (ERNIE 4.5 MoE checkpoints that name this model_type) is the MoE family's. */
#include "family.h"
#include <jansson.h>
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    int experts;
    if (mx_cfg_i32(c, "moe_num_experts", 0, 0, MX_MAX_EXPERTS, &experts)) return -1;
    if (experts > 0) return mx_ernie4_5_moe_configure(a, c); /* an ERNIE 4.5 MoE config under this model_type */
    bool bias;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) || mx_cfg_bool(c, "use_bias", false, &bias))
        return -1;
    a->attn->qk_norm_spec = a->norm;
    if (!json_object_get(c->root, "head_dim")) { /* absent: the config class default; null: hidden / heads */
        a->attn->head_dim = 128;
        a->attn->scale = 1.0f / sqrtf((float)a->attn->head_dim);
    }
    a->rope_decl[0] = (mx_rope_decl){.theta = 500000.0, .interleaved = true};
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = a->attn->o_bias = a->mlp_bias = bias;
    return 0;
}

MX_FAMILY(ernie4_5, .name = "ernie4_5", .aliases = MX_ALIASES("ernie4.5"), .base = "llama", .features = "llama + interleaved rope, theta 5e5, use_bias, head_dim",
          .configure = configure)
