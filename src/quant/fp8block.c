/* HF fine-grained FP8 ("quant_method": "fp8", DeepSeek-V3 and others): E4M3
 * bytes [rows, cols] used in place, with one f32 scale (weight_scale_inv)
 * per block of 128 x 128 (the last blocks may be partial). w = e4m3(code) *
 * scale. Kept as it is: requantizing to mxfp8 would be lossy (power-of-two
 * scales, docs/quant.md). */
#include "quant_impl.h"
#include "../base/base.h"
#include <stdlib.h>

static int fp8b_bind(mx_ckpt *ck, const char *module, int rows, int cols, int bits, int group, mx_weight *w) {
    (void)bits; (void)group; /* fixed by weight_block_size, checked below */
    const char *cfg = ck->config_path ? ck->config_path : ck->dir;
    json_t *qc = ck->config ? json_object_get(ck->config, "quantization_config") : NULL;
    if (!json_is_object(qc))
        return mx_set_err("%s: module %s: FP8 weights but config.json has no quantization_config", cfg, module);
    json_t *m = json_object_get(qc, "quant_method");
    if (!json_is_string(m) || strcmp(json_string_value(m), "fp8"))
        return mx_set_err("%s: module %s: FP8 weights with quantization_config.quant_method %s%s%s: only HF fine-grained "
                          "\"fp8\" (128x128 blocks, weight_scale_inv) is supported", cfg, module,
                          json_is_string(m) ? "'" : "", json_is_string(m) ? json_string_value(m) : "(missing)", json_is_string(m) ? "'" : "");
    json_t *fmt = json_object_get(qc, "fmt");
    if (fmt && !json_is_null(fmt) && (!json_is_string(fmt) || strcmp(json_string_value(fmt), "e4m3")))
        return mx_set_err("%s: module %s: FP8 fmt %s is not supported (only e4m3)", cfg, module,
                          json_is_string(fmt) ? json_string_value(fmt) : "(not a string)");
    json_t *as = json_object_get(qc, "activation_scheme");
    if (as && json_is_string(as) && strcmp(json_string_value(as), "dynamic"))
        return mx_set_err("%s: module %s: FP8 activation_scheme '%s' is not supported (only dynamic)", cfg, module, json_string_value(as));
    json_t *bs = json_object_get(qc, "weight_block_size");
    if (!json_is_array(bs) || json_array_size(bs) != 2 || !json_is_integer(json_array_get(bs, 0)) ||
        !json_is_integer(json_array_get(bs, 1)))
        return mx_set_err("%s: module %s: FP8 quantization_config.weight_block_size must be [128, 128] (per-tensor or "
                          "per-channel FP8 is not supported)", cfg, module);
    if (json_integer_value(json_array_get(bs, 0)) != 128 || json_integer_value(json_array_get(bs, 1)) != 128)
        return mx_set_err("%s: module %s: FP8 weight_block_size [%lld, %lld] is not supported (only [128, 128])", cfg, module,
                          (long long)json_integer_value(json_array_get(bs, 0)), (long long)json_integer_value(json_array_get(bs, 1)));
    char *sn = mx_asprintf("%s.weight_scale_inv", module), *ps = mx_asprintf("%s.weight_scale", module);
    if (!sn || !ps) { free(sn); free(ps); return MX_ERR; }
    bool has_inv = mx_ckpt_find(ck, sn) != NULL, has_ws = mx_ckpt_find(ck, ps) != NULL;
    free(sn);
    free(ps);
    if (!has_inv && has_ws)
        return mx_set_err("%s: module %s: FP8 layout with '%s.weight_scale' (per-tensor/per-channel, compressed-tensors or "
                          "FBGEMM style) is not supported; only weight_scale_inv per 128x128 block", ck->dir, module, module);
    mx_tensor *tw = mxq_need(ck, module, "weight", 1u << MX_DT_F8_E4M3, rows, cols, "FP8 E4M3 weight");
    if (!tw) return MX_ERR;
    int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
    mx_tensor *ts = mxq_need(ck, module, "weight_scale_inv", 1u << MX_DT_F32, br, bc, "F32 scale per 128x128 block");
    if (!ts) return MX_ERR;
    w->fmt = MX_W_FP8B;
    w->rows = rows;
    w->cols = cols;
    w->bits = 8;
    w->group = 128;
    w->data = tw->data;
    w->row_bytes = (size_t)cols;
    w->scales = ts->data;
    w->scale_dtype = MX_DT_F32;
    return MX_OK;
}

static size_t fp8b_bytes(const mx_weight *w) {
    return (size_t)w->rows * w->row_bytes + (size_t)((w->rows + 127) / 128) * (size_t)mxq_ngroups(w) * 4;
}

static int fp8b_slice(const mx_weight *w, int r0, int n, mx_weight *out) {
    if (r0 % 128) return mx_set_err("row slice at %d of an FP8 block-scaled weight is not on a 128-row block", r0);
    mx_weight_view_rows(w, r0, n, out);
    out->scales = w->scales + (size_t)(r0 / 128) * (size_t)mxq_ngroups(w) * 4;
    mxq_slice_prep(w, r0, out);
    return MX_OK;
}

MX_WFORMAT(fp8b, MX_W_FP8B, .name = "fp8-block", .mode = "fp8", .bind = fp8b_bind, .bytes = fp8b_bytes, .row = mxq_row, .slice = fp8b_slice,
           .matmul = mxq_matmul, .matmul_multi = mxq_matmul_multi, .prepare = mxq_prepare, .release = mxq_release)
