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
static inline float mx_f16_to_f32_fn(uint16_t h) { return mx_f16_to_f32(h); }
static inline float mx_bf16_to_f32_fn(uint16_t h) { return mx_bf16_to_f32(h); }
#endif
