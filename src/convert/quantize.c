/* Quantizers (the MLX Metal kernel's rules, as mlx-community checkpoints were
 * made; README "How the codes were chosen"): affine with round-half-away,
 * w_max starting at 0; mxfp4/nvfp4/mxfp8 with amax/6 or amax/448 scales. */
#include "convert.h"
#include "../quant/codes.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

/* E2M1 code of v, nearest magnitude with ties to the even code; sign bit set
 * for negative values (Metal writes -0 as 0x8). */
uint8_t mxq_enc_e2m1(float v) {
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    float a = fabsf(v);
    uint8_t code = 0;
    if (a != a) code = 7;
    else {
        while (code < 7 && a > mid[code]) code++;
        if (code < 7 && a == mid[code] && (code & 1)) code++; /* tie: even code */
    }
    return (uint8_t)(code | (signbit(v) ? 8 : 0));
}

/* E4M3 (fn) code of v: round to nearest even, saturating to +-448. */
uint8_t mxq_enc_e4m3(float v) {
    uint8_t sign = signbit(v) ? 0x80 : 0;
    float a = fabsf(v);
    if (a != a) return (uint8_t)(sign | 0x7e);
    if (a < 0x1p-6f) {
        int m = (int)nearbyintf(a * 512.0f); /* subnormal step 2^-9; m == 8 is the smallest normal */
        return (uint8_t)(sign | m);
    }
    int e;
    float fr = frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
    e -= 1;                   /* a = (2 fr) * 2^e */
    int m = (int)nearbyintf((2.0f * fr - 1.0f) * 8.0f);
    if (m == 8) { m = 0; e++; }
    int eb = e + 7;
    if (eb > 15 || (eb == 15 && m == 7)) return (uint8_t)(sign | 0x7e);
    return (uint8_t)(sign | (eb << 3) | m);
}

/* E8M0 code of a positive scale: round(log2(x)) + 127, clamped. */
static uint8_t enc_e8m0(float x) {
    if (!(x > 0)) return 0;
    float l = roundf(log2f(x)) + 127.0f;
    if (l < 0) l = 0;
    if (l > 254) l = 254;
    return (uint8_t)l;
}

static void put_bits(uint8_t *row, size_t c, int bits, unsigned v) {
    size_t o = c * (size_t)bits;
    unsigned sh = (unsigned)(o & 7);
    row[o >> 3] |= (uint8_t)(v << sh);
    if (sh + (unsigned)bits > 8) row[(o >> 3) + 1] |= (uint8_t)(v >> (8 - sh));
}

/* Metal's round: halves away from zero. */
static float round_away(float x) { return roundf(x); }

void mxq_quantize_row(mx_wfmt fmt, int bits, int group, const float *w, int cols, uint8_t *packed, float *scales, float *biases, uint8_t *scodes) {
    size_t row_bytes = (size_t)cols * bits / 8;
    memset(packed, 0, row_bytes);
    int ng = cols / group;
    for (int g = 0; g < ng; g++) {
        const float *x = w + (size_t)g * group;
        if (fmt == MX_W_AFFINE) {
            float n_bins = (float)((1 << bits) - 1), w_max = 0, w_min = INFINITY;
            for (int i = 0; i < group; i++) {
                w_max = fmaxf(w_max, x[i]);
                w_min = fminf(w_min, x[i]);
            }
            float scale = fmaxf((w_max - w_min) / n_bins, 1e-7f);
            bool side = fabsf(w_min) > fabsf(w_max);
            scale = side ? scale : -scale;
            float edge = side ? w_min : w_max;
            float q0 = round_away(edge / scale);
            bool at_zero = q0 == 0.0f;
            scale = at_zero ? scale : edge / q0;
            float bias = at_zero ? 0.0f : edge;
            for (int i = 0; i < group; i++) {
                float q = round_away((x[i] - bias) / scale);
                q = q < 0 ? 0 : q > n_bins ? n_bins : q;
                put_bits(packed, (size_t)g * group + i, bits, (unsigned)q);
            }
            scales[g] = scale;
            biases[g] = bias;
        } else {
            float amax = 0;
            for (int i = 0; i < group; i++) amax = fmaxf(amax, fabsf(x[i]));
            bool fp8 = fmt == MX_W_MXFP8;
            float sc = amax / (fp8 ? 448.0f : 6.0f), dec;
            uint8_t s;
            if (fmt == MX_W_NVFP4) { s = mxq_enc_e4m3(sc); dec = mxq_e4m3(s); }
            else { s = enc_e8m0(sc); dec = mxq_e8m0(s); }
            scodes[g] = s;
            float inv = dec > 0 ? 1.0f / dec : 0.0f;
            for (int i = 0; i < group; i++) {
                float v = x[i] * inv;
                size_t c = (size_t)g * group + i;
                if (fp8) packed[c] = mxq_enc_e4m3(v);
                else packed[c >> 1] |= (uint8_t)(mxq_enc_e2m1(v) << ((c & 1) * 4));
            }
        }
    }
}
