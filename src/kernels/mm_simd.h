/* mm_simd.h: float-weight (F32/F16/BF16) matmul kernels on 256-bit vectors
 * (AVX2 + FMA + F16C). Included by matmul_avx2.c and matmul_avx512.c, which
 * are compiled with the matching -m flags and only called after dispatch;
 * MM_NAME(x) gives each inclusion its own symbol names.
 *
 * Two shapes of work:
 *  - n = 1 (decode) and small n (<= mm_gemv_max_n: 24 for f32, 40 for
 *    f16/bf16): "dot form". Weight rows are streamed once, 4 (bf16 n=1: 8)
 *    rows at a time with independent accumulators; each weight vector is
 *    reused for up to 3 tokens, and for more tokens the 4-row group is
 *    re-read from L1/L2. One horizontal sum per (row, token) at the end.
 *  - larger n (prefill): a packed GEMM. For each block of MM_RB rows and
 *    MM_KC columns the weights are converted to f32 and transposed into
 *    16-row panels ([k][16], L1-sized); a 6-token x 16-row register tile
 *    (12 ymm accumulators) then broadcasts x[t][k] against the panel, so
 *    every weight element loaded from the panel serves 6 tokens and every
 *    x element serves 16 rows. Accumulation is f32 throughout. */
#ifndef MX_MM_SIMD_H
#define MX_MM_SIMD_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "matmul_impl.h"
#include "../base/base.h"

#define MM_AI static inline __attribute__((always_inline))
#define MM_KC 256  /* columns per packed block */
#define MM_RB 64   /* rows packed together (4 panels of 16) */
#define MM_MC 120  /* tokens per chunk reusing the packed rows (multiple of 6) */
#define MM_PF 512  /* software prefetch distance in bytes for the decode stream */

MM_AI size_t mm_esize(mx_wfmt f) { return f == MX_W_F32 ? 4 : 2; }

/* 8 consecutive weights at p (any alignment) as f32. */
MM_AI __m256 mm_ld8(mx_wfmt f, const uint8_t *p) {
    if (f == MX_W_F32) return _mm256_loadu_ps((const float *)(const void *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (f == MX_W_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

MM_AI float mm_ld1(mx_wfmt f, const uint8_t *p) {
    if (f == MX_W_F32) { float v; memcpy(&v, p, 4); return v; }
    uint16_t h;
    memcpy(&h, p, 2);
    return f == MX_W_F16 ? mx_f16_to_f32(h) : mx_bf16_to_f32(h);
}

MM_AI float mm_hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

/* ---- decode: dot form ---------------------------------------------------- */

/* R rows starting at row r, one token, two accumulators per row. */
MM_AI void mm_gemv1(mx_wfmt f, const mx_weight *w, const float *x, float *y, int r, int R) {
    const size_t es = mm_esize(f);
    const int K = w->cols;
    const uint8_t *p[4];
    __m256 a0[4], a1[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        p[i] = w->data + (size_t)(r + i) * w->row_bytes;
        a0[i] = _mm256_setzero_ps();
        a1[i] = _mm256_setzero_ps();
    }
    int c = 0;
    for (; c + 16 <= K; c += 16) {
        __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const uint8_t *q = p[i] + (size_t)c * es;
#ifdef MM_PREFETCH
            _mm_prefetch((const char *)q + MM_PF, _MM_HINT_T0);
            if (es == 4) _mm_prefetch((const char *)q + MM_PF + 32, _MM_HINT_T0);
#endif
            a0[i] = _mm256_fmadd_ps(mm_ld8(f, q), x0, a0[i]);
            a1[i] = _mm256_fmadd_ps(mm_ld8(f, q + 8 * es), x1, a1[i]);
        }
    }
    for (; c + 8 <= K; c += 8) {
        __m256 x0 = _mm256_loadu_ps(x + c);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) a0[i] = _mm256_fmadd_ps(mm_ld8(f, p[i] + (size_t)c * es), x0, a0[i]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        float s = mm_hsum(_mm256_add_ps(a0[i], a1[i]));
        for (int cc = c; cc < K; cc++) s += mm_ld1(f, p[i] + (size_t)cc * es) * x[cc];
        y[r + i] = s;
    }
}

/* BF16, one token, R <= 8 rows: 16 weights per 256-bit load; the even ones
 * are the low halves of the 32-bit words (shift left 16), the odd ones the
 * high halves (mask), so no widening shuffle per weight vector. x is split
 * into even/odd lanes once per 16 columns for all R rows. */
MM_AI void mm_gemv1_bf16(const mx_weight *w, const float *x, float *y, int r, int R) {
    const int K = w->cols;
    const uint8_t *p[8];
    __m256 acc[8];
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        p[i] = w->data + (size_t)(r + i) * w->row_bytes;
        acc[i] = _mm256_setzero_ps();
    }
    int c = 0;
    for (; c + 16 <= K; c += 16) {
        __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
        __m256 xe = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0))), 0xd8));
        __m256 xo = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1))), 0xd8));
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(p[i] + (size_t)c * 2));
#ifdef MM_PREFETCH
            _mm_prefetch((const char *)(p[i] + (size_t)c * 2) + MM_PF, _MM_HINT_T0);
#endif
            acc[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), xe, acc[i]);
            acc[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, hi)), xo, acc[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        float s = mm_hsum(acc[i]);
        for (int cc = c; cc < K; cc++) s += mm_ld1(MX_W_BF16, p[i] + (size_t)cc * 2) * x[cc];
        y[r + i] = s;
    }
}

/* R rows x T tokens (T <= 3). */
MM_AI void mm_gemvT(mx_wfmt f, const mx_weight *w, const float *x, int ldx, float *y, int ldy, int r, int R, int T) {
    const size_t es = mm_esize(f);
    const int K = w->cols;
    const uint8_t *p[4];
    __m256 acc[4][3];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        p[i] = w->data + (size_t)(r + i) * w->row_bytes;
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) acc[i][t] = _mm256_setzero_ps();
    }
    int c = 0;
    for (; c + 8 <= K; c += 8) {
        __m256 xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps(x + (size_t)t * ldx + c);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const uint8_t *q = p[i] + (size_t)c * es;
#ifdef MM_PREFETCH
            if ((c & 15) == 0) _mm_prefetch((const char *)q + MM_PF, _MM_HINT_T0);
#endif
            __m256 wv = mm_ld8(f, q);
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) acc[i][t] = _mm256_fmadd_ps(wv, xv[t], acc[i][t]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * ldx;
            float s = mm_hsum(acc[i][t]);
            for (int cc = c; cc < K; cc++) s += mm_ld1(f, p[i] + (size_t)cc * es) * xt[cc];
            y[(size_t)t * ldy + r + i] = s;
        }
    }
}

/* R rows (constant) x all n tokens, 3 at a time. */
MM_AI void mm_gemv_rows(mx_wfmt f, const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r, int R) {
    for (int t = 0; t < n; t += 3) {
        const float *xt = x + (size_t)t * ldx;
        float *yt = y + (size_t)t * ldy;
        int T = MX_MIN(3, n - t);
        if (T == 3) mm_gemvT(f, w, xt, ldx, yt, ldy, r, R, 3);
        else if (T == 2) mm_gemvT(f, w, xt, ldx, yt, ldy, r, R, 2);
        else mm_gemv1(f, w, xt, yt, r, R);
    }
}

/* Rows [r0, r1) x tokens [0, n): row groups of 4, and within each group
 * tokens 3 at a time, so the group's rows are read from memory once and
 * from L1/L2 for the later token groups. */
MM_AI void mm_gemv(mx_wfmt f, const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    int r = r0;
    if (n == 1 && f == MX_W_BF16) {
        for (; r + 8 <= r1; r += 8) mm_gemv1_bf16(w, x, y, r, 8);
        for (; r + 4 <= r1; r += 4) mm_gemv1_bf16(w, x, y, r, 4);
        for (; r < r1; r++) mm_gemv1_bf16(w, x, y, r, 1);
        return;
    }
    if (n == 1) {
        for (; r + 4 <= r1; r += 4) mm_gemv1(f, w, x, y, r, 4);
        for (; r < r1; r++) mm_gemv1(f, w, x, y, r, 1);
        return;
    }
    for (; r + 4 <= r1; r += 4) mm_gemv_rows(f, w, x, n, ldx, y, ldy, r, 4);
    for (; r < r1; r++) mm_gemv_rows(f, w, x, n, ldx, y, ldy, r, 1);
}

/* ---- prefill: packed GEMM ------------------------------------------------ */

MM_AI void mm_tr8(__m256 *r) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)), s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)), s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* dst[k*16 + i] = W[r + i][k0 + k] as f32, rows i >= nr zero. */
MM_AI void mm_pack16(mx_wfmt f, const mx_weight *w, int r, int nr, int k0, int kc, float *dst) {
    const size_t es = mm_esize(f);
    const uint8_t *p[16];
    for (int i = 0; i < 16; i++) p[i] = i < nr ? w->data + (size_t)(r + i) * w->row_bytes + (size_t)k0 * es : NULL;
    int k = 0;
    for (; k + 8 <= kc; k += 8) {
        for (int h = 0; h < 2; h++) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                v[i] = p[8 * h + i] ? mm_ld8(f, p[8 * h + i] + (size_t)k * es) : _mm256_setzero_ps();
            mm_tr8(v);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) _mm256_store_ps(dst + (size_t)(k + j) * 16 + 8 * h, v[j]);
        }
    }
    for (; k < kc; k++)
        for (int i = 0; i < 16; i++) dst[(size_t)k * 16 + i] = p[i] ? mm_ld1(f, p[i] + (size_t)k * es) : 0.0f;
}

/* y[t][0..nv) (+)= sum_k x[t][k] * panel[k][0..nv) for t < MR (a constant
 * after inlining), nv <= 16 valid rows. */
MM_AI void mm_ukern(int MR, int kc, const float *panel, const float *x, int ldx, float *y, int ldy, int first, int nv) {
    __m256 c0[6], c1[6];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm256_setzero_ps();
    const float *xp[6];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) xp[i] = x + (size_t)i * ldx;
#pragma GCC unroll 4
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(panel + (size_t)k * 16), b1 = _mm256_load_ps(panel + (size_t)k * 16 + 8);
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_broadcast_ss(xp[i] + k);
            c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        float *yr = y + (size_t)i * ldy;
        if (nv == 16) {
            if (!first) {
                c0[i] = _mm256_add_ps(c0[i], _mm256_loadu_ps(yr));
                c1[i] = _mm256_add_ps(c1[i], _mm256_loadu_ps(yr + 8));
            }
            _mm256_storeu_ps(yr, c0[i]);
            _mm256_storeu_ps(yr + 8, c1[i]);
        } else {
            float tmp[16];
            _mm256_storeu_ps(tmp, c0[i]);
            _mm256_storeu_ps(tmp + 8, c1[i]);
            for (int j = 0; j < nv; j++) yr[j] = first ? tmp[j] : yr[j] + tmp[j];
        }
    }
}

#define MM_UK(M)                                                                                           \
    static __attribute__((noinline)) void MM_NAME(uk##M)(int kc, const float *panel, const float *x, int ldx, \
                                                          float *y, int ldy, int first, int nv) {            \
        mm_ukern(M, kc, panel, x, ldx, y, ldy, first, nv);                                                  \
    }
MM_UK(1)
MM_UK(2)
MM_UK(3)
MM_UK(4)
MM_UK(5)
MM_UK(6)
#undef MM_UK

typedef void (*mm_uk_fn)(int, const float *, const float *, int, float *, int, int, int);

MM_AI void mm_gemm(mx_wfmt f, const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    static const mm_uk_fn uk[7] = {0, MM_NAME(uk1), MM_NAME(uk2), MM_NAME(uk3), MM_NAME(uk4), MM_NAME(uk5), MM_NAME(uk6)};
    float panel[MM_RB / 16][MM_KC * 16] __attribute__((aligned(64)));
    const int K = w->cols;
    for (int rb = r0; rb < r1; rb += MM_RB) {
        int nrb = MX_MIN(MM_RB, r1 - rb), np = (nrb + 15) / 16;
        for (int k0 = 0; k0 < K; k0 += MM_KC) {
            int kc = MX_MIN(MM_KC, K - k0);
            for (int p = 0; p < np; p++) mm_pack16(f, w, rb + 16 * p, MX_MIN(16, nrb - 16 * p), k0, kc, panel[p]);
            for (int t0 = 0; t0 < n; t0 += MM_MC) {
                int t1 = MX_MIN(n, t0 + MM_MC);
                for (int p = 0; p < np; p++) {
                    int nv = MX_MIN(16, nrb - 16 * p);
                    for (int t = t0; t < t1; t += 6) {
                        int mr = MX_MIN(6, t1 - t);
                        uk[mr](kc, panel[p], x + (size_t)t * ldx + k0, ldx, y + (size_t)t * ldy + rb + 16 * p, ldy,
                               k0 == 0, nv);
                    }
                }
            }
        }
    }
    if (K == 0)
        for (int t = 0; t < n; t++) memset(y + (size_t)t * ldy + r0, 0, sizeof(float) * (size_t)(r1 - r0));
}

/* Up to this many tokens the dot form beats packing: packing converts and
 * transposes every weight (about as costly as 4-8 tokens of FMAs), while the
 * dot form re-reads each 4-row group from L1/L2 per 3 tokens. Crossovers
 * measured on Zen 4 with 2048 x 8192 weights: f32 ~24, f16/bf16 ~48. */
static inline int mm_gemv_max_n(mx_wfmt f) { return f == MX_W_F32 ? 24 : 40; }

/* Per-format instantiations so the format tests fold away in the loops. */
#define MM_FMT(F, NAME)                                                                                        \
    static __attribute__((noinline)) void MM_NAME(gemv_##NAME)(const mx_weight *w, const float *x, int n, int ldx, \
                                                                float *y, int ldy, int r0, int r1) {           \
        mm_gemv(F, w, x, n, ldx, y, ldy, r0, r1);                                                            \
    }                                                                                                          \
    static __attribute__((noinline)) void MM_NAME(gemm_##NAME)(const mx_weight *w, const float *x, int n, int ldx, \
                                                                float *y, int ldy, int r0, int r1) {           \
        mm_gemm(F, w, x, n, ldx, y, ldy, r0, r1);                                                            \
    }
MM_FMT(MX_W_F32, f32)
MM_FMT(MX_W_F16, f16)
MM_FMT(MX_W_BF16, bf16)
#undef MM_FMT

/* Entry: the float formats for rows [r0, r1). */
MM_AI void mm_float(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    if (r1 <= r0 || n <= 0) return;
    if (n <= mm_gemv_max_n(w->fmt)) {
        switch (w->fmt) {
        case MX_W_F32: MM_NAME(gemv_f32)(w, x, n, ldx, y, ldy, r0, r1); return;
        case MX_W_F16: MM_NAME(gemv_f16)(w, x, n, ldx, y, ldy, r0, r1); return;
        case MX_W_BF16: MM_NAME(gemv_bf16)(w, x, n, ldx, y, ldy, r0, r1); return;
        default: return;
        }
    }
    switch (w->fmt) {
    case MX_W_F32: MM_NAME(gemm_f32)(w, x, n, ldx, y, ldy, r0, r1); return;
    case MX_W_F16: MM_NAME(gemm_f16)(w, x, n, ldx, y, ldy, r0, r1); return;
    case MX_W_BF16: MM_NAME(gemm_bf16)(w, x, n, ldx, y, ldy, r0, r1); return;
    default: return;
    }
}
#endif
