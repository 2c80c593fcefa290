/* OLMo 2: Llama with post-norms only (RMSNorm on the attention and MLP
 * outputs before each residual add, no pre-norm) and an RMSNorm over the
 * whole q and k projections, before the head split and rope. OLMo 3 and
 * EXAONE 4 build on it. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps)) return -1;
    a->attn->qk_norm_spec = a->norm;
    a->attn->qk_norm = MX_QKNORM_FULL;
    a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    a->names.attn_norm = NULL;
    a->names.ffn_norm = NULL;
    a->names.post_attn_norm = "model.layers.%d.post_attention_layernorm";
    a->names.post_ffn_norm = "model.layers.%d.post_feedforward_layernorm";
    return 0;
}

MX_FAMILY(olmo2, .name = "olmo2", .base = "llama", .features = "llama + post-norms only, rmsnorm over the full q/k projections",
          .configure = configure)
