/* Qwen3-VL's text model: Qwen3 (per-head q/k RMSNorm) with interleaved
 * M-RoPE (rope_scaling.mrope_interleaved: the temporal, height and width
 * positions take turns over the frequencies) and DeepStack: the tower's
 * extra rows are added to the hidden states at the image tokens after the
 * first decoder layers (mx_seq_in.n_deep). Keys in text_config with
 * Qwen3VLTextConfig's defaults. Its vision side is src/vision/fam_qwen3_vl.c. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    (void)c;
    a->rope_decl[0].mrope = true;
    return 0;
}

MX_FAMILY(qwen3_vl, .name = "qwen3_vl", .aliases = MX_ALIASES("qwen3_vl_text"), .base = "qwen3",
          .features = "qwen3 + interleaved M-RoPE, DeepStack rows; vision: src/vision", .configure = configure,
          .defaults = "{\"rope_theta\": 5000000.0, \"rms_norm_eps\": 1e-6}")
