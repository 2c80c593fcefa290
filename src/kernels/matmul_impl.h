/* Internal to kernels/: per-ISA float matmul entry points over a row range. */
#ifndef MX_MATMUL_IMPL_H
#define MX_MATMUL_IMPL_H
#include "weight.h"
#include "../base/half.h"
typedef void (*mx_mm_fn)(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_mm_float_portable(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_mm_float_avx2(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_mm_float_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
/* The opt-in BF16 dot path (the policy's bf16_dot, AVX-512 BF16 only): the
 * hi words of the split x below. */
void mx_mm_bf16_dot_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
/* BF16 weights on AVX-512 BF16 CPUs (mm_simd.h, "bf2", and the dot path
 * above): x split by mx_bf16_split, passed as x with ldx = mx_split_ld(K) / 2
 * floats. */
#include "kernels.h"
void mx_bf16_split_avx512(const float *x, int n, int ldx, int K, uint16_t *xb);
void mx_mm_bf2_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
/* BF16 weights repacked at load on AVX-512 BF16 CPUs ("bfr", mm_simd.h):
 * w->prep. Blocks of 16 rows, blk = np * 64 bytes apart; line p of a block
 * holds column pair p of its rows, row i in bytes [4i, 4i + 4). */
typedef struct {
    uint8_t *base;
    size_t blk;
    int np;      /* column pairs: (cols + 1) / 2 */
    void *chunk; /* the arena chunk holding the copy; NULL: a view into another weight's */
} mx_bfr;
/* The kernels over the repacked copy, x split as above: hi + lo (exact) and
 * hi alone (the fast mode, bf16_dot). Rows r0.. from a block's first. */
void mx_mm_bfr2_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_mm_bfr1_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_bfr_pack_avx512(const mx_weight *w, int b0, int b1, uint8_t *base, size_t blk);
static inline float mx_f16_to_f32_fn(uint16_t h) { return mx_f16_to_f32(h); }
static inline float mx_bf16_to_f32_fn(uint16_t h) { return mx_bf16_to_f32(h); }
#endif
