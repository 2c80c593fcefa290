/* Youtu-LLM (youtu): Llama blocks with DeepSeek-V3's latent attention in
 * every layer (q through a LoRA, or a plain q_proj when q_lora_rank is null;
 * interleaved rope on the rope slices unless rope_interleave is false) and a
 * dense SwiGLU MLP everywhere; tied embeddings by default. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    return mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) || mx_deepseek_mla_configure(a, c, &mx_deepseek_mla_defaults) ? -1 : 0;
}

MX_FAMILY(youtu, .name = "youtu", .base = "llama", .features = "llama + mla (q lora or plain q_proj, latent kv cache, rope slice), dense mlp, tied",
          .configure = configure)
