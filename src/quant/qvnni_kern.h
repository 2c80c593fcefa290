/* qvnni_kern.h (internal to quant/): the int8 one-token kernel's building
 * blocks for the 4-bit, 8-bit and E2M1 codes on the repacked layout (see
 * qvnni_avx512.c), shared by qvnni_avx512.c and qvnni_vbmi_avx512.c, which
 * builds the E2M1 kernel with AVX-512 VBMI (`vpermb` lookups). Only static
 * inline functions and macros; included after <immintrin.h> by files
 * compiled with the AVX-512 flags. */
#ifndef MX_QVNNI_KERN_H
#define MX_QVNNI_KERN_H
#include "quant_impl.h"
#include "../base/base.h"
#include <immintrin.h>

/* E2M1 (mxfp4, nvfp4) as affine codes: 2*value + 12 in [0, 24], so a value
 * is (s/2) * code - 6 s and the affine kernels apply unchanged. */
static inline bool is_e2m1(const mx_weight *w) { return w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4; }
/* E4M3 weights (mxq_is_e4m3) take `vdpbf16ps` instead (qvnni_avx512.c): their values
 * are exact in bf16 but no int8 code holds them. Their layout is the 8-bit one. */
/* The scale row of weight row r: HF FP8 blocks share one f32 scale per 128
 * rows (and 128 columns), which the copy repeats for each of 16 rows. */
static inline size_t scale_row(const mx_weight *w, int r) { return w->fmt == MX_W_FP8B ? (size_t)r / 128 : (size_t)r; }
/* one byte per scale and no biases (E8M0 / E4M3 scales) */
static inline bool u8_scales(const mx_weight *w) { return is_e2m1(w) || w->fmt == MX_W_MXFP8; }
/* Affine 1/2/3/5/6-bit: the codes are split into bit planes that keep the
 * original size: a 4-bit plane (bits >= 4; lines as the 4-bit layout), a
 * 2-bit plane (bits 2, 3, 6; a line holds 16 columns, field f of byte j of a
 * row's word is column 16m + 4f + j) and a 1-bit plane (bits 1, 3, 5; a line
 * holds 32 columns, bit t of byte j is column 32h + 4t + j), one after the
 * other in each group. The kernels reassemble the byte codes of 4 columns x
 * 16 rows with shifts and masks before the same vpdpbusd. */
static inline bool is_planes(const mx_weight *w) { return w->fmt == MX_W_AFFINE && w->bits != 4 && w->bits != 8; }
#define E2M1_U8 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0

typedef mxq_ril ril;

/* Byte offsets within a block: the code lines of group g, and its scales
 * (biases follow at + gu * 16 * es). A unit's scale line comes before its
 * codes and the one-token kernels read it at the first group's start, so a
 * block is read in address order: with the scales after the codes of gu = 4
 * groups (mxfp4, nvfp4, mxfp8), the read of the scale line at the end of the
 * first group jumped 3 groups ahead, and without software prefetch the
 * hardware's stream prefetch then left mxfp4 decode at ~0.4-0.5 of the
 * probe. */
static inline size_t g_code(const ril *p, int g) {
    return (size_t)(g >> p->gsh) * p->unit + p->head + (size_t)(g & (p->gu - 1)) * (size_t)p->gbytes;
}
static inline size_t g_scale(const ril *p, int g) { return (size_t)(g >> p->gsh) * p->unit + (size_t)(g & (p->gu - 1)) * 16 * (size_t)p->es; }
/* the line holding column k (of 4 (8-bit) or 8 (4-bit) columns) */
static inline size_t k_line(const ril *p, int G, int step, int k) { return g_code(p, k / G) + (size_t)((k % G) / step) * 64; }

/* ---- scales of 16 rows at one group, in the affine form ---- */

static inline __m512 ld16(const uint8_t *p, mx_dtype dt) {
    switch (dt) {
    case MX_DT_BF16: return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 16));
    case MX_DT_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
    default: return _mm512_loadu_ps((const float *)(const void *)p);
    }
}

/* s and b of the 16 rows of the block at cb, group g; fmt: w->fmt where
 * the caller knows it (a constant), else MX_W_NONE */
static inline __attribute__((always_inline)) void sb16f(const mx_weight *w, const ril *p, const uint8_t *cb, int g, __m512 *s, __m512 *b,
                                                          mx_wfmt fmt) {
    const uint8_t *sp = cb + g_scale(p, g);
    if (fmt == MX_W_NONE) fmt = w->fmt;
    if (fmt != MX_W_MXFP4 && fmt != MX_W_NVFP4) {
        *s = ld16(sp, w->scale_dtype);
        *b = ld16(sp + (size_t)p->gu * 16 * (size_t)p->es, w->scale_dtype);
        return;
    }
    __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)sp));
    __m512 f;
    if (fmt == MX_W_MXFP4) { /* E8M0: 2^(c-127); c = 0 is the denormal 2^-127, 255 inf */
        __m512i bits = _mm512_slli_epi32(c, 23);
        bits = _mm512_max_epi32(bits, _mm512_set1_epi32(0x00400000)); /* c = 0 only: c << 23 is 0 or >= 2^23 */
        f = _mm512_castsi512_ps(bits);
    } else { /* E4M3 (mxq_e4m3) */
        __m512i bits = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x7f)), 20),
                                       _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24));
        f = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
    }
    *s = f; /* the affine form's s = f / 2 and b = -6 f are folded into VQ_GROUP_STEP */
    *b = _mm512_setzero_ps();
}
static inline __attribute__((always_inline)) void sb16(const mx_weight *w, const ril *p, const uint8_t *cb, int g, __m512 *s, __m512 *b) {
    sb16f(w, p, cb, g, s, b, MX_W_NONE);
}

/* 16 rows' codes for 8 columns (4-bit: low and high nibbles) or 4 (8-bit). */
/* hi16: affine high nibbles are left in place (16 x code), saving the shift;
 * their sums are exact multiples of 16 and are shifted back once per group. */
static inline __attribute__((always_inline)) void codes_x(const uint8_t *line, bool four, bool e2m1, bool hi16, __m512i *lo, __m512i *hi) {
    __m512i v = _mm512_load_si512((const void *)line);
    if (!four) { *lo = v; return; }
#ifdef __AVX512VBMI__
    /* vpermb reads 6 index bits: with the 16-entry table repeated, the bits
     * above a nibble need no mask (3 operations for the line instead of 5;
     * the kernel's in-cache rate +10-15 %) */
    if (e2m1) {
        const __m512i t = _mm512_broadcast_i32x4(_mm_setr_epi8(E2M1_U8));
        *lo = _mm512_permutexvar_epi8(v, t);
        *hi = _mm512_permutexvar_epi8(_mm512_srli_epi16(v, 4), t);
        return;
    }
#endif
    const __m512i m = _mm512_set1_epi8(0x0F);
    *lo = _mm512_and_si512(v, m);
    *hi = hi16 && !e2m1 ? _mm512_and_si512(v, _mm512_set1_epi8((char)0xF0)) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
    if (e2m1) {
        const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(E2M1_U8));
        *lo = _mm512_shuffle_epi8(lut, *lo);
        *hi = _mm512_shuffle_epi8(lut, *hi);
    }
}

static inline __attribute__((always_inline)) void codes(const uint8_t *line, bool four, bool e2m1, __m512i *lo, __m512i *hi) {
    codes_x(line, four, e2m1, false, lo, hi);
}

/* acc + vpdpbusd(w, the 4 activation bytes at p broadcast): the broadcast
 * folded into the instruction ({1to16}). GCC 12 neither folds it nor, in
 * these loops, keeps the sums in place: the 8-bit prefill loop copied every
 * accumulator in and out (55 instructions per 12 products; 27 with this,
 * as clang compiles the intrinsics). */
static inline __attribute__((always_inline)) __m512i dpb4(__m512i acc, __m512i w, const int8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)(const void *)p));
    return acc;
}

/* The float step of one group for one token (the same in every kernel),
 * it: the group's exact sum(code * b). E2M1 (sb16 gave the raw scale):
 * s (d/2 sum - 6 xs), one product less than s/2, -6 s and the affine step;
 * d/2 and -6 xs come so from the activations' preparation (prep_int8 in
 * qmatmul.c), one broadcast each. */
#define VQ_GROUP_STEP(f, it, s, b, d, xs, E2M1)                                                             \
    do {                                                                                                    \
        if (E2M1) {                                                                                         \
            __m512 t_ = _mm512_fmadd_ps(_mm512_cvtepi32_ps(it), _mm512_set1_ps(d), _mm512_set1_ps(xs));     \
            f = _mm512_fmadd_ps(s, t_, f);                                                                  \
        } else {                                                                                            \
            f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(it), _mm512_mul_ps(s, _mm512_set1_ps(d)), f);           \
            f = _mm512_fmadd_ps(b, _mm512_set1_ps(xs), f);                                                  \
        }                                                                                                   \
    } while (0)
/* b = 16 q1 + q2: the one-token kernels' two sums as one */
static inline __m512i vq_b(__m512i i1, __m512i i2) { return _mm512_add_epi32(_mm512_slli_epi32(i1, 4), i2); }

/* ---- one token: nb (1 or 2) blocks at a time. Eight independent sums
 * hide the dot products' latency: per block (nb = 2) or per alternate line
 * (nb = 1); more would spill (a block pair with both took 4-bit from 57 to
 * 36 GB/s per core, from L2). ---- */
#define VQ_NB_UNROLL _Pragma("GCC unroll 2")
/* GC, FMT: the group size and format where the caller fixed them (the
 * loops then unroll), else 0 and MX_W_NONE */
/* ONE: the fast mode's one 8-bit code per activation (c->one): q1 alone */
static inline __attribute__((always_inline)) void dec_blocks(const mxq_ctx *c, const ril *p, const int bk[2], const int nb, const bool four,
                                                               const bool e2m1, const int GC, const mx_wfmt FMT, const bool ONE) {
    const mx_weight *w = c->w;
    const int step = four ? 8 : 4;
    int G = GC ? GC : w->group, ng = w->cols / G, lines = G / step; /* even: G >= 16 */
    const int8_t *q1 = c->xq, *q2 = c->xq + MXQ_Q2(w->cols);
    const uint8_t *cb[2] = {p->base + (size_t)bk[0] * p->blk, p->base + (size_t)bk[1] * p->blk};
    __m512 f[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int g = 0; g < ng; g++) {
        size_t go = g_code(p, g);
        __m512 s[2], bb[2]; /* read first: a unit's scale line leads its codes */
        VQ_NB_UNROLL
        for (int b = 0; b < nb; b++) sb16f(w, p, cb[b], g, &s[b], &bb[b], FMT);
        __m512i ia[2], ib[2], ja[2], jb[2]; /* [block] (nb = 2) or [line parity] (nb = 1) */
        VQ_NB_UNROLL
        for (int i = 0; i < 2; i++) ia[i] = ib[i] = ja[i] = jb[i] = _mm512_setzero_si512();
        _Pragma("GCC unroll 8")
        for (int l = 0; l < lines; l += 2) {
            VQ_NB_UNROLL
            for (int b = 0; b < nb; b++) {
                const uint8_t *ln = cb[b] + go + (size_t)l * 64;
                VQ_NB_UNROLL
                for (int h = 0; h < 2; h++) {
                    int k = g * G + (l + h) * step, i = nb == 2 ? b : h;
                    __m512i lo, hi = _mm512_setzero_si512();
                    codes_x(ln + (size_t)h * 64, four, e2m1, true, &lo, &hi);
                    ia[i] = dpb4(ia[i], lo, q1 + k);
                    if (!ONE) ja[i] = dpb4(ja[i], lo, q2 + k);
                    if (four) {
                        ib[i] = dpb4(ib[i], hi, q1 + k + 4);
                        if (!ONE) jb[i] = dpb4(jb[i], hi, q2 + k + 4);
                    }
                }
            }
        }
        VQ_NB_UNROLL
        for (int b = 0; b < nb; b++) {
            __m512i i1 = ia[b], i2 = ja[b], h1 = ib[b], h2 = jb[b];
            if (nb == 1) {
                i1 = _mm512_add_epi32(i1, ia[1]);
                i2 = _mm512_add_epi32(i2, ja[1]);
                h1 = _mm512_add_epi32(h1, ib[1]);
                h2 = _mm512_add_epi32(h2, jb[1]);
            }
            if (four && !e2m1) { /* high nibbles were summed as 16 x code */
                h1 = _mm512_srai_epi32(h1, 4);
                h2 = _mm512_srai_epi32(h2, 4);
            }
            if (four) {
                i1 = _mm512_add_epi32(i1, h1);
                i2 = _mm512_add_epi32(i2, h2);
            }
            VQ_GROUP_STEP(f[b], ONE ? i1 : vq_b(i1, i2), s[b], bb[b], c->xd[g], c->xs[g], e2m1);
        }
    }
    VQ_NB_UNROLL
    for (int b = 0; b < nb; b++) {
        int r = bk[b] * 16, nr = MX_MIN(16, w->rows - r);
        _mm512_mask_storeu_ps(c->y + r, (__mmask16)((1u << nr) - 1), f[b]);
    }
}

/* The one-token kernels take blocks in pairs, one from each of a task's two
 * ranges [a0, a1) and [c0, c1) (blocks): two streams far apart keep more
 * lines in flight per core than one (the read probe: ~36 vs ~30 GB/s on one
 * core of the dev VM), where adjacent blocks are one stream. Blocks left
 * over in the longer range go alone. */
#define VQ_PAIRS(CALL)                                                         \
    do {                                                                       \
        int h_ = MX_MIN(a1 - a0, c1 - c0);                                     \
        for (int i_ = 0; i_ < h_; i_++) {                                      \
            const int bk_[2] = {a0 + i_, c0 + i_}, nb_ = 2;                    \
            CALL;                                                              \
        }                                                                      \
        for (int r_ = 0; r_ < 2; r_++)                                         \
            for (int b_ = (r_ ? c0 : a0) + h_; b_ < (r_ ? c1 : a1); b_++) {    \
                const int bk_[2] = {b_, b_}, nb_ = 1;                          \
                CALL;                                                          \
            }                                                                  \
    } while (0)

/* The one-token E2M1 kernel over blocks [a0, a1) and [c0, c1), the usual
 * group sizes (mxfp4 32, nvfp4 16) as constants; each including file builds
 * its own (qvnni_vbmi_avx512.c: with vpermb lookups). */
#define VQ_E2M1_RANGE(ONE)                                                                                        \
    do {                                                                                                          \
        if (c->w->fmt == MX_W_MXFP4 && c->w->group == 32) VQ_PAIRS(dec_blocks(c, p, bk_, nb_, true, true, 32, MX_W_MXFP4, ONE)); \
        else if (c->w->fmt == MX_W_NVFP4 && c->w->group == 16)                                                    \
            VQ_PAIRS(dec_blocks(c, p, bk_, nb_, true, true, 16, MX_W_NVFP4, ONE));                                \
        else VQ_PAIRS(dec_blocks(c, p, bk_, nb_, true, true, 0, MX_W_NONE, ONE));                                 \
    } while (0)
static inline void dec_e2m1_range(const mxq_ctx *c, const ril *p, int a0, int a1, int c0, int c1) {
    if (c->one) VQ_E2M1_RANGE(true);
    else VQ_E2M1_RANGE(false);
}

#endif
