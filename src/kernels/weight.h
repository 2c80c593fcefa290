/* weight: the view every matrix product takes. A weight is [rows=out, cols=in]
 * in one of several storage formats, pointing into the mmap'd checkpoint
 * where the layout allows (float and MLX-packed formats are used in place).
 * Families never see the format; kernels dispatch on it. */
#ifndef MX_WEIGHT_H
#define MX_WEIGHT_H
#include <stdbool.h>
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
/* Rows [0, rows) of a product split into pool tasks: `big` tasks of `step`
 * rows, then one task per `unit` rows for the rest. For a few-token product
 * (decode) there are `want` tasks or more, so that none reads more than ~256
 * KiB of weights, and the last two steps' rows go in unit tasks: a thread
 * done early waits for the last task, which is then one unit (on a noisy
 * machine the threads' pace differs, and a 500 MB output head in 8 tasks
 * left a 64 MB one). Prefill keeps `want` equal tasks. */
typedef struct { int rows, step, unit, big, tasks; } mx_rowsplit;
mx_rowsplit mx_rowsplit_make(const mx_weight *w, int want, int unit, bool decode);
static inline void mx_rowsplit_range(const mx_rowsplit *s, int i, int *r0, int *r1) {
    int a = i < s->big ? i * s->step : s->big * s->step + (i - s->big) * s->unit;
    int b = a + (i < s->big ? s->step : s->unit);
    *r0 = a;
    *r1 = b < s->rows ? b : s->rows;
}
/* Dequantizes/converts row r into out[cols] (embedding lookup, tests). */
void mx_weight_row(const mx_weight *w, int r, float *out);
#endif
