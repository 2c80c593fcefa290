/* The format table and what every weight does through it: free, bytes,
 * rows, prepare, slices and the products (mx_matmul). */
#include "kernels.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

static void none_row(const mx_weight *w, int r, float *out) {
    (void)r;
    memset(out, 0, (size_t)w->cols * sizeof(float));
}
static void none_matmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp) {
    (void)x; (void)ldx; (void)kp;
    for (int t = 0; t < n; t++) memset(y + (size_t)t * ldy, 0, (size_t)w->rows * sizeof(float));
}
static const mx_wformat g_none = {.name = "none", .row = none_row, .matmul = none_matmul};
static const mx_wformat *g_formats[MX_W_COUNT];

void mx_wformat_register(mx_wfmt f, const mx_wformat *rec) {
    if (f > MX_W_NONE && f < MX_W_COUNT) g_formats[f] = rec;
}

const mx_wformat *mx_wformat_of(mx_wfmt f) {
    const mx_wformat *r = (unsigned)f < MX_W_COUNT ? g_formats[f] : NULL;
    return r ? r : &g_none;
}

const mx_wformat *mx_wformat_by_mode(const char *mode) {
    for (int f = 1; f < MX_W_COUNT; f++)
        if (g_formats[f] && g_formats[f]->mode && !strcmp(g_formats[f]->mode, mode)) return g_formats[f];
    return NULL;
}

void mx_wformat_modes(char *buf, size_t n) {
    size_t o = 0;
    if (n) buf[0] = 0;
    for (int f = 1; f < MX_W_COUNT && o < n; f++)
        if (g_formats[f] && g_formats[f]->mode) o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", g_formats[f]->mode);
}

const char *mx_wfmt_name(mx_wfmt f) { return mx_wformat_of(f)->name; }

void mx_weight_free(mx_weight *w) {
    if (!w) return;
    free(w->owned);
    const mx_wformat *f = mx_wformat_of(w->fmt);
    if (w->prep && f->release) f->release(w);
    memset(w, 0, sizeof *w);
}

size_t mx_weight_bytes(const mx_weight *w) {
    const mx_wformat *f = mx_wformat_of(w->fmt);
    return f->bytes ? f->bytes(w) : 0;
}

void mx_weight_row(const mx_weight *w, int r, float *out) { mx_wformat_of(w->fmt)->row(w, r, out); }

int mx_weight_prepare(mx_weight *w, const mx_kpolicy *kp) {
    const mx_wformat *f = mx_wformat_of(w->fmt);
    return kp && f->prepare ? f->prepare(w, kp) : MX_OK;
}

int mx_weight_slice_rows(const mx_weight *w, int r0, int n, mx_weight *out) {
    if (r0 < 0 || n < 1 || r0 + n > w->rows) return mx_set_err("row slice [%d, %d) outside a weight of %d rows", r0, r0 + n, w->rows);
    const mx_wformat *f = mx_wformat_of(w->fmt);
    if (f->slice) return f->slice(w, r0, n, out);
    mx_weight_view_rows(w, r0, n, out); /* a format without slice (none) */
    return MX_OK;
}

int mx_weight_copy_cols(const mx_weight *w, int c0, int n, mx_weight *out) {
    memset(out, 0, sizeof *out);
    if (c0 < 0 || n < 1 || c0 + n > w->cols) return mx_set_err("column slice [%d, %d) outside a weight of %d columns", c0, c0 + n, w->cols);
    bool fl = w->fmt == MX_W_F32 || w->fmt == MX_W_F16 || w->fmt == MX_W_BF16;
    bool mlx = w->fmt == MX_W_AFFINE || w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4 || w->fmt == MX_W_MXFP8;
    if (!fl && !mlx) return mx_set_err("a %s weight cannot be split by columns", mx_wfmt_name(w->fmt));
    size_t es = fl ? w->row_bytes / (size_t)w->cols : 0; /* float: bytes per element */
    if (mlx && (c0 % w->group || n % w->group || (size_t)c0 * w->bits % 32 || (size_t)n * w->bits % 32))
        return mx_set_err("columns [%d, %d) of a %s weight do not fall on its groups of %d", c0, c0 + n, mx_wfmt_name(w->fmt), w->group);
    size_t rb = fl ? (size_t)n * es : (size_t)n * w->bits / 8, off = fl ? (size_t)c0 * es : (size_t)c0 * w->bits / 8;
    size_t ng = mlx ? (size_t)(w->cols / w->group) : 0, nng = mlx ? (size_t)(n / w->group) : 0, g0 = mlx ? (size_t)(c0 / w->group) : 0;
    size_t ss = mlx ? mx_dtype_size(w->scale_dtype) : 0, sbytes = (size_t)w->rows * nng * ss;
    size_t total = (size_t)w->rows * rb + (w->scales ? sbytes : 0) + (w->biases ? sbytes : 0);
    uint8_t *buf = mx_malloc(total ? total : 1); /* freed by mx_weight_free */
    if (!buf) return MX_ERR;
    *out = *w;
    out->prep = NULL;
    out->cols = n;
    out->row_bytes = rb;
    out->data = buf;
    for (int r = 0; r < w->rows; r++) memcpy(buf + (size_t)r * rb, w->data + (size_t)r * w->row_bytes + off, rb);
    uint8_t *p = buf + (size_t)w->rows * rb;
    const uint8_t *src[2] = {w->scales, w->biases};
    const uint8_t **dst[2] = {&out->scales, &out->biases};
    for (int k = 0; k < 2; k++) {
        if (!src[k]) continue;
        *dst[k] = p;
        for (int r = 0; r < w->rows; r++) memcpy(p + (size_t)r * nng * ss, src[k] + ((size_t)r * ng + g0) * ss, nng * ss);
        p += sbytes;
    }
    out->owned = buf;
    return MX_OK;
}

int mx_weight_copy_rows(const mx_weight *w, const int (*ranges)[2], int n_ranges, mx_weight *out) {
    memset(out, 0, sizeof *out);
    bool fl = w->fmt == MX_W_F32 || w->fmt == MX_W_F16 || w->fmt == MX_W_BF16;
    bool mlx = w->fmt == MX_W_AFFINE || w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4 || w->fmt == MX_W_MXFP8;
    if (!fl && !mlx) return mx_set_err("rows of a %s weight cannot be gathered", mx_wfmt_name(w->fmt));
    int rows = 0;
    for (int i = 0; i < n_ranges; i++) {
        if (ranges[i][0] < 0 || ranges[i][1] < ranges[i][0] || ranges[i][1] > w->rows)
            return mx_set_err("row range [%d, %d) outside a weight of %d rows", ranges[i][0], ranges[i][1], w->rows);
        rows += ranges[i][1] - ranges[i][0];
    }
    if (rows < 1) return mx_set_err("no rows to gather");
    size_t sr = mlx ? (size_t)(w->cols / w->group) * mx_dtype_size(w->scale_dtype) : 0; /* scale bytes per row */
    size_t total = (size_t)rows * (w->row_bytes + (w->scales ? sr : 0) + (w->biases ? sr : 0));
    uint8_t *buf = mx_malloc(total ? total : 1); /* freed by mx_weight_free */
    if (!buf) return MX_ERR;
    *out = *w;
    out->prep = NULL;
    out->rows = rows;
    out->data = buf;
    uint8_t *d = buf, *sc = buf + (size_t)rows * w->row_bytes, *bi = sc + (w->scales ? (size_t)rows * sr : 0);
    out->scales = w->scales ? sc : NULL;
    out->biases = w->biases ? bi : NULL;
    for (int i = 0; i < n_ranges; i++) {
        size_t r0 = (size_t)ranges[i][0], n = (size_t)(ranges[i][1] - ranges[i][0]);
        memcpy(d, w->data + r0 * w->row_bytes, n * w->row_bytes);
        d += n * w->row_bytes;
        if (w->scales) { memcpy(sc, w->scales + r0 * sr, n * sr); sc += n * sr; }
        if (w->biases) { memcpy(bi, w->biases + r0 * sr, n * sr); bi += n * sr; }
    }
    out->owned = buf;
    return MX_OK;
}

void mx_weight_view_rows(const mx_weight *w, int r0, int n, mx_weight *out) {
    *out = *w;
    out->owned = out->prep = NULL;
    out->rows = n;
    if (out->data) out->data = w->data + (size_t)r0 * w->row_bytes;
}

void mx_matmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp) {
    if (n <= 0) return;
    mx_kpolicy def;
    if (!kp) {
        def = mx_kpolicy_default();
        kp = &def;
    }
    mx_wformat_of(w->fmt)->matmul(w, x, n, ldx, y, ldy, kp);
}

void mx_matmul_multi(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy, const mx_kpolicy *kp) {
    mx_kpolicy def;
    if (!kp) {
        def = mx_kpolicy_default();
        kp = &def;
    }
    const mx_wformat *f = count > 0 ? mx_wformat_of(w[0]->fmt) : NULL;
    if (f && f->matmul_multi && count >= 2 && n > 0 && f->matmul_multi(count, w, x, n, ldx, y, ldy, kp)) return;
    for (int i = 0; i < count; i++) mx_matmul(w[i], x, n, ldx, y[i], ldy, kp);
}

void mx_matmul_ref(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy) {
    float *row = malloc((size_t)w->cols * sizeof(float));
    if (!row) return;
    for (int r = 0; r < w->rows; r++) {
        mx_weight_row(w, r, row);
        for (int t = 0; t < n; t++) {
            double s = 0;
            for (int c = 0; c < w->cols; c++) s += (double)row[c] * x[(size_t)t * ldx + c];
            y[(size_t)t * ldy + r] = (float)s;
        }
    }
    free(row);
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
