/* half: exact conversions between f32 and the 16-bit float formats. */
#ifndef MX_HALF_H
#define MX_HALF_H
#include <stdint.h>
#include <string.h>

static inline float mx_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even, NaN kept quiet. */
static inline uint16_t mx_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static inline float mx_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else { /* subnormal: value = man * 2^-24 */
            float f = (float)man * (1.0f / 16777216.0f);
            memcpy(&u, &f, 4);
            u |= sign;
        }
    } else if (exp == 31) u = sign | 0x7f800000 | (man << 13);
    else u = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t mx_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00);
    if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
    if (a < 0x38800000) { /* subnormal or zero: round man*2^-24 */
        float af;
        memcpy(&af, &a, 4);
        float scaled = af * 16777216.0f; /* exact */
        uint32_t r = (uint32_t)scaled;
        float frac = scaled - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t man = a & 0x7fffff;
    uint32_t exp = (a >> 23) - 112;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
#endif
