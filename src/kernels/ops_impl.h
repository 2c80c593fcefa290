/* Internal to kernels/: per-ISA versions of the row-wise ops in ops.c. The
 * _avx2 ones are compiled with -mavx2 -mfma (ops_avx2.c) and are only called
 * after dispatch. */
#ifndef MX_OPS_IMPL_H
#define MX_OPS_IMPL_H
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
float mx_dot_avx2(const float *a, const float *b, int n);
void mx_axpy_avx2(float *y, float a, const float *x, int n);
void mx_attn_scores_avx2(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out);
void mx_attn_mix_avx2(float *y, const float *p, const float *V, size_t ldv, int n, int d, bool acc);
void mx_add_avx2(float *y, const float *x, int n);
void mx_scale_avx2(float *y, float a, int n);
/* One row: y = x / rms(x) * (w + w_offset) (w may be NULL). */
void mx_rmsnorm_row_avx2(float *y, const float *x, const float *w, float w_offset, int d, float eps);
void mx_softmax_avx2(float *x, int n);
float mx_max_avx2(const float *x, int n);
/* The first index of x's maximum, NaNs passed over (x[0] NaN: 0), as
 * mx_argmax's scan gives it. */
int32_t mx_argmax_avx2(const float *x, int n);
void mx_exp_acc_avx2(float *x, int n, float sub, float acc[8], int lane0);
/* gate[i] = act(gate[i]) * up[i] (up may be NULL: act only), for act = silu
 * (gelu_tanh = 0) or gelu_tanh (1). */
void mx_silu_mul_avx2(float *gate, const float *up, int n);
void mx_gelu_tanh_mul_avx2(float *gate, const float *up, int n);
/* two rows against the same keys / values, each row bit for bit the one-row kernel's (ops_avx512.c) */
void mx_attn_scores_avx512(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out);
void mx_attn_scores2_avx512(const float *q0, const float *q1, const float *K, size_t ldk, int n, int d, float scale, float *o0, float *o1, bool pf);
void mx_attn_mix2_avx512(float *y0, float *y1, const float *p0, const float *p1, const float *V, size_t ldv, int n, int d, bool acc, bool pf);
#endif
