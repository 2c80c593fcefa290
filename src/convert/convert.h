/* convert: offline conversion of a float checkpoint into the layout
 * mlx_lm.convert writes, optionally quantized (the quantizers follow MLX's
 * Metal kernels). Not on the path that loads and runs models: the runtime
 * formats (src/quant/) never include this. */
#ifndef MX_CONVERT_H
#define MX_CONVERT_H
#include <stdbool.h>
#include <stdint.h>
#include "../kernels/weight.h"
#include <jansson.h>

typedef struct {
    const char *dtype; /* bf16 | f16 | f32; NULL: config torch_dtype, else keep */
    bool quantize;
    const char *mode;  /* affine (default) | mxfp4 | nvfp4 | mxfp8 */
    int bits, group;   /* 0: the mode's default (affine 4/64, mxfp4 4/32, nvfp4 4/16, mxfp8 8/32) */
    int threads;       /* 0: default */
} mx_convert_opts;
/* Writes dst in the layout mlx_lm.convert writes (convert.c). */
int mx_convert(const char *src, const char *dst, const mx_convert_opts *o);

/* Writes dst as a draft model of its own: the next-n (multi-token
 * prediction) module `layer` (0-based among num_nextn_predict_layers) of
 * the DeepSeek-V3-layout checkpoint src (splitmtp.c). */
int mx_split_mtp(const char *src, const char *dst, int layer);

/* Shared by the writers: dst made, or empty if it exists; JSON written
 * (4-space indent); every file of src that is not weights or config.json
 * (tokenizer, generation config, chat template) copied to dst. */
int mx_conv_new_dir(const char *dst);
int mx_conv_write_json(const char *path, json_t *j);
int mx_conv_copy_aux(const char *src, const char *dst);

/* Quantizers (quantize.c; MLX Metal rules). One row of cols values, already
 * rounded to the model dtype: packed codes (cols*bits/8 bytes), and per group
 * either f32 scales+biases (affine; the caller casts them to the model dtype)
 * or U8 scale codes (mxfp4/nvfp4/mxfp8). */
void mxq_quantize_row(mx_wfmt fmt, int bits, int group, const float *w, int cols, uint8_t *packed, float *scales, float *biases, uint8_t *scodes);
uint8_t mxq_enc_e2m1(float v);
uint8_t mxq_enc_e4m3(float v);
#endif
