#define _GNU_SOURCE
/* Activation-quantized kernels (AVX-512): MLX affine weights of every width,
 * mxfp4 and nvfp4 on int8 VNNI; mxfp8 and HF FP8 blocks on vdpbf16ps.
 *
 * Activations: each group is coded as 12-bit integers b = round(x / d),
 * d = max|x| / 2047 (mxq_vnni_prep), so a group's dot product with the
 * weight codes is an exact integer:
 *     y += s * d * sum(code * b) + b_g * d * sum(b)    (s, b_g: scale, bias)
 * One token takes b as two int8 codes (b = 16 q1 + q2) and two vpdpbusd
 * (u8 codes x s8 activations); many tokens take b as 16-bit words and
 * Winograd's pairing (see "many tokens"), which needs b below 13 bits. One
 * int8 code alone (as llama.cpp's Q8 activations) moved the fixtures'
 * logits by up to 0.9; 12 bits keep them within 0.3 of 2e-2 * max|logit|
 * and the greedy tokens exact. (E4M3 weights: x as bf16 hi + lo, see below.)
 *
 * Weights: at load each matrix is repacked once ("rows in lanes") into
 * blocks of 16 rows whose codes for 4 (8-bit) or 8 (4-bit) consecutive
 * columns sit in one 64-byte line, 4 bytes per row, so one vpdpbusd with four
 * broadcast activation bytes feeds 16 rows and no horizontal sums are needed.
 * A block is one contiguous stream: each group's 16 rows' scales (and
 * biases) in their stored type come first, then its code lines (E2M1: the
 * four 16-byte scale rows of four groups, then their codes): the one-token
 * kernel, two blocks at a time, reads two sequential streams instead of six
 * (a block's codes, scales and biases each), which took a 4-bit 8192 x 2048
 * GEMV from 65-70 % to 79-87 % of the read bandwidth probe (2 threads), and
 * reads them in address order, which lets the hardware prefetchers alone
 * stream them (qvnni_kern.h). The repacked copy has the
 * size of the original (huge pages); the original's pages are given back to
 * the page cache. One token and many tokens run the same integer sums and
 * the same float steps, so a token's result does not depend on its batch. */
#include "qvnni_kern.h"
#include "../base/cpu.h"
#include "../base/threadpool.h"
#include "../kernels/tr16_avx512.h"
#include <immintrin.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/mman.h>


/* Software prefetch distance (bytes), into L1, of the one-token kernels
 * of the bit-plane and E4M3 codes. The 4-bit, 8-bit and E2M1 kernel reads
 * each block in address order (scale lines lead their units) and leaves the
 * streams to the hardware prefetchers: cold GEMV (tools/qcold, 2 threads,
 * each pass rated against the probe around it, medians over 8-26 passes per
 * phase) without / with this prefetch, fast phases (probe > 44 GB/s) and
 * slow ones (< 38): 4-bit 8192 x 2048 0.86 / 0.75 and 0.95 / 0.92; 8-bit
 * 0.94 / 0.76 and 0.96 / 0.92; mxfp4 0.75 / 0.72 and 0.94 / 0.92; 4-bit
 * 2048 x 2048 0.72 / 0.64 and 0.92 / 0.91. Bit planes read `bits` lines
 * spread over a group per step and keep it (6-bit slow phase 0.74 without,
 * 0.87 with; 3-bit 0.70 / 0.88); E4M3 is even (0.78 / 0.77). */
#define VQ_PF 2048

/* ---- the repack ---- */

/* 16 codes of one row (columns k..k+15, 4-bit) as two 4-byte words, one per
 * line: byte j of a line's word holds column k+j in its low nibble and k+4+j
 * in its high one. */
static void pack16_4(const uint8_t *src, uint32_t *a, uint32_t *b) {
    const __m128i m = _mm_set1_epi8(0x0F);
    const __m128i lo_i = _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i hi_i = _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)src);
    __m128i u = _mm_unpacklo_epi8(_mm_and_si128(v, m), _mm_and_si128(_mm_srli_epi16(v, 4), m)); /* codes k..k+15 */
    __m128i t = _mm_or_si128(_mm_shuffle_epi8(u, lo_i), _mm_slli_epi16(_mm_shuffle_epi8(u, hi_i), 4));
    uint64_t two = (uint64_t)_mm_cvtsi128_si64(t);
    *a = (uint32_t)two;
    *b = (uint32_t)(two >> 32);
}

/* Byte offsets of the 2-bit and 1-bit planes' lines within a group, and the
 * bit each plane lands on in the reassembled code. */
static inline int off_b(int G, int bits) { return bits >= 4 ? G / 8 * 64 : 0; }
static inline int off_c(int G, int bits) { return off_b(G, bits) + ((bits & 2) ? G / 16 * 64 : 0); }
static inline int sh_b(int bits) { return bits >= 4 ? 4 : 0; }
static inline int sh_c(int bits) { return bits >= 4 ? 4 : (bits & 2) ? 2 : 0; }

/* Bit-plane codes of block b (cb), 16 rows at a time: lane i of a vector is
 * row i's 4-byte slot of a line, so every plane line is one store. 32 codes
 * of a row are `bits` whole 32-bit words of its LSB-first stream (MLX
 * packing), gathered for the 16 rows; code j is then a shift (two across a
 * word edge) and a mask in every lane. The one-row scalar form took ~15
 * operations per code and most of the 6-bit 1B model's load time. */
static inline __attribute__((always_inline)) void pack_planes_bits(const mx_weight *w, const ril *p, int b, uint8_t *cb, const int bits) {
    const int G = w->group, ng = w->cols / G, nr = MX_MIN(16, w->rows - b * 16);
    const int ob = off_b(G, bits), oc = off_c(G, bits), sb = sh_b(bits), sc = sh_c(bits);
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    const __m512i rowoff = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32((int)w->row_bytes));
    const __m512i m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3), m1 = _mm512_set1_epi32(1), mb = _mm512_set1_epi32((1 << bits) - 1);
    const uint8_t *base = w->data + (size_t)b * 16 * w->row_bytes;
    for (int g = 0; g < ng; g++) {
        uint8_t *d = cb + g_code(p, g);
        for (int h = 0; h < G / 32; h++) {
            const uint8_t *src = base + ((size_t)g * G + (size_t)h * 32) * (size_t)bits / 8;
            __m512i D[7], C[32];
            for (int q = 0; q < bits; q++) D[q] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rowoff, src + 4 * q, 1);
            D[bits] = _mm512_setzero_si512();
#pragma GCC unroll 32
            for (int j = 0; j < 32; j++) {
                int wd = j * bits / 32, o = j * bits % 32;
                __m512i v = _mm512_srli_epi32(D[wd], (unsigned)o);
                if (o + bits > 32) v = _mm512_or_si512(v, _mm512_slli_epi32(D[wd + 1], (unsigned)(32 - o)));
                C[j] = _mm512_and_si512(v, mb);
            }
            if (bits >= 4)
                for (int l = 0; l < 4; l++) {
                    __m512i v = _mm512_setzero_si512();
                    for (int jb = 0; jb < 4; jb++) {
                        __m512i by = _mm512_or_si512(_mm512_and_si512(C[8 * l + jb], m4), _mm512_slli_epi32(_mm512_and_si512(C[8 * l + 4 + jb], m4), 4));
                        v = _mm512_or_si512(v, _mm512_slli_epi32(by, (unsigned)(8 * jb)));
                    }
                    _mm512_storeu_si512(d + (size_t)(4 * h + l) * 64, v);
                }
            if (bits & 2)
                for (int m = 0; m < 2; m++) {
                    __m512i v = _mm512_setzero_si512();
                    for (int jb = 0; jb < 4; jb++)
                        for (int f = 0; f < 4; f++)
                            v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(C[16 * m + 4 * f + jb], (unsigned)sb), m2),
                                                                     (unsigned)(2 * f + 8 * jb)));
                    _mm512_storeu_si512(d + (size_t)ob + (size_t)(2 * h + m) * 64, v);
                }
            if (bits & 1) {
                __m512i v = _mm512_setzero_si512();
                for (int jb = 0; jb < 4; jb++)
                    for (int t = 0; t < 8; t++)
                        v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(C[4 * t + jb], (unsigned)sc), m1), (unsigned)(t + 8 * jb)));
                _mm512_storeu_si512(d + (size_t)oc + (size_t)h * 64, v);
            }
        }
    }
}

static void pack_planes(const mx_weight *w, const ril *p, int b, uint8_t *cb) {
    switch (w->bits) {
    case 1: pack_planes_bits(w, p, b, cb, 1); break;
    case 2: pack_planes_bits(w, p, b, cb, 2); break;
    case 3: pack_planes_bits(w, p, b, cb, 3); break;
    case 5: pack_planes_bits(w, p, b, cb, 5); break;
    default: pack_planes_bits(w, p, b, cb, 6); break;
    }
}

typedef struct { const mx_weight *w; ril *p; int ng, nb; bool drop; } pack_job;

#define PACK_BLOCKS 32 /* blocks per task: the source pages are dropped per task */

static void drop_pages(const uint8_t *a, size_t n) { mx_st_release(a, n); }

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels return EINVAL, harmless */
#endif
static void prefault(const uint8_t *a, size_t n) {
    uintptr_t s = (uintptr_t)a & ~(uintptr_t)4095, e = ((uintptr_t)a + n + 4095) & ~(uintptr_t)4095;
    madvise((void *)s, e - s, MADV_POPULATE_READ);
}

/* 8-bit codes of block b (cb): a word of 4 columns from each of 16 rows is a
 * line, so 16 words of 16 rows transpose into 16 lines (word-by-word copies
 * made the repack of an 8-bit 1B model take ~1 s). Rows past the end are
 * zero. */
static void pack8(const mx_weight *w, const ril *p, int b, uint8_t *cb) {
    const uint8_t *rows[16];
    for (int i = 0; i < 16; i++) rows[i] = b * 16 + i < w->rows ? w->data + (size_t)(b * 16 + i) * w->row_bytes : NULL;
    for (int k = 0; k < w->cols; k += 64) {
        int words = MX_MIN(64, w->cols - k) / 4; /* cols is a multiple of the group, >= 32 */
        __mmask16 m = (__mmask16)((1u << words) - 1);
        __m512i v[16];
        for (int i = 0; i < 16; i++) v[i] = rows[i] ? _mm512_maskz_loadu_epi32(m, rows[i] + k) : _mm512_setzero_si512();
        mx_tr16_epi32(v);
        for (int q = 0; q < words; q++) _mm512_storeu_si512(cb + k_line(p, w->group, 4, k + 4 * q), v[q]);
    }
}

static void pack_block(const pack_job *j, int b) {
    const mx_weight *w = j->w;
    ril *p = j->p;
    int es = p->es, G = w->group;
    size_t bo = (size_t)p->gu * 16 * (size_t)es; /* biases after the scales */
    uint8_t *cb = p->base + (size_t)b * p->blk;
    if (is_planes(w)) pack_planes(w, p, b, cb);
    else if (w->bits == 8) pack8(w, p, b, cb);
    for (int i = 0; i < 16; i++) {
        int r = b * 16 + i;
        if (r >= w->rows) break; /* padding rows stay zero */
        const uint8_t *row = w->data + (size_t)r * w->row_bytes;
        if (w->bits == 4)
            for (int k = 0; k < w->cols; k += 16) {
                uint32_t lo, hi;
                pack16_4(row + k / 2, &lo, &hi);
                uint8_t *d = cb + k_line(p, G, 8, k) + (size_t)i * 4;
                memcpy(d, &lo, 4);
                memcpy(d + 64, &hi, 4);
            }
        const uint8_t *ss = w->scales + scale_row(w, r) * (size_t)j->ng * (size_t)es, *bs = p->bias ? w->biases + (ss - w->scales) : NULL;
        switch (es) { /* fixed-size copies, so they inline */
        case 1: for (int g = 0; g < j->ng; g++) cb[g_scale(p, g) + (size_t)i] = ss[g]; break;
        case 2:
            for (int g = 0; g < j->ng; g++) {
                uint8_t *sd = cb + g_scale(p, g) + (size_t)i * 2;
                memcpy(sd, ss + 2 * (size_t)g, 2);
                if (bs) memcpy(sd + bo, bs + 2 * (size_t)g, 2);
            }
            break;
        default:
            for (int g = 0; g < j->ng; g++) {
                uint8_t *sd = cb + g_scale(p, g) + (size_t)i * 4;
                memcpy(sd, ss + 4 * (size_t)g, 4);
                if (bs) memcpy(sd + bo, bs + 4 * (size_t)g, 4);
            }
        }
    }
}

static void pack_task(void *ctx, int t, int tid) {
    (void)tid;
    const pack_job *j = ctx;
    int b0 = t * PACK_BLOCKS, b1 = MX_MIN(j->nb, b0 + PACK_BLOCKS);
    const mx_weight *w = j->w;
    int r0 = b0 * 16, r1 = MX_MIN(w->rows, b1 * 16);
    size_t es = (size_t)j->p->es, sg = (size_t)j->ng * es, s0 = scale_row(w, r0), s1 = scale_row(w, r1 - 1) + 1;
    /* one call maps the task's source pages instead of a fault per 4 KiB
     * page (several microseconds each on VMs) */
    prefault(w->data + (size_t)r0 * w->row_bytes, (size_t)(r1 - r0) * w->row_bytes);
    prefault(w->scales + s0 * sg, (s1 - s0) * sg);
    if (j->p->bias) prefault(w->biases + s0 * sg, (s1 - s0) * sg);
    for (int b = b0; b < b1; b++) pack_block(j, b);
    if (!j->drop) return;
    /* the int8 path no longer reads these rows of the original: give their
     * pages back to the page cache (mapped or copied file; an f32-path read
     * faults them back in unchanged), so resident memory stays one copy */
    drop_pages(w->data + (size_t)r0 * w->row_bytes, (size_t)(r1 - r0) * w->row_bytes);
    drop_pages(w->scales + s0 * sg, (s1 - s0) * sg);
    if (j->p->bias) drop_pages(w->biases + s0 * sg, (s1 - s0) * sg);
}

static pthread_once_t g_e4m3_once = PTHREAD_ONCE_INIT;
static void e4m3_table(void);

mxq_ril *mxq_repack(const mx_weight *w, mx_pool *pool) {
    if (mxq_is_e4m3(w)) pthread_once(&g_e4m3_once, e4m3_table);
    ril *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    int nb = (w->rows + 15) / 16, ng = w->cols / w->group;
    p->es = u8_scales(w) ? 1 : (int)mx_dtype_size(w->scale_dtype);
    p->bias = w->fmt == MX_W_AFFINE;
    int sa = 16 * p->es * (p->bias ? 2 : 1); /* scale bytes per group */
    p->gu = sa >= 64 ? 1 : 64 / sa; /* sa is 16, 32, 64 or 128: a power of two (g_code shifts) */
    while ((1 << p->gsh) < p->gu) p->gsh++;
    p->gbytes = 16 * w->group * w->bits / 8;
    p->head = (size_t)p->gu * (size_t)sa;
    p->unit = p->head + (size_t)p->gu * (size_t)p->gbytes;
    p->blk = (size_t)((ng + p->gu - 1) / p->gu) * p->unit;
    size_t need = (size_t)nb * p->blk;
    uint8_t *mem = mx_arena_alloc(need, &p->chunk);
    if (!mem) { free(p); return NULL; }
    p->base = mem;
    size_t sgb = (scale_row(w, w->rows - 1) + 1) * (size_t)ng * (size_t)p->es;
    bool drop = !w->owned; /* else the original is the weight's own storage */
    /* large matrices drop their source as they go (bounding the transient
     * to a few MiB); each drop costs TLB flushes, so small ones drop once at
     * the end */
    pack_job j = {w, p, ng, nb, drop && need > ((size_t)32 << 20)};
    mx_pool_run(pool, pack_task, &j, (nb + PACK_BLOCKS - 1) / PACK_BLOCKS);
    if (drop) { /* the pages the tasks' edges shared */
        drop_pages(w->data, (size_t)w->rows * w->row_bytes);
        drop_pages(w->scales, sgb);
        if (p->bias) drop_pages(w->biases, sgb);
    }
    return p;
}

/* v's bits [from, from + width) of every byte moved to [to, to + width), the
 * rest cleared (16-bit shifts: a byte's bits stay in the byte, see the
 * mask). from, to and width are constants after inlining. */
static inline __attribute__((always_inline)) __m512i bits_to(__m512i v, int from, int to, int width) {
    v = to >= from ? _mm512_slli_epi16(v, (unsigned)(to - from)) : _mm512_srli_epi16(v, (unsigned)(from - to));
    return _mm512_and_si512(v, _mm512_set1_epi8((char)(((1 << width) - 1) << to)));
}

/* The byte codes of 16 rows x columns 4u..4u+3 of a bit-plane group at gl
 * (u < G / 4). */
static inline __attribute__((always_inline)) __m512i plane_codes(const uint8_t *gl, int G, int bits, int u) {
    int h = u / 8, q = u % 8;
    __m512i code = _mm512_setzero_si512();
    if (bits >= 4) code = bits_to(_mm512_load_si512((const void *)(gl + (size_t)(4 * h + q / 2) * 64)), 4 * (q & 1), 0, 4);
    if (bits & 2)
        code = _mm512_or_si512(code, bits_to(_mm512_load_si512((const void *)(gl + (size_t)off_b(G, bits) + (size_t)(2 * h + q / 4) * 64)),
                                             2 * (q % 4), sh_b(bits), 2));
    if (bits & 1)
        code = _mm512_or_si512(code, bits_to(_mm512_load_si512((const void *)(gl + (size_t)off_c(G, bits) + (size_t)h * 64)), q, sh_c(bits), 1));
    return code;
}

/* ---- one token, bit-plane codes: two blocks at a time, the sums of
 * alternate 4-column units apart (eight chains) ---- */
static inline __attribute__((always_inline)) void dec_planes(const mxq_ctx *c, const ril *p, const int bk[2], const int nb, const int bits,
                                                               const bool ONE) {
    const mx_weight *w = c->w;
    int G = w->group, ng = w->cols / G;
    const int8_t *q1 = c->xq, *q2 = c->xq + MXQ_Q2(w->cols);
    const uint8_t *cb[2] = {p->base + (size_t)bk[0] * p->blk, p->base + (size_t)bk[1] * p->blk};
    __m512 f[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int g = 0; g < ng; g++) {
        size_t go = g_code(p, g);
        __m512 s[2], bb[2];
        VQ_NB_UNROLL
        for (int b = 0; b < nb; b++) sb16(w, p, cb[b], g, &s[b], &bb[b]);
        __m512i i1[2][2], i2[2][2];
        VQ_NB_UNROLL
        for (int b = 0; b < 2; b++)
            VQ_NB_UNROLL
            for (int e = 0; e < 2; e++) i1[b][e] = i2[b][e] = _mm512_setzero_si512();
        for (int h = 0; h < G / 32; h++) {
            /* the group's lines are the block's stream: a chunk of 32
             * columns is `bits` of them */
            VQ_NB_UNROLL
            for (int b = 0; b < nb; b++)
                for (int l = 0; l < bits; l++) _mm_prefetch((const char *)cb[b] + go + (size_t)(h * bits + l) * 64 + VQ_PF, _MM_HINT_T0);
            _Pragma("GCC unroll 8")
            for (int q = 0; q < 8; q++) {
                int u = h * 8 + q, k = g * G + 4 * u;
                VQ_NB_UNROLL
                for (int b = 0; b < nb; b++) {
                    __m512i code = plane_codes(cb[b] + go, G, bits, u);
                    i1[b][q & 1] = dpb4(i1[b][q & 1], code, q1 + k);
                    if (!ONE) i2[b][q & 1] = dpb4(i2[b][q & 1], code, q2 + k);
                }
            }
        }
        VQ_NB_UNROLL
        for (int b = 0; b < nb; b++)
            VQ_GROUP_STEP(f[b],
                          ONE ? _mm512_add_epi32(i1[b][0], i1[b][1])
                              : vq_b(_mm512_add_epi32(i1[b][0], i1[b][1]), _mm512_add_epi32(i2[b][0], i2[b][1])),
                          s[b], bb[b], c->xd[g], c->xs[g], false);
    }
    VQ_NB_UNROLL
    for (int b = 0; b < nb; b++) {
        int r = bk[b] * 16, nr = MX_MIN(16, w->rows - r);
        _mm512_mask_storeu_ps(c->y + r, (__mmask16)((1u << nr) - 1), f[b]);
    }
}

#define VQ_PLANES(BITS, ONE) VQ_PAIRS(dec_planes(c, p, bk_, nb_, BITS, ONE))
#define VQ_PLANES_ALL(ONE)                \
    switch (c->w->bits) {                 \
    case 1: VQ_PLANES(1, ONE); break;     \
    case 2: VQ_PLANES(2, ONE); break;     \
    case 3: VQ_PLANES(3, ONE); break;     \
    case 5: VQ_PLANES(5, ONE); break;     \
    default: VQ_PLANES(6, ONE); break;    \
    }
static void dec_range_planes(const mxq_ctx *c, const ril *p, int a0, int a1, int c0, int c1) {
    if (c->one) { VQ_PLANES_ALL(true) }
    else { VQ_PLANES_ALL(false) }
}

/* Two blocks at a time: one block (one stream per thread) left 4-bit at
 * 52-55 % of the probe on a 2048 x 8192 GEMV, two reach 82-87 %. */
static void dec_range_fp8(const mxq_ctx *c, const ril *p, int a0, int a1, int c0, int c1);
static void dec_range(const mxq_ctx *c, const ril *p, int a0, int a1, int c0, int c1) {
    const mx_weight *w = c->w;
    if (is_planes(w)) { dec_range_planes(c, p, a0, a1, c0, c1); return; }
    if (mxq_is_e4m3(w)) { dec_range_fp8(c, p, a0, a1, c0, c1); return; }
    if (is_e2m1(w)) {
        if (c->vbmi) mxq_dec_e2m1_vbmi(c, p, a0, a1, c0, c1);
        else dec_e2m1_range(c, p, a0, a1, c0, c1);
    } else if (c->one) {
        if (w->bits == 4 && w->group == 64) VQ_PAIRS(dec_blocks(c, p, bk_, nb_, true, false, 64, MX_W_AFFINE, true));
        else if (w->bits == 4) VQ_PAIRS(dec_blocks(c, p, bk_, nb_, true, false, 0, MX_W_AFFINE, true));
        else if (w->group == 64) VQ_PAIRS(dec_blocks(c, p, bk_, nb_, false, false, 64, MX_W_AFFINE, true));
        else VQ_PAIRS(dec_blocks(c, p, bk_, nb_, false, false, 0, MX_W_AFFINE, true));
    } else if (w->bits == 4 && w->group == 64) VQ_PAIRS(dec_blocks(c, p, bk_, nb_, true, false, 64, MX_W_AFFINE, false));
    else if (w->bits == 4) VQ_PAIRS(dec_blocks(c, p, bk_, nb_, true, false, 0, MX_W_AFFINE, false));
    else if (w->group == 64) VQ_PAIRS(dec_blocks(c, p, bk_, nb_, false, false, 64, MX_W_AFFINE, false));
    else VQ_PAIRS(dec_blocks(c, p, bk_, nb_, false, false, 0, MX_W_AFFINE, false));
}

/* ---- many tokens: Winograd's inner product on 16-bit codes ----
 * Over a pair of columns, (c0 + b'1)(c1 + b'0) = c0 c1 + c0 b'0 + c1 b'1 +
 * b'0 b'1, so a group's sum(c b) (b = b' - 2048) is
 *     sum over pairs of (c0 + b'1)(c1 + b'0) - kr - kt,
 * kr = sum(c0 c1) + 2048 sum(c) of the weight rows (once per block and
 * group: wg_expand), kt = sum(b'0 b'1) of the token (mxq_vnni_prep). Per
 * 4 columns x 16 rows x token that is one vpdpwssd (two products per 32-bit
 * lane) and two vpaddd, where b as two int8 codes takes two vpdpbusd: on
 * Zen 4 (zmm) vpdpwssd and vpdpbusd issue 1 per cycle, vpaddd 2, and the
 * three together take 1.5 cycles (2048 x 4096 x 96 tokens, weights in L3,
 * 1 thread: 4-bit ~150 -> ~210 GFLOP/s, 8-bit ~174 -> ~205, mxfp4 ~150 ->
 * ~198; the per-group float step and the expansion take ~12 % each). The integer
 * sum is exact, the one the one-token kernels get from b = 16 q1 + q2, and
 * the float step is theirs: a token's result does not depend on its batch.
 * c + b' < 2^13 keeps the 16-bit sums exact and the products' int32 sums in
 * range (G <= 128). */
#define WG_NT 8 /* tokens per pass over a block's expanded codes */
#define WG_UNROLL _Pragma("GCC unroll 8")
#define WG_COLS 1024 /* columns expanded at a time (512: 3-5 % slower in cache, 2048 even) */
/* tokens per chunk: their codes of WG_COLS columns (192 KiB) stay in L2
 * while the task's blocks pass (256: 3-5 % slower) */
#define WG_TC 96
#define WG_GS(G) (192 + 32 * (size_t)(G)) /* bytes per expanded group: -kr, s, b, then (Cu, Cv) per 4 columns */
#define WG_BUF (WG_COLS / 16 * WG_GS(16)) /* the largest chunk: G = 16, the int8 path's smallest group */
static _Thread_local uint8_t wg_buf[2][WG_BUF] __attribute__((aligned(64)));

/* acc + the dword pairs of u and v (vpdpwssd), u + the 4 bytes at p
 * broadcast (vpaddd {1to16}) and u - them: as dpb4, so the broadcasts fold
 * and the sums stay in place. */
static inline __attribute__((always_inline)) __m512i dpw(__m512i acc, __m512i u, __m512i v) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(v));
    return acc;
}
static inline __attribute__((always_inline)) __m512i addb(__m512i u, const void *p) {
    __m512i r;
    __asm__("vpaddd %2%{1to16%}, %1, %0" : "=v"(r) : "v"(u), "m"(*(const int32_t *)p));
    return r;
}
static inline __attribute__((always_inline)) __m512i subb(__m512i u, const void *p) {
    __m512i r;
    __asm__("vpsubd %2%{1to16%}, %1, %0" : "=v"(r) : "v"(u), "m"(*(const int32_t *)p));
    return r;
}

/* Groups [g0, g0 + gn) of block blk as 16-bit codes: per 4 columns Cu =
 * (c0, c2) and Cv = (c1, c3) in each row's lane; -kr and the scales first. */
static inline __attribute__((always_inline)) void wg_expand(const mx_weight *w, const ril *p, int blk, int g0, int gn, uint8_t *E, const int bits,
                                                              const bool e2m1) {
    const int G = w->group;
    const uint8_t *cb = p->base + (size_t)blk * p->blk;
    const __m512i lo = _mm512_set1_epi32(0x00FF00FF), beta = _mm512_set1_epi16(2048);
    for (int g = g0; g < g0 + gn; g++) {
        uint8_t *e = E + (size_t)(g - g0) * WG_GS(G);
        const uint8_t *gl = cb + g_code(p, g);
        /* sum(c0 c1) and sum(c) (16-bit: < 2^15 for G <= 128), alternate
         * units apart (latency) */
        __m512i kp[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, ks[2] = {kp[0], kp[1]};
        for (int u = 0; u < G / 4; u += 2) { /* G / 4 is even; constant indices keep the sums in registers */
            __m512i cu[2];
            if (bits == 4) codes(gl + (size_t)(u / 2) * 64, true, e2m1, &cu[0], &cu[1]);
            else if (bits == 8) {
                cu[0] = _mm512_load_si512((const void *)(gl + (size_t)u * 64));
                cu[1] = _mm512_load_si512((const void *)(gl + (size_t)(u + 1) * 64));
            } else {
                cu[0] = plane_codes(gl, G, bits, u);
                cu[1] = plane_codes(gl, G, bits, u + 1);
            }
            VQ_NB_UNROLL
            for (int i = 0; i < 2; i++) {
                __m512i a = _mm512_and_si512(cu[i], lo), b = _mm512_srli_epi16(cu[i], 8);
                _mm512_store_si512((void *)(e + 192 + (size_t)(u + i) * 128), a);
                _mm512_store_si512((void *)(e + 256 + (size_t)(u + i) * 128), b);
                kp[i] = _mm512_dpwssd_epi32(kp[i], a, b);
                ks[i] = _mm512_add_epi16(ks[i], _mm512_add_epi16(a, b));
            }
        }
        __m512i kr = _mm512_dpwssd_epi32(_mm512_add_epi32(kp[0], kp[1]), _mm512_add_epi16(ks[0], ks[1]), beta);
        __m512 s, bb;
        sb16(w, p, cb, g, &s, &bb);
        _mm512_store_si512((void *)e, _mm512_sub_epi32(_mm512_setzero_si512(), kr));
        _mm512_store_ps((void *)(e + 64), s);
        _mm512_store_ps((void *)(e + 128), bb);
    }
}

/* F(bits, e2m1, ...) for w's code form, the two constants a kernel takes
 * (E2M1 codes unpack as 4-bit ones) */
#define VQ_CODE_FORMS(w, F, ...)                      \
    switch (is_e2m1(w) ? 0 : (w)->bits) {             \
    case 0: F(4, true, __VA_ARGS__); break;           \
    case 1: F(1, false, __VA_ARGS__); break;          \
    case 2: F(2, false, __VA_ARGS__); break;          \
    case 3: F(3, false, __VA_ARGS__); break;          \
    case 4: F(4, false, __VA_ARGS__); break;          \
    case 5: F(5, false, __VA_ARGS__); break;          \
    case 6: F(6, false, __VA_ARGS__); break;          \
    default: F(8, false, __VA_ARGS__); break;         \
    }

#define WG_EXPAND(BITS, E2M1, _) wg_expand(w, p, blk, g0, gn, E, BITS, E2M1)
static void wg_expand_any(const mx_weight *w, const ril *p, int blk, int g0, int gn, uint8_t *E) { VQ_CODE_FORMS(w, WG_EXPAND, 0) }

/* nt (1..WG_NT) tokens from t0 over the expanded groups [g0, g0 + gn) of
 * block blk; the float sums carry over chunks in y (the same steps in the
 * same order). A pass always runs WG_NT tokens, the missing ones as copies
 * of the last (results dropped): one kernel per group form instead of one
 * per count, whose 32 unrolled copies took clang's sanitizer build of this
 * file from 3 to 13 minutes. */
static inline __attribute__((always_inline)) void wg_micro(int nt, const mxq_ctx *c, const uint8_t *E, int g0, int gn, int blk, int t0,
                                                             const bool e2m1, const int GC) {
    const mx_weight *w = c->w;
    const int G = GC ? GC : w->group, ng = w->cols / G;
    const size_t ldq = MXQ_LDQ(w->cols);
    const int r = blk * 16;
    const __mmask16 m = (__mmask16)((1u << MX_MIN(16, w->rows - r)) - 1);
    const uint8_t *xt[WG_NT]; /* token t's codes, its scales at o[t] */
    size_t o[WG_NT];
    __m512 f[WG_NT];
    WG_UNROLL
    for (int t = 0; t < WG_NT; t++) {
        int tt = t0 + MX_MIN(t, nt - 1);
        xt[t] = (const uint8_t *)c->xq + (size_t)tt * ldq;
        o[t] = (size_t)tt * (size_t)ng;
        f[t] = g0 ? _mm512_maskz_loadu_ps(m, c->y + (size_t)tt * c->ldy + r) : _mm512_setzero_ps();
    }
    for (int g = g0; g < g0 + gn; g++) {
        const uint8_t *e = E + (size_t)(g - g0) * WG_GS(G);
        const size_t xo = (size_t)g * G * 2;
        const __m512i nkr = _mm512_load_si512((const void *)e);
        __m512i a[WG_NT];
        WG_UNROLL
        for (int t = 0; t < WG_NT; t++) a[t] = subb(nkr, c->xk + o[t] + g);
#define WG_UNIT                                                                          \
    do {                                                                                 \
        const __m512i cu = _mm512_load_si512((const void *)(e + 192 + (size_t)u * 128)); \
        const __m512i cv = _mm512_load_si512((const void *)(e + 256 + (size_t)u * 128)); \
        WG_UNROLL                                                                        \
        for (int t = 0; t < WG_NT; t++) {                                                \
            const uint8_t *q = xt[t] + xo + (size_t)u * 8;                               \
            a[t] = dpw(a[t], addb(cu, q), addb(cv, q + 4));                              \
        }                                                                                \
    } while (0)
        if (GC) {
            _Pragma("GCC unroll 16")
            for (int u = 0; u < G / 4; u++) WG_UNIT;
        } else {
            _Pragma("GCC unroll 2")
            for (int u = 0; u < G / 4; u++) WG_UNIT;
        }
#undef WG_UNIT
        const __m512 s = _mm512_load_ps((const void *)(e + 64)), bb = _mm512_load_ps((const void *)(e + 128));
        WG_UNROLL
        for (int t = 0; t < WG_NT; t++) VQ_GROUP_STEP(f[t], a[t], s, bb, c->xd[o[t] + g], c->xs[o[t] + g], e2m1);
    }
    WG_UNROLL
    for (int t = 0; t < WG_NT; t++)
        if (t < nt) _mm512_mask_storeu_ps(c->y + (size_t)(t0 + t) * c->ldy + r, m, f[t]);
}

/* Two blocks (E0: blk, E1: blk + 1) a pass: each token's activation words
 * are broadcast once into registers for both blocks' additions. The one-block
 * kernel's broadcast additions (vpaddd {1to16}) are bound by the core's two
 * broadcast loads a cycle (a unit a cycle); register additions issue four a
 * cycle. 8 tokens (4 and 6: 3-6 % slower in cache); their 16 float sums
 * live on the stack between groups (a load and a store per group, against
 * 16 units of integer sums). Each token's steps are wg_micro's, in order. */
#define WG2_NT 8
#define WG2_UNROLL _Pragma("GCC unroll 8")
static inline __attribute__((always_inline)) void wg_micro2(int nt, const mxq_ctx *c, const uint8_t *E0, const uint8_t *E1, int g0, int gn,
                                                              int blk, int t0, const bool e2m1, const int GC) {
    const mx_weight *w = c->w;
    const int G = GC ? GC : w->group, ng = w->cols / G;
    const size_t ldq = MXQ_LDQ(w->cols);
    const int r = blk * 16;
    const __mmask16 m1 = (__mmask16)((1u << MX_MIN(16, w->rows - r - 16)) - 1); /* the first block is whole */
    const uint8_t *xt[WG2_NT];
    size_t o[WG2_NT];
    float *yt[WG2_NT];
    WG2_UNROLL
    for (int t = 0; t < WG2_NT; t++) {
        int tt = t0 + MX_MIN(t, nt - 1);
        xt[t] = (const uint8_t *)c->xq + (size_t)tt * ldq;
        o[t] = (size_t)tt * (size_t)ng;
        yt[t] = c->y + (size_t)tt * c->ldy + r;
    }
    __m512 f[2][WG2_NT] __attribute__((aligned(64)));
    WG2_UNROLL
    for (int t = 0; t < WG2_NT; t++) {
        f[0][t] = g0 ? _mm512_loadu_ps(yt[t]) : _mm512_setzero_ps();
        f[1][t] = g0 ? _mm512_maskz_loadu_ps(m1, yt[t] + 16) : _mm512_setzero_ps();
    }
    for (int g = g0; g < g0 + gn; g++) {
        const uint8_t *e0 = E0 + (size_t)(g - g0) * WG_GS(G), *e1 = E1 + (size_t)(g - g0) * WG_GS(G);
        const size_t xo = (size_t)g * G * 2;
        const __m512i nk0 = _mm512_load_si512((const void *)e0), nk1 = _mm512_load_si512((const void *)e1);
        __m512i a0[WG2_NT], a1[WG2_NT];
        WG2_UNROLL
        for (int t = 0; t < WG2_NT; t++) {
            __m512i k = _mm512_set1_epi32(c->xk[o[t] + g]);
            a0[t] = _mm512_sub_epi32(nk0, k);
            a1[t] = _mm512_sub_epi32(nk1, k);
        }
#define WG2_UNIT                                                                                   \
    do {                                                                                           \
        const __m512i cu0 = _mm512_load_si512((const void *)(e0 + 192 + (size_t)u * 128));        \
        const __m512i cv0 = _mm512_load_si512((const void *)(e0 + 256 + (size_t)u * 128));        \
        const __m512i cu1 = _mm512_load_si512((const void *)(e1 + 192 + (size_t)u * 128));        \
        const __m512i cv1 = _mm512_load_si512((const void *)(e1 + 256 + (size_t)u * 128));        \
        WG2_UNROLL                                                                                  \
        for (int t = 0; t < WG2_NT; t++) {                                                          \
            const uint8_t *q = xt[t] + xo + (size_t)u * 8;                                         \
            const __m512i bu = _mm512_set1_epi32(*(const int32_t *)(const void *)q);               \
            const __m512i bv = _mm512_set1_epi32(*(const int32_t *)(const void *)(q + 4));         \
            a0[t] = dpw(a0[t], _mm512_add_epi32(cu0, bu), _mm512_add_epi32(cv0, bv));              \
            a1[t] = dpw(a1[t], _mm512_add_epi32(cu1, bu), _mm512_add_epi32(cv1, bv));              \
        }                                                                                          \
    } while (0)
        if (GC) {
            _Pragma("GCC unroll 16")
            for (int u = 0; u < G / 4; u++) WG2_UNIT;
        } else {
            _Pragma("GCC unroll 2")
            for (int u = 0; u < G / 4; u++) WG2_UNIT;
        }
#undef WG2_UNIT
        const __m512 s0 = _mm512_load_ps((const void *)(e0 + 64)), b0 = _mm512_load_ps((const void *)(e0 + 128));
        const __m512 s1 = _mm512_load_ps((const void *)(e1 + 64)), b1 = _mm512_load_ps((const void *)(e1 + 128));
        WG2_UNROLL
        for (int t = 0; t < WG2_NT; t++) {
            VQ_GROUP_STEP(f[0][t], a0[t], s0, b0, c->xd[o[t] + g], c->xs[o[t] + g], e2m1);
            VQ_GROUP_STEP(f[1][t], a1[t], s1, b1, c->xd[o[t] + g], c->xs[o[t] + g], e2m1);
        }
    }
    WG2_UNROLL
    for (int t = 0; t < WG2_NT; t++)
        if (t < nt) {
            _mm512_storeu_ps(yt[t], f[0][t]);
            _mm512_mask_storeu_ps(yt[t] + 16, m1, f[1][t]);
        }
}
static void wg_tokens2(const mxq_ctx *c, const uint8_t *E0, const uint8_t *E1, int g0, int gn, int blk, int t0, int nt) {
    bool e2m1 = is_e2m1(c->w);
    if (!e2m1 && c->w->group == 64) wg_micro2(nt, c, E0, E1, g0, gn, blk, t0, false, 64);
    else wg_micro2(nt, c, E0, E1, g0, gn, blk, t0, e2m1, 0);
}

/* the usual group sizes as constants (the column loop unrolls) */
static void wg_tokens(const mxq_ctx *c, const uint8_t *E, int g0, int gn, int blk, int t0, int nt) {
    bool e2m1 = is_e2m1(c->w);
    int G = c->w->group;
    if (e2m1 && G == 32) wg_micro(nt, c, E, g0, gn, blk, t0, true, 32);
    else if (e2m1) wg_micro(nt, c, E, g0, gn, blk, t0, true, 0);
    else if (G == 64) wg_micro(nt, c, E, g0, gn, blk, t0, false, 64);
    else wg_micro(nt, c, E, g0, gn, blk, t0, false, 0);
}

/* ---- a few tokens (under MXQ_WG_MIN) and E4M3 weights: one block, VG_NT
 * tokens at a time over it, the codes read as they are ---- */
#define VG_NT 6
/* Software prefetch distance (bytes) of the few-token kernel: its block is
 * read once per pass of up to VG_NT tokens, so the code stream runs at
 * several GB/s a thread and the hardware prefetchers alone left each line's
 * load waiting on memory (perf: ~40 % of the kernel's samples on the code
 * line's load). Each group asks for its share of the stream this far ahead,
 * into L1 (the block's bytes are contiguous, and so are the blocks).
 * 1B 4-bit, 4 streams decoding (bench -b 4), 2 threads, medians of 3
 * interleaved rounds: 129 -> 172 / 180 / 181 t/s at 2 / 4 / 6 KiB
 * (--fast 168 -> 187 / 204 / 197). */
#define VG_PF 4096
/* the token loops must unroll for the accumulators to stay in registers */
#define VG_UNROLL _Pragma("GCC unroll 6")

/* nt tokens over block blk, every code width: each step reads the byte codes
 * of 4 columns x 16 rows (8-bit: a line; 4-bit: two from a line; bit planes:
 * plane_codes) and adds them to every token's two sums */
static inline __attribute__((always_inline)) void gemm_micro(int nt, const mxq_ctx *c, const ril *p, int blk, int t0, const int bits,
                                                               const bool e2m1, const bool ONE, bool first) {
    const mx_weight *w = c->w;
    const int per = bits == 4 ? 2 : 1; /* 4-column units per fetch */
    int G = w->group, ng = w->cols / G;
    const size_t ldq = MXQ_LDQ(w->cols), q2o = MXQ_Q2(w->cols);
    const int8_t *xq = c->xq + (size_t)t0 * ldq;
    const uint8_t *cb = p->base + (size_t)blk * p->blk;
    const size_t pfg = (p->blk / (size_t)ng + 63) & ~(size_t)63;
    __m512 f[VG_NT];
    VG_UNROLL
    for (int t = 0; t < nt; t++) f[t] = _mm512_setzero_ps();
    for (int g = 0; g < ng; g++) {
        __m512i i1[VG_NT], i2[VG_NT];
        VG_UNROLL
        for (int t = 0; t < nt; t++) i1[t] = i2[t] = _mm512_setzero_si512();
        const uint8_t *gl = cb + g_code(p, g);
        if (first) /* later passes over the block find it in cache */
            for (size_t l = 0; l < pfg; l += 64) _mm_prefetch((const char *)cb + (size_t)g * pfg + l + VG_PF, _MM_HINT_T0);
        for (int u = 0; u < G / 4; u += per) {
            __m512i cu[2];
            if (bits == 4) codes(gl + (size_t)(u / 2) * 64, true, e2m1, &cu[0], &cu[1]);
            else if (bits == 8) cu[0] = _mm512_load_si512((const void *)(gl + (size_t)u * 64));
            else cu[0] = plane_codes(gl, G, bits, u);
            VQ_NB_UNROLL
            for (int j = 0; j < per; j++) {
                int k = g * G + 4 * (u + j);
                VG_UNROLL
                for (int t = 0; t < nt; t++) {
                    const int8_t *q = xq + (size_t)t * ldq + k;
                    if (ONE && (u + j) % 2) i2[t] = dpb4(i2[t], cu[j], q); /* ONE: two chains a token (latency) */
                    else i1[t] = dpb4(i1[t], cu[j], q);
                    if (!ONE) i2[t] = dpb4(i2[t], cu[j], q + q2o);
                }
            }
        }
        __m512 s, bb;
        sb16(w, p, cb, g, &s, &bb);
        VG_UNROLL
        for (int t = 0; t < nt; t++) {
            size_t o = (size_t)(t0 + t) * (size_t)ng + (size_t)g;
            VQ_GROUP_STEP(f[t], ONE ? _mm512_add_epi32(i1[t], i2[t]) : vq_b(i1[t], i2[t]), s, bb, c->xd[o], c->xs[o], e2m1);
        }
    }
    int r = blk * 16, nr = MX_MIN(16, w->rows - r);
    VG_UNROLL
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(c->y + (size_t)(t0 + t) * c->ldy + r, (__mmask16)((1u << nr) - 1), f[t]);
}

/* 4-bit, 8-bit and E2M1 weights, 6 tokens or more: two blocks (32 rows) a
 * pass, so each broadcast activation word feeds two vpdpbusd. The fast
 * mode's 8-bit codes (c->one; one block a pass: 12 chains of sums per 6
 * tokens, the kernel ~11 % slower in cache, pp512 --fast 1.1x slower on the
 * 1B shape) 6 tokens a pass; the exact 12-bit codes (hi and lo words, under
 * MXQ_WG_MIN tokens: batched decode, short prompts) 4, their four sums a
 * token in registers (1B 4-bit, 2 threads, 16-token prompt 187 -> 243 t/s,
 * 8-bit 176 -> 213; the server's 16-stream steps 110-121 -> 143-148 t/s).
 * Under V2_MIN tokens the weights' stream from memory bounds a pass, and two
 * blocks' streams a pass ran slower than one (4-token prompt 134-146 ->
 * 112-121 t/s exact, 194-200 -> 140-146 --fast). Each token's sums and
 * float steps are gemm_micro's, in its order. A pass always runs its token
 * count, the missing ones as copies of the last (results dropped), as
 * wg_micro does: one kernel per code form and group size. */
#define V2_MIN 6
#define V2_NT 6
#define V2X_NT 4 /* the 12-bit codes: four sums a token (two blocks, hi and lo) */
static inline __attribute__((always_inline)) void gemm_micro2(int nt, const mxq_ctx *c, const ril *p, int blk, int t0, const int bits,
                                                                const bool e2m1, const int GC, const bool ONE, const int NT,
                                                                const uint8_t *pf, size_t pfg) {
    const mx_weight *w = c->w;
    const int per = bits == 4 ? 2 : 1; /* 4-column units per line */
    const int G = GC ? GC : w->group, ng = w->cols / G;
    const size_t ldq = MXQ_LDQ(w->cols), q2o = MXQ_Q2(w->cols);
    const uint8_t *cb0 = p->base + (size_t)blk * p->blk, *cb1 = cb0 + p->blk;
    const int8_t *xt[V2_NT];
    size_t o[V2_NT];
    __m512 f0[V2_NT], f1[V2_NT];
    VG_UNROLL
    for (int t = 0; t < NT; t++) {
        int tt = t0 + MX_MIN(t, nt - 1);
        xt[t] = c->xq + (size_t)tt * ldq;
        o[t] = (size_t)tt * (size_t)ng;
        f0[t] = f1[t] = _mm512_setzero_ps();
    }
    for (int g = 0; g < ng; g++) {
        __m512i i0[V2_NT], i1[V2_NT], l0[V2_NT], l1[V2_NT]; /* l: the 12-bit codes' low parts' sums */
        VG_UNROLL
        for (int t = 0; t < NT; t++) {
            i0[t] = i1[t] = _mm512_setzero_si512();
            if (!ONE) l0[t] = l1[t] = _mm512_setzero_si512();
        }
        const size_t go = g_code(p, g);
        if (pf)
            for (size_t l = 0; l < pfg; l += 64) _mm_prefetch((const char *)pf + (size_t)g * pfg + l, _MM_HINT_T1);
        _Pragma("GCC unroll 16")
        for (int u = 0; u < G / 4; u += per) {
            __m512i ca[2], cc[2];
            if (bits == 4) {
                codes(cb0 + go + (size_t)(u / 2) * 64, true, e2m1, &ca[0], &ca[1]);
                codes(cb1 + go + (size_t)(u / 2) * 64, true, e2m1, &cc[0], &cc[1]);
            } else {
                ca[0] = _mm512_load_si512((const void *)(cb0 + go + (size_t)u * 64));
                cc[0] = _mm512_load_si512((const void *)(cb1 + go + (size_t)u * 64));
            }
            VQ_NB_UNROLL
            for (int j = 0; j < per; j++) {
                const int k = g * G + 4 * (u + j);
                VG_UNROLL
                for (int t = 0; t < NT; t++) {
                    __m512i b = _mm512_set1_epi32(*(const int32_t *)(const void *)(xt[t] + k));
                    i0[t] = _mm512_dpbusd_epi32(i0[t], ca[j], b);
                    i1[t] = _mm512_dpbusd_epi32(i1[t], cc[j], b);
                    if (!ONE) {
                        __m512i bl = _mm512_set1_epi32(*(const int32_t *)(const void *)(xt[t] + q2o + k));
                        l0[t] = _mm512_dpbusd_epi32(l0[t], ca[j], bl);
                        l1[t] = _mm512_dpbusd_epi32(l1[t], cc[j], bl);
                    }
                }
            }
        }
        __m512 s0, b0, s1, b1;
        sb16(w, p, cb0, g, &s0, &b0);
        sb16(w, p, cb1, g, &s1, &b1);
        VG_UNROLL
        for (int t = 0; t < NT; t++) {
            VQ_GROUP_STEP(f0[t], ONE ? i0[t] : vq_b(i0[t], l0[t]), s0, b0, c->xd[o[t] + g], c->xs[o[t] + g], e2m1);
            VQ_GROUP_STEP(f1[t], ONE ? i1[t] : vq_b(i1[t], l1[t]), s1, b1, c->xd[o[t] + g], c->xs[o[t] + g], e2m1);
        }
    }
    const int r = blk * 16;
    const __mmask16 m1 = (__mmask16)((1u << MX_MIN(16, w->rows - r - 16)) - 1); /* the first block is whole */
    VG_UNROLL
    for (int t = 0; t < NT; t++)
        if (t < nt) {
            _mm512_storeu_ps(c->y + (size_t)(t0 + t) * c->ldy + r, f0[t]);
            _mm512_mask_storeu_ps(c->y + (size_t)(t0 + t) * c->ldy + r + 16, m1, f1[t]);
        }
}
/* the fast mode's codes of w have a 4-token two-block kernel (gemm_tokens2) */
static bool one4(const mxq_ctx *c) { return c->one && c->w->group == 64 && !is_e2m1(c->w); }
#define V2_MICRO(BITS, E2M1, ONE, NT)                                                     \
    (w->group == 64 ? gemm_micro2(nt, c, p, blk, t, BITS, E2M1, 64, ONE, NT, pf, pfg)     \
                    : gemm_micro2(nt, c, p, blk, t, BITS, E2M1, 0, ONE, NT, pf, pfg))
/* blocks blk and blk + 1 (both present), nt (1..v2_nt(c)) tokens from t;
 * pf (or NULL): bytes to ask for, pfg of them with each group */
static void gemm_tokens2(const mxq_ctx *c, const ril *p, int blk, int t, int nt, const uint8_t *pf, size_t pfg) {
    const mx_weight *w = c->w;
    if (c->one) {
        /* a short pass (a batch's last tokens) on a 4-token kernel, where a 6-token one would
         * compute the missing tokens as copies: affine 4- and 8-bit, groups of 64 only (compile time) */
        if (nt <= 4 && one4(c)) {
            if (w->bits == 4) gemm_micro2(nt, c, p, blk, t, 4, false, 64, true, 4, pf, pfg);
            else gemm_micro2(nt, c, p, blk, t, 8, false, 64, true, 4, pf, pfg);
        } else if (is_e2m1(w)) V2_MICRO(4, true, true, V2_NT);
        else if (w->bits == 4) V2_MICRO(4, false, true, V2_NT);
        else V2_MICRO(8, false, true, V2_NT);
    } else { /* groups of 64 only (two_ok): each instantiation costs ~5 s of compile time */
        if (is_e2m1(w)) gemm_micro2(nt, c, p, blk, t, 4, true, 64, false, V2X_NT, pf, pfg);
        else if (w->bits == 4) gemm_micro2(nt, c, p, blk, t, 4, false, 64, false, V2X_NT, pf, pfg);
        else gemm_micro2(nt, c, p, blk, t, 8, false, 64, false, V2X_NT, pf, pfg);
    }
}
static int v2_nt(const mxq_ctx *c) { return c->one ? V2_NT : V2X_NT; }
/* the code forms gemm_micro2 reads (the 12-bit codes at groups of 64 only) */
static bool two_forms(const mx_weight *w) { return !mxq_is_e4m3(w) && (is_e2m1(w) || w->bits == 4 || w->bits == 8); }
/* The 12-bit codes read as they are two blocks a pass (gemm_micro2) beat
 * Winograd's expansion at every n once both asked for their lines ahead
 * (1B, 2 threads, 4 interleaved rounds of pp512: 4-bit 239 -> 262 t/s, 8-bit
 * 238 -> 263, --fast (whose q/k/v and o keep 12 bits) 342 -> 396; pp24-pp192
 * +6 to +22 %): Winograd keeps the groups and code forms they do not take. */
bool mxq_vnni_wg(const mx_weight *w, int n, bool one) {
    return !one && !mxq_is_e4m3(w) && n >= MXQ_WG_MIN && !(two_forms(w) && w->group == 64);
}
static bool two_ok(const mxq_ctx *c) { return two_forms(c->w) && (c->one || c->w->group == 64); }

/* nt tokens (1..VG_NT): the kernel for the weight's code width */
#define VG_MICRO(BITS, E2M1, NT) gemm_micro(NT, c, p, blk, t, BITS, E2M1, false, first)
#define VG_MICRO1(BITS, E2M1, NT) gemm_micro(NT, c, p, blk, t, BITS, E2M1, true, first)
#define VG_CASE(NT)                                   \
    case NT:                                          \
        if (c->one) { VQ_CODE_FORMS(w, VG_MICRO1, NT) } \
        else { VQ_CODE_FORMS(w, VG_MICRO, NT) }       \
        break;

/* ---- mxfp8: vdpbf16ps on exact bf16 weights ----
 * x is split into bf16 hi = bf16(x) and lo = bf16(x - hi) (~16 significant
 * bits), each product pair is exact in f32.
 * A 64-byte line (16 rows x 4 columns of E4M3) becomes two vectors of bf16
 * words, rows 0-7 and 8-15, a 32-bit lane holding columns (0, 1) or (2, 3)
 * of a row; one broadcast of x's 4 bf16 values then feeds both kinds of lane,
 * and the two lanes of a row are added once per group. */
static __m512i g_e4m3_bf16[4]; /* |E4M3| (7 bits) -> bf16 bits, 32 per vector */
static void e4m3_table(void) {
    uint16_t t[128];
    for (int b = 0; b < 128; b++) {
        float f = mxq_e4m3((uint8_t)b);
        uint32_t u;
        memcpy(&u, &f, 4);
        t[b] = (uint16_t)(u >> 16); /* exact: 3 mantissa bits */
    }
    for (int i = 0; i < 4; i++) g_e4m3_bf16[i] = _mm512_loadu_si512((const void *)(t + 32 * i));
}

static inline __attribute__((always_inline)) __m512i e4m3_words(__m512i w, const __m512i *T) {
    __m512i lo = _mm512_permutex2var_epi16(T[0], w, T[1]), hi = _mm512_permutex2var_epi16(T[2], w, T[3]);
    __m512i m = _mm512_mask_mov_epi16(lo, _mm512_test_epi16_mask(w, _mm512_set1_epi16(0x40)), hi);
    return _mm512_ternarylogic_epi32(m, _mm512_slli_epi16(w, 8), _mm512_set1_epi16((short)0x8000), 0xF8); /* m | (sign & 0x8000) */
}

static inline __attribute__((always_inline)) void fp8_line(const uint8_t *line, const __m512i *T, __m512bh *a, __m512bh *b) {
    __m512i v = _mm512_load_si512((const void *)line);
    *a = (__m512bh)e4m3_words(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(v)), T);
    *b = (__m512bh)e4m3_words(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(v, 1)), T);
}

/* rows 0-7 (a) and 8-15 (b), two lanes per row, as one vector of 16 rows */
static inline __attribute__((always_inline)) __m512 fp8_rows(__m512 a, __m512 b) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_ps(_mm512_permutex2var_ps(a, ev, b), _mm512_permutex2var_ps(a, od, b));
}

/* E8M0 scales of 16 rows (mxq_e8m0) */
static inline __m512 e8m0_16(const uint8_t *sp);
/* the 16 rows' scales at sp: E8M0 (mxfp8) or f32 (FP8 blocks) */
static inline __m512 fp8_scales(const mx_weight *w, const uint8_t *sp) {
    return w->fmt == MX_W_MXFP8 ? e8m0_16(sp) : _mm512_loadu_ps((const float *)(const void *)sp);
}
static inline __m512 e8m0_16(const uint8_t *sp) {
    __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)sp));
    __m512i bits = _mm512_slli_epi32(c, 23);
    bits = _mm512_max_epi32(bits, _mm512_set1_epi32(0x00400000)); /* c = 0 only: c << 23 is 0 or >= 2^23 */
    return _mm512_castsi512_ps(bits);
}

static inline __m512bh bc8(const uint16_t *p) {
    long long v;
    memcpy(&v, p, 8);
    return (__m512bh)_mm512_set1_epi64(v);
}

/* one token, nb (1 or 2) blocks; hi and lo sums apart (latency) */
static inline __attribute__((always_inline)) void dec_fp8(const mxq_ctx *c, const ril *p, const int bk[2], const int nb) {
    const mx_weight *w = c->w;
    int G = w->group, ng = w->cols / G;
    const uint16_t *xh = (const uint16_t *)(const void *)c->xq, *xl = xh + mx_split_q2(w->cols);
    const uint8_t *cb[2] = {p->base + (size_t)bk[0] * p->blk, p->base + (size_t)bk[1] * p->blk};
    const __m512i *T = g_e4m3_bf16;
    __m512 f[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int g = 0; g < ng; g++) {
        size_t go = g_code(p, g);
        __m512 sc[2];
        VQ_NB_UNROLL
        for (int b = 0; b < nb; b++) sc[b] = fp8_scales(w, cb[b] + g_scale(p, g));
        __m512 ah[2], al[2], bh[2], bl[2];
        VQ_NB_UNROLL
        for (int b = 0; b < 2; b++) ah[b] = al[b] = bh[b] = bl[b] = _mm512_setzero_ps();
        for (int l = 0; l < G / 4; l++) {
            int k = g * G + 4 * l;
            __m512bh Xh = bc8(xh + k), Xl = bc8(xl + k);
            VQ_NB_UNROLL
            for (int b = 0; b < nb; b++) {
                const uint8_t *ln = cb[b] + go + (size_t)l * 64;
                _mm_prefetch((const char *)ln + VQ_PF, _MM_HINT_T0);
                __m512bh A, B;
                fp8_line(ln, T, &A, &B);
                ah[b] = _mm512_dpbf16_ps(ah[b], A, Xh);
                al[b] = _mm512_dpbf16_ps(al[b], A, Xl);
                bh[b] = _mm512_dpbf16_ps(bh[b], B, Xh);
                bl[b] = _mm512_dpbf16_ps(bl[b], B, Xl);
            }
        }
        VQ_NB_UNROLL
        for (int b = 0; b < nb; b++)
            f[b] = _mm512_fmadd_ps(fp8_rows(_mm512_add_ps(ah[b], al[b]), _mm512_add_ps(bh[b], bl[b])), sc[b], f[b]);
    }
    VQ_NB_UNROLL
    for (int b = 0; b < nb; b++) {
        int r = bk[b] * 16, nr = MX_MIN(16, w->rows - r);
        _mm512_mask_storeu_ps(c->y + r, (__mmask16)((1u << nr) - 1), f[b]);
    }
}

static void dec_range_fp8(const mxq_ctx *c, const ril *p, int a0, int a1, int c0, int c1) {
    VQ_PAIRS(dec_fp8(c, p, bk_, nb_));
}

/* nt tokens over one block: the same per-token sums as dec_fp8 */
static inline __attribute__((always_inline)) void gemm_fp8(int nt, const mxq_ctx *c, const ril *p, int blk, int t0) {
    const mx_weight *w = c->w;
    int G = w->group, ng = w->cols / G;
    const size_t ldq = mx_split_ld(w->cols), lo = mx_split_q2(w->cols); /* in bf16 words: hi, then lo */
    const uint16_t *xq = (const uint16_t *)(const void *)c->xq + (size_t)t0 * ldq;
    const uint8_t *cb = p->base + (size_t)blk * p->blk;
    const __m512i *T = g_e4m3_bf16;
    __m512 f[VG_NT];
    VG_UNROLL
    for (int t = 0; t < nt; t++) f[t] = _mm512_setzero_ps();
    for (int g = 0; g < ng; g++) {
        __m512 ah[VG_NT], al[VG_NT], bh[VG_NT], bl[VG_NT];
        VG_UNROLL
        for (int t = 0; t < nt; t++) ah[t] = al[t] = bh[t] = bl[t] = _mm512_setzero_ps();
        const uint8_t *gl = cb + g_code(p, g);
        for (int l = 0; l < G / 4; l++) {
            int k = g * G + 4 * l;
            __m512bh A, B;
            fp8_line(gl + (size_t)l * 64, T, &A, &B);
            VG_UNROLL
            for (int t = 0; t < nt; t++) {
                const uint16_t *q = xq + (size_t)t * ldq + k;
                __m512bh Xh = bc8(q), Xl = bc8(q + lo);
                ah[t] = _mm512_dpbf16_ps(ah[t], A, Xh);
                al[t] = _mm512_dpbf16_ps(al[t], A, Xl);
                bh[t] = _mm512_dpbf16_ps(bh[t], B, Xh);
                bl[t] = _mm512_dpbf16_ps(bl[t], B, Xl);
            }
        }
        __m512 s = fp8_scales(w, cb + g_scale(p, g));
        VG_UNROLL
        for (int t = 0; t < nt; t++) f[t] = _mm512_fmadd_ps(fp8_rows(_mm512_add_ps(ah[t], al[t]), _mm512_add_ps(bh[t], bl[t])), s, f[t]);
    }
    int r = blk * 16, nr = MX_MIN(16, w->rows - r);
    VG_UNROLL
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(c->y + (size_t)(t0 + t) * c->ldy + r, (__mmask16)((1u << nr) - 1), f[t]);
}

static void gemm_fp8_tokens(const mxq_ctx *c, const ril *p, int blk, int t, int nt) {
    switch (nt) {
    case 6: gemm_fp8(6, c, p, blk, t); break;
    case 5: gemm_fp8(5, c, p, blk, t); break;
    case 4: gemm_fp8(4, c, p, blk, t); break;
    case 3: gemm_fp8(3, c, p, blk, t); break;
    case 2: gemm_fp8(2, c, p, blk, t); break;
    default: gemm_fp8(1, c, p, blk, t); break;
    }
}

/* first: the block's first pass (it asks for the stream ahead) */
static void gemm_tokens(const mxq_ctx *c, const ril *p, int blk, int t, int nt, bool first) {
    const mx_weight *w = c->w;
    if (mxq_is_e4m3(w)) { gemm_fp8_tokens(c, p, blk, t, nt); return; }
    switch (nt) {
        VG_CASE(6)
        VG_CASE(5)
        VG_CASE(4)
        VG_CASE(3)
        VG_CASE(2)
        default:
        VG_CASE(1)
    }
}

/* Rows [r0, r1) (r0 a multiple of 16) for every token of c. */
static void vnni_mm(const mxq_ctx *c, const ril *p, int r0, int r1) {
    int b0 = r0 / 16, b1 = (r1 + 15) / 16;
    if (c->n == 1) { /* the range's halves as the two streams */
        int m = b0 + (b1 - b0) / 2;
        dec_range(c, p, b0, m, m, b1);
        return;
    }
    const mx_weight *w = c->w;
    if (!c->xk) { /* tokens in chunks whose codes stay in L2, the task's blocks re-read for each */
        bool two = two_ok(c) && c->n >= V2_MIN;
        int nt2 = v2_nt(c);
        for (int t0 = 0; t0 < c->n; t0 += 96)
            for (int b = b0; b < b1; b++) {
                int te = MX_MIN(c->n, t0 + 96);
                if (two && b + 1 < b1) {
                    /* The pair's first pass asks for the next pair's lines (into L2), a share with each
                     * group: the pair's first pass otherwise waited on memory for its lines, since each
                     * line is read by only n / nt2 passes (1B 4-bit, 16 streams decoding: 180 -> 203 t/s,
                     * --fast 223 -> 258; 8-bit 180 -> 190, 216 -> 227; pp512 level). (One block a pass asks
                     * for its own stream ahead: VG_PF.) */
                    int nn = MX_MIN(2, b1 - (b + 2)), ng = w->cols / w->group;
                    const uint8_t *pf = nn > 0 ? p->base + (size_t)(b + 2) * p->blk : NULL;
                    size_t pfg = ((size_t)nn * p->blk / (size_t)ng + 63) & ~(size_t)63;
                    for (int t = t0; t < te;) {
                        /* 7 or 8 tokens left: two passes of 4 (gemm_tokens2's 4-token kernel), not 6 + copies */
                        int r = te - t, m = one4(c) && (r == 7 || r == 8) ? 4 : MX_MIN(nt2, r);
                        gemm_tokens2(c, p, b, t, m, pf, pfg);
                        pf = NULL;
                        t += m;
                    }
                    b++;
                    continue;
                }
                for (int t = t0; t < te; t += VG_NT) gemm_tokens(c, p, b, t, MX_MIN(VG_NT, te - t), t == t0);
            }
        return;
    }
    /* per chunk of tokens and of columns, each block expanded once for all
     * the chunk's tokens */
    int ng = w->cols / w->group, gc = MX_MAX(1, WG_COLS / w->group);
    for (int t0 = 0; t0 < c->n; t0 += WG_TC) {
        int t1 = MX_MIN(c->n, t0 + WG_TC);
        for (int g0 = 0; g0 < ng; g0 += gc)
            for (int b = b0; b < b1; b++) {
                int gn = MX_MIN(gc, ng - g0);
                wg_expand_any(w, p, b, g0, gn, wg_buf[0]);
                if (b + 1 < b1) { /* two blocks a pass */
                    wg_expand_any(w, p, b + 1, g0, gn, wg_buf[1]);
                    /* the next pair's chunk of units, a share asked for (into L2) before each pass: its
                     * expansion otherwise waited on memory for the code lines (perf: 59 % of the
                     * expansion's samples on the first use of a code line; 1B 4-bit pp512, 6
                     * interleaved rounds: +3.7 %, median of the per-round ratios, measured while groups
                     * of 64 still took this path: mxq_vnni_wg) */
                    int nn = MX_MIN(2, b1 - (b + 2)), np = (t1 - t0 + WG2_NT - 1) / WG2_NT;
                    size_t cs = (size_t)(g0 >> p->gsh) * p->unit, ce = (size_t)((g0 + gn - 1) >> p->gsh) * p->unit + p->unit;
                    size_t share = ((ce - cs + (size_t)np - 1) / (size_t)np + 63) & ~(size_t)63;
                    for (int t = t0, i = 0; t < t1; t += WG2_NT, i++) {
                        for (int k = 0; k < nn; k++) {
                            const uint8_t *q = p->base + (size_t)(b + 2 + k) * p->blk;
                            for (size_t l = cs + (size_t)i * share; l < MX_MIN(ce, cs + (size_t)(i + 1) * share); l += 64)
                                _mm_prefetch((const char *)q + l, _MM_HINT_T1);
                        }
                        wg_tokens2(c, wg_buf[0], wg_buf[1], g0, gn, b, t, MX_MIN(WG2_NT, t1 - t));
                    }
                    b++;
                    continue;
                }
                for (int t = t0; t < t1; t += WG_NT) wg_tokens(c, wg_buf[0], g0, gn, b, t, MX_MIN(WG_NT, t1 - t));
            }
    }
}

void mxq_vnni_mm(const mxq_ctx *c, int r0, int r1) { vnni_mm(c, (const ril *)c->w->prep, r0, r1); }
void mxq_vnni_dec2(const mxq_ctx *c, int a0, int a1, int b0, int b1) {
    dec_range(c, (const ril *)c->w->prep, a0 / 16, (a1 + 15) / 16, b0 / 16, (b1 + 15) / 16);
}

/* Code of column kk of a bit-plane group for the row whose slot is at d
 * (pack_planes read back, one value at a time). */
static unsigned plane_code(const uint8_t *d, int G, int bits, int kk) {
    int h = kk / 32, q = (kk % 32) / 4, jb = kk % 4;
    unsigned code = 0;
    if (bits >= 4) code |= (d[(size_t)(4 * h + q / 2) * 64 + (size_t)jb] >> (4 * (q & 1))) & 15u;
    if (bits & 2) code |= ((d[(size_t)off_b(G, bits) + (size_t)(2 * h + q / 4) * 64 + (size_t)jb] >> (2 * (q % 4))) & 3u) << sh_b(bits);
    if (bits & 1) code |= ((d[(size_t)off_c(G, bits) + (size_t)h * 64 + (size_t)jb] >> q) & 1u) << sh_c(bits);
    return code;
}

/* Row r from the repacked copy (embedding lookups of a tied head): the
 * values mxq_deq gives, without touching the dropped original, whose
 * faults would map whole page-cache folios back in. */
void mxq_ril_row(const mx_weight *w, int r, float *out) {
    const ril *p = w->prep;
    int i = r % 16, G = w->group, ng = w->cols / G, step = w->bits == 8 ? 4 : 8;
    const uint8_t *cb = p->base + (size_t)(r / 16) * p->blk;
    bool e2m1 = is_e2m1(w);
    for (int g = 0; g < ng; g++) {
        const uint8_t *sp = cb + g_scale(p, g) + (size_t)i * (size_t)p->es;
        float s, bias = 0;
        if (mxq_is_e4m3(w)) {
            s = w->fmt == MX_W_MXFP8 ? mxq_e8m0(*sp) : mxq_ld(sp, MX_DT_F32, 0);
            for (int k = g * G; k < (g + 1) * G; k++) out[k] = mxq_e4m3(cb[k_line(p, G, 4, k) + (size_t)i * 4 + (size_t)(k % 4)]) * s;
            continue;
        }
        if (e2m1) s = w->fmt == MX_W_MXFP4 ? mxq_e8m0(*sp) : mxq_e4m3(*sp);
        else {
            s = mxq_ld(sp, w->scale_dtype, 0);
            bias = mxq_ld(sp + (size_t)p->gu * 16 * (size_t)p->es, w->scale_dtype, 0);
        }
        for (int k = g * G; k < (g + 1) * G; k++) {
            unsigned code;
            if (is_planes(w)) code = plane_code(cb + g_code(p, g) + (size_t)i * 4, G, w->bits, k - g * G);
            else {
                uint8_t v = cb[k_line(p, G, step, k) + (size_t)i * 4 + (size_t)(k % 4)];
                code = w->bits == 8 ? v : k % 8 < 4 ? v & 15u : v >> 4u;
            }
            if (e2m1) out[k] = mxq_e2m1_lut[code] * s;
            else {
                float q = s * (float)code; /* rounded product, then rounded sum, as mxq_deq */
                out[k] = q + bias;
            }
        }
    }
}

/* (see quant_impl.h) The codes' width: the many-token kernel's 16-bit sums
 * (c + b') stay below 2^13 and a group's int32 sum of their products cannot
 * overflow (G <= 128); 12 bits keep the fixtures' logits within 0.3 of the
 * 2e-2 rule (0.09-0.3; 16 bits gave 0.01, one int8 code 1.8-4x over it). */
/* the scale of a group of G (a multiple of 16) coded in [-lim, lim]: lim / max|x| (0 for a zero group),
 * and max|x| / lim in *d */
static inline float group_inv(const float *s, int G, int lim, float *d) {
    __m512 mx = _mm512_setzero_ps();
    for (int k = 0; k < G; k += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(s + k)));
    float amax = _mm512_reduce_max_ps(mx);
    *d = amax / (float)lim;
    return amax > 0 ? (float)lim / amax : 0.0f;
}
/* 16 columns' codes: round(x * inv) within [-lim, lim] */
static inline __m512i code16(const float *s, __m512 inv, __m512i lim) {
    __m512i b = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(s), inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm512_max_epi32(_mm512_min_epi32(b, lim), _mm512_sub_epi32(_mm512_setzero_si512(), lim));
}

void mxq_vnni_prep(const float *x, int cols, int G, int8_t *xq, float *xd, float *xs, int32_t *xk) {
    const __m512i lim = _mm512_set1_epi32(2047);
    /* b'1 b'3 b'0 b'2 of each 4 columns, from 16 columns' words */
    const __m512i perm = _mm512_setr_epi32(1, 3, 0, 2, 5, 7, 4, 6, 9, 11, 8, 10, 13, 15, 12, 14);
    for (int g = 0; g < cols / G; g++) {
        const float *s = x + (size_t)g * G;
        __m512 inv = _mm512_set1_ps(group_inv(s, G, 2047, &xd[g]));
        __m512i qs = _mm512_setzero_si512(), kp = _mm512_setzero_si512();
        for (int k = 0; k < G; k += 16) {
            __m512i b = code16(s + k, inv, lim);
            qs = _mm512_add_epi32(qs, b);
            size_t o = (size_t)g * G + (size_t)k;
            if (!xk) {
                _mm_storeu_si128((__m128i *)(void *)(xq + o), _mm512_cvtepi32_epi8(_mm512_srai_epi32(b, 4)));
                _mm_storeu_si128((__m128i *)(void *)(xq + MXQ_Q2(cols) + o), _mm512_cvtepi32_epi8(_mm512_and_si512(b, _mm512_set1_epi32(15))));
                continue;
            }
            __m512i bp = _mm512_add_epi32(b, _mm512_set1_epi32(2048)), pr = _mm512_permutexvar_epi32(perm, bp);
            _mm256_storeu_si256((__m256i *)(void *)(xq + 2 * o), _mm512_cvtepi32_epi16(pr));
            /* b'0 b'1 + b'2 b'3 + ...: even lanes times their neighbours */
            kp = _mm512_add_epi32(kp, _mm512_maskz_mullo_epi32(0x5555, bp, _mm512_shuffle_epi32(bp, _MM_PERM_CDAB)));
        }
        /* d * sum(x) from the codes, not from x: with the codes' offset
         * (b ~ -s * 2^(bits-1)) the bias term then cancels the rounding of x
         * against the codes, leaving sum(w * (x - x_coded)) */
        xs[g] = xd[g] * (float)_mm512_reduce_add_epi32(qs);
        if (xk) xk[g] = _mm512_reduce_add_epi32(kp); /* < 64 * 4095^2 */
    }
}

void mxq_vnni_prep8(const float *x, int cols, int G, int8_t *xq, float *xd, float *xs) {
    const __m512i lim = _mm512_set1_epi32(127);
    for (int g = 0; g < cols / G; g++) {
        const float *s = x + (size_t)g * G;
        __m512 inv = _mm512_set1_ps(group_inv(s, G, 127, &xd[g]));
        __m512i qs = _mm512_setzero_si512();
        for (int k = 0; k < G; k += 16) {
            __m512i b = code16(s + k, inv, lim);
            qs = _mm512_add_epi32(qs, b);
            _mm_storeu_si128((__m128i *)(void *)(xq + (size_t)g * G + (size_t)k), _mm512_cvtepi32_epi8(b));
        }
        xs[g] = xd[g] * (float)_mm512_reduce_add_epi32(qs); /* from the codes, as mxq_vnni_prep */
    }
}
