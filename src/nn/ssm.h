/* Helpers shared by the recurrent mixer blocks (nn/mamba.c, nn/rglru.c):
 * tensor loading under a module prefix, the causal depthwise convolution
 * with its cached window, and per-sequence bookkeeping. */
#ifndef MX_SSM_H
#define MX_SSM_H
#include "model.h"
#include <math.h>

/* Loads "<prefix(layer)>.<sub>" (any shape) holding exactly n elements into
 * a new f32 array; absent and !required: *out = NULL. */
int mx_ssm_load_arr(mx_model *m, const char *prefix, int layer, const char *sub, size_t n, bool required, float **out);
/* mx_load_lin on "<prefix>.<sub>". */
int mx_ssm_load_lin(mx_model *m, const char *prefix, int layer, const char *sub, int rows, int cols, bool bias,
                    mx_weight *w, float **b);
/* Tensor parallelism: mx_load_lin_rows / _cols on "<prefix>.<sub>", and the
 * elements ranges[i] * unit of an array of full_n elements, in order. */
int mx_ssm_load_lin_rows(mx_model *m, const char *prefix, int layer, const char *sub, int full_rows, int cols, const int (*ranges)[2], int nr,
                         bool bias, mx_weight *w, float **b);
int mx_ssm_load_lin_cols(mx_model *m, const char *prefix, int layer, const char *sub, int rows, int full_cols, int c0, int nc, bool bias,
                         mx_weight *w, float **b);
int mx_ssm_load_arr_parts(mx_model *m, const char *prefix, int layer, const char *sub, size_t full_n, const int (*ranges)[2], int nr,
                          size_t unit, float **out);

/* The Mamba2 mixer for blocks that embed one (arch.ssm with its own module
 * prefix): weights loaded from `prefix`, state found as block `self`'s in
 * the layer (mx_kv_block), f->scratch from its start (the mamba2 block's
 * scratch_floats). */
int mx_ssm_load_prefix(mx_model *m, int layer, const char *prefix, void **w);
void mx_ssm_free(void *w);
void mx_mamba2_run(mx_fwd *f, int layer, const void *w, const mx_block_ops *self, const float *in, float *out);

/* One step of a causal depthwise conv of one channel: returns
 * bias + sum_k w[k] x_{t-K+1+k}; win holds the K-1 inputs before x_t (oldest
 * first) and is advanced past x_t. */
static inline float mx_conv_step(const float *w, float bias, int K, float *win, float xt) {
    float acc = bias;
    for (int k = 0; k < K - 1; k++) acc += w[k] * win[k];
    acc += w[K - 1] * xt;
    for (int k = 0; k + 1 < K - 1; k++) win[k] = win[k + 1];
    if (K > 1) win[K - 2] = xt;
    return acc;
}

/* torch.nn.functional.softplus (beta 1, threshold 20). */
static inline float mx_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Stacked token t starts its sequence in this forward: the sequence's state
 * is then loaded (or, at position 0, reset: caches are reused). */
static inline bool mx_seq_first(const mx_fwd *f, int t) { return t == 0 || f->seq_of[t] != f->seq_of[t - 1]; }
#endif
