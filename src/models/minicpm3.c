/* MiniCPM3: Llama blocks with DeepSeek-V2's latent attention (q through a
 * LoRA, or a plain q_proj when q_lora_rank is null; rotate-half rope on the
 * rope slices, never interleaved; v_head_dim by default hidden / heads) and
 * muP-style scales: embeddings times scale_emb, each sublayer's output times
 * scale_depth / sqrt(num_hidden_layers) before the residual add, logits of
 * h / (hidden_size / dim_model_base). scale_depth null means no residual
 * scale, dim_model_base null no logit scale. Tied embeddings by default. */
#include "family.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_mla_defaults d = {.q_lora = 768, .kv_lora = 256, .nope = 64, .rope = 32, .v = 0, .fixed_rope = true};
    double emb, depth, base;
    if (mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) || mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_float(c, "scale_emb", 12, 0, 1e6, &emb) ||
        mx_cfg_float(c, "scale_depth", mx_cfg_absent(c, "scale_depth") ? 1.4 : sqrt(a->n_layers), 0, 1e6, &depth) ||
        mx_cfg_float(c, "dim_model_base", mx_cfg_absent(c, "dim_model_base") ? 256 : a->hidden, 1e-6, 1e9, &base) ||
        mx_deepseek_mla_configure(a, c, &d))
        return -1;
    a->embed_scale = (float)emb;
    a->residual_scale = (float)(depth / sqrt(a->n_layers));
    a->logit_scale = (float)(base / a->hidden);
    return 0;
}

MX_FAMILY(minicpm3, .name = "minicpm3", .base = "llama",
          .features = "llama + mla (q lora or plain q_proj, rotate-half rope slice), embedding / residual / logit scales, tied",
          .configure = configure)
