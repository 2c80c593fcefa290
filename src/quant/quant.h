/* quant: the quantized storage formats (one file each: affine.c, mxfp4.c,
 * nvfp4.c, mxfp8.c, fp8block.c; each fills in its record of
 * kernels/weight.h), their kernels, and loading weights in every format.
 *
 * mx_load_weight binds module `module` (tensors module.weight, and for MLX
 * quantized modules module.scales / module.biases) as a [rows, cols] weight,
 * deciding float vs quantized by mlx-lm's rule: a per-module entry in the
 * config's `quantization` block wins (a dict or false); otherwise the module
 * is quantized iff module.scales exists, with the top-level parameters.
 * HF fine-grained FP8 (weight_scale_inv, 128x128 blocks) is kept as E4M3
 * bytes in place with its f32 block scales (MX_W_FP8B): requantizing it to
 * MXFP8 would be lossy (power-of-two scales), see docs/quant.md. The weight
 * is then prepared for kp (mx_weight_prepare: the int8 kernels' repacked
 * copy), unless kp is NULL. */
#ifndef MX_QUANT_H
#define MX_QUANT_H
#include "../format/checkpoint.h"
#include "../kernels/weight.h"

#define MX_LOAD_TRANSPOSED 1u /* float weight stored [cols, rows] (GPT-2 Conv1D); copied transposed */
#define MX_LOAD_OPTIONAL   2u /* absent -> w->fmt = MX_W_NONE and MX_OK */

int mx_load_weight(mx_ckpt *ck, const char *module, int rows, int cols, unsigned flags, const mx_kpolicy *kp, mx_weight *w);

/* Binds an expert-stacked module: module.weight (or the bare tensor
 * `module`) of shape [E, rows, cols] or [E*rows, cols], float or quantized
 * (scales/biases stacked alike); with MX_LOAD_TRANSPOSED stored [E, cols,
 * rows] / [E*cols, rows] (float only, copied transposed to f32). *whole gets
 * the [E*rows, cols] weight (it may own storage) and out[e] the view of
 * expert e (mx_weight_slice_rows), prepared for kp. HF MXFP4 pairs
 * module_blocks / module_scales (GPT-OSS) are bound in place, [out, in]
 * whatever `flags` says. MX_LOAD_OPTIONAL: absent -> whole->fmt =
 * MX_W_NONE, MX_OK. */
int mx_load_weight_stacked(mx_ckpt *ck, const char *module, int E, int rows, int cols, unsigned flags, const mx_kpolicy *kp,
                           mx_weight *whole, mx_weight *out);

/* Binds a quantized module (called by mx_load_weight once it decided the
 * module is quantized) with the record of `mode`; mode/bits/group come from
 * the config. */
int mx_quant_bind(mx_ckpt *ck, const char *module, int rows, int cols, const char *mode, int bits, int group, mx_weight *w);

/* Products on 12-bit activations so far (tests and bench labels: the
 * policy's act12). mxfp8 and FP8 blocks (AVX-512 BF16 CPUs) multiply exact
 * bf16 weights by x split into bf16 hi + lo instead (E4M3 values fit no
 * int8 code); those are counted in both. */
unsigned long mx_qmatmul_int8_calls(void);
unsigned long mx_qmatmul_bf16_calls(void);
/* Those that coded x as one 8-bit code per value (the fast mode). */
unsigned long mx_qmatmul_one_calls(void);
#endif
