/* WebP through libwebp's animation decoder, as Pillow 9.4 reads every WebP
 * file (WebPImagePlugin with WebPAnimDecoder): the first frame composited on
 * the canvas in non-premultiplied RGBA, whose alpha convert("RGB") drops
 * (and Idefics3's processor composites over white).
 * For a still image that is the decoded picture (RGB under alpha 0 kept as
 * stored); for an animation, frame one on a transparent-black canvas.
 * The canvas size is checked before the decoder allocates it. */
#include "image_internal.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/demux.h>

int mx_img_decode_webp(const uint8_t *data, size_t len, int64_t max_pixels, const char *what, mx_image *out, uint8_t **alpha) {
    *alpha = NULL;
    WebPBitstreamFeatures feat;
    VP8StatusCode st = WebPGetFeatures(data, len, &feat);
    if (st != VP8_STATUS_OK)
        return mx_set_err("%s: WebP: %s", what, st == VP8_STATUS_NOT_ENOUGH_DATA ? "file is truncated" : "invalid header");
    if (mx_img_check_size(what, "WebP", feat.width, feat.height, max_pixels)) return MX_ERR;
    WebPAnimDecoderOptions opt;
    if (!WebPAnimDecoderOptionsInit(&opt)) return mx_set_err("%s: WebP: library version mismatch", what);
    opt.color_mode = MODE_RGBA;
    opt.use_threads = 0;
    WebPData wd = {data, len};
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&wd, &opt);
    if (!dec) return mx_set_err("%s: WebP: invalid or truncated file", what);
    WebPAnimInfo info;
    uint8_t *rgba = NULL;
    int ts = 0;
    if (!WebPAnimDecoderGetInfo(dec, &info) || (int64_t)info.canvas_width != feat.width ||
        (int64_t)info.canvas_height != feat.height) {
        WebPAnimDecoderDelete(dec);
        return mx_set_err("%s: WebP: inconsistent canvas size", what);
    }
    if (!WebPAnimDecoderGetNext(dec, &rgba, &ts) || !rgba) {
        WebPAnimDecoderDelete(dec);
        return mx_set_err("%s: WebP: cannot decode the first frame (corrupt or truncated data)", what);
    }
    if (mx_image_alloc(out, feat.width, feat.height)) {
        WebPAnimDecoderDelete(dec);
        return mx_err_prefix("%s: WebP", what);
    }
    size_t n = (size_t)feat.width * (size_t)feat.height;
    for (size_t i = 0; i < n; i++) memcpy(out->px + 3 * i, rgba + 4 * i, 3);
    /* Pillow's mode is "RGBA" only when the bitstream says it has alpha */
    if (feat.has_alpha && (*alpha = mx_malloc(n)))
        for (size_t i = 0; i < n; i++) (*alpha)[i] = rgba[4 * i + 3];
    WebPAnimDecoderDelete(dec);
    if (feat.has_alpha && !*alpha) {
        mx_image_free(out);
        return mx_err_prefix("%s: WebP", what);
    }
    return MX_OK;
}
