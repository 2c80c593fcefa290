/* Internal to quant/: what the quantized formats' files share. Their
 * records (affine.c, mxfp4.c, nvfp4.c, mxfp8.c, fp8block.c) point to the
 * shared entries below: the MLX binder and layout (bind.c), the products,
 * prepare and release (qmatmul.c), and the kernels they dispatch to
 * (qkern.h: f32 activations; qvnni_avx512.c: 12-bit activations on the
 * repacked copy; deq.c: exact dequantization), which specialise on the
 * format's code and scale kinds.
 *
 * Every decoder is exact: it yields the f32 value the fixtures' reference
 * dequantization yields (README "Quantized fixtures"). */
#ifndef MX_QUANT_IMPL_H
#define MX_QUANT_IMPL_H
#include "quant.h"
#include "codes.h"
#include "../base/threadpool.h"
#include "../base/half.h"
#include "../kernels/kernels.h"
#include <string.h>

/* ---- the records' shared entries ---- */
/* MLX layout (P.weight U32 codes, P.scales, affine P.biases), every shape
 * and dtype checked; the caller checked bits and group for its format. */
int mxq_bind_mlx(mx_ckpt *ck, const char *module, int rows, int cols, mx_wfmt fmt, const char *mode, int bits, int group, mx_weight *w);
/* The same for a format of fixed bits eb and group eg (mxfp4, nvfp4, mxfp8). */
int mxq_bind_fixed(mx_ckpt *ck, const char *module, int rows, int cols, mx_wfmt fmt, const char *mode, int eb, int eg, int bits, int group,
                   mx_weight *w);
/* Takes tensor `module.suffix` with a dtype of the set (mask of 1<<dtype)
 * and 2-D shape [d0, d1]; else NULL with an error naming file and tensor. */
mx_tensor *mxq_need(mx_ckpt *ck, const char *module, const char *suffix, unsigned dtypes, int64_t d0, int64_t d1, const char *what);
const char *mxq_tfile(const mx_ckpt *ck, const mx_tensor *t); /* the file holding t */
size_t mxq_bytes(const mx_weight *w);                              /* MLX layout: codes, scales (and biases) per row */
int mxq_slice(const mx_weight *w, int r0, int n, mx_weight *out); /* MLX layout */
/* The prepared part of a slice of w (rows r0.., out's other fields set):
 * a view into w's repacked copy where r0 starts a block, else a copy of
 * its own (none where w has none). */
void mxq_slice_prep(const mx_weight *w, int r0, mx_weight *out);
void mxq_row(const mx_weight *w, int r, float *out);
void mxq_matmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp);
bool mxq_matmul_multi(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy, const mx_kpolicy *kp);
int mxq_prepare(mx_weight *w, const mx_kpolicy *kp);
void mxq_release(mx_weight *w);
#define MXQ_RECORD .bytes = mxq_bytes, .row = mxq_row, .slice = mxq_slice, .matmul = mxq_matmul, .matmul_multi = mxq_matmul_multi, \
                   .prepare = mxq_prepare, .release = mxq_release
static inline float mxq_ld(const uint8_t *p, mx_dtype dt, size_t i) {
    switch (dt) {
    case MX_DT_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case MX_DT_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return mx_f16_to_f32(h); }
    case MX_DT_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return mx_bf16_to_f32(h); }
    default: return 0;
    }
}
/* Groups per row (FP8B: 128-column blocks, the last one may be partial). */
static inline int mxq_ngroups(const mx_weight *w) { return (w->cols + w->group - 1) / w->group; }
/* Scale of group g of row r. */
static inline float mxq_scale(const mx_weight *w, int r, int g) {
    size_t ng = (size_t)mxq_ngroups(w);
    switch (w->fmt) {
    case MX_W_AFFINE: return mxq_ld(w->scales, w->scale_dtype, (size_t)r * ng + g);
    case MX_W_MXFP4: case MX_W_MXFP8: return mxq_e8m0(w->scales[(size_t)r * ng + g]);
    case MX_W_NVFP4: return mxq_e4m3(w->scales[(size_t)r * ng + g]);
    case MX_W_FP8B: return mxq_ld(w->scales, MX_DT_F32, (size_t)(r / 128) * ng + g);
    default: return 0;
    }
}
static inline float mxq_bias(const mx_weight *w, int r, int g) {
    return mxq_ld(w->biases, w->scale_dtype, (size_t)r * mxq_ngroups(w) + g);
}
/* Scales (and affine biases, when b) of groups [g0, g0+n) of row r as f32,
 * with the dtype switch outside the loops (kernels call this once per row
 * block instead of decoding a scale per group). */
static inline void mxq_scales(const mx_weight *w, int r, int g0, int n, float *s, float *b) {
    size_t ng = (size_t)mxq_ngroups(w);
    switch (w->fmt) {
    case MX_W_AFFINE: {
        size_t o = (size_t)r * ng + g0;
        if (w->scale_dtype == MX_DT_BF16) {
            for (int i = 0; i < n; i++) {
                uint16_t hs, hb;
                memcpy(&hs, w->scales + 2 * (o + i), 2);
                memcpy(&hb, w->biases + 2 * (o + i), 2);
                s[i] = mx_bf16_to_f32(hs);
                if (b) b[i] = mx_bf16_to_f32(hb);
            }
        } else {
            for (int i = 0; i < n; i++) {
                s[i] = mxq_ld(w->scales, w->scale_dtype, o + i);
                if (b) b[i] = mxq_ld(w->biases, w->scale_dtype, o + i);
            }
        }
        break;
    }
    case MX_W_MXFP4: case MX_W_MXFP8: {
        const uint8_t *p = w->scales + (size_t)r * ng + g0;
        for (int i = 0; i < n; i++) s[i] = mxq_e8m0(p[i]);
        break;
    }
    case MX_W_NVFP4: {
        const uint8_t *p = w->scales + (size_t)r * ng + g0;
        for (int i = 0; i < n; i++) s[i] = mxq_e4m3(p[i]);
        break;
    }
    case MX_W_FP8B:
        for (int i = 0; i < n; i++) s[i] = mxq_ld(w->scales, MX_DT_F32, (size_t)(r / 128) * ng + g0 + i);
        break;
    default:
        for (int i = 0; i < n; i++) s[i] = 0;
    }
}

/* E4M3 weights (mxfp8, HF FP8 blocks): the activation-quantized path runs
 * them on bf16 dot products instead of int8 codes. */
static inline bool mxq_is_e4m3(const mx_weight *w) { return w->fmt == MX_W_MXFP8 || w->fmt == MX_W_FP8B; }

/* 8 bytes at p as a little-endian word, of which only `avail` may be read
 * (a row's or tensor's end; the rest is zero). */
static inline uint64_t mxq_ld64(const uint8_t *p, size_t avail) {
    uint64_t u = 0;
    if (avail >= 8) memcpy(&u, p, 8);
    else
        for (size_t i = 0; i < avail; i++) u |= (uint64_t)p[i] << (8 * i);
    return u;
}

/* Element c of an LSB-first packed row of `bits`-bit codes (bits <= 8). */
static inline unsigned mxq_bits(const uint8_t *row, size_t c, int bits) {
    size_t o = c * (size_t)bits;
    unsigned sh = (unsigned)(o & 7), v = row[o >> 3] >> sh;
    if (sh + (unsigned)bits > 8) v |= (unsigned)row[(o >> 3) + 1] << (8 - sh);
    return v & ((1u << bits) - 1);
}

/* Dequantizes row r, columns [c0, c0+len), into out (natural order), from
 * the stored original. */
void mxq_deq(const mx_weight *w, int r, int c0, int len, float *out);

/* Kernel context: x is in the order the kernel wants (perm > 0: within each
 * chunk of 2*perm columns, the even columns then the odd ones, matching how
 * 4-bit codes unpack as low/high nibbles of perm bytes). xs: affine only, the
 * sum of x over each group, [n][ngroups]. */
typedef struct {
    const mx_weight *w;
    const float *x;
    int ldx;
    const float *xs;
    const int8_t *xq; /* int8 path: coded x per token (MXQ_LDQ; mxq_vnni_prep) */
    const float *xd;  /* int8 path: activation scale per group, [n][ngroups] */
    const int32_t *xk; /* int8 path, n >= MXQ_WG_MIN: per token and group, the pairs' sum (mxq_vnni_prep) */
    int n;
    float *y;
    int ldy;
    int perm;
    bool invariant; /* one kernel for every n (the policy's MX_QMODE_PANEL) */
    bool vbmi;      /* the int8 path may take its AVX-512 VBMI kernel */
    bool one;       /* the fast mode: x as one 8-bit code per value (q1 only; mxq_vnni_prep8) */
} mxq_ctx;
typedef void (*mxq_fn)(const mxq_ctx *c, int r0, int r1);
/* Where the int8 path's prepared activations lie: token t's codes at
 * xq + t * MXQ_LDQ(cols), under MXQ_WG_MIN tokens: q1 there and q2
 * MXQ_Q2(cols) bytes after them; more: 2 * cols bytes of 16-bit codes
 * (mxq_vnni_prep). E4M3 weights: bf16 hi and lo words as mx_bf16_split
 * writes them. Padded as kernels.h's mx_pad_* say (unpadded, the 6-token prefill tile's
 * 12 code rows thrashed one L1 set: 4096 x 8192 x 192 tokens, 1 thread,
 * 67-125 GFLOP/s, 162-182 padded). cols is a multiple of 64 here. */
#define MXQ_Q2(cols) mx_pad_q2((size_t)(cols))
/* From this many tokens the int8 path takes Winograd's pairing
 * (qvnni_avx512.c), whose per-block expansion costs about as much as 8-16
 * tokens: below it the codes are read as they are (test_quant_bench, one
 * thread, 2048 x 4096: n = 2 59-64 against 157-193 GFLOP/s, n = 16 even at
 * 4-bit and behind at 8-bit, n = 32 ahead at both). Only where no two-block
 * kernel reads the 12-bit codes as they are (mxq_vnni_wg). */
#define MXQ_WG_MIN 24
/* Whether n tokens of w (one: the fast mode's 8-bit codes) take Winograd's
 * kernels, and so need mxq_vnni_prep's per-token sums (xk). */
bool mxq_vnni_wg(const mx_weight *w, int n, bool one);
#define MXQ_LDQ(cols) mx_pad_ld((size_t)(cols))
void mxq_mm_portable(const mxq_ctx *c, int r0, int r1);
void mxq_mm_avx2(const mxq_ctx *c, int r0, int r1);
void mxq_mm_avx512(const mxq_ctx *c, int r0, int r1);
/* Int8-activation kernels (AVX-512 VNNI; qvnni_avx512.c) for weights that
 * mxq_int8_ok accepts: mxq_repack makes their copy at load (mxq_prepare);
 * x prepared per token by mxq_vnni_prep (MXQ_LDQ codes, per-group xd and
 * xs); mxq_vnni_mm then serves any n. */
bool mxq_int8_ok(const mx_weight *w, const mx_cpu_info *ci);
typedef struct {
    uint8_t *base;    /* [blocks of 16 rows][units] of blk bytes per block */
    size_t blk;       /* bytes per block */
    size_t unit;      /* gu groups' scales (then biases) in `head` bytes, then their code lines ([line][16 rows][4 bytes]) */
    size_t head;      /* scale and bias bytes at the start of a unit (whole lines) */
    int gu, gsh;      /* groups per unit (the scales of a unit fill whole 64-byte lines), its log2 */
    int gbytes;       /* code bytes of one group of 16 rows */
    int es;           /* bytes per scale */
    bool bias;        /* affine: biases follow the scales, [gu][16] each */
    void *chunk;      /* the arena chunk holding the copy; NULL: a view into another weight's */
} mxq_ril;
/* w's repacked copy (AVX-512 CPUs; NULL: out of memory), the original's
 * pages given back as it is made. */
mxq_ril *mxq_repack(const mx_weight *w, mx_pool *pool);
void mxq_vnni_mm(const mxq_ctx *c, int r0, int r1);
/* The one-token E2M1 kernel over blocks [a0, a1) and [c0, c1), built with
 * AVX-512 VBMI (qvnni_vbmi_avx512.c; call only where the CPU has it). */
void mxq_dec_e2m1_vbmi(const mxq_ctx *c, const mxq_ril *p, int a0, int a1, int c0, int c1);
/* One token (c->n == 1), rows [a0, a1) and [b0, b1) (multiples of 16 but for
 * a last partial block) read together as two streams. */
void mxq_vnni_dec2(const mxq_ctx *c, int a0, int a1, int b0, int b1);
void mxq_ril_row(const mx_weight *w, int r, float *out); /* w->prep set */
/* One token's activations (cols a multiple of G, G a multiple of 16): per group of G
 * the 12-bit codes b = round(x * 2047 / max|x|), *xd = max|x| / 2047 and
 * *xs = *xd * sum(b). xk NULL (fewer than MXQ_WG_MIN tokens): q1 = b >> 4
 * in xq[0, cols) and q2 = b & 15 at xq + MXQ_Q2(cols), so b = 16 q1 + q2.
 * Else (Winograd's pairing): b' = b + 2048 as 16-bit words, per 4 columns
 * b'1 b'3 b'0 b'2, and *xk = b'0 b'1 + b'2 b'3 + ... over the group. */
void mxq_vnni_prep(const float *x, int cols, int G, int8_t *xq, float *xd, float *xs, int32_t *xk);
/* The fast mode's coding (the policy's `fast`): per group of G one 8-bit
 * code b = round(x * 127 / max|x|) in xq[0, cols), *xd = max|x| / 127 and
 * *xs = *xd * sum(b); the kernels then make one vpdpbusd per 4 columns
 * instead of two (or the 16-bit pairing) and take the code as the sum. */
void mxq_vnni_prep8(const float *x, int cols, int G, int8_t *xq, float *xd, float *xs);
/* The x permutation (0, 8 or 16) the kernel of `level` wants for w. */
int mxq_perm_for(const mx_weight *w, int level);
#endif
