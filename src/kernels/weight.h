/* weight: the view every matrix product takes. A weight is [rows=out, cols=in]
 * in one of several storage formats, pointing into the mmap'd checkpoint
 * where the layout allows (float and MLX-packed formats are used in place).
 * Families never see the format; kernels dispatch on it. */
#ifndef MX_WEIGHT_H
#define MX_WEIGHT_H
#include <stddef.h>
#include <stdint.h>
#include "../format/safetensors.h"

typedef enum {
    MX_W_NONE = 0,
    MX_W_F32, MX_W_F16, MX_W_BF16,   /* plain float [rows, cols] */
    MX_W_AFFINE,                     /* MLX affine: bits 1..8, scales+biases per group */
    MX_W_MXFP4, MX_W_NVFP4, MX_W_MXFP8,
    MX_W_FP8B,                       /* HF fine-grained FP8: E4M3 bytes [rows, cols] in place, f32 scale per 128x128 block */
} mx_wfmt;

typedef struct {
    mx_wfmt fmt;
    int rows, cols;
    const uint8_t *data;   /* row r starts at data + r*row_bytes (may be unaligned) */
    size_t row_bytes;
    /* quantized formats */
    int bits, group;
    const uint8_t *scales; /* [rows, cols/group] of scale_dtype */
    const uint8_t *biases; /* affine only, same layout as scales */
    mx_dtype scale_dtype;  /* F32/F16/BF16 for affine; U8 for the fp formats */
    void *owned;           /* storage this view owns (converted or transposed); freed by mx_weight_free */
    void *ril;             /* the int8 kernels' repacked copy, made on first use (quant/); owned */
} mx_weight;

const char *mx_wfmt_name(mx_wfmt f);
void mx_weight_free(mx_weight *w);
/* Bytes the weight occupies (what one full read costs). */
size_t mx_weight_bytes(const mx_weight *w);
/* Row tasks for a few-token product over w on nt threads: `want` tasks, or
 * more so that none reads more than ~256 KiB of weights (a thread done early
 * waits for the last task; on a 500 MB output head that could be tens of MB),
 * never more than one per `unit` rows. */
int mx_row_tasks(const mx_weight *w, int want, int unit);
/* Dequantizes/converts row r into out[cols] (embedding lookup, tests). */
void mx_weight_row(const mx_weight *w, int r, float *out);
#endif
