/* kernels: the numeric primitives the nn layer is built from, with runtime
 * CPU dispatch (AVX-512, AVX2, portable C) inside each.
 *
 * Matrix product convention: x is [n, cols] row-major with row stride ldx,
 * y is [n, rows] with row stride ldy, y[t][r] = sum_c x[t][c] * W[r][c].
 * n = 1 is decode (matrix-vector), n > 1 prefill (matrix-matrix). */
#ifndef MX_KERNELS_H
#define MX_KERNELS_H
#include "weight.h"
#include "../base/threadpool.h"

void mx_matmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, mx_pool *pool);
/* Reference implementation (dequantize row, then dot) used by tests. */
void mx_matmul_ref(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy);

/* Row-wise ops on [n, d] arrays with row stride ld (in place when x == y). */
void mx_rmsnorm(float *y, const float *x, const float *w, float w_offset, int n, int d, int ld, float eps);
void mx_layernorm(float *y, const float *x, const float *w, const float *b, float w_offset, int n, int d, int ld, float eps);
void mx_softmax(float *x, int n);
float mx_dot(const float *a, const float *b, int n);
void mx_axpy(float *y, float a, const float *x, int n); /* y += a*x */
void mx_add(float *y, const float *x, int n);           /* y += x */
void mx_scale(float *y, float a, int n);

typedef enum { MX_ACT_SILU, MX_ACT_GELU, MX_ACT_GELU_TANH, MX_ACT_RELU, MX_ACT_RELU2, MX_ACT_IDENTITY, MX_ACT_SIGMOID, MX_ACT_TANH } mx_act;
int mx_act_parse(const char *name, mx_act *out);
void mx_act_apply(mx_act a, float *x, int n);
/* x[i] = act(gate[i]) * up[i] into gate */
void mx_act_mul(mx_act a, float *gate, const float *up, int n);
#endif
