/* Attention's scores and mixes for two query rows that read the same keys
 * (two heads of a GQA group), with 32 vector registers (2 rows x 8 keys of
 * accumulators). Mixes run the same 256-bit operations as ops_avx2.c's
 * one-row kernels, in the same order per element; scores run on 512-bit
 * registers where d allows, as mx_attn_scores_avx512 (the one-row kernel
 * used on these machines) does: each row's result is bit for bit what
 * mx_attn_scores / mx_attn_mix give it alone. Each K or V row is loaded once for both: the one-row kernels are
 * bound by those loads (one per FMA). Only called after dispatch (ops.c). */
#include "ops_impl.h"
#include <immintrin.h>
#include <string.h>

/* A cache's K / V rows of one head lie a whole row of all heads apart (2 KiB for 8 heads of 64), so a
 * head reads 256 bytes of each 4 KiB page: too little for the hardware's stream prefetchers, and each
 * line would be a demand miss. The rows ATT_PF keys ahead are asked for explicitly. */
#define ATT_PF 32
/* Keeps a loaded row in a register: gcc otherwise folds the load into both rows' FMAs, and the kernels
 * were bound by 18 loads per 16 FMAs (~12 cycles per key and pair instead of 8). */
#define IN_REG(x) __asm__("" : "+v"(x))
static inline __attribute__((always_inline)) void prefetch_row(const float *r, int d) {
    for (int c = 0; c < d; c += 16) _mm_prefetch((const char *)(r + c), _MM_HINT_T0);
}

/* lane j of the result: the sum of a[j]'s lanes (mx_attn_scores_avx2's reduction) */
static inline __attribute__((always_inline)) __m256 reduce8(const __m256 *a) {
    __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

/* ---- f32 scores on 512-bit registers where d is a multiple of 16 (16 lanes of a key's products; the
 * two 256-bit halves added, then the 8 lanes reduced as above): 1.75 times the 256-bit kernels' FMA
 * rate on this core (tools/isa_bounds), and the whole of attention's arithmetic at depth. The one-row
 * and two-row kernels share this order, so each row is bit for bit the same in either; other d take
 * the 256-bit kernels in both. */
static inline __attribute__((always_inline)) __m256 halves(__m512 x) {
    return _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
}
static inline __attribute__((always_inline)) float dot16(const float *a, const float *b, int d) {
    __m512 acc = _mm512_setzero_ps();
    for (int c = 0; c < d; c += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + c), _mm512_loadu_ps(b + c), acc);
    __m256 h = halves(acc);
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}

void mx_attn_scores_avx512(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out) {
    if (d % 16) { mx_attn_scores_avx2(q, K, ldk, n, d, scale, out); return; }
    const __m256 vs = _mm256_set1_ps(scale);
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        __m512 a[8];
        __m256 h[8];
        const float *kr = K + (size_t)k * ldk;
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) a[j] = _mm512_setzero_ps();
        for (int c = 0; c < d; c += 16) {
            __m512 qv = _mm512_loadu_ps(q + c);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) a[j] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kr + (size_t)j * ldk + c), a[j]);
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) h[j] = halves(a[j]);
        _mm256_storeu_ps(out + k, _mm256_mul_ps(reduce8(h), vs));
    }
    for (; k < n; k++) out[k] = dot16(q, K + (size_t)k * ldk, d) * scale;
}

void mx_attn_scores2_avx512(const float *q0, const float *q1, const float *K, size_t ldk, int n, int d, float scale, float *o0, float *o1, bool pf) {
    int k = 0;
    if (d % 16 == 0) {
        const __m256 vs = _mm256_set1_ps(scale);
        for (; k + 8 <= n; k += 8) {
            __m512 a[8], b[8];
            __m256 h[8];
            const float *kr = K + (size_t)k * ldk;
            if (pf && k + ATT_PF + 8 <= n)
                for (int j = 0; j < 8; j++) prefetch_row(kr + (size_t)(ATT_PF + j) * ldk, d);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) a[j] = b[j] = _mm512_setzero_ps();
            for (int c = 0; c < d; c += 16) {
                __m512 qa = _mm512_loadu_ps(q0 + c), qb = _mm512_loadu_ps(q1 + c);
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    __m512 kv = _mm512_loadu_ps(kr + (size_t)j * ldk + c);
                    IN_REG(kv);
                    a[j] = _mm512_fmadd_ps(qa, kv, a[j]);
                    b[j] = _mm512_fmadd_ps(qb, kv, b[j]);
                }
            }
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) h[j] = halves(a[j]);
            _mm256_storeu_ps(o0 + k, _mm256_mul_ps(reduce8(h), vs));
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) h[j] = halves(b[j]);
            _mm256_storeu_ps(o1 + k, _mm256_mul_ps(reduce8(h), vs));
        }
        for (; k < n; k++) {
            o0[k] = dot16(q0, K + (size_t)k * ldk, d) * scale;
            o1[k] = dot16(q1, K + (size_t)k * ldk, d) * scale;
        }
        return;
    }
    if (d % 8 == 0) {
        const __m256 vs = _mm256_set1_ps(scale);
        for (; k + 8 <= n; k += 8) {
            __m256 a[8], b[8];
            const float *kr = K + (size_t)k * ldk;
            if (pf && k + ATT_PF + 8 <= n)
                for (int j = 0; j < 8; j++) prefetch_row(kr + (size_t)(ATT_PF + j) * ldk, d);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) a[j] = b[j] = _mm256_setzero_ps();
            for (int c = 0; c < d; c += 8) {
                __m256 qa = _mm256_loadu_ps(q0 + c), qb = _mm256_loadu_ps(q1 + c);
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    __m256 kv = _mm256_loadu_ps(kr + (size_t)j * ldk + c);
                    IN_REG(kv);
                    a[j] = _mm256_fmadd_ps(qa, kv, a[j]);
                    b[j] = _mm256_fmadd_ps(qb, kv, b[j]);
                }
            }
            _mm256_storeu_ps(o0 + k, _mm256_mul_ps(reduce8(a), vs));
            _mm256_storeu_ps(o1 + k, _mm256_mul_ps(reduce8(b), vs));
        }
    }
    for (; k < n; k++) {
        o0[k] = mx_dot_avx2(q0, K + (size_t)k * ldk, d) * scale;
        o1[k] = mx_dot_avx2(q1, K + (size_t)k * ldk, d) * scale;
    }
}

/* y0 += sum_k p0[k] V[k], y1 likewise, over 64 columns of V: per element the fma sequence of
 * mix_regs (ops_avx2.c), on 512-bit registers (the same arithmetic per element, 1.75 times the rate) */
static inline __attribute__((always_inline)) void mix2_64(float *y0, float *y1, const float *p0, const float *p1, const float *V, size_t ldv, int n,
                                                          bool from_y, bool pf) {
    __m512 a[4], b[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        a[i] = from_y ? _mm512_loadu_ps(y0 + 16 * i) : _mm512_setzero_ps();
        b[i] = from_y ? _mm512_loadu_ps(y1 + 16 * i) : _mm512_setzero_ps();
    }
    for (int k = 0; k < n; k++) {
        __m512 va = _mm512_set1_ps(p0[k]), vb = _mm512_set1_ps(p1[k]);
        const float *v = V + (size_t)k * ldv;
        if (pf && k + ATT_PF < n) prefetch_row(v + (size_t)ATT_PF * ldv, 64);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512 x = _mm512_loadu_ps(v + 16 * i);
            IN_REG(x);
            a[i] = _mm512_fmadd_ps(va, x, a[i]);
            b[i] = _mm512_fmadd_ps(vb, x, b[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        _mm512_storeu_ps(y0 + 16 * i, a[i]);
        _mm512_storeu_ps(y1 + 16 * i, b[i]);
    }
}

void mx_attn_mix2_avx512(float *y0, float *y1, const float *p0, const float *p1, const float *V, size_t ldv, int n, int d, bool acc, bool pf) {
    if (d == 64 || d == 128) /* mx_attn_mix_avx2's register paths, a 64-column half at a time */
        for (int c = 0; c < d; c += 64) mix2_64(y0 + c, y1 + c, p0, p1, V + c, ldv, n, acc, pf);
    else {
        mx_attn_mix_avx2(y0, p0, V, ldv, n, d, acc);
        mx_attn_mix_avx2(y1, p1, V, ldv, n, d, acc);
    }
}
