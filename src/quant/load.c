/* Loading weights: mlx-lm's float-vs-quantized rule per module, float
 * tensors as views (or transposed copies), expert-stacked modules; each
 * weight prepared for the caller's policy. */
#include "quant.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

/* Decides how `module` is stored per mlx-lm's load rule. *quantized=false for
 * float; otherwise mode/bits/group are filled. */
static int module_quant_spec(mx_ckpt *ck, const char *module, bool *quantized, const char **mode, int *bits, int *group) {
    *quantized = false;
    json_t *q = ck->config ? json_object_get(ck->config, "quantization") : NULL;
    if (q && !json_is_object(q)) return mx_set_err("%s: quantization: expected an object", ck->config_path);
    json_t *entry = q ? json_object_get(q, module) : NULL;
    char *sname = mx_asprintf("%s.scales", module);
    if (!sname) return MX_ERR;
    bool has_scales = mx_ckpt_find(ck, sname) != NULL;
    free(sname);
    if (entry && json_is_false(entry)) return MX_OK;
    json_t *src = NULL;
    if (entry) {
        if (!json_is_object(entry)) return mx_set_err("%s: quantization.%s: expected an object or false", ck->config_path, module);
        src = entry;
    } else if (has_scales) {
        if (!q) return mx_set_err("%s: tensor %s.scales exists but config.json has no quantization block", ck->dir, module);
        src = q;
    } else return MX_OK;
    json_t *jm = json_object_get(src, "mode"), *jb = json_object_get(src, "bits"), *jg = json_object_get(src, "group_size");
    /* A per-module dict without "mode" means affine (mlx-lm passes it as
     * keyword arguments to QuantizedLinear), as does a top level without it. */
    if (jm && !json_is_string(jm)) return mx_set_err("%s: quantization mode for %s: expected a string", ck->config_path, module);
    *mode = jm ? json_string_value(jm) : "affine";
    if (!json_is_integer(jb) || !json_is_integer(jg))
        return mx_set_err("%s: quantization for %s: bits and group_size must be integers", ck->config_path, module);
    int64_t b = json_integer_value(jb), g = json_integer_value(jg);
    if (b < 1 || b > 8) return mx_set_err("%s: quantization for %s: bits %lld not in 1..8", ck->config_path, module, (long long)b);
    if (g < 1 || g > 4096) return mx_set_err("%s: quantization for %s: group_size %lld is invalid", ck->config_path, module, (long long)g);
    *bits = (int)b;
    *group = (int)g;
    *quantized = true;
    return MX_OK;
}

static int load_float(mx_ckpt *ck, const char *name, const mx_tensor *t, int rows, int cols, unsigned flags, mx_weight *w) {
    int64_t er = (flags & MX_LOAD_TRANSPOSED) ? cols : rows, ec = (flags & MX_LOAD_TRANSPOSED) ? rows : cols;
    if (t->ndim != 2 || t->shape[0] != er || t->shape[1] != ec)
        return mx_set_err("%s: tensor '%s' has shape [%lld%s%lld], expected [%lld, %lld]", ck->dir, name,
                          (long long)(t->ndim ? t->shape[0] : -1), t->ndim == 2 ? ", " : " ... ",
                          (long long)(t->ndim > 1 ? t->shape[1] : -1), (long long)er, (long long)ec);
    switch (t->dtype) {
    case MX_DT_F32: w->fmt = MX_W_F32; break;
    case MX_DT_F16: w->fmt = MX_W_F16; break;
    case MX_DT_BF16: w->fmt = MX_W_BF16; break;
    default: return mx_set_err("%s: tensor '%s' has dtype %s, expected F32, F16 or BF16", ck->dir, name, mx_dtype_name(t->dtype));
    }
    w->rows = rows;
    w->cols = cols;
    size_t es = mx_dtype_size(t->dtype);
    if (flags & MX_LOAD_TRANSPOSED) {
        /* Conv1D [in, out]: a transposed f32 copy, once at load. */
        float *tmp = mx_malloc(t->nbytes / es * sizeof(float)), *dst = mx_malloc((size_t)rows * cols * sizeof(float));
        if (!tmp || !dst || mx_tensor_to_f32(t, tmp)) { free(tmp); free(dst); return MX_ERR; }
        for (int c = 0; c < cols; c++)
            for (int r = 0; r < rows; r++) dst[(size_t)r * cols + c] = tmp[(size_t)c * rows + r];
        free(tmp);
        w->fmt = MX_W_F32;
        w->owned = dst;
        w->data = (const uint8_t *)dst;
        w->row_bytes = (size_t)cols * sizeof(float);
        return MX_OK;
    }
    w->data = t->data;
    w->row_bytes = (size_t)cols * es;
    return MX_OK;
}

static int bind_weight(mx_ckpt *ck, const char *module, int rows, int cols, unsigned flags, mx_weight *w) {
    memset(w, 0, sizeof *w);
    bool quantized;
    const char *mode = NULL;
    int bits = 0, group = 0;
    if (module_quant_spec(ck, module, &quantized, &mode, &bits, &group)) return MX_ERR;
    char *name = mx_asprintf("%s.weight", module);
    if (!name) return MX_ERR;
    int rc;
    if (quantized) {
        free(name);
        return mx_quant_bind(ck, module, rows, cols, mode, bits, group, w);
    }
    mx_tensor *t = mx_ckpt_take(ck, name);
    if (!t) {
        char *fp8 = mx_asprintf("%s.weight_scale_inv", module);
        bool is_fp8 = fp8 && mx_ckpt_find(ck, fp8);
        free(fp8);
        if (is_fp8) { free(name); return mx_quant_bind(ck, module, rows, cols, "fp8", 8, 128, w); }
        rc = (flags & MX_LOAD_OPTIONAL) ? MX_OK : mx_set_err("%s: missing tensor '%s'", ck->dir, name);
        free(name);
        return rc;
    }
    if (t->dtype == MX_DT_F8_E4M3) {
        t->used = false; /* the fp8 binder takes it */
        free(name);
        return mx_quant_bind(ck, module, rows, cols, "fp8", 8, 128, w);
    }
    rc = load_float(ck, name, t, rows, cols, flags, w);
    free(name);
    return rc;
}

int mx_load_weight(mx_ckpt *ck, const char *module, int rows, int cols, unsigned flags, const mx_kpolicy *kp, mx_weight *w) {
    int rc = bind_weight(ck, module, rows, cols, flags, w);
    if (!rc) rc = mx_weight_prepare(w, kp);
    return rc;
}

/* ---- expert-stacked modules (MoE experts, MLA per-head slices) ---- */

/* [E, a, b] -> [E*a, b] in the checkpoint's tensor table, so the 2-D binders
 * accept an expert-stacked tensor (the data is contiguous either way). */
static void flatten3(mx_ckpt *ck, const char *module, const char *suffix) {
    char *nm = mx_asprintf("%s.%s", module, suffix);
    mx_tensor *t = nm ? mx_ckpt_find(ck, nm) : NULL;
    free(nm);
    if (t && t->ndim == 3) {
        t->shape[0] *= t->shape[1];
        t->shape[1] = t->shape[2];
        t->ndim = 2;
    }
}

static int stacked_float_transposed(mx_ckpt *ck, mx_tensor *t, int E, int rows, int cols, mx_weight *whole) {
    bool ok3 = t->ndim == 3 && t->shape[0] == E && t->shape[1] == cols && t->shape[2] == rows;
    bool ok2 = t->ndim == 2 && t->shape[0] == (int64_t)E * cols && t->shape[1] == rows;
    if (!ok3 && !ok2)
        return mx_set_err("%s: tensor '%s' has %d dims, expected [%d, %d, %d] (experts stored [in, out])", ck->dir, t->name, t->ndim, E, cols, rows);
    if (t->dtype != MX_DT_F32 && t->dtype != MX_DT_F16 && t->dtype != MX_DT_BF16)
        return mx_set_err("%s: tensor '%s' has dtype %s; experts stored [in, out] must be F32, F16 or BF16", ck->dir, t->name, mx_dtype_name(t->dtype));
    size_t per = (size_t)rows * cols;
    float *tmp = mx_malloc(per * E * sizeof(float)), *dst = mx_malloc(per * E * sizeof(float));
    if (!tmp || !dst || mx_tensor_to_f32(t, tmp)) { free(tmp); free(dst); return MX_ERR; }
    for (int e = 0; e < E; e++)
        for (int c = 0; c < cols; c++)
            for (int r = 0; r < rows; r++) dst[e * per + (size_t)r * cols + c] = tmp[e * per + (size_t)c * rows + r];
    free(tmp);
    t->used = true;
    whole->fmt = MX_W_F32;
    whole->rows = E * rows;
    whole->cols = cols;
    whole->owned = dst;
    whole->data = (const uint8_t *)dst;
    whole->row_bytes = (size_t)cols * sizeof(float);
    return MX_OK;
}

int mx_load_weight_stacked(mx_ckpt *ck, const char *module, int E, int rows, int cols, unsigned flags, const mx_kpolicy *kp,
                           mx_weight *whole, mx_weight *out) {
    memset(whole, 0, sizeof *whole);
    if (E < 1 || (int64_t)E * rows > INT32_MAX) return mx_set_err("%s: module %s: %d experts of %d rows is out of range", ck->dir, module, E, rows);
    char *wn = mx_asprintf("%s.weight", module);
    if (!wn) return MX_ERR;
    mx_tensor *tw = mx_ckpt_find(ck, wn), *bare = tw ? NULL : mx_ckpt_find(ck, module);
    free(wn);
    int rc;
    char *bn = mx_asprintf("%s_blocks", module), *sn = mx_asprintf("%s_scales", module);
    mx_tensor *tb = bn && !tw && !bare ? mx_ckpt_find(ck, bn) : NULL, *ts = sn && tb ? mx_ckpt_find(ck, sn) : NULL;
    free(bn);
    free(sn);
    if (tb && ts) {
        /* HF MXFP4 (GPT-OSS's released checkpoints): module_blocks U8 [E, rows, cols/32, 16]
         * and module_scales U8 [E, rows, cols/32] (E8M0), always [out, in] */
        if (cols % 32 || tb->dtype != MX_DT_U8 || ts->dtype != MX_DT_U8 || tb->ndim != 4 || ts->ndim != 3 || tb->shape[0] != E ||
            tb->shape[1] != rows || tb->shape[2] != cols / 32 || tb->shape[3] != 16 || ts->shape[0] != E || ts->shape[1] != rows ||
            ts->shape[2] != cols / 32)
            return mx_set_err("%s: module %s: MXFP4 blocks/scales are not U8 [%d, %d, %d, 16] / [%d, %d, %d]", ck->dir, module, E, rows,
                              cols / 32, E, rows, cols / 32);
        tb->used = ts->used = true;
        *whole = (mx_weight){.fmt = MX_W_MXFP4, .rows = E * rows, .cols = cols, .bits = 4, .group = 32, .data = tb->data,
                             .row_bytes = (size_t)cols / 2, .scales = ts->data, .scale_dtype = MX_DT_U8};
        rc = MX_OK;
    } else if (flags & MX_LOAD_TRANSPOSED) {
        mx_tensor *t = tw ? tw : bare;
        if (!t) return (flags & MX_LOAD_OPTIONAL) ? MX_OK : mx_set_err("%s: missing tensor '%s.weight' (or '%s')", ck->dir, module, module);
        rc = stacked_float_transposed(ck, t, E, rows, cols, whole);
    } else if (tw || !bare) {
        flatten3(ck, module, "weight");
        flatten3(ck, module, "scales");
        flatten3(ck, module, "biases");
        rc = bind_weight(ck, module, E * rows, cols, flags & MX_LOAD_OPTIONAL, whole);
    } else {
        /* a bare float tensor (DBRX's experts.mlp.w1, GPT-OSS's experts.down_proj) */
        bool ok = (bare->ndim == 3 && bare->shape[0] == E && bare->shape[1] == rows && bare->shape[2] == cols) ||
                  (bare->ndim == 2 && bare->shape[0] == (int64_t)E * rows && bare->shape[1] == cols);
        if (!ok) return mx_set_err("%s: tensor '%s' has %d dims, expected [%d, %d, %d]", ck->dir, module, bare->ndim, E, rows, cols);
        if (bare->dtype != MX_DT_F32 && bare->dtype != MX_DT_F16 && bare->dtype != MX_DT_BF16)
            return mx_set_err("%s: tensor '%s' has dtype %s, expected F32, F16 or BF16", ck->dir, module, mx_dtype_name(bare->dtype));
        bare->used = true;
        whole->fmt = bare->dtype == MX_DT_F32 ? MX_W_F32 : bare->dtype == MX_DT_F16 ? MX_W_F16 : MX_W_BF16;
        whole->rows = E * rows;
        whole->cols = cols;
        whole->data = bare->data;
        whole->row_bytes = (size_t)cols * mx_dtype_size(bare->dtype);
        rc = MX_OK;
    }
    if (rc || !whole->fmt) return rc;
    /* the experts are used, never the whole: prepared as one where they
     * can share its copy (whole blocks of 16 rows each), else one by one */
    bool share = rows % 16 == 0;
    if (share && mx_weight_prepare(whole, kp)) return MX_ERR;
    for (int e = 0; e < E; e++)
        if (mx_weight_slice_rows(whole, e * rows, rows, &out[e]) || (!share && mx_weight_prepare(&out[e], kp))) {
            for (int i = 0; i <= e; i++) mx_weight_free(&out[i]);
            return mx_err_prefix("%s: module %s", ck->dir, module);
        }
    return MX_OK;
}
