/* Int8 kernels for MLX affine 4/8-bit, mxfp4 and nvfp4 weights (AVX-512 VNNI).
 *
 * Each activation group is split into two int8 codes, x ~ d * (q1 + q2/256)
 * with d = max|x| / 127 (q2 codes the rounding residual of q1), so x is held
 * to about 16 bits and a group's dot product with the weight codes is an
 * exact integer from two vpdpbusd (u8 codes x s8 activations):
 *     y += s * (d/256) * sum(code * (256 q1 + q2)) + b * (d/256) * sum(256 q1 + q2)
 * One int8 code alone (as llama.cpp's Q8 activations) moved the fixtures'
 * logits by up to 0.9; two keep them within 2e-2 * max|logit| and the
 * greedy tokens exact, at about half the instructions of unpacking codes to
 * f32 (which kept 4-bit decode from the memory bandwidth).
 *
 * 4-bit rows read x in "even elements, then odd ones" order per 64-element
 * chunk (the low and high nibbles of 32 packed bytes), set up by mx_qmatmul.
 * Per token xq holds q1 for all columns, then q2. */
#include "quant_impl.h"
#include "../base/base.h"
#include <immintrin.h>

#define VQ_GB 16 /* groups whose scales are converted at once */
#define VQ_PF 4096

/* 16 scales (or biases) of one row as f32. */
static inline __m512 ld_scales16(const uint8_t *base, mx_dtype dt, size_t i) {
    switch (dt) {
    case MX_DT_BF16: return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(base + 2 * i))), 16));
    case MX_DT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(base + 2 * i)));
    default: return _mm512_loadu_ps((const float *)(const void *)(base + 4 * i));
    }
}

/* E2M1 (mxfp4, nvfp4) as affine codes: 2*value + 12 in [0, 24], so a value
 * is (s/2) * code - 6 s and the affine kernels apply unchanged. */
static inline bool is_e2m1(const mx_weight *w) { return w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4; }
#define E2M1_U8 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0

/* f32 scale and bias of groups [g, g + n) of row r in the affine form. */
static inline __attribute__((always_inline)) void row_sb(const mx_weight *w, int r, int g, int n, float *s, float *b) {
    size_t o = (size_t)r * (size_t)mxq_ngroups(w) + (size_t)g;
    if (!is_e2m1(w)) {
        if (n == 16) {
            _mm512_storeu_ps(s, ld_scales16(w->scales, w->scale_dtype, o));
            _mm512_storeu_ps(b, ld_scales16(w->biases, w->scale_dtype, o));
            return;
        }
        for (int i = 0; i < n; i++) {
            s[i] = mxq_ld(w->scales, w->scale_dtype, o + (size_t)i);
            b[i] = mxq_ld(w->biases, w->scale_dtype, o + (size_t)i);
        }
        return;
    }
    for (int i = 0; i < n; i++) {
        float sc = w->fmt == MX_W_MXFP4 ? mxq_e8m0(w->scales[o + (size_t)i]) : mxq_e4m3(w->scales[o + (size_t)i]);
        s[i] = sc * 0.5f;
        b[i] = sc * -6.0f;
    }
}

/* Products s*d and the bias term for groups [g, g + n) of row r. */
static inline float row_block(const mxq_ctx *c, int r, int g, int n, float *sd) {
    _Alignas(64) float s[VQ_GB], b[VQ_GB];
    row_sb(c->w, r, g, n, s, b);
    if (n == VQ_GB) {
        _mm512_storeu_ps(sd, _mm512_mul_ps(_mm512_load_ps(s), _mm512_loadu_ps(c->xd + g)));
        return _mm512_reduce_add_ps(_mm512_mul_ps(_mm512_load_ps(b), _mm512_loadu_ps(c->xs + g)));
    }
    float bt = 0;
    for (int i = 0; i < n; i++) {
        sd[i] = s[i] * c->xd[g + i];
        bt += b[i] * c->xs[g + i];
    }
    return bt;
}

/* Codes of 64 elements as bytes: 8-bit rows load them, 4-bit rows unpack 32
 * bytes into [low nibbles | high nibbles] (E2M1 then mapped to 0..24). */
static inline __m512i codes64(const uint8_t *p, int bits, bool e2m1) {
    if (bits == 8) return _mm512_loadu_si512((const void *)p);
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)p));
    v = _mm512_mask_srli_epi16(v, (__mmask32)0xFFFF0000u, v, 4);
    v = _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
    if (e2m1) v = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_setr_epi8(E2M1_U8)), v);
    return v;
}

/* Two rows at a time (sharing the activation loads), groups of 16 to 128: a
 * 64-element chunk holds 64/G groups or 1/(G/64) of one. */
static void dec_rows(const mxq_ctx *c, int r, int nr, float *out) {
    const mx_weight *w = c->w;
    int G = w->group, bits = w->bits, ng = w->cols / G;
    bool e2m1 = is_e2m1(w);
    const uint8_t *p0 = w->data + (size_t)r * w->row_bytes, *p1 = nr > 1 ? p0 + w->row_bytes : p0;
    const int8_t *xq = c->xq;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    float bt0 = 0, bt1 = 0;
    _Alignas(64) float sd0[2 * VQ_GB], sd1[2 * VQ_GB];
    int gpc = G < 64 ? 64 / G : 1; /* groups per chunk */
    int cpg = G > 64 ? G / 64 : 1; /* chunks per group */
    /* G < 64: the group of each int32 lane (see codes64's layout) */
    __m512i lane_g = _mm512_setzero_si512();
    if (gpc > 1) {
        int idx[16];
        for (int l = 0; l < 16; l++) idx[l] = bits == 8 ? 4 * l / G : 8 * (l % 8) / G;
        lane_g = _mm512_loadu_si512((const void *)idx);
    }
    for (int g = 0; g < ng; g += gpc) {
        int gi = g % VQ_GB;
        if (gi == 0) {
            int n = MX_MIN(VQ_GB, ng - g);
            bt0 += row_block(c, r, g, n, sd0);
            if (nr > 1) bt1 += row_block(c, r + 1, g, n, sd1);
        }
        __m512i i0 = _mm512_setzero_si512(), i1 = _mm512_setzero_si512(), j0 = i0, j1 = i0;
        for (int h = 0; h < cpg; h++) {
            size_t k = (size_t)g * G + (size_t)h * 64, pb = k * (size_t)bits / 8;
            _mm_prefetch((const char *)p0 + pb + VQ_PF, _MM_HINT_T0);
            _mm_prefetch((const char *)p1 + pb + VQ_PF, _MM_HINT_T0);
            if (bits == 8) {
                _mm_prefetch((const char *)p0 + pb + VQ_PF + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)p1 + pb + VQ_PF + 64, _MM_HINT_T0);
            }
            __m512i x = _mm512_loadu_si512((const void *)(xq + k)), x2 = _mm512_loadu_si512((const void *)(xq + w->cols + k));
            __m512i c0 = codes64(p0 + pb, bits, e2m1), c1 = codes64(p1 + pb, bits, e2m1);
            i0 = _mm512_dpbusd_epi32(i0, c0, x);
            j0 = _mm512_dpbusd_epi32(j0, c0, x2);
            i1 = _mm512_dpbusd_epi32(i1, c1, x);
            j1 = _mm512_dpbusd_epi32(j1, c1, x2);
        }
        /* |256 q1 + q2| <= 32640 and codes <= 255: at most 2^28 per lane */
        i0 = _mm512_add_epi32(_mm512_slli_epi32(i0, 8), j0);
        i1 = _mm512_add_epi32(_mm512_slli_epi32(i1, 8), j1);
        __m512 s0, s1;
        if (gpc > 1) { /* sd arrays hold 2*VQ_GB: the 16-wide loads stay inside */
            s0 = _mm512_permutexvar_ps(lane_g, _mm512_loadu_ps(sd0 + gi));
            s1 = _mm512_permutexvar_ps(lane_g, _mm512_loadu_ps(sd1 + gi));
        } else {
            s0 = _mm512_set1_ps(sd0[gi]);
            s1 = _mm512_set1_ps(sd1[gi]);
        }
        a0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), s0, a0);
        if (nr > 1) a1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), s1, a1);
    }
    out[0] = _mm512_reduce_add_ps(a0) + bt0;
    if (nr > 1) out[1] = _mm512_reduce_add_ps(a1) + bt1;
}

void mxq_vnni_dec(const mxq_ctx *c, int r0, int r1) {
    for (int r = r0; r < r1; r += 2) {
        float o[2];
        int nr = MX_MIN(2, r1 - r);
        dec_rows(c, r, nr, o);
        for (int i = 0; i < nr; i++) c->y[r + i] = o[i];
    }
}

/* One token's activations for the kernel above: per group of G (a multiple
 * of 16) the codes q1 (xq[0, cols)) and q2 (xq[cols, 2 cols)), the scale
 * d/256 and (d/256) * sum(256 q1 + q2). */
void mxq_vnni_prep(const float *x, int cols, int G, int bits, int8_t *xq, float *xd, float *xs) {
    /* 4-bit: per 16-byte lane evens then odds, then the lanes' halves gathered */
    const __m512i evod = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
    const __m512i qsel = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
    for (int g = 0; g < cols / G; g++) {
        const float *s = x + (size_t)g * G;
        __m512 mx = _mm512_setzero_ps();
        for (int k = 0; k < G; k += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(s + k)));
        float amax = _mm512_reduce_max_ps(mx);
        __m512 inv = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f), k256 = _mm512_set1_ps(256.0f);
        __m512i qs = _mm512_setzero_si512();
        for (int k = 0; k < G; k += 16) {
            __m512 u = _mm512_mul_ps(_mm512_loadu_ps(s + k), inv);
            __m512 r = _mm512_roundscale_ps(u, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m512i q1 = _mm512_cvtps_epi32(r);
            /* the residual is in [-0.5, 0.5]: q2 in [-128, 128], saturated to 127 */
            __m512i q2 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(u, r), k256));
            q2 = _mm512_max_epi32(_mm512_min_epi32(q2, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
            qs = _mm512_add_epi32(qs, _mm512_add_epi32(_mm512_slli_epi32(q1, 8), q2));
            _mm_storeu_si128((__m128i *)(void *)(xq + (size_t)g * G + k), _mm512_cvtepi32_epi8(q1));
            _mm_storeu_si128((__m128i *)(void *)(xq + cols + (size_t)g * G + k), _mm512_cvtepi32_epi8(q2));
        }
        xd[g] = amax / (127.0f * 256.0f);
        /* d * sum(x) from the codes, not from x: with the codes' offset
         * (b ~ -s * 2^(bits-1)) the bias term then cancels the rounding of x
         * against the codes, leaving sum(w * (x - x_coded)) */
        xs[g] = xd[g] * (float)_mm512_reduce_add_epi32(qs);
    }
    if (bits == 4)
        for (int k = 0; k < 2 * cols; k += 64) {
            __m512i v = _mm512_loadu_si512((const void *)(xq + k));
            _mm512_storeu_si512((void *)(xq + k), _mm512_permutexvar_epi64(qsel, _mm512_shuffle_epi8(v, evod)));
        }
}

/* ---- prefill: 16-row panels repacked for dot products across rows ----
 * A panel of 16 rows x KC columns is unpacked once into u8 codes laid out
 * [KC/4][16 rows][4 columns], so one vpdpbusd with four broadcast activation
 * bytes adds 4 columns to 16 rows' sums (no horizontal reductions); every
 * token of the matmul then runs over it. The same kernel serves every n, so
 * a token's result does not depend on its batch (PANEL mode). */
#define VG_KC 256
#define VG_NT 6
/* the token loops must unroll for the accumulators to stay in registers */
#define VG_UNROLL _Pragma("GCC unroll 6")

typedef struct {
    const int8_t *xq; /* token 0's codes at the chunk's first column */
    size_t ldq;       /* bytes per token (2 * cols) */
    int cols;         /* offset of q2 from q1 */
    const float *xd, *xs; /* token 0's values at the chunk's first group */
    int ldg;          /* groups per token */
} vg_x;

static inline __attribute__((always_inline)) void vg_micro(int nt, const uint8_t *wp, const float *ST, const float *BT, int G, int len,
                                                             const vg_x *x, float *y, int ldy, __mmask16 rows) {
    __m512 f[VG_NT];
    VG_UNROLL
    for (int t = 0; t < nt; t++) f[t] = _mm512_setzero_ps();
    for (int g = 0; g < len / G; g++) {
        __m512i i1[VG_NT], i2[VG_NT];
        VG_UNROLL
    for (int t = 0; t < nt; t++) i1[t] = i2[t] = _mm512_setzero_si512();
        for (int q = 0; q < G / 4; q++) {
            int k = g * G + q * 4;
            __m512i W = _mm512_load_si512((const void *)(wp + (size_t)(k / 4) * 64));
            VG_UNROLL
    for (int t = 0; t < nt; t++) {
                const int8_t *p = x->xq + (size_t)t * x->ldq + k;
                int32_t a, b;
                memcpy(&a, p, 4);
                memcpy(&b, p + x->cols, 4);
                i1[t] = _mm512_dpbusd_epi32(i1[t], W, _mm512_set1_epi32(a));
                i2[t] = _mm512_dpbusd_epi32(i2[t], W, _mm512_set1_epi32(b));
            }
        }
        __m512 s = _mm512_load_ps(ST + g * 16), b = _mm512_load_ps(BT + g * 16);
        VG_UNROLL
    for (int t = 0; t < nt; t++) {
            __m512i it = _mm512_add_epi32(_mm512_slli_epi32(i1[t], 8), i2[t]);
            f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(it), _mm512_mul_ps(s, _mm512_set1_ps(x->xd[(size_t)t * x->ldg + g])), f[t]);
            f[t] = _mm512_fmadd_ps(b, _mm512_set1_ps(x->xs[(size_t)t * x->ldg + g]), f[t]);
        }
    }
    VG_UNROLL
    for (int t = 0; t < nt; t++) {
        float *yt = y + (size_t)t * ldy;
        _mm512_mask_storeu_ps(yt, rows, _mm512_add_ps(_mm512_maskz_loadu_ps(rows, yt), f[t]));
    }
}

/* Codes of row r, columns [c0, c0 + len) (len a multiple of 16), as bytes. */
static void unpack_row(const mx_weight *w, int r, int c0, int len, uint8_t *out) {
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    if (w->bits == 8) { memcpy(out, row + c0, (size_t)len); return; }
    const __m128i m = _mm_set1_epi8(0x0F), lut = _mm_setr_epi8(E2M1_U8);
    bool e2m1 = is_e2m1(w);
    for (int k = 0; k < len; k += 16) {
        __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)(row + (c0 + k) / 2));
        __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m), u = _mm_unpacklo_epi8(lo, hi);
        _mm_storeu_si128((__m128i *)(void *)(out + k), e2m1 ? _mm_shuffle_epi8(lut, u) : u);
    }
}

void mxq_vnni_gemm(const mxq_ctx *c, int r0, int r1) {
    const mx_weight *w = c->w;
    int G = w->group, ng = w->cols / G;
    _Alignas(64) uint8_t wp[VG_KC * 16];
    _Alignas(64) uint8_t rowb[VG_KC];
    _Alignas(64) float ST[VG_KC / 16 * 16], BT[VG_KC / 16 * 16], s[VG_KC / 16], b[VG_KC / 16];
    for (int t = 0; t < c->n; t++) memset(c->y + (size_t)t * c->ldy + r0, 0, (size_t)(r1 - r0) * sizeof(float));
    for (int rb = r0; rb < r1; rb += 16) {
        int nr = MX_MIN(16, r1 - rb);
        __mmask16 rows = (__mmask16)((1u << nr) - 1);
        for (int kc = 0; kc < w->cols; kc += VG_KC) {
            int len = MX_MIN(VG_KC, w->cols - kc), gc = len / G, g0 = kc / G;
            for (int i = 0; i < 16; i++) {
                if (i < nr) {
                    unpack_row(w, rb + i, kc, len, rowb);
                    row_sb(w, rb + i, g0, gc, s, b);
                    for (int g = 0; g < gc; g++) {
                        ST[g * 16 + i] = s[g];
                        BT[g * 16 + i] = b[g];
                    }
                } else {
                    memset(rowb, 0, (size_t)len);
                    for (int g = 0; g < gc; g++) ST[g * 16 + i] = BT[g * 16 + i] = 0;
                }
                for (int q = 0; q < len / 4; q++) memcpy(wp + (size_t)q * 64 + (size_t)i * 4, rowb + q * 4, 4);
            }
            for (int t = 0; t < c->n; t += VG_NT) {
                int nt = MX_MIN(VG_NT, c->n - t);
                vg_x x = {c->xq + (size_t)t * 2 * w->cols + kc, (size_t)2 * w->cols, w->cols, c->xd + (size_t)t * ng + g0,
                          c->xs + (size_t)t * ng + g0, ng};
                float *yt = c->y + (size_t)t * c->ldy + rb;
                switch (nt) {
                case 6: vg_micro(6, wp, ST, BT, G, len, &x, yt, c->ldy, rows); break;
                case 5: vg_micro(5, wp, ST, BT, G, len, &x, yt, c->ldy, rows); break;
                case 4: vg_micro(4, wp, ST, BT, G, len, &x, yt, c->ldy, rows); break;
                case 3: vg_micro(3, wp, ST, BT, G, len, &x, yt, c->ldy, rows); break;
                case 2: vg_micro(2, wp, ST, BT, G, len, &x, yt, c->ldy, rows); break;
                default: vg_micro(1, wp, ST, BT, G, len, &x, yt, c->ldy, rows); break;
                }
            }
        }
    }
}
