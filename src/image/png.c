/* PNG through libpng, converted as Pillow 9.4 opens and converts it.
 * Pillow has its own PNG reader; what it makes of each color type and depth
 * (PngImagePlugin._MODES, then Image.convert("RGB")):
 *   gray 1/2/4/8  -> "1"/"L", scaled to 0..255 (libpng's expand does the same)
 *   gray 16       -> "I", then clipped to 255 (not scaled)
 *   gray+alpha, RGB, RGBA at 16 bits -> the high byte of each sample
 *   palette       -> looked up; indices past the palette read Pillow's
 *                    default palette, the gray ramp (i, i, i)
 *   gAMA, iCCP    -> ignored (Pillow applies no gamma or colour profile)
 *   tRNS          -> dropped by convert("RGB"); for convert("RGBA") read
 *                    raw as Pillow reads it (libpng would validate it
 *                    differently): palette alphas, or the gray / RGB value,
 *                    16 bits as stored, compared with the 8-bit pixels
 * libpng checks the CRC of critical chunks and refuses bad ones; a truncated
 * file is an error (Pillow raises "image file is truncated"). */
#include "image_internal.h"
#include "../base/base.h"
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *data;
    size_t len, pos;
    const char *what;
    char msg[200];
    /* owned while libpng may longjmp out */
    uint8_t *rows;
    png_bytep *rowp;
    mx_image im;
    uint8_t *alpha;
} png_ctx;

static void on_error(png_structp png, png_const_charp msg) {
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* ancillary-chunk problems: Pillow ignores them too */
}

static void read_mem(png_structp png, png_bytep out, size_t n) {
    png_ctx *c = png_get_io_ptr(png);
    if (n > c->len - c->pos) png_error(png, "file is truncated");
    memcpy(out, c->data + c->pos, n);
    c->pos += n;
}

int mx_img_decode_png(const uint8_t *data, size_t len, int64_t max_pixels, const char *what, mx_image *out, uint8_t **alpha) {
    *alpha = NULL;
    /* on the heap: what changes between setjmp and a longjmp must not be a local */
    png_ctx *c = mx_calloc(1, sizeof *c);
    if (!c) return MX_ERR;
    c->data = data;
    c->len = len;
    c->what = what;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        free(c);
        return mx_set_err("%s: PNG: out of memory", what);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        mx_set_err("%s: PNG: %s", what, c->msg[0] ? c->msg : "decoding failed");
        goto fail;
    }
    png_set_read_fn(png, c, read_mem);
    png_set_user_limits(png, MX_IMAGE_MAX_SIDE, MX_IMAGE_MAX_SIDE);
    png_set_chunk_malloc_max(png, 8 << 20); /* text/ICC chunks: bounded inflation */
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_ALWAYS, (png_const_bytep) "tRNS", 1);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if (mx_img_check_size(what, "PNG", w, h, max_pixels)) {
        png_destroy_read_struct(&png, &info, NULL);
        goto fail;
    }
    /* palette: look up below (Pillow's out-of-range rule); 16-bit gray: keep it
     * whole to clip as mode "I" does; other 16-bit samples: high byte */
    bool gray16 = ctype == PNG_COLOR_TYPE_GRAY && depth == 16;
    if (depth == 16 && !gray16) png_set_strip_16(png);
    if (depth < 8) {
        if (ctype == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(png);
        else png_set_packing(png);
    }
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    int ch = png_get_channels(png, info);
    if (rowbytes < (size_t)w * (size_t)ch * (gray16 ? 2 : 1)) png_error(png, "unexpected row size");
    c->rows = malloc(rowbytes * h);
    c->rowp = malloc(sizeof(png_bytep) * h);
    if (!c->rows || !c->rowp) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) c->rowp[y] = c->rows + rowbytes * y;
    png_read_image(png, c->rowp);

    uint8_t pal[256][3];
    if (ctype == PNG_COLOR_TYPE_PALETTE) {
        png_colorp plte = NULL;
        int np = 0;
        if (!png_get_PLTE(png, info, &plte, &np)) png_error(png, "palette image without a PLTE chunk");
        for (int i = 0; i < 256; i++) pal[i][0] = pal[i][1] = pal[i][2] = (uint8_t)i;
        for (int i = 0; i < np && i < 256; i++) {
            pal[i][0] = plte[i].red;
            pal[i][1] = plte[i].green;
            pal[i][2] = plte[i].blue;
        }
    }
    /* the last tRNS before the image data, as Pillow keeps it */
    const uint8_t *trns = NULL;
    size_t ntrns = 0;
    png_unknown_chunkp unk;
    int nunk = png_get_unknown_chunks(png, info, &unk);
    for (int i = 0; i < nunk; i++)
        if (!memcmp(unk[i].name, "tRNS", 4)) {
            trns = unk[i].data;
            ntrns = unk[i].size;
        }
    uint8_t pal_alpha[256];
    memset(pal_alpha, 255, sizeof pal_alpha);
    int key[3] = {-1, -1, -1}; /* gray / RGB transparent value, 16 bits as stored */
    bool has_alpha = ch == 2 || ch == 4;
    if (trns && ctype == PNG_COLOR_TYPE_PALETTE) {
        memcpy(pal_alpha, trns, ntrns < 256 ? ntrns : 256);
        has_alpha = true;
    } else if (trns && ctype == PNG_COLOR_TYPE_GRAY && ntrns >= 2) {
        key[0] = key[1] = key[2] = trns[0] << 8 | trns[1];
        has_alpha = true;
    } else if (trns && ctype == PNG_COLOR_TYPE_RGB && ntrns >= 6) {
        for (int i = 0; i < 3; i++) key[i] = trns[2 * i] << 8 | trns[2 * i + 1];
        has_alpha = true;
    }
    if (mx_image_alloc(&c->im, (int)w, (int)h)) png_error(png, "out of memory");
    if (has_alpha && !(c->alpha = malloc((size_t)w * h))) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) {
        const uint8_t *s = c->rowp[y];
        uint8_t *d = c->im.px + (size_t)y * w * 3;
        for (png_uint_32 x = 0; x < w; x++, d += 3) {
            uint8_t a = 255;
            if (ctype == PNG_COLOR_TYPE_PALETTE) {
                memcpy(d, pal[s[x]], 3);
                a = pal_alpha[s[x]];
            } else if (gray16) {
                unsigned v = (unsigned)s[2 * x] << 8 | s[2 * x + 1];
                d[0] = d[1] = d[2] = (uint8_t)(v > 255 ? 255 : v);
            } else if (ch <= 2) { /* gray, gray + alpha */
                d[0] = d[1] = d[2] = s[(size_t)x * ch];
                if (ch == 2) a = s[(size_t)x * 2 + 1];
            } else { /* RGB, RGBA */
                memcpy(d, s + (size_t)x * ch, 3);
                if (ch == 4) a = s[(size_t)x * 4 + 3];
            }
            if (key[0] >= 0 && d[0] == key[0] && d[1] == key[1] && d[2] == key[2]) a = 0;
            if (c->alpha) c->alpha[(size_t)y * w + x] = a;
        }
    }
    png_destroy_read_struct(&png, &info, NULL);
    free(c->rows);
    free(c->rowp);
    *out = c->im;
    *alpha = c->alpha;
    free(c);
    return MX_OK;
fail:
    free(c->rows);
    free(c->rowp);
    free(c->alpha);
    mx_image_free(&c->im);
    free(c);
    return MX_ERR;
}
