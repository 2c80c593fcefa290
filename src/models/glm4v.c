/* GLM-4.1V's text model (Glm4vTextModel): GLM-4 (post-sublayer norms, fused
 * gate_up, q/k/v biases) with M-RoPE: rope_scaling.mrope_section splits the
 * frequencies of the partial interleaved rotary dims between the temporal,
 * height and width positions (src/vision/mrope.c). Its vision side is
 * src/vision/fam_glm4v.c. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    (void)c;
    a->rope_decl[0].mrope = true;
    return 0;
}

/* Glm4vTextConfig's defaults (rms_norm_eps differs from GlmConfig's) */
MX_FAMILY(glm4v, .name = "glm4v", .aliases = MX_ALIASES("glm4v_text"), .base = "glm4",
          .features = "glm4 + M-RoPE on the partial interleaved rotary dims (multimodal positions); vision: src/vision",
          .configure = configure,
          .defaults = "{\"vocab_size\": 151552, \"hidden_size\": 4096, \"intermediate_size\": 13696, \"num_hidden_layers\": 40,"
                      " \"num_attention_heads\": 32, \"num_key_value_heads\": 2, \"max_position_embeddings\": 32768,"
                      " \"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0}")
