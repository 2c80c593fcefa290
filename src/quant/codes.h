/* codes: the element and scale codes of the quantized formats, decoded
 * exactly (the f32 value the fixtures' reference dequantization yields,
 * README "Quantized fixtures"). Shared by the formats' kernels and the
 * offline quantizers (src/convert/). */
#ifndef MX_QCODES_H
#define MX_QCODES_H
#include <stdint.h>
#include <string.h>

/* E2M1 code (mxfp4, nvfp4) -> value; the sign is bit 3 */
extern const float mxq_e2m1_lut[16];

/* E4M3 (fn) byte -> f32: the 7 magnitude bits placed at the top of an f32
 * exponent/mantissa, rescaled by 2^120 (exact for normals and subnormals;
 * 0x7f/0xff decode to +-480 as MLX does). */
static inline float mxq_e4m3(uint8_t b) {
    uint32_t u = ((uint32_t)(b & 0x7f) << 20) | ((uint32_t)(b & 0x80) << 24);
    float f;
    memcpy(&f, &u, 4);
    return f * 0x1p120f;
}
/* E8M0 -> 2^(s-127); s = 0 is the denormal 2^-127, s = 255 inf (as MLX). */
static inline float mxq_e8m0(uint8_t s) {
    uint32_t u = s == 0 ? 0x00400000u : s == 255 ? 0x7f800000u : (uint32_t)s << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#endif
