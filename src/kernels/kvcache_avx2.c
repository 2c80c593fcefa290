/* AVX2 attention rows over f16 / bf16 / q8_0 / q4_0 cache rows: each block
 * of 32 values is widened to f32 in registers (4 vectors of 8) and used at
 * once; nothing of the cache is copied. Scores take 4 keys at a time (one
 * accumulator each, reduced together); a quantized block's partial dot is
 * scaled once. Mix keeps one block of y in registers while it runs over the
 * keys. */
#include "kvcache_impl.h"
#include <immintrin.h>
#include <string.h>

typedef const uint8_t cu8;

static inline __attribute__((always_inline)) size_t blk_bytes(const mx_kv_type t) {
    return t == MX_KV_Q8_0 ? MX_Q8_0_BYTES : t == MX_KV_Q4_0 ? MX_Q4_0_BYTES : 2 * MX_KV_BLOCK;
}

static inline __attribute__((always_inline)) float blk_scale(const mx_kv_type t, cu8 *blk) {
    if (t != MX_KV_Q8_0 && t != MX_KV_Q4_0) return 1.0f;
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

/* values 8c .. 8c + 7 of the block at blk, as f32 (unscaled for q8_0 / q4_0) */
static inline __attribute__((always_inline)) __m256 ld8(const mx_kv_type t, cu8 *blk, int c) {
    switch (t) {
    case MX_KV_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 16 * c)));
    case MX_KV_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + 16 * c))), 16));
    case MX_KV_Q8_0: return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(blk + 2 + 8 * c))));
    default: { /* q4_0: chunks 0, 1 are the low nibbles of bytes 0..15, chunks 2, 3 the high ones */
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(blk + 2 + 8 * (c & 1)));
        if (c >= 2) b = _mm_srli_epi16(b, 4);
        b = _mm_and_si128(b, _mm_set1_epi8(15));
        return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(b), _mm256_set1_epi32(8)));
    }
    }
}

/* a whole q4_0 block's nibbles 0..15 as f32 (the -8 is folded in by the
 * callers: q . (n - 8) = q . n - 8 sum(q)): one load, two masks, and a
 * widening per vector */
static inline __attribute__((always_inline)) void q4_nibbles(cu8 *blk, __m256 v[4]) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2)), m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    v[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    v[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
    v[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    v[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
}

static inline __attribute__((always_inline)) float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define QUANT(t) ((t) == MX_KV_Q8_0 || (t) == MX_KV_Q4_0)

/* a head's rows lie a row of all heads apart: too sparse for the stream prefetchers (ops_avx512.c), so
 * the row KV_PF keys ahead is asked for (bytes from its start) */
#define KV_PF 32
static inline __attribute__((always_inline)) void prefetch_bytes(cu8 *r, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(r + o), _MM_HINT_T0);
}

/* full: d % 32 == 0 (every block has its 4 vectors: the chunk loops unroll) */
static inline __attribute__((always_inline)) void scores_t(const mx_kv_type t, const bool full, const float *q, cu8 *K, size_t ldk, int n, int d,
                                                           float scale, float *out) {
    const size_t bb = blk_bytes(t);
    int nb = (d + MX_KV_BLOCK - 1) / MX_KV_BLOCK, k = 0;
    for (; k + 4 <= n; k += 4) {
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        cu8 *r = K + (size_t)k * ldk;
        if (k + KV_PF + 4 <= n)
            for (int j = 0; j < 4; j++) prefetch_bytes(r + (size_t)(KV_PF + j) * ldk, (size_t)nb * bb);
        for (int b = 0; b < nb; b++) {
            const int nc = full || d - b * MX_KV_BLOCK >= MX_KV_BLOCK ? 4 : (d - b * MX_KV_BLOCK) / 8;
            const float *qb = q + b * MX_KV_BLOCK;
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                cu8 *blk = r + (size_t)j * ldk + (size_t)b * bb;
                __m256 s = QUANT(t) ? _mm256_setzero_ps() : a[j];
#pragma GCC unroll 4
                for (int c = 0; c < nc; c++) s = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 8 * c), ld8(t, blk, c), s);
                a[j] = QUANT(t) ? _mm256_fmadd_ps(s, _mm256_set1_ps(blk_scale(t, blk)), a[j]) : s;
            }
        }
        __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        _mm_storeu_ps(out + k, _mm_mul_ps(s4, _mm_set1_ps(scale)));
    }
    for (; k < n; k++) {
        __m256 a = _mm256_setzero_ps();
        cu8 *r = K + (size_t)k * ldk;
        for (int b = 0; b < nb; b++) {
            const int nc = full || d - b * MX_KV_BLOCK >= MX_KV_BLOCK ? 4 : (d - b * MX_KV_BLOCK) / 8;
            cu8 *blk = r + (size_t)b * bb;
            __m256 s = QUANT(t) ? _mm256_setzero_ps() : a;
            for (int c = 0; c < nc; c++) s = _mm256_fmadd_ps(_mm256_loadu_ps(q + b * MX_KV_BLOCK + 8 * c), ld8(t, blk, c), s);
            a = QUANT(t) ? _mm256_fmadd_ps(s, _mm256_set1_ps(blk_scale(t, blk)), a) : s;
        }
        out[k] = hsum8(a) * scale;
    }
}

static inline __attribute__((always_inline)) void mix_t(const mx_kv_type t, float *y, const float *p, cu8 *V, size_t ldv, int n, int d, bool acc) {
    const size_t bb = blk_bytes(t);
    int nb = (d + MX_KV_BLOCK - 1) / MX_KV_BLOCK;
    for (int b = 0; b < nb; b++) {
        float *yb = y + b * MX_KV_BLOCK;
        cu8 *col = V + (size_t)b * bb;
        if (d - b * MX_KV_BLOCK >= MX_KV_BLOCK) {
            __m256 y0 = acc ? _mm256_loadu_ps(yb) : _mm256_setzero_ps(), y1 = acc ? _mm256_loadu_ps(yb + 8) : _mm256_setzero_ps();
            __m256 y2 = acc ? _mm256_loadu_ps(yb + 16) : _mm256_setzero_ps(), y3 = acc ? _mm256_loadu_ps(yb + 24) : _mm256_setzero_ps();
            for (int k = 0; k < n; k++) {
                cu8 *blk = col + (size_t)k * ldv;
                if (k + KV_PF < n) prefetch_bytes(blk + (size_t)KV_PF * ldv, bb);
                __m256 w = _mm256_set1_ps(QUANT(t) ? p[k] * blk_scale(t, blk) : p[k]);
                y0 = _mm256_fmadd_ps(w, ld8(t, blk, 0), y0);
                y1 = _mm256_fmadd_ps(w, ld8(t, blk, 1), y1);
                y2 = _mm256_fmadd_ps(w, ld8(t, blk, 2), y2);
                y3 = _mm256_fmadd_ps(w, ld8(t, blk, 3), y3);
            }
            _mm256_storeu_ps(yb, y0);
            _mm256_storeu_ps(yb + 8, y1);
            _mm256_storeu_ps(yb + 16, y2);
            _mm256_storeu_ps(yb + 24, y3);
        } else { /* a short last block: (d % 32) / 8 vectors, through memory */
            int nc = (d - b * MX_KV_BLOCK) / 8;
            if (!acc) memset(yb, 0, (size_t)nc * 8 * sizeof(float));
            for (int k = 0; k < n; k++) {
                cu8 *blk = col + (size_t)k * ldv;
                if (k + KV_PF < n) prefetch_bytes(blk + (size_t)KV_PF * ldv, bb);
                __m256 w = _mm256_set1_ps(QUANT(t) ? p[k] * blk_scale(t, blk) : p[k]);
                for (int c = 0; c < nc; c++) _mm256_storeu_ps(yb + 8 * c, _mm256_fmadd_ps(w, ld8(t, blk, c), _mm256_loadu_ps(yb + 8 * c)));
            }
        }
    }
}

/* scores_t for two query rows (two heads of a GQA group) over the same keys: each block of a K row
 * widened once for both, each row's sums those of scores_t */
static inline __attribute__((always_inline)) void scores2_t(const mx_kv_type t, const bool full, const float *q0, const float *q1, cu8 *K,
                                                            size_t ldk, int n, int d, float scale, float *o0, float *o1) {
    const size_t bb = blk_bytes(t);
    int nb = (d + MX_KV_BLOCK - 1) / MX_KV_BLOCK, k = 0;
    for (; k + 4 <= n; k += 4) {
        __m256 a[4], b[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) a[j] = b[j] = _mm256_setzero_ps();
        cu8 *r = K + (size_t)k * ldk;
        if (k + KV_PF + 4 <= n)
            for (int j = 0; j < 4; j++) prefetch_bytes(r + (size_t)(KV_PF + j) * ldk, (size_t)nb * bb);
        for (int bl = 0; bl < nb; bl++) {
            const int nc = full || d - bl * MX_KV_BLOCK >= MX_KV_BLOCK ? 4 : (d - bl * MX_KV_BLOCK) / 8;
            const float *qa = q0 + bl * MX_KV_BLOCK, *qb = q1 + bl * MX_KV_BLOCK;
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                cu8 *blk = r + (size_t)j * ldk + (size_t)bl * bb;
                __m256 sa = QUANT(t) ? _mm256_setzero_ps() : a[j], sb = QUANT(t) ? _mm256_setzero_ps() : b[j];
#pragma GCC unroll 4
                for (int c = 0; c < nc; c++) {
                    __m256 kv = ld8(t, blk, c);
                    sa = _mm256_fmadd_ps(_mm256_loadu_ps(qa + 8 * c), kv, sa);
                    sb = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 8 * c), kv, sb);
                }
                if (QUANT(t)) {
                    __m256 sc = _mm256_set1_ps(blk_scale(t, blk));
                    a[j] = _mm256_fmadd_ps(sa, sc, a[j]);
                    b[j] = _mm256_fmadd_ps(sb, sc, b[j]);
                } else {
                    a[j] = sa;
                    b[j] = sb;
                }
            }
        }
        __m256 ha = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        __m256 hb = _mm256_hadd_ps(_mm256_hadd_ps(b[0], b[1]), _mm256_hadd_ps(b[2], b[3]));
        _mm_storeu_ps(o0 + k, _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(ha), _mm256_extractf128_ps(ha, 1)), _mm_set1_ps(scale)));
        _mm_storeu_ps(o1 + k, _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(hb), _mm256_extractf128_ps(hb, 1)), _mm_set1_ps(scale)));
    }
    if (k < n) {
        scores_t(t, full, q0, K + (size_t)k * ldk, ldk, n - k, d, scale, o0 + k);
        scores_t(t, full, q1, K + (size_t)k * ldk, ldk, n - k, d, scale, o1 + k);
    }
}

/* mix_t for two rows of probabilities into two outputs: each V block widened once for both */
static inline __attribute__((always_inline)) void mix2_t(const mx_kv_type t, float *y, float *z, const float *p0, const float *p1, cu8 *V, size_t ldv,
                                                         int n, int d, bool acc) {
    const size_t bb = blk_bytes(t);
    int nb = (d + MX_KV_BLOCK - 1) / MX_KV_BLOCK;
    for (int b = 0; b < nb; b++) {
        float *yb = y + b * MX_KV_BLOCK, *zb = z + b * MX_KV_BLOCK;
        cu8 *col = V + (size_t)b * bb;
        if (d - b * MX_KV_BLOCK < MX_KV_BLOCK) { /* a short last block: as mix_t, one row at a time */
            mix_t(t, yb, p0, col, ldv, n, d - b * MX_KV_BLOCK, acc);
            mix_t(t, zb, p1, col, ldv, n, d - b * MX_KV_BLOCK, acc);
            continue;
        }
        __m256 y0, y1, y2, y3, z0, z1, z2, z3;
        if (acc) {
            y0 = _mm256_loadu_ps(yb), y1 = _mm256_loadu_ps(yb + 8), y2 = _mm256_loadu_ps(yb + 16), y3 = _mm256_loadu_ps(yb + 24);
            z0 = _mm256_loadu_ps(zb), z1 = _mm256_loadu_ps(zb + 8), z2 = _mm256_loadu_ps(zb + 16), z3 = _mm256_loadu_ps(zb + 24);
        } else
            y0 = y1 = y2 = y3 = z0 = z1 = z2 = z3 = _mm256_setzero_ps();
        for (int k = 0; k < n; k++) {
            cu8 *blk = col + (size_t)k * ldv;
            if (k + KV_PF < n) prefetch_bytes(blk + (size_t)KV_PF * ldv, bb);
            float sc = blk_scale(t, blk);
            __m256 w = _mm256_set1_ps(QUANT(t) ? p0[k] * sc : p0[k]), u = _mm256_set1_ps(QUANT(t) ? p1[k] * sc : p1[k]);
            __m256 v0 = ld8(t, blk, 0), v1 = ld8(t, blk, 1), v2 = ld8(t, blk, 2), v3 = ld8(t, blk, 3);
            y0 = _mm256_fmadd_ps(w, v0, y0);
            y1 = _mm256_fmadd_ps(w, v1, y1);
            y2 = _mm256_fmadd_ps(w, v2, y2);
            y3 = _mm256_fmadd_ps(w, v3, y3);
            z0 = _mm256_fmadd_ps(u, v0, z0);
            z1 = _mm256_fmadd_ps(u, v1, z1);
            z2 = _mm256_fmadd_ps(u, v2, z2);
            z3 = _mm256_fmadd_ps(u, v3, z3);
        }
        _mm256_storeu_ps(yb, y0);
        _mm256_storeu_ps(yb + 8, y1);
        _mm256_storeu_ps(yb + 16, y2);
        _mm256_storeu_ps(yb + 24, y3);
        _mm256_storeu_ps(zb, z0);
        _mm256_storeu_ps(zb + 8, z1);
        _mm256_storeu_ps(zb + 16, z2);
        _mm256_storeu_ps(zb + 24, z3);
    }
}

enum { Q4_MAX_BLOCKS = 64 }; /* rows of up to 2048 values take the q4_0 rows below */

/* q4_0 rows of whole blocks: q . row = sum_b scale_b (q_b . n_b - 8 sum(q_b)) */
static void scores_q4(const float *q, cu8 *K, size_t ldk, int n, int d, float scale, float *out) {
    int nb = d / MX_KV_BLOCK, k = 0;
    __m256 q8[Q4_MAX_BLOCKS]; /* 8 sum(q_b) per lane */
    for (int b = 0; b < nb; b++) {
        const float *qb = q + b * MX_KV_BLOCK;
        __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(qb), _mm256_loadu_ps(qb + 8)), _mm256_add_ps(_mm256_loadu_ps(qb + 16), _mm256_loadu_ps(qb + 24)));
        q8[b] = _mm256_mul_ps(s, _mm256_set1_ps(8.0f));
    }
    for (; k + 4 <= n; k += 4) {
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        cu8 *r = K + (size_t)k * ldk;
        if (k + KV_PF + 4 <= n)
            for (int j = 0; j < 4; j++) prefetch_bytes(r + (size_t)(KV_PF + j) * ldk, (size_t)nb * MX_Q4_0_BYTES);
        for (int b = 0; b < nb; b++) {
            const float *qb = q + b * MX_KV_BLOCK;
            __m256 q0 = _mm256_loadu_ps(qb), q1 = _mm256_loadu_ps(qb + 8), q2 = _mm256_loadu_ps(qb + 16), q3 = _mm256_loadu_ps(qb + 24);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                cu8 *blk = r + (size_t)j * ldk + (size_t)b * MX_Q4_0_BYTES;
                __m256 v[4];
                q4_nibbles(blk, v);
                __m256 s = _mm256_fmsub_ps(q0, v[0], q8[b]);
                s = _mm256_fmadd_ps(q1, v[1], s);
                s = _mm256_fmadd_ps(q2, v[2], s);
                s = _mm256_fmadd_ps(q3, v[3], s);
                a[j] = _mm256_fmadd_ps(s, _mm256_set1_ps(blk_scale(MX_KV_Q4_0, blk)), a[j]);
            }
        }
        __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        _mm_storeu_ps(out + k, _mm_mul_ps(s4, _mm_set1_ps(scale)));
    }
    for (; k < n; k++) {
        __m256 a = _mm256_setzero_ps();
        cu8 *r = K + (size_t)k * ldk;
        for (int b = 0; b < nb; b++) {
            const float *qb = q + b * MX_KV_BLOCK;
            cu8 *blk = r + (size_t)b * MX_Q4_0_BYTES;
            __m256 v[4];
            q4_nibbles(blk, v);
            __m256 s = _mm256_fmsub_ps(_mm256_loadu_ps(qb), v[0], q8[b]);
            s = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 8), v[1], s);
            s = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 16), v[2], s);
            s = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 24), v[3], s);
            a = _mm256_fmadd_ps(s, _mm256_set1_ps(blk_scale(MX_KV_Q4_0, blk)), a);
        }
        out[k] = hsum8(a) * scale;
    }
}

/* y += sum_k p_k scale_k (n_k - 8): the nibbles' sum, less 8 sum_k p_k scale_k once per block */
static void mix_q4(float *y, const float *p, cu8 *V, size_t ldv, int n, int d, bool acc) {
    for (int b = 0; b < d / MX_KV_BLOCK; b++) {
        float *yb = y + b * MX_KV_BLOCK;
        cu8 *col = V + (size_t)b * MX_Q4_0_BYTES;
        __m256 y0 = _mm256_setzero_ps(), y1 = y0, y2 = y0, y3 = y0, ws = y0;
        for (int k = 0; k < n; k++) {
            cu8 *blk = col + (size_t)k * ldv;
            __m256 w = _mm256_set1_ps(p[k] * blk_scale(MX_KV_Q4_0, blk)), v[4];
            q4_nibbles(blk, v);
            ws = _mm256_add_ps(ws, w);
            y0 = _mm256_fmadd_ps(w, v[0], y0);
            y1 = _mm256_fmadd_ps(w, v[1], y1);
            y2 = _mm256_fmadd_ps(w, v[2], y2);
            y3 = _mm256_fmadd_ps(w, v[3], y3);
        }
        __m256 w8 = _mm256_mul_ps(ws, _mm256_set1_ps(8.0f));
        y0 = _mm256_sub_ps(y0, w8);
        y1 = _mm256_sub_ps(y1, w8);
        y2 = _mm256_sub_ps(y2, w8);
        y3 = _mm256_sub_ps(y3, w8);
        if (acc) {
            y0 = _mm256_add_ps(y0, _mm256_loadu_ps(yb));
            y1 = _mm256_add_ps(y1, _mm256_loadu_ps(yb + 8));
            y2 = _mm256_add_ps(y2, _mm256_loadu_ps(yb + 16));
            y3 = _mm256_add_ps(y3, _mm256_loadu_ps(yb + 24));
        }
        _mm256_storeu_ps(yb, y0);
        _mm256_storeu_ps(yb + 8, y1);
        _mm256_storeu_ps(yb + 16, y2);
        _mm256_storeu_ps(yb + 24, y3);
    }
}

void mx_attn_scores_kv_avx2(mx_kv_type t, const float *q, const void *K, size_t ldk, int n, int d, float scale, float *out) {
    bool full = d % MX_KV_BLOCK == 0;
    if (t == MX_KV_Q4_0 && full && d / MX_KV_BLOCK <= Q4_MAX_BLOCKS) { scores_q4(q, K, ldk, n, d, scale, out); return; }
    switch (t) {
    case MX_KV_F16: full ? scores_t(MX_KV_F16, true, q, K, ldk, n, d, scale, out) : scores_t(MX_KV_F16, false, q, K, ldk, n, d, scale, out); break;
    case MX_KV_BF16: full ? scores_t(MX_KV_BF16, true, q, K, ldk, n, d, scale, out) : scores_t(MX_KV_BF16, false, q, K, ldk, n, d, scale, out); break;
    case MX_KV_Q8_0: full ? scores_t(MX_KV_Q8_0, true, q, K, ldk, n, d, scale, out) : scores_t(MX_KV_Q8_0, false, q, K, ldk, n, d, scale, out); break;
    case MX_KV_Q4_0: full ? scores_t(MX_KV_Q4_0, true, q, K, ldk, n, d, scale, out) : scores_t(MX_KV_Q4_0, false, q, K, ldk, n, d, scale, out); break;
    default: break;
    }
}

void mx_attn_mix_kv_avx2(mx_kv_type t, float *y, const float *p, const void *V, size_t ldv, int n, int d, bool acc) {
    if (t == MX_KV_Q4_0 && d % MX_KV_BLOCK == 0) { mix_q4(y, p, V, ldv, n, d, acc); return; }
    switch (t) {
    case MX_KV_F16: mix_t(MX_KV_F16, y, p, V, ldv, n, d, acc); break;
    case MX_KV_BF16: mix_t(MX_KV_BF16, y, p, V, ldv, n, d, acc); break;
    case MX_KV_Q8_0: mix_t(MX_KV_Q8_0, y, p, V, ldv, n, d, acc); break;
    case MX_KV_Q4_0: mix_t(MX_KV_Q4_0, y, p, V, ldv, n, d, acc); break;
    default: break;
    }
}

/* f16, bf16 and q8_0 rows (q4_0 has its own one-row kernels: the caller runs those per row) */
void mx_attn_scores2_kv_avx2(mx_kv_type t, const float *q0, const float *q1, const void *K, size_t ldk, int n, int d, float scale, float *o0,
                             float *o1) {
    bool full = d % MX_KV_BLOCK == 0;
    switch (t) {
    case MX_KV_F16: full ? scores2_t(MX_KV_F16, true, q0, q1, K, ldk, n, d, scale, o0, o1) : scores2_t(MX_KV_F16, false, q0, q1, K, ldk, n, d, scale, o0, o1); break;
    case MX_KV_BF16: full ? scores2_t(MX_KV_BF16, true, q0, q1, K, ldk, n, d, scale, o0, o1) : scores2_t(MX_KV_BF16, false, q0, q1, K, ldk, n, d, scale, o0, o1); break;
    case MX_KV_Q8_0: full ? scores2_t(MX_KV_Q8_0, true, q0, q1, K, ldk, n, d, scale, o0, o1) : scores2_t(MX_KV_Q8_0, false, q0, q1, K, ldk, n, d, scale, o0, o1); break;
    default: break;
    }
}

void mx_attn_mix2_kv_avx2(mx_kv_type t, float *y, float *z, const float *p0, const float *p1, const void *V, size_t ldv, int n, int d, bool acc) {
    switch (t) {
    case MX_KV_F16: mix2_t(MX_KV_F16, y, z, p0, p1, V, ldv, n, d, acc); break;
    case MX_KV_BF16: mix2_t(MX_KV_BF16, y, z, p0, p1, V, ldv, n, d, acc); break;
    case MX_KV_Q8_0: mix2_t(MX_KV_Q8_0, y, z, p0, p1, V, ldv, n, d, acc); break;
    default: break;
    }
}
