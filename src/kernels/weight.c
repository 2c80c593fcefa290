#include "weight.h"
#include "../base/base.h"
#include "../base/half.h"
#include "../base/threadpool.h"
#include "../quant/quant.h"
#include <stdlib.h>
#include <string.h>

const char *mx_wfmt_name(mx_wfmt f) {
    switch (f) {
    case MX_W_F32: return "f32";
    case MX_W_F16: return "f16";
    case MX_W_BF16: return "bf16";
    case MX_W_AFFINE: return "affine";
    case MX_W_MXFP4: return "mxfp4";
    case MX_W_NVFP4: return "nvfp4";
    case MX_W_MXFP8: return "mxfp8";
    case MX_W_FP8B: return "fp8-block";
    default: return "none";
    }
}

void mx_weight_free(mx_weight *w) {
    if (!w) return;
    free(w->owned);
    mxq_ril_free(w->ril);
    memset(w, 0, sizeof *w);
}

size_t mx_weight_bytes(const mx_weight *w) {
    switch (w->fmt) {
    case MX_W_NONE: return 0;
    case MX_W_F32: case MX_W_F16: case MX_W_BF16: return (size_t)w->rows * w->row_bytes;
    default: return mx_qbytes(w);
    }
}

void mx_weight_row(const mx_weight *w, int r, float *out) {
    const uint8_t *p = w->data + (size_t)r * w->row_bytes;
    switch (w->fmt) {
    case MX_W_F32: memcpy(out, p, (size_t)w->cols * 4); break;
    case MX_W_F16:
        for (int c = 0; c < w->cols; c++) { uint16_t h; memcpy(&h, p + 2 * c, 2); out[c] = mx_f16_to_f32(h); }
        break;
    case MX_W_BF16:
        for (int c = 0; c < w->cols; c++) { uint16_t h; memcpy(&h, p + 2 * c, 2); out[c] = mx_bf16_to_f32(h); }
        break;
    case MX_W_NONE: memset(out, 0, (size_t)w->cols * 4); break;
    default: mx_qrow(w, r, out);
    }
}

mx_rowsplit mx_rowsplit_make(const mx_weight *w, int want, int unit, int lanes, int streams) {
    mx_rowsplit s = {w->rows, unit, 1, 1, 1, 1, (w->rows + unit - 1) / unit};
    if (s.units == 0) return s;
    lanes = MX_MAX(1, MX_MIN(MX_MIN(lanes, MX_POOL_LANES), s.units));
    streams = MX_MAX(1, MX_MIN(streams, 2));
    if (lanes == 1 && streams == 1) { /* prefill: equal tasks */
        int tasks = MX_MAX(1, MX_MIN(s.units, want));
        s.chunk = (s.units + tasks - 1) / tasks;
        s.per_lane = (s.units + s.chunk - 1) / s.chunk;
        return s;
    }
    s.lanes = lanes;
    s.streams = streams;
    /* units per stream chunk: a task of `streams` chunks reads <= 256 KiB */
    size_t per_unit = MX_MAX((size_t)1, mx_weight_bytes(w) / (size_t)s.units);
    s.chunk = (int)MX_MAX((size_t)1, ((size_t)256 << 10) / (per_unit * (size_t)streams));
    int lane_max = (s.units + lanes - 1) / lanes, part_max = (lane_max + streams - 1) / streams;
    s.per_lane = (part_max + s.chunk - 1) / s.chunk;
    return s;
}
