#define _GNU_SOURCE /* memmem */
/* The shared steps of the image processors (see processor.h) and the
 * registry of family descriptions. Arithmetic follows the Python it
 * reproduces: int() truncation, Python round() (halves to even, nearbyint
 * under the default rounding mode), math.floor / math.ceil on doubles. */
#include "processor.h"
#include "../base/base.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry ---------------------------------------------------------- */

static mx_improc_family *g_families;

void mx_improc_register(mx_improc_family *f) {
    f->next = g_families;
    g_families = f;
}

static const mx_improc_family *find_family(const char *type) {
    /* "...ImageProcessorFast" names the torchvision twin of the same processor */
    char name[128];
    snprintf(name, sizeof name, "%s", type);
    size_t n = strlen(name);
    if (n > 4 && !strcmp(name + n - 4, "Fast")) name[n - 4] = 0;
    for (const mx_improc_family *f = g_families; f; f = f->next) {
        if (!strcmp(f->name, name)) return f;
        for (const char *const *a = f->aliases; a && *a; a++)
            if (!strcmp(*a, name)) return f;
    }
    return NULL;
}

/* ---- config readers ---------------------------------------------------- */

int mx_improc_size(const mx_cfg *c, const char *obj, const char *key, int def, int lo, int hi, int *out) {
    *out = def;
    if (!c || !c->root) return MX_OK;
    if (!obj) return mx_cfg_i32(c, key, def, lo, hi, out);
    json_t *o = mx_cfg_get(c, obj);
    if (!o) return MX_OK;
    json_t *v = json_is_integer(o) ? o : json_is_object(o) ? json_object_get(o, key) : NULL;
    if (!json_is_object(o) && !json_is_integer(o)) return mx_set_err("%s: %s: expected an object or an integer", c->file, obj);
    if (!v || json_is_null(v)) return MX_OK;
    char name[96];
    snprintf(name, sizeof name, "%s.%s", obj, key);
    double d;
    if (mx_json_num(v, c->file, name, lo, hi, &d)) return MX_ERR;
    if (d != (int)d) return mx_set_err("%s: %s: expected an integer", c->file, name);
    *out = (int)d;
    return MX_OK;
}

int mx_improc_str(const mx_cfg *c, const char *key, const char *def, char *out, size_t cap) {
    int err = 0;
    const char *s = c && c->root ? mx_cfg_str(c, key, def, &err) : def;
    if (err) return MX_ERR;
    if (strlen(s) >= cap || !*s) return mx_set_err("%s: %s: expected a non-empty string of at most %zu bytes", c ? c->file : "config", key, cap - 1);
    memcpy(out, s, strlen(s) + 1);
    return MX_OK;
}

/* Keeps out (the family's default) when the key is absent. */
static int read_triple(const mx_cfg *c, const char *key, double lo, double hi, float out[3]) {
    json_t *v = mx_cfg_get(c, key);
    if (!v) return MX_OK;
    double d;
    if (json_is_number(v)) { /* one value for every channel */
        if (mx_json_num(v, c->file, key, lo, hi, &d)) return MX_ERR;
        out[0] = out[1] = out[2] = (float)d;
        return MX_OK;
    }
    if (!json_is_array(v) || json_array_size(v) != 3) return mx_set_err("%s: %s: expected 3 numbers", c->file, key);
    for (int i = 0; i < 3; i++) {
        if (mx_json_num(json_array_get(v, (size_t)i), c->file, key, lo, hi, &d)) return MX_ERR;
        out[i] = (float)d; /* np.array(mean, dtype=float32) */
    }
    return MX_OK;
}

int mx_improc_common(mx_image_processor *p, const mx_cfg *pre) {
    if (mx_cfg_bool(pre, "do_resize", true, &p->do_resize) || mx_cfg_bool(pre, "do_rescale", true, &p->do_rescale) ||
        mx_cfg_bool(pre, "do_normalize", true, &p->do_normalize) ||
        mx_cfg_bool(pre, "do_center_crop", p->do_center_crop, &p->do_center_crop) ||
        mx_cfg_float(pre, "rescale_factor", 1.0 / 255, 0, 1e3, &p->rescale_factor) ||
        mx_cfg_i32(pre, "resample", p->resample, 0, 5, &p->resample) ||
        read_triple(pre, "image_mean", -1e3, 1e3, p->mean) || read_triple(pre, "image_std", 1e-6, 1e3, p->std))
        return MX_ERR;
    if (p->resample == MX_RESAMPLE_NEAREST)
        return mx_set_err("%s: resample: 0 (NEAREST) is not supported (Pillow's nearest resize is not ported)", pre->file);
    return MX_OK;
}

/* ---- loading ----------------------------------------------------------- */

static json_t *load_optional(const char *dir, const char *name, char **path) {
    *path = mx_path_join(dir, name);
    if (!mx_file_exists(*path)) return NULL;
    return mx_json_load_file(*path, 4 << 20);
}

int mx_image_processor_load(const char *dir, mx_image_processor *p) {
    memset(p, 0, sizeof *p);
    char *pre_path, *proc_path, *model_path;
    json_t *pre = load_optional(dir, "preprocessor_config.json", &pre_path);
    json_t *proc = load_optional(dir, "processor_config.json", &proc_path);
    json_t *model = load_optional(dir, "config.json", &model_path);
    int r = MX_ERR;
    if (!pre) {
        if (!mx_file_exists(pre_path)) mx_set_err("%s: missing (a vision model needs its image processor's settings)", pre_path);
        goto done;
    }
    if ((mx_file_exists(proc_path) && !proc) || (mx_file_exists(model_path) && !model)) goto done;
    if (!json_is_object(pre) || (proc && !json_is_object(proc)) || (model && !json_is_object(model))) {
        mx_set_err("%s: expected JSON objects in the processor and model configs", dir);
        goto done;
    }
    mx_cfg cpre = {pre, NULL, pre_path}, cproc = {proc, NULL, proc_path},
           cmodel = {model, model ? json_object_get(model, "vision_config") : NULL, model_path};
    int err = 0;
    const char *type = mx_cfg_str(&cpre, "image_processor_type", NULL, &err);
    if (err) goto done;
    if (!type) {
        mx_set_err("%s: no image_processor_type", pre_path);
        goto done;
    }
    p->family = find_family(type);
    if (!p->family) {
        mx_set_err("%s: image_processor_type \"%s\" is not supported", pre_path, type);
        goto done;
    }
    /* the defaults HF's processors share; a family changes its own before it
     * calls mx_improc_common */
    static const float clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f}, clip_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    memcpy(p->mean, clip_mean, sizeof p->mean);
    memcpy(p->std, clip_std, sizeof p->std);
    p->resample = MX_RESAMPLE_BICUBIC;
    if (p->family->configure(p, &cpre, &cproc, &cmodel)) goto done;
    if (!p->placeholder[0]) memcpy(p->placeholder, p->image_token, sizeof p->placeholder);
    r = MX_OK;
done:
    json_decref(pre);
    json_decref(proc);
    json_decref(model);
    free(pre_path);
    free(proc_path);
    free(model_path);
    return r;
}

int mx_image_processor_decode(const mx_image_processor *p, const void *data, size_t len, int64_t max_pixels,
                              const char *what, mx_image *out) {
    return mx_image_decode_alpha(data, len, max_pixels, what, p->alpha_white ? MX_ALPHA_WHITE : MX_ALPHA_DROP, out);
}

/* ---- shared steps ------------------------------------------------------ */

/* HF rescale (x * factor in float64, cast to float32) and normalize (float32
 * (x - mean) / std), written channel-first. */
void mx_improc_to_chw(const mx_image_processor *p, const mx_image *im, float *dst) {
    size_t plane = (size_t)im->w * im->h;
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < plane; i++) {
            float x = p->do_rescale ? (float)((double)im->px[3 * i + c] * p->rescale_factor) : (float)im->px[3 * i + c];
            if (p->do_normalize) x = (x - p->mean[c]) / p->std[c];
            dst[c * plane + i] = x;
        }
}

/* CLIP's get_resize_output_image_size(default_to_square=False). */
static void shortest_edge_size(int h, int w, int s, int *oh, int *ow) {
    int sh = w <= h ? w : h, lg = w <= h ? h : w;
    int nl = (int)((double)s * lg / sh);
    *oh = w <= h ? nl : s;
    *ow = w <= h ? s : nl;
}

/* transformers' center_crop: the crop box centred with floor division; where
 * the image is smaller than the crop it is padded with zeros (centred, the
 * odd pixel after). */
static int center_crop(const mx_image *in, int ch, int cw, mx_image *out) {
    int top = in->h >= ch ? (in->h - ch) / 2 : -((ch - in->h + 1) / 2);
    int left = in->w >= cw ? (in->w - cw) / 2 : -((cw - in->w + 1) / 2);
    return mx_image_crop(in, left, top, cw, ch, out);
}

/* Resize (the view's rule), center crop, normalize into dst (or just count). */
static int clip_view(const mx_image_processor *p, const mx_image *img, mx_image *resized, float *dst, int *vh, int *vw) {
    mx_image r = {0}, c = {0};
    const mx_image *cur = img;
    if (p->do_resize) {
        int oh = p->size_h, ow = p->size_w;
        if (p->resize == MX_IP_RESIZE_SHORTEST_EDGE) shortest_edge_size(img->h, img->w, p->size_w, &oh, &ow);
        if (mx_image_resize(img, ow, oh, p->resample, &r)) return MX_ERR;
        cur = &r;
    }
    if (p->do_center_crop) {
        if (center_crop(cur, p->crop_h, p->crop_w, &c)) {
            mx_image_free(&r);
            return MX_ERR;
        }
        cur = &c;
    }
    *vh = cur->h;
    *vw = cur->w;
    if (dst) mx_improc_to_chw(p, cur, dst);
    if (resized && r.px) {
        *resized = r;
        r.px = NULL;
    }
    mx_image_free(&r);
    mx_image_free(&c);
    return MX_OK;
}

int mx_improc_alloc_views(mx_image_input *out, int n, int h, int w) {
    if (n > MX_IP_MAX_VIEWS) return mx_set_err("image processor: %d views of one image (more than %d)", n, MX_IP_MAX_VIEWS);
    if ((int64_t)n * 3 * h * w > MX_IP_MAX_VALUES)
        return mx_set_err("image processor: %d views of %dx%d are more than %d pixel values", n, w, h, MX_IP_MAX_VALUES);
    out->n_views = n;
    out->h = h;
    out->w = w;
    out->n_values = (size_t)n * 3 * h * w;
    out->pixels = mx_malloc(sizeof(float) * out->n_values);
    return out->pixels ? MX_OK : MX_ERR;
}

static long long floordiv(long long a, long long b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

/* Python's int(round(x, 7)): round to 7 decimals (correctly rounded, halves
 * to even, as "%.7f" prints) then truncate. */
static int int_round7(double x) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.7f", x);
    return (int)strtod(buf, NULL);
}

/* LLaVA-NeXT: select_best_resolution over the pinpoints (height, width). */
static void best_resolution(const mx_image_processor *p, int h, int w, int *bh, int *bw) {
    long long best_eff = -1, best_waste = 0;
    for (int i = 0; i < p->n_pinpoints; i++) {
        int ph = p->pinpoints[i][0], pw = p->pinpoints[i][1];
        double sw = (double)pw / w, sh = (double)ph / h, s = sw < sh ? sw : sh;
        long long dw = (long long)(w * s), dh = (long long)(h * s);
        long long eff = dw * dh < (long long)w * h ? dw * dh : (long long)w * h, waste = (long long)ph * pw - eff;
        if (eff > best_eff || (eff == best_eff && waste < best_waste)) {
            best_eff = eff;
            best_waste = waste;
            *bh = ph;
            *bw = pw;
        }
    }
}

/* The processor's token count for one LLaVA-NeXT image (processing_llava_next
 * _get_number_of_features; the model's unpadding follows the same arithmetic). */
static int anyres_tokens(const mx_image_processor *p, int oh, int ow, int vh, int vw) {
    int bh = 0, bw = 0;
    best_resolution(p, oh, ow, &bh, &bw);
    int ph = vh / p->feature_patch, pw = vw / p->feature_patch;
    long long cur_h = (long long)ph * (bh / vh), cur_w = (long long)pw * (bw / vw);
    if ((double)ow / oh > (double)cur_w / cur_h) {
        int nh = int_round7(oh * ((double)cur_w / ow));
        cur_h -= 2 * floordiv(cur_h - nh, 2);
    } else {
        int nw = int_round7(ow * ((double)cur_h / oh));
        cur_w -= 2 * floordiv(cur_w - nw, 2);
    }
    long long n = cur_h * cur_w + cur_h + (long long)ph * pw + p->extra_tokens;
    return n > MX_IP_MAX_TOKENS ? -1 : (int)n;
}

static int preprocess_anyres(const mx_image_processor *p, const mx_image *img, mx_image_input *out) {
    int bh = 0, bw = 0, s = p->crop_h;
    best_resolution(p, img->h, img->w, &bh, &bw);
    /* resize keeping the aspect ratio into (bh, bw), then pad with zeros:
     * (d // 2) before, the rest after */
    double sw = (double)bw / img->w, sh = (double)bh / img->h;
    int nw, nh;
    if (sw < sh) {
        nw = bw;
        nh = (int)MX_MIN(ceil(img->h * sw), (double)bh);
    } else {
        nh = bh;
        nw = (int)MX_MIN(ceil(img->w * sh), (double)bw);
    }
    mx_image padded = {0};
    out->rows = (bh + s - 1) / s;
    out->cols = (bw + s - 1) / s;
    if (mx_image_resize(img, nw, nh, p->resample, &out->resized) ||
        mx_image_crop(&out->resized, -((bw - nw) / 2), -((bh - nh) / 2), bw, bh, &padded))
        return MX_ERR;
    mx_image base = {0};
    int vh, vw, r = MX_ERR;
    if (mx_image_resize(img, p->size_w, p->size_w, p->resample, &base)) goto done;
    out->resized_base = base;
    /* every view goes through CLIP's pipeline (a no-op resize on S x S views) */
    if (clip_view(p, &base, NULL, NULL, &vh, &vw) || mx_improc_alloc_views(out, 1 + out->rows * out->cols, vh, vw)) goto done;
    size_t per = (size_t)3 * vh * vw;
    int k = 0;
    if (clip_view(p, &base, NULL, out->pixels, &vh, &vw)) goto done;
    for (int y = 0; y < out->rows; y++)
        for (int x = 0; x < out->cols; x++) {
            mx_image tile = {0};
            int th = MX_MIN(s, bh - y * s), tw = MX_MIN(s, bw - x * s), h2, w2;
            if (mx_image_crop(&padded, x * s, y * s, tw, th, &tile)) goto done;
            int e = clip_view(p, &tile, NULL, out->pixels + per * (size_t)++k, &h2, &w2);
            mx_image_free(&tile);
            if (e) goto done;
            if (h2 != vh || w2 != vw) {
                mx_set_err("image processor: an any-res tile came out %dx%d, the base view %dx%d", w2, h2, vw, vh);
                goto done;
            }
        }
    out->n_tokens = anyres_tokens(p, img->h, img->w, vh, vw);
    if (out->n_tokens < 0) mx_set_err("image processor: too many image tokens");
    else r = MX_OK;
done:
    mx_image_free(&padded);
    return r;
}

/* Idefics3: longest edge to size (other side int(), made even), then both
 * sides up to multiples of M, cut into M x M tiles plus the global view. */
static int preprocess_split(const mx_image_processor *p, const mx_image *img, mx_image_input *out) {
    mx_image a = {0}, b = {0};
    const mx_image *cur = img;
    int M = p->tile, r = MX_ERR;
    if (p->do_resize) {
        int h = img->h, w = img->w, L = p->size_w;
        double aspect = (double)w / h;
        if (w >= h) {
            w = L;
            h = (int)(w / aspect);
            h += h % 2;
        } else {
            h = L;
            w = (int)(h * aspect);
            w += w % 2;
        }
        /* HF then scales below 4096 per side: a no-op, L <= 4096 is checked at load */
        h = MX_MAX(h, 1);
        w = MX_MAX(w, 1);
        if (mx_image_resize(img, w, h, p->resample, &a)) goto done;
        cur = &a;
        if (p->do_split) {
            aspect = (double)w / h;
            if (w >= h) {
                w = (int)ceil((double)w / M) * M;
                h = (int)ceil((double)(int)(w / aspect) / M) * M;
            } else {
                h = (int)ceil((double)h / M) * M;
                w = (int)ceil((double)(int)(h * aspect) / M) * M;
            }
        } else {
            h = w = M;
        }
        if (mx_image_resize(&a, w, h, p->resample, &b)) goto done;
        cur = &b;
    }
    out->rows = out->cols = 0;
    if (p->do_split && (cur->h > M || cur->w > M)) {
        out->rows = (cur->h + M - 1) / M;
        out->cols = (cur->w + M - 1) / M;
    }
    int n = out->rows * out->cols + 1;
    if (out->rows && (cur->h % M || cur->w % M)) {
        mx_set_err("image processor: %dx%d is not a multiple of the %d-pixel tile", cur->w, cur->h, M);
        goto done;
    }
    int vh = out->rows ? M : cur->h, vw = out->rows ? M : cur->w;
    if (mx_improc_alloc_views(out, n, vh, vw)) goto done;
    size_t per = (size_t)3 * vh * vw;
    for (int y = 0; y < out->rows; y++)
        for (int x = 0; x < out->cols; x++) {
            mx_image tile;
            if (mx_image_crop(cur, x * M, y * M, M, M, &tile)) goto done;
            mx_improc_to_chw(p, &tile, out->pixels + per * (size_t)(y * out->cols + x));
            mx_image_free(&tile);
        }
    if (out->rows) {
        mx_image g;
        if (mx_image_resize(cur, M, M, p->resample, &g)) goto done;
        mx_improc_to_chw(p, &g, out->pixels + per * (size_t)(n - 1));
        mx_image_free(&g);
    } else {
        mx_improc_to_chw(p, cur, out->pixels);
    }
    long long tokens = (long long)n * p->tokens_per_view;
    if (tokens > MX_IP_MAX_TOKENS) {
        mx_set_err("image processor: too many image tokens");
        goto done;
    }
    out->n_tokens = (int)tokens;
    if (b.px) { /* the image the tiles are cut from */
        out->resized = b;
        b.px = NULL;
    }
    r = MX_OK;
done:
    mx_image_free(&a);
    mx_image_free(&b);
    return r;
}

/* Qwen2-VL's smart_resize (transformers 4.48, errors included); with
 * smart_frames, GLM-4V's: a small side scaled up first (int() of each side
 * times max(f / h, f / w)), the image counted as that many frames, and the
 * shrunk sides kept at least f. */
static int smart_resize(const mx_image_processor *p, int h, int w, int *oh, int *ow) {
    int f = p->patch * p->merge, t = MX_MAX(p->smart_frames, 1);
    if (p->smart_frames && (h < f || w < f)) {
        double sc = MX_MAX((double)f / h, (double)f / w);
        h = (int)(h * sc);
        w = (int)(w * sc);
    }
    if (p->smart_frames ? h < 1 || w < 1 : h < f || w < f)
        return mx_set_err("image %dx%d: both sides must be at least %d pixels for this processor", w, h, p->smart_frames ? 1 : f);
    if ((double)MX_MAX(h, w) / MX_MIN(h, w) > 200) return mx_set_err("image %dx%d: aspect ratio above 200", w, h);
    double hb = nearbyint((double)h / f) * f, wb = nearbyint((double)w / f) * f;
    if (t * hb * wb > (double)p->max_pixels) {
        double beta = sqrt((double)t * h * w / (double)p->max_pixels);
        hb = floor(h / beta / f) * f;
        wb = floor(w / beta / f) * f;
        if (p->smart_frames) {
            hb = MX_MAX(hb, f);
            wb = MX_MAX(wb, f);
        }
    } else if (t * hb * wb < (double)p->min_pixels) {
        double beta = sqrt((double)p->min_pixels / ((double)t * h * w));
        hb = ceil(h * beta / f) * f;
        wb = ceil(w * beta / f) * f;
    }
    if (hb < f || wb < f || hb > MX_IMAGE_MAX_SIDE || wb > MX_IMAGE_MAX_SIDE)
        return mx_set_err("image %dx%d: smart resize gives %.0fx%.0f", w, h, wb, hb);
    *oh = (int)hb;
    *ow = (int)wb;
    return MX_OK;
}

static int preprocess_patchify(const mx_image_processor *p, const mx_image *img, mx_image_input *out) {
    int h = img->h, w = img->w;
    if (p->do_resize) {
        if (smart_resize(p, img->h, img->w, &h, &w) || mx_image_resize(img, w, h, p->resample, &out->resized)) return MX_ERR;
    } else if (h % (p->patch * p->merge) || w % (p->patch * p->merge)) {
        return mx_set_err("image %dx%d: not a multiple of %d and do_resize is off", w, h, p->patch * p->merge);
    }
    const mx_image *cur = out->resized.px ? &out->resized : img;
    int P = p->patch, m = p->merge, T = p->temporal, gh = h / P, gw = w / P;
    long long tokens = (long long)gh * gw / (m * m);
    if (tokens > MX_IP_MAX_TOKENS || (int64_t)3 * T * h * w > MX_IP_MAX_VALUES)
        return mx_set_err("image %dx%d: too many image tokens or pixel values", w, h);
    size_t plane = (size_t)h * w, cols = (size_t)3 * T * P * P;
    float *chw = mx_malloc(sizeof(float) * 3 * plane);
    out->n_values = (size_t)gh * gw * cols;
    out->pixels = mx_malloc(sizeof(float) * out->n_values);
    if (!chw || !out->pixels) {
        free(chw);
        return MX_ERR;
    }
    mx_improc_to_chw(p, cur, chw);
    /* rows: merge windows row-major, then row-major inside the window;
     * columns: (channel, frame, patch row, patch col); one image repeated over
     * the temporal_patch_size frames */
    float *dst = out->pixels;
    for (int bh = 0; bh < gh / m; bh++)
        for (int bw = 0; bw < gw / m; bw++)
            for (int mh = 0; mh < m; mh++)
                for (int mw = 0; mw < m; mw++) {
                    int y0 = (bh * m + mh) * P, x0 = (bw * m + mw) * P;
                    for (int c = 0; c < 3; c++)
                        for (int t = 0; t < T; t++)
                            for (int py = 0; py < P; py++) {
                                memcpy(dst, chw + c * plane + (size_t)(y0 + py) * w + x0, sizeof(float) * P);
                                dst += P;
                            }
                }
    free(chw);
    out->grid_t = 1;
    out->grid_h = gh;
    out->grid_w = gw;
    out->n_views = 1;
    out->h = h;
    out->w = w;
    out->n_tokens = (int)tokens;
    return MX_OK;
}

int mx_image_preprocess(const mx_image_processor *p, const mx_image *img, mx_image_input *out) {
    memset(out, 0, sizeof *out);
    out->orig_h = img->h;
    out->orig_w = img->w;
    int r;
    if (p->family->preprocess) {
        r = p->family->preprocess(p, img, out);
        if (r) mx_image_input_free(out);
        return r;
    }
    switch (p->layout) {
    case MX_IP_LAYOUT_ANYRES: r = preprocess_anyres(p, img, out); break;
    case MX_IP_LAYOUT_SPLIT: r = preprocess_split(p, img, out); break;
    case MX_IP_LAYOUT_PATCHIFY: r = preprocess_patchify(p, img, out); break;
    default: {
        int vh, vw;
        if (p->resize == MX_IP_RESIZE_SMART || p->resize == MX_IP_RESIZE_LONGEST_EDGE) {
            r = mx_set_err("image processor: resize rule not available for a single view");
            break;
        }
        r = clip_view(p, img, NULL, NULL, &vh, &vw);
        if (!r) r = mx_improc_alloc_views(out, 1, vh, vw);
        if (!r) r = clip_view(p, img, &out->resized, out->pixels, &vh, &vw);
        if (r) break;
        long long n = p->feature_patch ? (long long)(vh / p->feature_patch) * (vw / p->feature_patch) + p->extra_tokens
                                       : p->tokens_per_view;
        if (n <= 0 || n > MX_IP_MAX_TOKENS) r = mx_set_err("image processor: %lld image tokens per image", n);
        else out->n_tokens = (int)n;
    }
    }
    if (r) mx_image_input_free(out);
    return r;
}

void mx_image_input_free(mx_image_input *in) {
    free(in->pixels);
    mx_image_free(&in->resized);
    mx_image_free(&in->resized_base);
    memset(in, 0, sizeof *in);
}

/* ---- prompt expansion -------------------------------------------------- */

static int repeat(mx_buf *b, const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (mx_buf_puts(b, s)) return MX_ERR;
    return MX_OK;
}

static int expand_one(const mx_image_processor *p, const mx_image_input *im, mx_buf *b) {
    if (p->family->expand) return p->family->expand(p, im, b);
    switch (p->prompt) {
    case MX_IP_PROMPT_WRAP:
        return mx_buf_puts(b, p->pre) || repeat(b, p->image_token, im->n_tokens) || mx_buf_puts(b, p->post) ? MX_ERR : MX_OK;
    case MX_IP_PROMPT_GRID: {
        int per = p->tokens_per_view;
        if (!im->rows)
            return mx_buf_puts(b, p->fake_token) || mx_buf_puts(b, p->global_token) || repeat(b, p->image_token, per) ||
                           mx_buf_puts(b, p->fake_token)
                       ? MX_ERR
                       : MX_OK;
        for (int y = 0; y < im->rows; y++) {
            for (int x = 0; x < im->cols; x++)
                if (mx_buf_puts(b, p->fake_token) || mx_buf_printf(b, "<row_%d_col_%d>", y + 1, x + 1) ||
                    repeat(b, p->image_token, per))
                    return MX_ERR;
            if (mx_buf_puts(b, "\n")) return MX_ERR;
        }
        return mx_buf_puts(b, "\n") || mx_buf_puts(b, p->fake_token) || mx_buf_puts(b, p->global_token) ||
                       repeat(b, p->image_token, per) || mx_buf_puts(b, p->fake_token)
                   ? MX_ERR
                   : MX_OK;
    }
    default: return repeat(b, p->image_token, im->n_tokens);
    }
}

/* The output being written, with its markup ranges when they are tracked. */
typedef struct {
    mx_buf *b, *mk;       /* mk: NULL when not tracked */
    const size_t *in;     /* the input's ranges */
    size_t n_in;
} emitter;

static int add_mark(mx_buf *mk, size_t s, size_t e) {
    size_t n = mk->len / (2 * sizeof(size_t)), *r = (size_t *)(void *)mk->data;
    if (n && r[2 * n - 1] == s) { /* adjacent: one range */
        r[2 * n - 1] = e;
        return MX_OK;
    }
    size_t pair[2] = {s, e};
    return mx_buf_append(mk, pair, sizeof pair);
}

/* text[a, e) copied, its markup ranges carried over. */
static int emit_text(emitter *m, const char *text, size_t a, size_t e) {
    size_t base = m->b->len;
    if (mx_buf_append(m->b, text + a, e - a)) return MX_ERR;
    for (size_t i = 0; m->mk && i < m->n_in; i++) {
        size_t s = MX_MAX(m->in[2 * i], a), t = MX_MIN(m->in[2 * i + 1], e);
        if (s < t && add_mark(m->mk, base + s - a, base + t - a)) return MX_ERR;
    }
    return MX_OK;
}

/* What the processor wrote since from is markup. */
static int mark_from(emitter *m, size_t from) { return m->mk && m->b->len > from ? add_mark(m->mk, from, m->b->len) : MX_OK; }

/* A placeholder at [a, e) is an image's when markup is not tracked or it
 * lies wholly in markup (the template wrote it, not a client). */
static bool is_image_ph(const emitter *m, size_t a, size_t e) {
    if (!m->mk) return true;
    for (size_t i = 0; i < m->n_in && a < e; i++)
        if (m->in[2 * i] <= a && m->in[2 * i + 1] > a) a = m->in[2 * i + 1];
    return a >= e;
}

static const char *next_ph(const char *text, size_t len, const char *from, const char *ph, size_t phl) {
    return memmem(from, len - (size_t)(from - text), ph, phl);
}

int mx_image_expand_marked(const mx_image_processor *p, const char *text, size_t len, const size_t *markup, size_t n_markup,
                           const mx_image_input *imgs, int n_images, const char *bos_text, mx_buf *out, mx_buf *out_markup,
                           bool *add_bos) {
    emitter m = {out, out_markup, markup, n_markup};
    *add_bos = true;
    const char *ph = p->placeholder;
    size_t phl = strlen(ph), from;
    if (!phl) return mx_set_err("the image processor has an empty placeholder");
    int n_ph = 0;
    for (const char *s = next_ph(text, len, text, ph, phl); s; s = next_ph(text, len, s + phl, ph, phl))
        n_ph += is_image_ph(&m, (size_t)(s - text), (size_t)(s - text) + phl);
    if (p->prompt == MX_IP_PROMPT_PREFIX) {
        /* PaliGemma: no placeholders -> the image tokens and BOS before the
         * text; placeholders -> each expanded in place; "\n" after either */
        *add_bos = false;
        if (!n_ph) {
            from = out->len;
            for (int i = 0; i < n_images; i++)
                if (repeat(out, p->image_token, imgs[i].n_tokens)) return MX_ERR;
            if (mx_buf_puts(out, bos_text ? bos_text : "") || mark_from(&m, from) || emit_text(&m, text, 0, len)) return MX_ERR;
            from = out->len;
            return mx_buf_puts(out, "\n") || mark_from(&m, from) ? MX_ERR : MX_OK;
        }
    } else if (!n_ph && out_markup && n_images) { /* tracked and none written: the images go first */
        from = out->len;
        for (int i = 0; i < n_images; i++)
            if (expand_one(p, &imgs[i], out)) return MX_ERR;
        return mark_from(&m, from) || emit_text(&m, text, 0, len) ? MX_ERR : MX_OK;
    }
    if (n_ph != n_images)
        return mx_set_err("the prompt holds %d image placeholder%s (\"%s\") for %d image%s", n_ph, n_ph == 1 ? "" : "s", ph, n_images,
                          n_images == 1 ? "" : "s");
    size_t at = 0;
    for (const char *s = next_ph(text, len, text, ph, phl); s; s = next_ph(text, len, s + phl, ph, phl)) {
        size_t a = (size_t)(s - text);
        if (!is_image_ph(&m, a, a + phl)) continue;
        if (emit_text(&m, text, at, a)) return MX_ERR;
        from = out->len;
        if (expand_one(p, &imgs[n_images - n_ph], out) || mark_from(&m, from)) return MX_ERR;
        n_ph--;
        at = a + phl;
    }
    if (emit_text(&m, text, at, len)) return MX_ERR;
    from = out->len;
    if (p->prompt == MX_IP_PROMPT_PREFIX && (mx_buf_puts(out, "\n") || mark_from(&m, from))) return MX_ERR;
    return !out->data ? mx_buf_puts(out, "") : MX_OK;
}

int mx_image_expand_prompt(const mx_image_processor *p, const char *text, const mx_image_input *imgs, int n_images,
                           const char *bos_text, char **out, bool *add_bos) {
    mx_buf b = {0};
    *out = NULL;
    if (mx_image_expand_marked(p, text, strlen(text), NULL, 0, imgs, n_images, bos_text, &b, NULL, add_bos)) {
        mx_buf_free(&b);
        return MX_ERR;
    }
    *out = b.data;
    return MX_OK;
}
