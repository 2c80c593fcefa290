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
/* Rows [0, rows) of a product split into pool tasks, in units of `unit`
 * rows. Prefill (lanes 1, streams 1): `want` equal contiguous tasks.
 * Decode: one lane per thread (mx_pool_run_lanes with s.lanes), each lane a
 * contiguous range cut into `streams` equal parts, and task k of a lane
 * takes chunk k of every part (<= ~256 KiB of weights per task). A thread
 * thus reads its lane's parts as long sequential streams across its tasks,
 * restarting them once per matrix instead of once per task (a model of a 1B
 * decode step: 64-66 GB/s with independent tasks, 77-80 with lanes of two
 * streams), while tasks stay small for a thread that helps a late one. */
typedef struct { int rows, unit, lanes, streams, per_lane, chunk, units; } mx_rowsplit;
mx_rowsplit mx_rowsplit_make(const mx_weight *w, int want, int unit, int lanes, int streams);
static inline int mx_rowsplit_tasks(const mx_rowsplit *s) { return s->lanes * s->per_lane; }
/* Task i's rows: `streams` ranges [r[k][0], r[k][1]) (possibly empty). */
static inline void mx_rowsplit_range(const mx_rowsplit *s, int i, int r[2][2]) {
    int u = i / s->per_lane, k = i % s->per_lane;
    long l0 = (long)s->units * u / s->lanes, l1 = (long)s->units * (u + 1) / s->lanes;
    for (int p = 0; p < s->streams; p++) {
        long p0 = l0 + (l1 - l0) * p / s->streams, p1 = l0 + (l1 - l0) * (p + 1) / s->streams;
        long a = p0 + (long)k * s->chunk, b = a + s->chunk;
        a = a < p1 ? a : p1;
        b = b < p1 ? b : p1;
        a *= s->unit;
        b *= s->unit;
        r[p][0] = (int)(a < s->rows ? a : s->rows);
        r[p][1] = (int)(b < s->rows ? b : s->rows);
    }
}
/* Dequantizes/converts row r into out[cols] (embedding lookup, tests). */
void mx_weight_row(const mx_weight *w, int r, float *out);
#endif
