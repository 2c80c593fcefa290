/* Cohere (Command-R): a parallel block on input_layernorm alone, LayerNorm
 * without bias, interleaved rope, optional per-head q/k LayerNorm with its own
 * weights per head ([heads, head_dim], use_qk_norm), logits times logit_scale,
 * tied head. Cohere 2 builds on it. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    bool qk, tied;
    if (mx_cfg_f32(c, "layer_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_f32(c, "logit_scale", 0.0625f, -1e6f, 1e6f, &a->logit_scale) || mx_cfg_bool(c, "use_qk_norm", false, &qk) ||
        mx_cfg_bool(c, "tie_word_embeddings", true, &tied))
        return -1;
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = false;
    a->attn->qk_norm_spec = a->norm;
    a->tied = tied;
    a->rope_decl[0].interleaved = true;
    a->residual = MX_RES_PARALLEL;
    a->names.ffn_norm = NULL;
    if (qk) {
        a->attn->qk_norm = MX_QKNORM_HEAD_EACH;
        a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
        a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    }
    return 0;
}

MX_FAMILY(cohere, .name = "cohere", .base = "llama", .features = "parallel block, layernorm without bias, interleaved rope, per-head q/k layernorm, logit scale",
          .configure = configure)
