/* Pillow's uint8 resampler (libImaging/Resample.c, unchanged in this part
 * since Pillow 4.3), reproduced bit for bit because the Hugging Face image
 * processors resize with Pillow before they rescale: a float resize differs
 * by a few uint8 steps, which moves logits far more than the parity rule.
 *
 * It is a separable convolution: a horizontal pass over only the rows the
 * vertical pass will read, then the vertical pass; a pass is skipped when its
 * size is unchanged. Per output sample: the filter is centred at
 * (i + 0.5) * scale, its support widened by the downscale factor (so
 * shrinking averages, i.e. antialiases), the taps between
 * (int)(centre -/+ support + 0.5) clamped to the image are weighed and
 * normalised to sum 1 in double, then turned into fixed point with 22
 * fractional bits, rounding half away from zero. Each pass accumulates in int
 * from 1 << 21 (rounding), shifts right arithmetically and clips to 0..255. */
#include "image.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#define PREC 22

typedef struct {
    double (*fn)(double x);
    double support;
} filter;

static double f_box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
static double f_bilinear(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}
static double f_hamming(double x) {
    x = fabs(x);
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x *= M_PI;
    return sin(x) / x * (0.54f + 0.46f * cos(x)); /* float constants, as Pillow */
}
static double f_bicubic(double x) { /* cubic convolution, a = -0.5 */
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}
static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return sin(x) / x;
}
static double f_lanczos(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

static const filter *filter_of(int id) {
    static const filter box = {f_box, 0.5}, bilinear = {f_bilinear, 1.0}, hamming = {f_hamming, 1.0},
                        bicubic = {f_bicubic, 2.0}, lanczos = {f_lanczos, 3.0};
    switch (id) {
    case MX_RESAMPLE_BOX: return &box;
    case MX_RESAMPLE_BILINEAR: return &bilinear;
    case MX_RESAMPLE_HAMMING: return &hamming;
    case MX_RESAMPLE_BICUBIC: return &bicubic;
    case MX_RESAMPLE_LANCZOS: return &lanczos;
    default: return NULL;
    }
}

const char *mx_resample_name(int f) {
    static const char *names[] = {"NEAREST", "LANCZOS", "BILINEAR", "BICUBIC", "BOX", "HAMMING"};
    return f >= 0 && f < 6 ? names[f] : "unknown";
}

/* The taps of one axis: for output i, first[i] and count[i] input indices
 * with fixed-point weights w[i * ksize ..]. */
typedef struct {
    int ksize;
    int *first, *count;
    int32_t *w;
} taps;

static void taps_free(taps *t) {
    free(t->first);
    free(t->count);
    free(t->w);
}

static int taps_make(taps *t, int in_size, int out_size, const filter *f) {
    memset(t, 0, sizeof *t);
    double scale = (double)in_size / out_size, fscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * fscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *k = mx_malloc(sizeof(double) * (size_t)ksize);
    t->first = mx_malloc(sizeof(int) * (size_t)out_size);
    t->count = mx_malloc(sizeof(int) * (size_t)out_size);
    t->w = mx_calloc((size_t)out_size * (size_t)ksize, sizeof(int32_t));
    if (!k || !t->first || !t->count || !t->w) {
        free(k);
        taps_free(t);
        return MX_ERR;
    }
    t->ksize = ksize;
    for (int i = 0; i < out_size; i++) {
        double centre = (i + 0.5) * scale, sum = 0.0, ss = 1.0 / fscale;
        int lo = (int)(centre - support + 0.5), hi = (int)(centre + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in_size) hi = in_size;
        int n = hi - lo;
        for (int j = 0; j < n; j++) {
            k[j] = f->fn((j + lo - centre + 0.5) * ss);
            sum += k[j];
        }
        int32_t *w = t->w + (size_t)i * ksize;
        for (int j = 0; j < n; j++) {
            double v = sum != 0.0 ? k[j] / sum : k[j];
            w[j] = (int32_t)(v < 0 ? -0.5 + v * (1 << PREC) : 0.5 + v * (1 << PREC));
        }
        t->first[i] = lo;
        t->count[i] = n;
    }
    free(k);
    return MX_OK;
}

static inline uint8_t clip8(int32_t acc) {
    int32_t v = acc >> PREC; /* arithmetic shift, as Pillow's lookup table index */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass over rows [y0, y0 + out->h) of in. */
static void pass_h(const mx_image *in, int y0, const taps *t, mx_image *out) {
    for (int y = 0; y < out->h; y++) {
        const uint8_t *src = in->px + (size_t)(y + y0) * in->w * 3;
        uint8_t *dst = out->px + (size_t)y * out->w * 3;
        for (int x = 0; x < out->w; x++) {
            const int32_t *w = t->w + (size_t)x * t->ksize;
            const uint8_t *s = src + (size_t)t->first[x] * 3;
            int32_t a0 = 1 << (PREC - 1), a1 = a0, a2 = a0;
            for (int j = 0; j < t->count[x]; j++) {
                a0 += s[3 * j] * w[j];
                a1 += s[3 * j + 1] * w[j];
                a2 += s[3 * j + 2] * w[j];
            }
            dst[3 * x] = clip8(a0);
            dst[3 * x + 1] = clip8(a1);
            dst[3 * x + 2] = clip8(a2);
        }
    }
}

/* Vertical pass; the taps' first rows are relative to row y0 of in. */
static void pass_v(const mx_image *in, int y0, const taps *t, mx_image *out) {
    size_t stride = (size_t)in->w * 3;
    for (int y = 0; y < out->h; y++) {
        const int32_t *w = t->w + (size_t)y * t->ksize;
        const uint8_t *src = in->px + (size_t)(t->first[y] - y0) * stride;
        uint8_t *dst = out->px + (size_t)y * out->w * 3;
        for (int x = 0; x < 3 * out->w; x++) {
            int32_t a = 1 << (PREC - 1);
            for (int j = 0; j < t->count[y]; j++) a += src[(size_t)j * stride + x] * w[j];
            dst[x] = clip8(a);
        }
    }
}

int mx_image_resize(const mx_image *in, int w, int h, int filter_id, mx_image *out) {
    out->w = out->h = 0;
    out->px = NULL;
    const filter *f = filter_of(filter_id);
    if (!f) return mx_set_err("image resize: resample filter %d (%s) is not supported", filter_id, mx_resample_name(filter_id));
    if (w <= 0 || h <= 0 || w > MX_IMAGE_MAX_SIDE || h > MX_IMAGE_MAX_SIDE || (int64_t)w * h > MX_IMAGE_MAX_PIXELS_DEFAULT)
        return mx_set_err("image resize: target size %dx%d out of range", w, h);
    if (w == in->w && h == in->h) { /* Pillow returns a copy */
        if (mx_image_alloc(out, w, h)) return MX_ERR;
        memcpy(out->px, in->px, (size_t)w * h * 3);
        return MX_OK;
    }
    taps tv;
    if (taps_make(&tv, in->h, h, f)) return MX_ERR;
    int y_first = tv.first[0], y_last = tv.first[h - 1] + tv.count[h - 1];
    mx_image tmp = {0};
    const mx_image *src = in;
    int y0 = 0;
    if (w != in->w) {
        taps th;
        if (taps_make(&th, in->w, w, f) || mx_image_alloc(&tmp, w, y_last - y_first)) {
            taps_free(&th);
            taps_free(&tv);
            return MX_ERR;
        }
        pass_h(in, y_first, &th, &tmp);
        taps_free(&th);
        src = &tmp;
        y0 = y_first;
    }
    int r = MX_OK;
    if (h != in->h) {
        r = mx_image_alloc(out, w, h);
        if (!r) pass_v(src, y0, &tv, out);
        mx_image_free(&tmp);
    } else {
        *out = tmp; /* horizontal only: the temporary holds every row */
    }
    taps_free(&tv);
    return r;
}

int mx_image_crop(const mx_image *in, int x0, int y0, int w, int h, mx_image *out) {
    if (mx_image_alloc(out, w, h)) return mx_err_prefix("image crop");
    memset(out->px, 0, (size_t)w * h * 3);
    for (int y = 0; y < h; y++) {
        int sy = y0 + y;
        if (sy < 0 || sy >= in->h) continue;
        int xa = x0 < 0 ? -x0 : 0, xb = x0 + w > in->w ? in->w - x0 : w;
        if (xb > xa) memcpy(out->px + ((size_t)y * w + xa) * 3, in->px + ((size_t)sy * in->w + x0 + xa) * 3, (size_t)(xb - xa) * 3);
    }
    return MX_OK;
}
