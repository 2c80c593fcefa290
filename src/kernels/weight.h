/* weight: the view every matrix product takes, and the table of storage
 * formats. A weight is [rows=out, cols=in] in one of several storage
 * formats, pointing into the mmap'd checkpoint where the layout allows
 * (float and MLX-packed formats are used in place). Families never see the
 * format; everything that depends on it goes through the format's record
 * (mx_wformat), looked up by format as ggml's type traits are. Each format
 * fills in its record in its own file and registers it with MX_WFORMAT:
 * kernels/matmul.c the float ones, quant/ the quantized ones. */
#ifndef MX_WEIGHT_H
#define MX_WEIGHT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy.h"
#include "../format/checkpoint.h"

typedef enum {
    MX_W_NONE = 0,
    MX_W_F32, MX_W_F16, MX_W_BF16,   /* plain float [rows, cols] */
    MX_W_AFFINE,                     /* MLX affine: bits 1..8, scales+biases per group */
    MX_W_MXFP4, MX_W_NVFP4, MX_W_MXFP8,
    MX_W_FP8B,                       /* HF fine-grained FP8: E4M3 bytes [rows, cols] in place, f32 scale per 128x128 block */
    MX_W_COUNT
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
    void *prep;            /* what the format's prepare made for the policy (the int8 kernels' repacked copy); freed by mx_weight_free */
} mx_weight;

/* A storage format's record. Every entry but name may be NULL where the
 * format has nothing to do (bind: a float dtype, bound by the loader). */
typedef struct mx_wformat {
    const char *name; /* as bench, tests and errors name it */
    const char *mode; /* the config's quantization mode (mlx-lm's `mode`, HF's quant_method) that binds it */
    /* Binds module `module` of ck as [rows, cols], bits and group from the
     * config, every shape and dtype checked (quant/quant.h: mx_quant_bind). */
    int (*bind)(mx_ckpt *ck, const char *module, int rows, int cols, int bits, int group, mx_weight *w);
    size_t (*bytes)(const mx_weight *w);                 /* what one full read costs */
    void (*row)(const mx_weight *w, int r, float *out);  /* row r as f32, exactly */
    /* rows [r0, r0+n) as a view (its prepared part shared or made alike) */
    int (*slice)(const mx_weight *w, int r0, int n, mx_weight *out);
    /* y[t][r] = sum_c x[t][c] * W[r][c] (kernels.h: mx_matmul) */
    void (*matmul)(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp);
    /* The same for count (2..4) weights reading the same x, w[0] of this
     * format, in fewer passes over the pool; false, having done nothing,
     * where it cannot serve them all (they then run one by one). */
    bool (*matmul_multi)(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy,
                         const mx_kpolicy *kp);
    /* At load: what the kernels kp picks need (a repacked copy in w->prep);
     * MX_OK and nothing where they need nothing. */
    int (*prepare)(mx_weight *w, const mx_kpolicy *kp);
    void (*release)(mx_weight *w); /* frees w->prep */
} mx_wformat;

void mx_wformat_register(mx_wfmt f, const mx_wformat *rec);
/* f's record; a format nobody registered gets one that binds nothing and
 * multiplies to zeros. */
const mx_wformat *mx_wformat_of(mx_wfmt f);
/* The record whose mode is `mode`, or NULL. */
const mx_wformat *mx_wformat_by_mode(const char *mode);
/* The registered modes, ", "-separated, for error messages. */
void mx_wformat_modes(char *buf, size_t n);
/* In a format's own file: MX_WFORMAT(id, MX_W_..., .name = ..., ...). */
#define MX_WFORMAT(id, fmt, ...)                                                   \
    static const mx_wformat mx_wformat_##id = {__VA_ARGS__};                       \
    __attribute__((constructor)) static void mx_wformat_register_##id(void) { mx_wformat_register(fmt, &mx_wformat_##id); }

const char *mx_wfmt_name(mx_wfmt f);
void mx_weight_free(mx_weight *w);
/* Bytes the weight occupies (what one full read costs). */
size_t mx_weight_bytes(const mx_weight *w);
/* Dequantizes/converts row r into out[cols] (embedding lookup, tests). */
void mx_weight_row(const mx_weight *w, int r, float *out);
/* Prepares w for the kernels kp picks (at load; kp NULL: nothing). */
int mx_weight_prepare(mx_weight *w, const mx_kpolicy *kp);
/* A view of rows [r0, r0+n) of w (any format; FP8 block-scaled: r0 on a
 * 128-row block), prepared as w is. It owns no storage of w's: free it with
 * mx_weight_free (for what it prepared itself) before w. */
int mx_weight_slice_rows(const mx_weight *w, int r0, int n, mx_weight *out);
/* Columns [c0, c0+n) of w as a weight of its own (a copy it owns, not
 * prepared): float formats, and MLX-packed ones with c0 and n on w's groups
 * (a tensor-parallel part of an o or down projection). */
int mx_weight_copy_cols(const mx_weight *w, int c0, int n, mx_weight *out);
/* The rows of ranges[0..n_ranges) of w, in that order, as a weight of its own
 * (a copy it owns, not prepared): float and MLX-packed formats (a
 * tensor-parallel part of a fused [gate | up] projection). */
int mx_weight_copy_rows(const mx_weight *w, const int (*ranges)[2], int n_ranges, mx_weight *out);
/* For the records' slice: out = w's fields with rows [r0, r0+n) of data,
 * owning and prepared nothing (the format then moves its scales). */
void mx_weight_view_rows(const mx_weight *w, int r0, int n, mx_weight *out);

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
/* The huge-page arena that weights repacked at load live in (arena.c;
 * *chunk: what mx_arena_free releases). Thread-safe. */
uint8_t *mx_arena_alloc(size_t n, void **chunk);
void mx_arena_free(void *chunk);
#endif
