/* Internal to kernels/: per-ISA float matmul entry points over a row range. */
#ifndef MX_MATMUL_IMPL_H
#define MX_MATMUL_IMPL_H
#include "weight.h"
#include "../base/half.h"
typedef void (*mx_mm_fn)(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_mm_float_portable(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_mm_float_avx2(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
void mx_mm_float_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1);
static inline float mx_f16_to_f32_fn(uint16_t h) { return mx_f16_to_f32(h); }
static inline float mx_bf16_to_f32_fn(uint16_t h) { return mx_bf16_to_f32(h); }
#endif
