/* Image decoding entry points: the format is told by its signature, never by
 * a file name or a MIME type a client sent. */
#include "image_internal.h"
#include "../base/base.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int mx_img_check_size(const char *what, const char *fmt, int64_t w, int64_t h, int64_t max_pixels) {
    if (max_pixels <= 0) max_pixels = MX_IMAGE_MAX_PIXELS_DEFAULT;
    if (w <= 0 || h <= 0) return mx_set_err("%s: %s image has an empty size %lldx%lld", what, fmt, (long long)w, (long long)h);
    if (w > MX_IMAGE_MAX_SIDE || h > MX_IMAGE_MAX_SIDE || w * h > max_pixels)
        return mx_set_err("%s: %s image of %lldx%lld pixels is larger than the limit of %lld pixels (%d per side)", what, fmt,
                          (long long)w, (long long)h, (long long)max_pixels, MX_IMAGE_MAX_SIDE);
    return MX_OK;
}

int mx_image_alloc(mx_image *im, int w, int h) {
    im->w = im->h = 0;
    im->px = NULL;
    if (w <= 0 || h <= 0 || w > MX_IMAGE_MAX_SIDE || h > MX_IMAGE_MAX_SIDE)
        return mx_set_err("image size %dx%d out of range (1..%d per side)", w, h, MX_IMAGE_MAX_SIDE);
    im->px = mx_malloc((size_t)w * (size_t)h * 3);
    if (!im->px) return MX_ERR;
    im->w = w;
    im->h = h;
    return MX_OK;
}

void mx_image_free(mx_image *im) {
    if (!im) return;
    free(im->px);
    im->px = NULL;
    im->w = im->h = 0;
}

/* Pillow's Image.alpha_composite(white, im) (AlphaComposite.c): integer
 * blending with 7 extra bits, divisions by 255 rounded by shifts. */
static void composite_white(mx_image *im, const uint8_t *alpha) {
    size_t n = (size_t)im->w * im->h;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = alpha[i];
        uint8_t *px = im->px + 3 * i;
        if (a == 0) {
            px[0] = px[1] = px[2] = 255;
            continue;
        }
        uint32_t blend = 255 * (255 - a), outa255 = a * 255 + blend;
        uint32_t coef1 = a * 255 * 255 * 128 / outa255, coef2 = 255 * 128 - coef1;
        for (int c = 0; c < 3; c++) {
            uint32_t t = px[c] * coef1 + 255 * coef2 + (0x80 << 7);
            px[c] = (uint8_t)((((t >> 8) + t) >> 8) >> 7);
        }
    }
}

/* ImageOps.exif_transpose: orientation 2..8 is FLIP_LEFT_RIGHT, ROTATE_180,
 * FLIP_TOP_BOTTOM, TRANSPOSE, ROTATE_270, TRANSVERSE, ROTATE_90 (Pillow's
 * counter-clockwise names); 1 and anything else leave the image as it is.
 * Output pixel (x, y) reads source pixel (sx, sy). */
static int exif_transpose(mx_image *im, int orient) {
    if (orient < 2 || orient > 8) return MX_OK;
    int w = im->w, h = im->h;
    bool swap = orient >= 5;
    mx_image o;
    if (mx_image_alloc(&o, swap ? h : w, swap ? w : h)) return MX_ERR;
    for (int y = 0; y < o.h; y++)
        for (int x = 0; x < o.w; x++) {
            int sx, sy;
            switch (orient) {
            case 2: sx = w - 1 - x, sy = y; break;
            case 3: sx = w - 1 - x, sy = h - 1 - y; break;
            case 4: sx = x, sy = h - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = h - 1 - x; break;
            case 7: sx = w - 1 - y, sy = h - 1 - x; break;
            default: sx = w - 1 - y, sy = x; break; /* 8 */
            }
            memcpy(o.px + ((size_t)y * o.w + x) * 3, im->px + ((size_t)sy * w + sx) * 3, 3);
        }
    mx_image_free(im);
    *im = o;
    return MX_OK;
}

int mx_image_decode_alpha(const void *data, size_t len, int64_t max_pixels, const char *what, mx_alpha_mode mode,
                          mx_image *out) {
    const uint8_t *p = data;
    uint8_t *alpha = NULL;
    int r;
    out->w = out->h = 0;
    out->px = NULL;
    if (!what) what = "image";
    if (len >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8)) r = mx_img_decode_png(p, len, max_pixels, what, out, &alpha);
    else if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) r = mx_img_decode_jpeg(p, len, max_pixels, what, out, &alpha);
    else if (len >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
        r = mx_img_decode_webp(p, len, max_pixels, what, out, &alpha);
    else return mx_set_err("%s: not a PNG, JPEG or WebP image (%zu bytes)", what, len);
    if (!r && alpha && mode == MX_ALPHA_WHITE) composite_white(out, alpha);
    free(alpha);
    /* as transformers' load_image: upright before any processor sees it */
    if (!r && (r = exif_transpose(out, mx_img_exif_orientation(p, len)))) mx_image_free(out);
    return r;
}

int mx_image_decode(const void *data, size_t len, int64_t max_pixels, const char *what, mx_image *out) {
    return mx_image_decode_alpha(data, len, max_pixels, what, MX_ALPHA_DROP, out);
}

int mx_image_load(const char *path, int64_t max_pixels, mx_image *out) {
    char *data;
    size_t len;
    out->w = out->h = 0;
    out->px = NULL;
    if (mx_read_file(path, MX_IMAGE_MAX_FILE_BYTES, &data, &len)) return MX_ERR;
    int r = mx_image_decode(data, len, max_pixels, path, out);
    free(data);
    return r;
}
