/* mm_simd.h: float-weight (F32/F16/BF16) matmul kernels on 256-bit vectors
 * (AVX2 + FMA + F16C), or 512-bit ones where the including file defines
 * MM_ZMM. Included by matmul_avx2.c and matmul_avx512.c, which are compiled
 * with the matching -m flags and only called after dispatch; MM_NAME(x)
 * gives each inclusion its own symbol names.
 *
 * Every output y[t][r] is computed by one canonical sequence of operations,
 * whatever n, the tile it falls in and the thread split: an MM_VL-lane f32
 * accumulator takes fma(w[r][c..c+VL], x[t][c..c+VL]) for the VL-column
 * chunks in order, is reduced by mm_vsum, and the K % VL tail columns are
 * added in order. So a token's result is bit-identical whether it runs alone or
 * stacked with others (continuous batching must not change greedy output).
 *
 * Tiles: one token x 8 rows (decode: 8 independent accumulators, each
 * weight row streamed once), 6 or 3 tokens x 4 rows (prefill: every weight
 * vector serves 6 or 3 tokens, every x vector 4 rows). Prefill
 * walks blocks of MM_TB tokens so their activations stay in cache while all
 * weight rows stream past. */
#ifndef MX_MM_SIMD_H
#define MX_MM_SIMD_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "matmul_impl.h"
#include "../base/base.h"

#define MM_AI static inline __attribute__((always_inline))
#define MM_TB 48   /* tokens per prefill block (multiple of 3 and 6) */
/* Tokens per prefill tile: 6 where the including file has 32 vector
 * registers (AVX-512VL: 24 accumulators, each weight vector converted once
 * for 6 tokens), else 3 (16 registers). */
#ifndef MM_PT
#define MM_PT 3
#endif
#define MM_PF 1024 /* software prefetch distance in bytes for the weight streams (prefill tiles) */
/* One-token tiles prefetch farther and into L2 only. Their 8 rows are
 * usually 4 KiB apart, so the lines of one step share an L1 set and fill
 * its 8 ways; prefetched into L1, every set of the window was full and the
 * x lines evicted weight lines before use. bf16 GEMV, 2 threads, against
 * the read probe around it: 8192 x 2048 0.55 -> 0.74, 2048 x 8192 0.56 ->
 * 0.78, 512 x 2048 0.52 -> 0.69 (T0 at 512 B: 0.63; T1 at 1-8 KiB:
 * 0.69-0.74; NTA: 0.57). */
#define MM_PF_DEC 4096

MM_AI size_t mm_esize(mx_wfmt f) { return f == MX_W_F32 ? 4 : 2; }

/* The vector the canonical order is written in: 8 lanes (ymm), or 16 (zmm)
 * where the including file defines MM_ZMM. */
#ifdef MM_ZMM
typedef __m512 mm_v;
#define MM_VL 16
#define mm_vzero _mm512_setzero_ps
#define mm_vloadx _mm512_loadu_ps
#define mm_vfma _mm512_fmadd_ps
/* MM_VL consecutive weights at p (any alignment) as f32. */
MM_AI mm_v mm_ldv(mx_wfmt f, const uint8_t *p) {
    if (f == MX_W_F32) return _mm512_loadu_ps((const float *)(const void *)p);
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    if (f == MX_W_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#else
typedef __m256 mm_v;
#define MM_VL 8
#define mm_vzero _mm256_setzero_ps
#define mm_vloadx _mm256_loadu_ps
#define mm_vfma _mm256_fmadd_ps
MM_AI mm_v mm_ldv(mx_wfmt f, const uint8_t *p) {
    if (f == MX_W_F32) return _mm256_loadu_ps((const float *)(const void *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (f == MX_W_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

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

MM_AI float mm_vsum(mm_v v) {
#ifdef MM_ZMM
    return mm_hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
#else
    return mm_hsum(v);
#endif
}

/* ---- the canonical tile --------------------------------------------------- */

/* One step of the canonical order: chunk c (MM_VL columns) of rows p[0..R)
 * into the accumulators of tokens 0..T. */
#define MM_STEP(c)                                                                                   \
    do {                                                                                             \
        mm_v xv[MM_PT];                                                                              \
        _Pragma("GCC unroll 6") for (int t = 0; t < T; t++) xv[t] = mm_vloadx(x + (size_t)t * ldx + (c)); \
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                        \
            mm_v wv = mm_ldv(f, p[i] + (size_t)(c) * es);                                            \
            _Pragma("GCC unroll 6") for (int t = 0; t < T; t++) acc[i][t] = mm_vfma(wv, xv[t], acc[i][t]); \
        }                                                                                            \
    } while (0)

/* A tile's outputs from its sums acc[R][T]: lanes reduced, then the tail
 * columns [c, K) added in order by TAIL (column cc, row i, token t, into s). */
#define MM_STORE(Y, TAIL)                                               \
    do {                                                                \
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)             \
            _Pragma("GCC unroll 6") for (int t = 0; t < T; t++) {       \
                float s = mm_vsum(acc[i][t]);                           \
                for (int cc = c; cc < K; cc++) TAIL;                    \
                (Y)[(size_t)t * ldy + i] = s;                           \
            }                                                           \
    } while (0)

/* Rows r..r+R x tokens 0..T (R, T constants after inlining). The main loop
 * takes a cache line of every row per step: weight rows are usually 4 KiB
 * apart, so they share an L1 set, and a line left half-read for the next step
 * would be evicted by the other rows' lines before it is used. */
MM_AI void mm_tile(mx_wfmt f, const mx_weight *w, const float *x, int ldx, float *y, int ldy, int r, int R, int T) {
    const size_t es = mm_esize(f);
    const int K = w->cols, U = (int)(64 / (MM_VL * es));
    const uint8_t *p[8];
    mm_v acc[8][MM_PT];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        p[i] = w->data + (size_t)(r + i) * w->row_bytes;
#pragma GCC unroll 6
        for (int t = 0; t < T; t++) acc[i][t] = mm_vzero();
    }
    /* Near the end of a row the prefetch runs on into the same row of the
     * next tile (what this thread reads next), not into the next row. */
    const size_t rowlen = (size_t)K * es, skip = (size_t)R * w->row_bytes - rowlen;
    int c = 0;
    for (; c + U * MM_VL <= K; c += U * MM_VL) {
        size_t pf = (size_t)c * es + (T == 1 ? MM_PF_DEC : MM_PF);
        pf += pf >= rowlen ? skip : 0;
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            if (T == 1) _mm_prefetch((const char *)p[i] + pf, _MM_HINT_T1);
            else _mm_prefetch((const char *)p[i] + pf, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int j = 0; j < U; j++) MM_STEP(c + j * MM_VL);
    }
    for (; c + MM_VL <= K; c += MM_VL) MM_STEP(c);
    MM_STORE(y + r, s += mm_ld1(f, p[i] + (size_t)cc * es) * x[(size_t)t * ldx + cc]);
}
#undef MM_STEP

#define MM_TILE(F, NAME, R, T)                                                                                      \
    static __attribute__((noinline)) void MM_NAME(t_##NAME##_##R##x##T)(const mx_weight *w, const float *x, int ldx, \
                                                                         float *y, int ldy, int r) {                 \
        mm_tile(F, w, x, ldx, y, ldy, r, R, T);                                                                   \
    }
#if MM_PT == 6
#define MM_TILE_WIDE(F, NAME) MM_TILE(F, NAME, 4, 6)
#else
#define MM_TILE_WIDE(F, NAME)
#endif
#define MM_TILES(F, NAME) \
    MM_TILE_WIDE(F, NAME) MM_TILE(F, NAME, 8, 1) MM_TILE(F, NAME, 4, 3) MM_TILE(F, NAME, 4, 2) MM_TILE(F, NAME, 4, 1) \
    MM_TILE(F, NAME, 1, 3) MM_TILE(F, NAME, 1, 2) MM_TILE(F, NAME, 1, 1)
MM_TILES(MX_W_F32, f32)
MM_TILES(MX_W_F16, f16)
MM_TILES(MX_W_BF16, bf16)
#undef MM_TILES
#undef MM_TILE

typedef void (*mm_tile_fn)(const mx_weight *, const float *, int, float *, int, int);
typedef struct { mm_tile_fn t4x6, t8x1, t4x3, t4x2, t4x1, t1x3, t1x2, t1x1; } mm_tiles;

#if MM_PT == 6
#define MM_WIDE(NAME) MM_NAME(t_##NAME##_4x6)
#else
#define MM_WIDE(NAME) NULL
#endif
#define MM_TABLE(NAME)                                                                                        \
    { MM_WIDE(NAME), MM_NAME(t_##NAME##_8x1), MM_NAME(t_##NAME##_4x3), MM_NAME(t_##NAME##_4x2),               \
      MM_NAME(t_##NAME##_4x1), MM_NAME(t_##NAME##_1x3), MM_NAME(t_##NAME##_1x2), MM_NAME(t_##NAME##_1x1) }

/* The walk over rows [r0, r1) x tokens [0, n) that the entries share:
 * TILE(R, T, r, t) runs rows r.. x tokens t.. One token: 8-, 4-, then
 * 1-row tiles; more: blocks of MM_TB tokens whose activations stay in cache
 * while the rows stream past, 4-row tiles of 6 (where MM_PT allows), 3, 2 or
 * 1 tokens, then the rows left one at a time. */
#define MM_WALK(TILE)                                                              \
    do {                                                                           \
        if (n == 1) {                                                              \
            int r = r0;                                                            \
            for (; r + 8 <= r1; r += 8) TILE(8, 1, r, 0);                          \
            for (; r + 4 <= r1; r += 4) TILE(4, 1, r, 0);                          \
            for (; r < r1; r++) TILE(1, 1, r, 0);                                  \
            break;                                                                 \
        }                                                                          \
        for (int t0 = 0; t0 < n; t0 += MM_TB) {                                    \
            int t1 = MX_MIN(n, t0 + MM_TB), r = r0;                                \
            for (; r + 4 <= r1; r += 4) {                                          \
                int t = t0;                                                        \
                if (MM_PT == 6)                                                    \
                    for (; t + 6 <= t1; t += 6) TILE(4, 6, r, t);                  \
                for (; t + 3 <= t1; t += 3) TILE(4, 3, r, t);                      \
                if (t1 - t == 2) TILE(4, 2, r, t);                                 \
                else if (t1 - t == 1) TILE(4, 1, r, t);                            \
            }                                                                      \
            for (; r < r1; r++) {                                                  \
                int t = t0;                                                        \
                for (; t + 3 <= t1; t += 3) TILE(1, 3, r, t);                      \
                if (t1 - t == 2) TILE(1, 2, r, t);                                 \
                else if (t1 - t == 1) TILE(1, 1, r, t);                            \
            }                                                                      \
        }                                                                          \
    } while (0)

/* Entry: the float formats for rows [r0, r1) x tokens [0, n). */
MM_AI void mm_float(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    static const mm_tiles tabs[3] = {MM_TABLE(f32), MM_TABLE(f16), MM_TABLE(bf16)};
    if (r1 <= r0 || n <= 0) return;
    const mm_tiles *tb = &tabs[w->fmt == MX_W_F32 ? 0 : w->fmt == MX_W_F16 ? 1 : 2];
#define MM_FT(R_, T_, r_, t_) tb->t##R_##x##T_(w, x + (size_t)(t_) * ldx, ldx, y + (size_t)(t_) * ldy, ldy, r_)
    MM_WALK(MM_FT);
#undef MM_FT
}
#undef MM_TABLE
#undef MM_WIDE

#if defined(MM_ZMM) && defined(__AVX512BF16__)
#include "tr16_avx512.h"
/* ---- BF16 weights on AVX-512 BF16 CPUs ("bf2") ----------------------------
 * x is split once per matmul into bf16 hi = bf16(x) and lo = bf16(x - hi)
 * (mm_bf16_split: ~16 significant bits, at most 2^-17 |x| off per value; the
 * llama-bf16 fixture's logits move by 1.3e-5 of their scale, 1e-4 allowed),
 * and a row's 64-byte line, 16 column pairs, meets them in vdpbf16ps as it
 * is: products exact, no widening of the weights (the exact path spends two
 * operations per 16 weights on it). A sum's order, the same for every n: per
 * 32-column chunk the hi pairs, then the lo pairs, lanes reduced by mm_vsum,
 * then the K % 32 tail columns in order (w hi, then w lo). Tiles as above;
 * a token's x vector meets every row of the tile before the next loads.
 * H = 1 takes the hi words alone (MLXCEL_BF16_DOT=1: x rounded to bf16,
 * half the products). */
MM_AI void mm_bf2_tile(const uint8_t *rows, size_t rb, int K, const uint16_t *xb, size_t ldb, size_t q2, float *y, int ldy, int R,
                       int T, const int H) {
    const uint8_t *p[8];
    __m512 acc[8][MM_PT];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        p[i] = rows + (size_t)i * rb;
#pragma GCC unroll 6
        for (int t = 0; t < T; t++) acc[i][t] = _mm512_setzero_ps();
    }
    const size_t rowlen = (size_t)K * 2, skip = (size_t)R * rb - rowlen;
    int c = 0;
    for (; c + 32 <= K; c += 32) {
        size_t pf = (size_t)c * 2 + (T == 1 ? MM_PF_DEC : MM_PF);
        pf += pf >= rowlen ? skip : 0;
        __m512bh wv[8];
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            if (T == 1) _mm_prefetch((const char *)p[i] + pf, _MM_HINT_T1);
            else _mm_prefetch((const char *)p[i] + pf, _MM_HINT_T0);
            wv[i] = (__m512bh)_mm512_loadu_si512((const void *)(p[i] + (size_t)c * 2));
        }
#pragma GCC unroll 2
        for (int h = 0; h < H; h++)
#pragma GCC unroll 6
            for (int t = 0; t < T; t++) {
                __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(xb + (size_t)t * ldb + (size_t)h * q2 + (size_t)c));
#pragma GCC unroll 8
                for (int i = 0; i < R; i++) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], wv[i], xv);
            }
    }
    MM_STORE(y, {
        float wf = mm_ld1(MX_W_BF16, p[i] + (size_t)cc * 2);
        s += wf * mx_bf16_to_f32(xb[(size_t)t * ldb + (size_t)cc]);
        if (H == 2) s += wf * mx_bf16_to_f32(xb[(size_t)t * ldb + q2 + (size_t)cc]);
    });
}

#define MM_BF2_TILE(H, R, T)                                                                                          \
    static __attribute__((noinline)) void MM_NAME(b##H##_##R##x##T)(const uint8_t *rows, size_t rb, int K, const uint16_t *xb, \
                                                                     size_t ldb, size_t q2, float *y, int ldy) {   \
        mm_bf2_tile(rows, rb, K, xb, ldb, q2, y, ldy, R, T, H);                                                   \
    }
#define MM_BF2_TILES(H)    \
    MM_BF2_TILE(H, 4, 6)   \
    MM_BF2_TILE(H, 8, 1)   \
    MM_BF2_TILE(H, 4, 3)   \
    MM_BF2_TILE(H, 4, 2)   \
    MM_BF2_TILE(H, 4, 1)   \
    MM_BF2_TILE(H, 1, 3)   \
    MM_BF2_TILE(H, 1, 2)   \
    MM_BF2_TILE(H, 1, 1)
MM_BF2_TILES(2)
MM_BF2_TILES(1)
#undef MM_BF2_TILES
#undef MM_BF2_TILE

/* x's n rows (ldx apart) as bf16 hi at xb + t * ldb and lo q2 words after */
MM_AI void mm_bf16_split(const float *x, int n, int ldx, int K, uint16_t *xb, size_t ldb, size_t q2) {
    for (int t = 0; t < n; t++) {
        const float *s = x + (size_t)t * ldx;
        uint16_t *h = xb + (size_t)t * ldb, *l = h + q2;
        int k = 0;
        for (; k + 16 <= K; k += 16) {
            __m512 v = _mm512_loadu_ps(s + k);
            __m256bh hb = _mm512_cvtneps_pbh(v);
            __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)hb), 16));
            _mm256_storeu_si256((__m256i *)(void *)(h + k), (__m256i)hb);
            _mm256_storeu_si256((__m256i *)(void *)(l + k), (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(v, hf)));
        }
        for (; k < K; k++) {
            h[k] = mx_f32_to_bf16(s[k]);
            l[k] = mx_f32_to_bf16(s[k] - mx_bf16_to_f32(h[k]));
        }
        if (K & 1) h[K] = l[K] = 0; /* the bfr kernels read x in pairs (mx_split_ld leaves room) */
    }
}

/* Rows [r0, r1) x n tokens of BF16 w against x prepared by mm_bf16_split,
 * hi + lo (H = 2) or hi alone (H = 1). */
MM_AI void mm_bf2(const mx_weight *w, const uint16_t *xb, size_t ldb, size_t q2, int n, float *y, int ldy, int r0, int r1, const int H) {
    if (r1 <= r0 || n <= 0) return;
    const int K = w->cols;
    const size_t wb = w->row_bytes;
#define MM_ROW(r) (w->data + (size_t)(r) * wb)
#define MM_B(H_, R_, T_, r_, t_) MM_NAME(b##H_##_##R_##x##T_)(MM_ROW(r_), wb, K, xb + (size_t)(t_) * ldb, ldb, q2, y + (size_t)(t_) * ldy + (r_), ldy)
#define MM_B2(R_, T_, r_, t_) MM_B(2, R_, T_, r_, t_)
#define MM_B1(R_, T_, r_, t_) MM_B(1, R_, T_, r_, t_)
    if (H == 2) MM_WALK(MM_B2);
    else MM_WALK(MM_B1);
#undef MM_B1
#undef MM_B2
#undef MM_B
#undef MM_ROW
}

/* ---- BF16 weights repacked at load: rows in lanes ("bfr") -----------------
 * Blocks of 16 rows (mx_bfr, matmul_impl.h): a block's line p (64 bytes)
 * holds column pair (2p, 2p+1) of its 16 rows, row i in lane i, so one
 * vdpbf16ps with a token's pair broadcast feeds 16 rows' sums and no lanes
 * are reduced. Each output is one chain over the pairs in order (per pair
 * x hi, then x lo where H = 2), whatever n, the tile and the thread split,
 * so a token's result does not depend on its batch. Prefill tiles are 3
 * blocks x 8 tokens (24 sums; per pair 3 weight lines and 8 broadcasts for
 * 24 products), the rest of a block's tokens in one tile of 1-7 (a verification pass of 5 tokens
 * took a 3 x 4 tile and a 3 x 1 one, whose chains of two products per pair wait on each other):
 * 1B bf16 pp512 against the dot tiles above, 2 threads,
 * interleaved: exact 138 -> 175-187 t/s, one product (--fast) 239 -> 280-320.
 * Tried: 2 x 8 and 2 x 12 (level), 4 x 6 and 1 x 12 (-15 %), pairs in
 * chunks of 32-256 with the sums parked in y so a tile's lines stay in L1
 * (-3 to -15 %), 96-512 tokens per block (level). One token: no software
 * prefetch (a block is one sequential stream; T1 prefetch 1-8 KiB ahead as
 * the dot tiles take gave 1B decode 21.7-22.1 t/s against 23.0-23.2, --fast
 * 25.9-26.2 against 28.0-28.6), 8 blocks at a time no faster than 4.
 * A group's lines come from memory (or L3) for its first tile, which then
 * waits on them: each tile of a group asks for a share of the next group's
 * lines into L2 (prefetcht2, one a pair), so the next group's first tile
 * finds them there. Two threads, 8192 x 2048, 128 tokens, tasks of 672 rows:
 * one product 334-389 -> 361-399 GFLOP/s per thread; 1B bf16 pp512, 4
 * interleaved rounds: --fast 286 -> 303 t/s (medians), exact 170 -> 172.
 * Only where a group is at most MM_BFR_PF_MAX (K <= 2730): two groups and
 * the tokens' x must share L2. Tried: the pairs in chunks of 1024 (a
 * down projection's group in L2; the sums carried in y): level. */
#define MM_BFR_PF_MAX ((size_t)256 << 10)
MM_AI __m512bh mm_bfr_bc(const uint16_t *x) {
    int32_t v;
    memcpy(&v, x, 4);
    return (__m512bh)_mm512_set1_epi32(v);
}

/* NB blocks at b (blk bytes apart) x T tokens over all np pairs; the last
 * block's rows beyond `mlast` are not written. pf (or NULL): a line to ask
 * for at pf + p * pfs with pair p. */
MM_AI void mm_bfr_tile(const uint8_t *b, size_t blk, int np, const uint16_t *xb, size_t ldb, size_t q2, float *y, int ldy,
                       __mmask16 mlast, const uint8_t *pf, size_t pfs, const int NB, const int T, const int H) {
    __m512 acc[4][8];
#pragma GCC unroll 4
    for (int i = 0; i < NB; i++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[i][t] = _mm512_setzero_ps();
    const uint8_t *wp = b;
    for (int p = 0; p < np; p++, wp += 64) {
        if (pf) _mm_prefetch((const char *)(pf + (size_t)p * pfs), _MM_HINT_T2);
        __m512bh wv[4];
#pragma GCC unroll 4
        for (int i = 0; i < NB; i++) wv[i] = (__m512bh)_mm512_loadu_si512((const void *)(wp + (size_t)i * blk));
#pragma GCC unroll 2
        for (int h = 0; h < H; h++)
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                __m512bh xv = mm_bfr_bc(xb + (size_t)t * ldb + (size_t)h * q2 + 2 * (size_t)p);
#pragma GCC unroll 4
                for (int i = 0; i < NB; i++) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], wv[i], xv);
            }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NB; i++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy + 16 * i, i == NB - 1 ? mlast : 0xFFFF, acc[i][t]);
}

#define MM_BFR_TILE(H, NB, T)                                                                                          \
    static __attribute__((noinline)) void MM_NAME(bfr##H##_##NB##x##T)(const uint8_t *b, size_t blk, int np, const uint16_t *xb, \
                                                                       size_t ldb, size_t q2, float *y, int ldy, __mmask16 mlast, const uint8_t *pf, size_t pfs) { \
        mm_bfr_tile(b, blk, np, xb, ldb, q2, y, ldy, mlast, pf, pfs, NB, T, H);                                                 \
    }
#define MM_BFR_TILES_T(H, T) MM_BFR_TILE(H, 3, T) MM_BFR_TILE(H, 2, T) MM_BFR_TILE(H, 1, T)
#define MM_BFR_TILES(H)                                                                                                  \
    MM_BFR_TILE(H, 4, 1) MM_BFR_TILES_T(H, 1) MM_BFR_TILES_T(H, 2) MM_BFR_TILES_T(H, 3) MM_BFR_TILES_T(H, 4)              \
    MM_BFR_TILES_T(H, 5) MM_BFR_TILES_T(H, 6) MM_BFR_TILES_T(H, 7) MM_BFR_TILES_T(H, 8)
MM_BFR_TILES(2)
MM_BFR_TILES(1)
#undef MM_BFR_TILES
#undef MM_BFR_TILES_T
#undef MM_BFR_TILE

typedef void (*mm_bfr_fn)(const uint8_t *, size_t, int, const uint16_t *, size_t, size_t, float *, int, __mmask16, const uint8_t *, size_t);
#define MM_BFR_T(H, T) {MM_NAME(bfr##H##_1x##T), MM_NAME(bfr##H##_2x##T), MM_NAME(bfr##H##_3x##T), NULL}
#define MM_BFR_ROW(H)                                                                                                 \
    {{MM_NAME(bfr##H##_1x1), MM_NAME(bfr##H##_2x1), MM_NAME(bfr##H##_3x1), MM_NAME(bfr##H##_4x1)},                   \
     MM_BFR_T(H, 2), MM_BFR_T(H, 3), MM_BFR_T(H, 4), MM_BFR_T(H, 5), MM_BFR_T(H, 6), MM_BFR_T(H, 7), MM_BFR_T(H, 8)}

/* Rows [r0, r1) (r0 on a block) x n tokens of the repacked w against x as
 * mm_bf16_split made it, hi + lo (H = 2) or hi alone (H = 1). One token:
 * 4 blocks at a time (4 sums in flight, 4 streams); more: blocks of MM_TB
 * tokens, each group of 3 blocks meeting the block's tiles of 8 (4, 2, 1)
 * tokens in turn while its lines are in L2. */
MM_AI void mm_bfr(const mx_weight *w, const uint16_t *xb, size_t ldb, size_t q2, int n, float *y, int ldy, int r0, int r1, const int H) {
    static const mm_bfr_fn tabs[2][8][4] = {MM_BFR_ROW(1), MM_BFR_ROW(2)};
    const mm_bfr_fn(*tab)[4] = tabs[H - 1];
    if (r1 <= r0 || n <= 0) return;
    const mx_bfr *P = w->prep;
    const size_t blk = P->blk;
    const int b0 = r0 / 16, b1 = (r1 + 15) / 16, np = P->np;
    const __mmask16 mend = (__mmask16)(0xFFFFu >> (16 * b1 - r1));
#define MM_BFR_CALL(NB_, TI_, b_, t_, PF_, PFS_)                                                                     \
    tab[TI_][(NB_) - 1](P->base + (size_t)(b_) * blk, blk, np, xb + (size_t)(t_) * ldb, ldb, q2, y + (size_t)(t_) * ldy + 16 * (size_t)(b_), \
                        ldy, (b_) + (NB_) == b1 ? mend : 0xFFFF, PF_, PFS_)
    if (n == 1) {
        int b = b0;
        for (; b + 4 <= b1; b += 4) MM_BFR_CALL(4, 0, b, 0, NULL, 0);
        if (b < b1) MM_BFR_CALL(b1 - b, 0, b, 0, NULL, 0);
        return;
    }
    const bool pfo = (size_t)3 * blk <= MM_BFR_PF_MAX;
    for (int t0 = 0; t0 < n; t0 += MM_TB) {
        int t1 = MX_MIN(n, t0 + MM_TB), ntile = (t1 - t0 + 7) / 8;
        for (int b = b0; b < b1; b += 3) {
            /* the group after this one: the next 3 blocks, or the first ones again for the next tokens */
            int nb = MX_MIN(3, b1 - b), bn = b + 3 < b1 ? b + 3 : t1 < n ? b0 : b1, nn = MX_MIN(3, b1 - bn);
            int parts = nn > 0 ? (ntile + nn - 1) / nn : 1;
            size_t pfs = (64 / (size_t)parts) & ~(size_t)3, span = (size_t)np * 64 / (size_t)parts;
            int j = 0;
            for (int t = t0; t < t1; j++) { /* 8 at a time, then the rest in one tile */
                int nt = MX_MIN(8, t1 - t);
                /* tile j asks for part j / nn of the next group's block j % nn */
                const uint8_t *pf = pfo && nn > 0 && j / nn < parts ? P->base + (size_t)(bn + j % nn) * blk + (size_t)(j / nn) * span : NULL;
                MM_BFR_CALL(nb, nt - 1, b, t, pf, pfs);
                t += nt;
            }
        }
    }
#undef MM_BFR_CALL
}
#undef MM_BFR_ROW
#undef MM_BFR_T

/* Blocks [b0, b1) of BF16 w repacked into base (blocks blk bytes apart):
 * 16 rows' 64-byte runs (16 pairs each) transposed into 16 lines; rows past
 * w's end and the column past an odd K are zero. */
MM_AI void mm_bfr_pack(const mx_weight *w, int b0, int b1, uint8_t *base, size_t blk) {
    const int K = w->cols;
    for (int b = b0; b < b1; b++) {
        const uint8_t *rows[16];
        for (int i = 0; i < 16; i++) rows[i] = b * 16 + i < w->rows ? w->data + (size_t)(b * 16 + i) * w->row_bytes : NULL;
        uint8_t *d = base + (size_t)b * blk;
        for (int k = 0; k < K; k += 32) {
            int cols = MX_MIN(32, K - k);
            __mmask32 m = (__mmask32)(0xFFFFFFFFu >> (32 - cols));
            __m512i v[16];
            for (int i = 0; i < 16; i++) v[i] = rows[i] ? _mm512_maskz_loadu_epi16(m, rows[i] + 2 * (size_t)k) : _mm512_setzero_si512();
            mx_tr16_epi32(v);
            for (int q = 0; q < (cols + 1) / 2; q++) _mm512_storeu_si512((void *)(d + (size_t)(k / 2 + q) * 64), v[q]);
        }
    }
}
#endif
#endif
