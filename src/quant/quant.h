/* quant: loading weights in every storage format, and the quantized kernels.
 *
 * mx_load_weight binds module `module` (tensors module.weight, and for MLX
 * quantized modules module.scales / module.biases) as a [rows, cols] weight,
 * deciding float vs quantized by mlx-lm's rule: a per-module entry in the
 * config's `quantization` block wins (a dict or false); otherwise the module
 * is quantized iff module.scales exists, with the top-level parameters.
 * HF fine-grained FP8 (weight_scale_inv) is requantized to MXFP8 at load. */
#ifndef MX_QUANT_H
#define MX_QUANT_H
#include "../format/checkpoint.h"
#include "../kernels/weight.h"
#include "../base/threadpool.h"

#define MX_LOAD_TRANSPOSED 1u /* float weight stored [cols, rows] (GPT-2 Conv1D); copied transposed */
#define MX_LOAD_OPTIONAL   2u /* absent -> w->fmt = MX_W_NONE and MX_OK */

int mx_load_weight(mx_ckpt *ck, const char *module, int rows, int cols, unsigned flags, mx_weight *w);

/* Binds a quantized module (called by mx_load_weight once it decided the
 * module is quantized). mode/bits/group come from the config. */
int mx_quant_bind(mx_ckpt *ck, const char *module, int rows, int cols, const char *mode, int bits, int group, mx_weight *w);

/* Kernels for the quantized formats (dispatched from mx_matmul). */
void mx_qmatmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, mx_pool *pool);
void mx_qrow(const mx_weight *w, int r, float *out);
size_t mx_qbytes(const mx_weight *w);
#endif
