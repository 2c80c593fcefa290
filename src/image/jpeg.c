/* JPEG through libjpeg(-turbo), set up as Pillow 9.4's decoder sets it up
 * (JpegDecode.c, JpegImagePlugin.py): the library's defaults (islow IDCT,
 * fancy upsampling), the colour space it guesses from the markers, output
 * gray for 1 component, RGB for 3, CMYK for 4, which Pillow reads as Adobe's
 * inverted CMYK ("CMYK;I") and converts with cmyk2rgb. Other component
 * counts are refused, as Pillow refuses them.
 * libjpeg's warnings about corrupt data are ignored as Pillow ignores them;
 * a file that ends before its last scan is an error (Pillow: "image file is
 * truncated"). Progressive files are limited in scans: each one is a pass
 * over the whole coefficient buffer, so a few kilobytes of empty scans would
 * take minutes. */
#include "image_internal.h"
#include "../base/base.h"
#include <jerror.h>
#include <jpeglib.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JPEG_MAX_SCANS 500

typedef struct {
    struct jpeg_error_mgr err;
    struct jpeg_progress_mgr progress;
    jmp_buf jmp;
    char msg[JMSG_LENGTH_MAX];
    bool truncated;
    uint8_t *row;
    mx_image im;
} jpeg_ctx;

static void on_error(j_common_ptr ci) {
    jpeg_ctx *c = (jpeg_ctx *)ci->err;
    ci->err->format_message(ci, c->msg);
    longjmp(c->jmp, 1);
}

static void on_message(j_common_ptr ci, int level) {
    jpeg_ctx *c = (jpeg_ctx *)ci->err;
    if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) c->truncated = true;
}

static void on_progress(j_common_ptr ci) {
    jpeg_ctx *c = (jpeg_ctx *)ci->err;
    if (ci->is_decompressor && ((j_decompress_ptr)ci)->input_scan_number > JPEG_MAX_SCANS) {
        snprintf(c->msg, sizeof c->msg, "more than %d progressive scans", JPEG_MAX_SCANS);
        longjmp(c->jmp, 1);
    }
}

int mx_img_decode_jpeg(const uint8_t *data, size_t len, int64_t max_pixels, const char *what, mx_image *out, uint8_t **alpha) {
    *alpha = NULL; /* JPEG has no transparency */
    /* on the heap: what changes between setjmp and a longjmp must not be a local */
    jpeg_ctx *c = mx_calloc(1, sizeof *c);
    struct jpeg_decompress_struct *ci = mx_calloc(1, sizeof *ci);
    if (!c || !ci) {
        free(c);
        free(ci);
        return MX_ERR;
    }
    ci->err = jpeg_std_error(&c->err);
    c->err.error_exit = on_error;
    c->err.emit_message = on_message;
    if (setjmp(c->jmp)) {
        mx_set_err("%s: JPEG: %s", what, c->msg[0] ? c->msg : "decoding failed");
        goto fail;
    }
    jpeg_create_decompress(ci);
    c->progress.progress_monitor = on_progress;
    ci->progress = &c->progress;
    jpeg_mem_src(ci, data, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    if (c->truncated) {
        snprintf(c->msg, sizeof c->msg, "file is truncated");
        longjmp(c->jmp, 1);
    }
    if (mx_img_check_size(what, "JPEG", ci->image_width, ci->image_height, max_pixels)) goto fail;
    int comps = ci->num_components;
    if (comps == 1) ci->out_color_space = JCS_GRAYSCALE;
    else if (comps == 3) ci->out_color_space = JCS_RGB;
    else if (comps == 4) ci->out_color_space = JCS_CMYK;
    else {
        snprintf(c->msg, sizeof c->msg, "cannot handle %d-component images", comps);
        longjmp(c->jmp, 1);
    }
    jpeg_start_decompress(ci);
    int w = (int)ci->output_width, h = (int)ci->output_height, oc = ci->output_components;
    if (oc != (comps == 1 ? 1 : comps == 3 ? 3 : 4)) {
        snprintf(c->msg, sizeof c->msg, "unexpected output components %d", oc);
        longjmp(c->jmp, 1);
    }
    c->row = malloc((size_t)w * (size_t)oc);
    if (!c->row || mx_image_alloc(&c->im, w, h)) {
        snprintf(c->msg, sizeof c->msg, "out of memory");
        longjmp(c->jmp, 1);
    }
    while (ci->output_scanline < ci->output_height) {
        int y = (int)ci->output_scanline;
        JSAMPROW rp = c->row;
        if (jpeg_read_scanlines(ci, &rp, 1) != 1 || c->truncated) {
            snprintf(c->msg, sizeof c->msg, "file is truncated");
            longjmp(c->jmp, 1);
        }
        uint8_t *d = c->im.px + (size_t)y * (size_t)w * 3;
        const uint8_t *s = c->row;
        for (int x = 0; x < w; x++, d += 3) {
            if (oc == 1) d[0] = d[1] = d[2] = s[x];
            else if (oc == 3) memcpy(d, s + 3 * x, 3);
            else {
                /* "CMYK;I": the stored values are inverted */
                int k = 255 - s[4 * x + 3];
                for (int i = 0; i < 3; i++) d[i] = img_cmyk_channel(255 - s[4 * x + i], k);
            }
        }
    }
    jpeg_finish_decompress(ci);
    if (c->truncated) {
        snprintf(c->msg, sizeof c->msg, "file is truncated");
        longjmp(c->jmp, 1);
    }
    jpeg_destroy_decompress(ci);
    *out = c->im;
    free(c->row);
    free(c);
    free(ci);
    return MX_OK;
fail:
    jpeg_destroy_decompress(ci);
    free(c->row);
    mx_image_free(&c->im);
    free(c);
    free(ci);
    return MX_ERR;
}
