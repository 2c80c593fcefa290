/* Qwen2-VL's text model: Qwen2 with M-RoPE, the rotary frequencies split in
 * rope_scaling.mrope_section between the temporal, height and width
 * positions (equal for text; an image's tokens get their grid coordinates,
 * src/vision/mrope.c). Its vision side is src/vision/fam_qwen2_vl.c. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    (void)c;
    a->rope_decl[0].mrope = true;
    return 0;
}

MX_FAMILY(qwen2_vl, .name = "qwen2_vl", .base = "qwen2", .features = "qwen2 + M-RoPE (multimodal positions); vision: src/vision",
          .configure = configure)
