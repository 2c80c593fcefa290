/* PixtralImageProcessor with PixtralProcessor (Mistral 3, Pixtral): native
 * resolution. The image is scaled down (never up) so that its sides fit
 * size.longest_edge (or size.height / size.width), each side floored, then
 * each side rounded up to a multiple of F = patch_size * spatial_merge_size
 * (the processor hands the image processor that product as its patch size)
 * and resized straight to that (BICUBIC); CLIP mean/std, one view, no
 * padding. The prompt's [IMG] becomes, per row of merged patches, [IMG] x
 * cols + [IMG_BREAK], the last break written as [IMG_END]; only the [IMG]
 * tokens take image rows. Transparency: HF pastes the image over opaque white
 * with its own alpha as the mask; that rounds as the alpha_composite over white
 * used here (both DIV255(c a + 255 (255 - a)); checked for every c and a). */
#include "processor.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    (void)model;
    int longest, pp, merge;
    p->layout = MX_IP_LAYOUT_SINGLE;
    p->alpha_white = true;
    if (mx_improc_common(p, pre) || mx_improc_size(pre, "size", "longest_edge", 1024, 1, 8192, &longest) ||
        mx_improc_size(pre, "size", "height", longest, 1, 8192, &p->size_h) ||
        mx_improc_size(pre, "size", "width", longest, 1, 8192, &p->size_w) ||
        mx_improc_size(pre, "patch_size", "height", 16, 1, 1024, &pp) ||
        mx_cfg_i32(proc, "patch_size", pp, 1, 1024, &p->patch) ||
        mx_cfg_i32(proc, "spatial_merge_size", 1, 1, 16, &merge) ||
        mx_improc_str(proc, "image_token", "[IMG]", p->image_token, sizeof p->image_token) ||
        mx_improc_str(proc, "image_break_token", "[IMG_BREAK]", p->pre, sizeof p->pre) ||
        mx_improc_str(proc, "image_end_token", "[IMG_END]", p->post, sizeof p->post))
        return MX_ERR;
    p->merge = merge;
    if (p->patch * merge > 4096) return mx_set_err("%s: patch_size x spatial_merge_size %d is too large", proc->file, p->patch * merge);
    return MX_OK;
}

static int preprocess(const mx_image_processor *p, const mx_image *img, mx_image_input *out) {
    int F = p->patch * p->merge, h = img->h, w = img->w;
    if (p->do_resize) {
        double ratio = fmax((double)h / p->size_h, (double)w / p->size_w);
        if (ratio > 1) {
            h = (int)floor(h / ratio);
            w = (int)floor(w / ratio);
        }
        h = ((MX_MAX(h, 1) - 1) / F + 1) * F;
        w = ((MX_MAX(w, 1) - 1) / F + 1) * F;
        if (mx_image_resize(img, w, h, p->resample, &out->resized)) return MX_ERR;
    } else if (h % F || w % F) {
        return mx_set_err("image %dx%d: not a multiple of %d and do_resize is off", w, h, F);
    }
    const mx_image *cur = out->resized.px ? &out->resized : img;
    if (mx_improc_alloc_views(out, 1, h, w)) return MX_ERR;
    mx_improc_to_chw(p, cur, out->pixels);
    out->rows = h / F;
    out->cols = w / F;
    out->n_tokens = out->rows * out->cols; /* bounded by the pixel values above */
    return MX_OK;
}

static int expand(const mx_image_processor *p, const mx_image_input *im, mx_buf *b) {
    for (int y = 0; y < im->rows; y++) {
        for (int x = 0; x < im->cols; x++)
            if (mx_buf_puts(b, p->image_token)) return MX_ERR;
        if (mx_buf_puts(b, y + 1 < im->rows ? p->pre : p->post)) return MX_ERR;
    }
    return MX_OK;
}

MX_IMAGE_PROCESSOR(pixtral, .name = "PixtralImageProcessor", .configure = configure, .preprocess = preprocess, .expand = expand)
