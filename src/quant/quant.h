/* quant: loading weights in every storage format, and the quantized kernels.
 *
 * mx_load_weight binds module `module` (tensors module.weight, and for MLX
 * quantized modules module.scales / module.biases) as a [rows, cols] weight,
 * deciding float vs quantized by mlx-lm's rule: a per-module entry in the
 * config's `quantization` block wins (a dict or false); otherwise the module
 * is quantized iff module.scales exists, with the top-level parameters.
 * HF fine-grained FP8 (weight_scale_inv, 128x128 blocks) is kept as E4M3
 * bytes in place with its f32 block scales (MX_W_FP8B): requantizing it to
 * MXFP8 would be lossy (power-of-two scales), see docs/quant.md. */
#ifndef MX_QUANT_H
#define MX_QUANT_H
#include "../format/checkpoint.h"
#include "../kernels/weight.h"
#include "../base/threadpool.h"

#define MX_LOAD_TRANSPOSED 1u /* float weight stored [cols, rows] (GPT-2 Conv1D); copied transposed */
#define MX_LOAD_OPTIONAL   2u /* absent -> w->fmt = MX_W_NONE and MX_OK */

int mx_load_weight(mx_ckpt *ck, const char *module, int rows, int cols, unsigned flags, mx_weight *w);

/* A view of rows [r0, r0+n) of w (any format; FP8 block-scaled: r0 on a
 * 128-row block). The view owns nothing: free it with mx_weight_free only
 * for what a kernel may have prepared in it (sf/bf); w must outlive it. */
int mx_weight_slice_rows(const mx_weight *w, int r0, int n, mx_weight *out);
/* Binds an expert-stacked module: module.weight (or the bare tensor
 * `module`) of shape [E, rows, cols] or [E*rows, cols], float or quantized
 * (scales/biases stacked alike); with MX_LOAD_TRANSPOSED stored [E, cols,
 * rows] / [E*cols, rows] (float only, copied transposed to f32). *whole gets
 * the [E*rows, cols] weight (it may own storage) and out[e] the view of
 * expert e. HF MXFP4 pairs module_blocks / module_scales (GPT-OSS) are bound
 * in place, [out, in] whatever `flags` says. MX_LOAD_OPTIONAL: absent ->
 * whole->fmt = MX_W_NONE, MX_OK. */
int mx_load_weight_stacked(mx_ckpt *ck, const char *module, int E, int rows, int cols, unsigned flags, mx_weight *whole, mx_weight *out);

/* Binds a quantized module (called by mx_load_weight once it decided the
 * module is quantized). mode/bits/group come from the config. */
int mx_quant_bind(mx_ckpt *ck, const char *module, int rows, int cols, const char *mode, int bits, int group, mx_weight *w);

/* Kernels for the quantized formats (dispatched from mx_matmul). */
void mx_qmatmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, mx_pool *pool);
/* Kernel choice for the quantized matmuls the calling thread issues. The
 * one-token decode kernel and the multi-token panel kernel sum in different
 * orders, so with AUTO (n == 1 decode, n > 1 panel) a token's result depends
 * on how many tokens share its matmul. The server pins the choice per step
 * so results are bit-identical alone or batched: decode steps run the
 * decode kernel once per token (PER_TOKEN), prompt chunks the panel kernel
 * for every n (PANEL). */
typedef enum { MX_QMODE_AUTO, MX_QMODE_PER_TOKEN, MX_QMODE_PANEL } mx_qmode;
void mx_qmatmul_set_mode(mx_qmode m);
/* MLX affine weights of every width (groups 32/64/128), mxfp4 and nvfp4
 * multiply activations coded as 12-bit integers per value with VNNI dot
 * products where the CPU has them (mxfp8: bf16, see below). Each such matrix is repacked on first use into 16-row
 * blocks (same size, huge pages; the mapped original's pages are dropped),
 * and one kernel serves every n, so the qmodes change nothing for it and a
 * token's result never depends on its batch. Logits stay within
 * 2e-2 * max|logit| of f32 activations (at most 6e-3 on the fixtures). On
 * unless MLXCEL_INT8=0 or turned off here; mx_qmatmul_int8 says whether w
 * takes that path. */
void mx_qmatmul_set_int8(bool on);
/* y[i] = x w[i]^T for 2..4 weights sharing x, in one pool job, when every
 * one takes the int8 path with the same cols and group (the results are
 * those of mx_qmatmul); false, having done nothing, otherwise. */
bool mx_qmatmul_multi(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy, mx_pool *pool);
bool mx_qmatmul_int8(const mx_weight *w);
unsigned long mx_qmatmul_int8_calls(void); /* matmuls that took it so far (tests) */
/* mxfp8 (group 32, AVX-512 BF16 CPUs) takes the same switch and counter but
 * multiplies exact bf16 weights by x split into bf16 hi + lo (vdpbf16ps):
 * E4M3 values fit no int8 code. Those matmuls are also counted here. */
unsigned long mx_qmatmul_bf16_calls(void);
void mxq_ril_free(void *ril); /* for mx_weight_free */
void mx_qrow(const mx_weight *w, int r, float *out);
size_t mx_qbytes(const mx_weight *w);

/* Conversion (convert.c): writes dst in the layout mlx_lm.convert writes. */
typedef struct {
    const char *dtype; /* bf16 | f16 | f32; NULL: config torch_dtype, else keep */
    bool quantize;
    const char *mode;  /* affine (default) | mxfp4 | nvfp4 | mxfp8 */
    int bits, group;   /* 0: the mode's default (affine 4/64, mxfp4 4/32, nvfp4 4/16, mxfp8 8/32) */
    int threads;       /* 0: default */
    bool progress;     /* progress bar on stderr */
} mx_convert_opts;
int mx_convert(const char *src, const char *dst, const mx_convert_opts *o);
#endif
