/* What the quantized formats' records share: binding by mode through the
 * format table, the MLX layout (binding as weight views over the mmap'd
 * checkpoint, with every shape, dtype and config value checked; bytes; row
 * slices; rows). */
#include "quant_impl.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

const char *mxq_tfile(const mx_ckpt *ck, const mx_tensor *t) {
    return t->file_index >= 0 && t->file_index < ck->n_files ? ck->files[t->file_index].path : ck->dir;
}

static void shape_str(const mx_tensor *t, char *buf, size_t n) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "[");
    for (int d = 0; d < t->ndim && o < n; d++) o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* Requires tensor `module.suffix` with the given dtype set (mask of 1<<dtype)
 * and 2-D shape [d0, d1]. */
mx_tensor *mxq_need(mx_ckpt *ck, const char *module, const char *suffix, unsigned dtypes, int64_t d0, int64_t d1, const char *what) {
    char *name = mx_asprintf("%s.%s", module, suffix);
    if (!name) return NULL;
    mx_tensor *t = mx_ckpt_take(ck, name);
    if (!t) {
        mx_set_err("%s: module %s: missing tensor '%s' (%s)", ck->dir, module, name, what);
        free(name);
        return NULL;
    }
    if (!(dtypes & (1u << t->dtype))) {
        char ok[96] = "";
        size_t o = 0;
        for (int i = 0; i < MX_DT_COUNT; i++)
            if (dtypes & (1u << i)) o += (size_t)snprintf(ok + o, sizeof ok - o, "%s%s", o ? "/" : "", mx_dtype_name((mx_dtype)i));
        mx_set_err("%s: module %s: tensor '%s' has dtype %s, expected %s (%s)", mxq_tfile(ck, t), module, name, mx_dtype_name(t->dtype), ok, what);
        free(name);
        return NULL;
    }
    if (t->ndim != 2 || t->shape[0] != d0 || t->shape[1] != d1) {
        char sh[128];
        shape_str(t, sh, sizeof sh);
        mx_set_err("%s: module %s: tensor '%s' has shape %s, expected [%lld, %lld] (%s)", mxq_tfile(ck, t), module, name, sh,
                   (long long)d0, (long long)d1, what);
        free(name);
        return NULL;
    }
    free(name);
    return t;
}

int mx_quant_bind(mx_ckpt *ck, const char *module, int rows, int cols, const char *mode, int bits, int group, mx_weight *w) {
    memset(w, 0, sizeof *w);
    const char *cfg = ck->config_path ? ck->config_path : ck->dir;
    if (rows <= 0 || cols <= 0) return mx_set_err("%s: module %s: invalid shape [%d, %d]", ck->dir, module, rows, cols);
    if (!mode) mode = "affine";
    const mx_wformat *f = mx_wformat_by_mode(mode);
    if (!f || !f->bind) {
        char modes[128];
        mx_wformat_modes(modes, sizeof modes);
        return mx_set_err("%s: module %s: quantization mode '%s' is not supported (%s)", cfg, module, mode, modes);
    }
    return f->bind(ck, module, rows, cols, bits, group, w);
}

int mxq_bind_fixed(mx_ckpt *ck, const char *module, int rows, int cols, mx_wfmt fmt, const char *mode, int eb, int eg, int bits, int group,
                   mx_weight *w) {
    if (bits != eb || group != eg)
        return mx_set_err("%s: module %s: %s needs bits %d and group_size %d, config has bits %d and group_size %d",
                          ck->config_path ? ck->config_path : ck->dir, module, mode, eb, eg, bits, group);
    return mxq_bind_mlx(ck, module, rows, cols, fmt, mode, bits, group, w);
}

int mxq_bind_mlx(mx_ckpt *ck, const char *module, int rows, int cols, mx_wfmt fmt, const char *mode, int bits, int group, mx_weight *w) {
    const char *cfg = ck->config_path ? ck->config_path : ck->dir;
    if (cols % group)
        return mx_set_err("%s: module %s: group_size %d does not divide the input dimension %d", cfg, module, group, cols);
    if (((int64_t)cols * bits) % 32)
        return mx_set_err("%s: module %s: %d columns of %d bits do not fill whole uint32 words", cfg, module, cols, bits);
    int64_t words = (int64_t)cols * bits / 32, ng = cols / group;
    char what[96];
    snprintf(what, sizeof what, "%s %d-bit, group %d, %d x %d", mode, bits, group, rows, cols);
    mx_tensor *tw = mxq_need(ck, module, "weight", 1u << MX_DT_U32, rows, words, what);
    if (!tw) return MX_ERR;
    mx_tensor *ts, *tb = NULL;
    if (fmt == MX_W_AFFINE) {
        unsigned fl = (1u << MX_DT_F32) | (1u << MX_DT_F16) | (1u << MX_DT_BF16);
        ts = mxq_need(ck, module, "scales", fl, rows, ng, what);
        if (!ts) return MX_ERR;
        tb = mxq_need(ck, module, "biases", fl, rows, ng, what);
        if (!tb) return MX_ERR;
        if (tb->dtype != ts->dtype)
            return mx_set_err("%s: module %s: biases are %s but scales are %s", mxq_tfile(ck, tb), module, mx_dtype_name(tb->dtype), mx_dtype_name(ts->dtype));
    } else {
        ts = mxq_need(ck, module, "scales", 1u << MX_DT_U8, rows, ng, what);
        if (!ts) return MX_ERR;
    }
    w->fmt = fmt;
    w->rows = rows;
    w->cols = cols;
    w->bits = bits;
    w->group = group;
    w->data = tw->data;
    w->row_bytes = (size_t)words * 4;
    w->scales = ts->data;
    w->biases = tb ? tb->data : NULL;
    w->scale_dtype = ts->dtype;
    return MX_OK;
}

void mxq_row(const mx_weight *w, int r, float *out) {
    if (w->prep) mxq_ril_row(w, r, out);
    else mxq_deq(w, r, 0, w->cols, out);
}

size_t mxq_bytes(const mx_weight *w) {
    size_t ng = (size_t)mxq_ngroups(w), sb = (size_t)w->rows * ng * mx_dtype_size(w->scale_dtype);
    return (size_t)w->rows * w->row_bytes + (w->biases ? 2 * sb : sb);
}

int mxq_slice(const mx_weight *w, int r0, int n, mx_weight *out) {
    mx_weight_view_rows(w, r0, n, out);
    size_t off = (size_t)r0 * (size_t)mxq_ngroups(w) * mx_dtype_size(w->scale_dtype);
    out->scales = w->scales + off;
    if (w->biases) out->biases = w->biases + off;
    mxq_slice_prep(w, r0, out);
    return MX_OK;
}
