/* GLM-4.5V's text model (Glm4vMoeTextModel): GLM-4.5 (glm4_moe: q/k/v
 * biases, rotate-half partial rotary, DeepSeek-V3-style MoE) with M-RoPE:
 * rope_scaling.mrope_section splits the frequencies of the rotary dims
 * between the temporal, height and width positions (src/vision/mrope.c). Its
 * vision side is GLM-4.1V's (src/vision/fam_glm4v.c). No fixture covers this
 * text model: its layers are glm4_moe's and its positions glm4v's, each
 * checked on their own fixtures. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    (void)c;
    a->rope_decl[0].mrope = true;
    return 0;
}

/* Glm4vMoeTextConfig's defaults where they differ from Glm4MoeConfig's */
MX_FAMILY(glm4v_moe, .name = "glm4v_moe", .aliases = MX_ALIASES("glm4v_moe_text"), .base = "glm4_moe",
          .features = "glm4_moe + M-RoPE on the partial rotary dims (multimodal positions); vision: src/vision",
          .configure = configure,
          .defaults = "{\"vocab_size\": 151424, \"max_position_embeddings\": 65536, \"attention_bias\": true}")
