/* Qwen2.5-VL's text model: Qwen2-VL's (Qwen2 with M-RoPE), its keys in
 * text_config with Qwen2_5_VLTextConfig's defaults. Its vision side is
 * src/vision/fam_qwen2_5_vl.c. */
#include "family.h"

MX_FAMILY(qwen2_5_vl, .name = "qwen2_5_vl", .aliases = MX_ALIASES("qwen2_5_vl_text"), .base = "qwen2_vl",
          .features = "qwen2_vl (qwen2 + M-RoPE); vision: window-attention ViT (src/vision)",
          .defaults = "{\"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-6}")
