/* Binding quantized modules (MLX affine / mxfp4 / nvfp4 / mxfp8, HF
 * fine-grained FP8) as weight views over the mmap'd checkpoint, with every
 * shape, dtype and config value checked; plus row dequantization. */
#include "quant_impl.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

const float mxq_e2m1_lut[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static const char *tfile(const mx_ckpt *ck, const mx_tensor *t) {
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
static mx_tensor *need(mx_ckpt *ck, const char *module, const char *suffix, unsigned dtypes, int64_t d0, int64_t d1, const char *what) {
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
        mx_set_err("%s: module %s: tensor '%s' has dtype %s, expected %s (%s)", tfile(ck, t), module, name, mx_dtype_name(t->dtype), ok, what);
        free(name);
        return NULL;
    }
    if (t->ndim != 2 || t->shape[0] != d0 || t->shape[1] != d1) {
        char sh[128];
        shape_str(t, sh, sizeof sh);
        mx_set_err("%s: module %s: tensor '%s' has shape %s, expected [%lld, %lld] (%s)", tfile(ck, t), module, name, sh,
                   (long long)d0, (long long)d1, what);
        free(name);
        return NULL;
    }
    free(name);
    return t;
}

static int bind_fp8(mx_ckpt *ck, const char *module, int rows, int cols, mx_weight *w) {
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
    mx_tensor *tw = need(ck, module, "weight", 1u << MX_DT_F8_E4M3, rows, cols, "FP8 E4M3 weight");
    if (!tw) return MX_ERR;
    int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
    mx_tensor *ts = need(ck, module, "weight_scale_inv", 1u << MX_DT_F32, br, bc, "F32 scale per 128x128 block");
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

int mx_quant_bind(mx_ckpt *ck, const char *module, int rows, int cols, const char *mode, int bits, int group, mx_weight *w) {
    memset(w, 0, sizeof *w);
    const char *cfg = ck->config_path ? ck->config_path : ck->dir;
    if (rows <= 0 || cols <= 0) return mx_set_err("%s: module %s: invalid shape [%d, %d]", ck->dir, module, rows, cols);
    if (!mode) mode = "affine";
    if (!strcmp(mode, "fp8")) return bind_fp8(ck, module, rows, cols, w);
    mx_wfmt fmt;
    if (!strcmp(mode, "affine")) {
        fmt = MX_W_AFFINE;
        if (bits < 1 || bits > 8 || bits == 7)
            return mx_set_err("%s: module %s: affine quantization with %d bits is not supported (1, 2, 3, 4, 5, 6 or 8)", cfg, module, bits);
        if (group != 32 && group != 64 && group != 128)
            return mx_set_err("%s: module %s: affine group_size %d is not supported (32, 64 or 128)", cfg, module, group);
    } else {
        int eb, eg;
        if (!strcmp(mode, "mxfp4")) { fmt = MX_W_MXFP4; eb = 4; eg = 32; }
        else if (!strcmp(mode, "nvfp4")) { fmt = MX_W_NVFP4; eb = 4; eg = 16; }
        else if (!strcmp(mode, "mxfp8")) { fmt = MX_W_MXFP8; eb = 8; eg = 32; }
        else return mx_set_err("%s: module %s: quantization mode '%s' is not supported (affine, mxfp4, nvfp4, mxfp8)", cfg, module, mode);
        if (bits != eb || group != eg)
            return mx_set_err("%s: module %s: %s needs bits %d and group_size %d, config has bits %d and group_size %d", cfg, module, mode, eb, eg, bits, group);
    }
    if (cols % group)
        return mx_set_err("%s: module %s: group_size %d does not divide the input dimension %d", cfg, module, group, cols);
    if (((int64_t)cols * bits) % 32)
        return mx_set_err("%s: module %s: %d columns of %d bits do not fill whole uint32 words", cfg, module, cols, bits);
    int64_t words = (int64_t)cols * bits / 32, ng = cols / group;
    char what[96];
    snprintf(what, sizeof what, "%s %d-bit, group %d, %d x %d", mode, bits, group, rows, cols);
    mx_tensor *tw = need(ck, module, "weight", 1u << MX_DT_U32, rows, words, what);
    if (!tw) return MX_ERR;
    mx_tensor *ts, *tb = NULL;
    if (fmt == MX_W_AFFINE) {
        unsigned fl = (1u << MX_DT_F32) | (1u << MX_DT_F16) | (1u << MX_DT_BF16);
        ts = need(ck, module, "scales", fl, rows, ng, what);
        if (!ts) return MX_ERR;
        tb = need(ck, module, "biases", fl, rows, ng, what);
        if (!tb) return MX_ERR;
        if (tb->dtype != ts->dtype)
            return mx_set_err("%s: module %s: biases are %s but scales are %s", tfile(ck, tb), module, mx_dtype_name(tb->dtype), mx_dtype_name(ts->dtype));
    } else {
        ts = need(ck, module, "scales", 1u << MX_DT_U8, rows, ng, what);
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

/* Affine codes of BITS bits, 8 at a time from BITS bytes (one 64-bit word). */
#define DEQ_AFFINE(BITS)                                                                     \
    static void deq_affine##BITS(const uint8_t *row, int c, int ce, float s, float b, float *out) { \
        for (; c < ce && (c & 7); c++) { float p = s * (float)mxq_bits(row, (size_t)c, BITS); *out++ = p + b; } \
        for (; c + 8 <= ce; c += 8) {                                                          \
            uint64_t u = 0;                                                                    \
            memcpy(&u, row + (size_t)c / 8 * BITS, BITS);                                      \
            for (int i = 0; i < 8; i++) {                                                      \
                float p = s * (float)(unsigned)((u >> (i * BITS)) & ((1u << BITS) - 1));       \
                *out++ = p + b;                                                                \
            }                                                                                  \
        }                                                                                      \
        for (; c < ce; c++) { float p = s * (float)mxq_bits(row, (size_t)c, BITS); *out++ = p + b; } \
    }
DEQ_AFFINE(1)
DEQ_AFFINE(2)
DEQ_AFFINE(3)
DEQ_AFFINE(4)
DEQ_AFFINE(5)
DEQ_AFFINE(6)
DEQ_AFFINE(8)

void mxq_deq(const mx_weight *w, int r, int c0, int len, float *out) {
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    int c = c0, end = c0 + len;
    float sb[2][64];
    int gb = -1, gn = 0; /* scales cached for groups [gb, gb+gn) */
    while (c < end) {
        int g = c / w->group, ge = MX_MIN((g + 1) * w->group, end);
        if (g >= gb + gn || g < gb) {
            gb = g;
            gn = MX_MIN(64, (end - 1) / w->group - g + 1); /* only the groups this call needs */
            mxq_scales(w, r, gb, gn, sb[0], w->fmt == MX_W_AFFINE ? sb[1] : NULL);
        }
        float s = sb[0][g - gb];
        switch (w->fmt) {
        case MX_W_AFFINE: {
            float b = sb[1][g - gb];
            switch (w->bits) {
            case 1: deq_affine1(row, c, ge, s, b, out + c - c0); break;
            case 2: deq_affine2(row, c, ge, s, b, out + c - c0); break;
            case 3: deq_affine3(row, c, ge, s, b, out + c - c0); break;
            case 4: deq_affine4(row, c, ge, s, b, out + c - c0); break;
            case 5: deq_affine5(row, c, ge, s, b, out + c - c0); break;
            case 6: deq_affine6(row, c, ge, s, b, out + c - c0); break;
            case 8: deq_affine8(row, c, ge, s, b, out + c - c0); break;
            default:
                for (int k = c; k < ge; k++) {
                    float p = s * (float)mxq_bits(row, (size_t)k, w->bits); /* rounded product, then rounded sum */
                    out[k - c0] = p + b;
                }
            }
            c = ge;
            break;
        }
        case MX_W_MXFP4: case MX_W_NVFP4:
            for (; c < ge; c++) out[c - c0] = mxq_e2m1_lut[(row[c >> 1] >> ((c & 1) * 4)) & 15] * s;
            break;
        case MX_W_MXFP8: case MX_W_FP8B:
            for (; c < ge; c++) out[c - c0] = mxq_e4m3(row[c]) * s;
            break;
        default:
            for (; c < ge; c++) out[c - c0] = 0;
        }
    }
}

void mx_qrow(const mx_weight *w, int r, float *out) {
    if (__atomic_load_n(&w->ril, __ATOMIC_ACQUIRE)) mxq_ril_row(w, r, out);
    else mxq_deq(w, r, 0, w->cols, out);
}

size_t mx_qbytes(const mx_weight *w) {
    size_t ng = (size_t)mxq_ngroups(w), packed = (size_t)w->rows * w->row_bytes;
    switch (w->fmt) {
    case MX_W_AFFINE: return packed + 2 * (size_t)w->rows * ng * mx_dtype_size(w->scale_dtype);
    case MX_W_MXFP4: case MX_W_NVFP4: case MX_W_MXFP8: return packed + (size_t)w->rows * ng;
    case MX_W_FP8B: return packed + (size_t)((w->rows + 127) / 128) * ng * 4;
    default: return 0;
    }
}
