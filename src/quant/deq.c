/* Dequantization of the quantized formats' codes, exactly (README
 * "Quantized fixtures"): what the portable kernel, the SIMD kernels' edges
 * and row lookups read. */
#include "quant_impl.h"
#include "../base/base.h"

const float mxq_e2m1_lut[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static void deq_e2m1(const uint8_t *row, int c, int ce, float s, float *out) {
    for (int k = c; k < ce; k++) out[k - c] = mxq_e2m1_lut[(row[k >> 1] >> ((k & 1) * 4)) & 15] * s;
}

/* Affine codes of BITS bits, 8 at a time from BITS bytes (one 64-bit word). */
#define DEQ_AFFINE(BITS)                                                                     \
    static void deq_affine##BITS(const uint8_t *row, int c, int ce, float s, float b, float *out) { \
        for (; c < ce && (c & 7); c++) { float p = s * (float)mxq_bits(row, (size_t)c, BITS); *out++ = p + b; } \
        for (; c + 8 <= ce; c += 8) {                                                          \
            uint64_t u = 0;                                                                    \
            memcpy(&u, row + (size_t)c / 8 * BITS, BITS);                                      \
            for (int i = 0; i < 8; i++) {                                                      \
                float p = s * (float)(unsigned)((u >> (i * BITS)) & ((1u << BITS) - 1));       \
                *out++ = p + b;                                                                \
            }                                                                                  \
        }                                                                                      \
        for (; c < ce; c++) { float p = s * (float)mxq_bits(row, (size_t)c, BITS); *out++ = p + b; } \
    }
DEQ_AFFINE(1)
DEQ_AFFINE(2)
DEQ_AFFINE(3)
DEQ_AFFINE(4)
DEQ_AFFINE(5)
DEQ_AFFINE(6)
DEQ_AFFINE(8)


static void deq_affine(const uint8_t *row, int bits, int c, int ce, float s, float b, float *out) {
    switch (bits) {
    case 1: deq_affine1(row, c, ce, s, b, out); break;
    case 2: deq_affine2(row, c, ce, s, b, out); break;
    case 3: deq_affine3(row, c, ce, s, b, out); break;
    case 4: deq_affine4(row, c, ce, s, b, out); break;
    case 5: deq_affine5(row, c, ce, s, b, out); break;
    case 6: deq_affine6(row, c, ce, s, b, out); break;
    case 8: deq_affine8(row, c, ce, s, b, out); break;
    default:
        for (int k = c; k < ce; k++) {
            float p = s * (float)mxq_bits(row, (size_t)k, bits); /* rounded product, then rounded sum */
            out[k - c] = p + b;
        }
    }
}

void mxq_deq(const mx_weight *w, int r, int c0, int len, float *out) {
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    int c = c0, end = c0 + len;
    float sb[2][64];
    int gb = -1, gn = 0; /* scales cached for groups [gb, gb+gn) */
    while (c < end) {
        int g = c / w->group, ge = MX_MIN((g + 1) * w->group, end);
        if (g >= gb + gn || g < gb) {
            gb = g;
            gn = MX_MIN(64, (end - 1) / w->group - g + 1); /* only the groups this call needs */
            mxq_scales(w, r, gb, gn, sb[0], w->fmt == MX_W_AFFINE ? sb[1] : NULL);
        }
        float s = sb[0][g - gb];
        switch (w->fmt) {
        case MX_W_AFFINE: deq_affine(row, w->bits, c, ge, s, sb[1][g - gb], out + c - c0); break;
        case MX_W_MXFP4: case MX_W_NVFP4: deq_e2m1(row, c, ge, s, out + c - c0); break;
        case MX_W_MXFP8: case MX_W_FP8B:
            for (int k = c; k < ge; k++) out[k - c0] = mxq_e4m3(row[k]) * s;
            break;
        default:
            for (int k = c; k < ge; k++) out[k - c0] = 0;
        }
        c = ge;
    }
}

