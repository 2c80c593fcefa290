/* GotOcr2ImageProcessor with crop_to_patches (InternVL, Aya Vision): the tile
 * grid (cols, rows) with min_patches <= cols * rows <= max_patches whose
 * ratio cols / rows is closest to the image's w / h (candidates by cols, then
 * rows, stably sorted by cols * rows; on an exact tie the later one wins when
 * the image's area exceeds half the grid's), the whole image resized to
 * (cols S, rows S) and cut into S x S tiles row-major, then, when there is
 * more than one tile, the whole image resized to S x S as a thumbnail
 * (BICUBIC; use_thumbnail). Without crop_to_patches: the image resized to
 * S x S. Each view rescaled and normalized (the tiles are already S x S, so
 * their own resize is a copy).
 *
 * The prompt: InternVLProcessor writes <img> + <IMG_CONTEXT> x
 * (image_seq_length x views) + </img>; AyaVisionProcessor writes
 * <|START_OF_IMG|>, then per tile k (from 1) the text "TILE_k" and
 * <|IMG_PATCH|> x (img_size / patch_size)^2, then "TILE_GLOBAL" and the
 * thumbnail's patches, <|END_OF_IMG|> (a single view: only the global one). */
#include "processor.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    int err = 0, mn, mx;
    p->layout = MX_IP_LAYOUT_SINGLE;
    p->resize = MX_IP_RESIZE_EXACT;
    if (mx_improc_common(p, pre) || mx_improc_size(pre, "size", "height", 384, 1, 8192, &p->size_h) ||
        mx_improc_size(pre, "size", "width", 384, 1, 8192, &p->size_w) || mx_cfg_bool(pre, "crop_to_patches", false, &p->do_split) ||
        mx_cfg_i32(pre, "min_patches", 1, 1, MX_IP_MAX_VIEWS - 1, &mn) || mx_cfg_i32(pre, "max_patches", 12, 1, MX_IP_MAX_VIEWS - 1, &mx) ||
        mx_cfg_bool(pre, "use_thumbnail", true, &p->thumbnail))
        return MX_ERR;
    if (mn > mx) return mx_set_err("%s: min_patches %d is above max_patches %d", pre->file, mn, mx);
    p->min_tiles = mn;
    p->max_tiles = mx;
    const char *cls = mx_cfg_str(proc, "processor_class", NULL, &err);
    if (!err && !cls) cls = mx_cfg_str(pre, "processor_class", "InternVLProcessor", &err);
    if (err) return MX_ERR;
    if (!strcmp(cls, "AyaVisionProcessor")) {
        int img, patch;
        if (mx_improc_str(proc, "image_token", "<image>", p->placeholder, sizeof p->placeholder) ||
            mx_improc_str(proc, "img_patch_token", "<|IMG_PATCH|>", p->image_token, sizeof p->image_token) ||
            mx_improc_str(proc, "start_of_img_token", "<|START_OF_IMG|>", p->pre, sizeof p->pre) ||
            mx_improc_str(proc, "end_of_img_token", "<|END_OF_IMG|>", p->post, sizeof p->post) ||
            mx_improc_str(proc, "tile_token", "TILE", p->fake_token, sizeof p->fake_token) ||
            mx_improc_str(proc, "tile_global_token", "TILE_GLOBAL", p->global_token, sizeof p->global_token) ||
            mx_cfg_i32(proc, "img_size", 364, 1, 8192, &img) || mx_cfg_i32(proc, "patch_size", 28, 1, 8192, &patch))
            return MX_ERR;
        p->tokens_per_view = (img / patch) * (img / patch);
    } else if (!strcmp(cls, "InternVLProcessor")) {
        int def;
        if (mx_cfg_i32(model, "image_seq_length", 256, 1, 1 << 16, &def) ||
            mx_cfg_i32(proc, "image_seq_length", def, 1, 1 << 16, &p->tokens_per_view))
            return MX_ERR;
        strcpy(p->image_token, "<IMG_CONTEXT>");
        strcpy(p->pre, "<img>");
        strcpy(p->post, "</img>");
    } else {
        return mx_set_err("%s: processor_class \"%s\" with GotOcr2ImageProcessor is not supported (InternVLProcessor, AyaVisionProcessor)",
                          proc->root ? proc->file : pre->file, cls);
    }
    return MX_OK;
}

/* transformers' get_optimal_tiled_canvas: (cols, rows) */
static void best_grid(const mx_image_processor *p, int h, int w, int *cols, int *rows) {
    double aspect = (double)w / h, area = (double)w * h, best = INFINITY;
    *cols = *rows = 1;
    for (int n = p->min_tiles; n <= p->max_tiles; n++) /* stably sorted by c * r: area by area, c then r */
        for (int c = 1; c <= n; c++) {
            if (n % c) continue;
            int r = n / c;
            double diff = fabs(aspect - (double)c / r);
            if (diff < best) {
                best = diff;
                *cols = c;
                *rows = r;
            } else if (diff == best && area > 0.5 * p->size_h * p->size_w * c * r) {
                *cols = c;
                *rows = r;
            }
        }
}

static int preprocess(const mx_image_processor *p, const mx_image *img, mx_image_input *out) {
    int S_h = p->size_h, S_w = p->size_w, cols = 1, rows = 1;
    if (!p->do_resize) return mx_set_err("image processor: do_resize false is not supported for GotOcr2ImageProcessor");
    if (p->do_split) best_grid(p, img->h, img->w, &cols, &rows);
    int tiles = cols * rows, n = tiles + (tiles > 1 && p->thumbnail ? 1 : 0);
    if (mx_improc_alloc_views(out, n, S_h, S_w)) return MX_ERR;
    if (mx_image_resize(img, cols * S_w, rows * S_h, p->resample, &out->resized)) return MX_ERR;
    size_t per = (size_t)3 * S_h * S_w;
    for (int k = 0; k < tiles; k++) {
        mx_image tile;
        if (mx_image_crop(&out->resized, (k % cols) * S_w, (k / cols) * S_h, S_w, S_h, &tile)) return MX_ERR;
        mx_improc_to_chw(p, &tile, out->pixels + per * (size_t)k);
        mx_image_free(&tile);
    }
    if (n > tiles) {
        if (mx_image_resize(img, S_w, S_h, p->resample, &out->resized_base)) return MX_ERR;
        mx_improc_to_chw(p, &out->resized_base, out->pixels + per * (size_t)tiles);
    }
    out->rows = rows;
    out->cols = cols;
    long long tokens = (long long)n * p->tokens_per_view;
    if (tokens > MX_IP_MAX_TOKENS) return mx_set_err("image processor: too many image tokens");
    out->n_tokens = (int)tokens;
    return MX_OK;
}

static int repeat(mx_buf *b, const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (mx_buf_puts(b, s)) return MX_ERR;
    return MX_OK;
}

static int expand(const mx_image_processor *p, const mx_image_input *im, mx_buf *b) {
    if (mx_buf_puts(b, p->pre)) return MX_ERR;
    if (!p->global_token[0]) /* InternVL */
        return repeat(b, p->image_token, im->n_tokens) || mx_buf_puts(b, p->post) ? MX_ERR : MX_OK;
    int views = im->n_tokens / p->tokens_per_view;
    for (int k = 1; k < views; k++)
        if (mx_buf_printf(b, "%s_%d", p->fake_token, k) || repeat(b, p->image_token, p->tokens_per_view)) return MX_ERR;
    return mx_buf_puts(b, p->global_token) || repeat(b, p->image_token, p->tokens_per_view) || mx_buf_puts(b, p->post) ? MX_ERR
                                                                                                                     : MX_OK;
}

MX_IMAGE_PROCESSOR(got_ocr2, .name = "GotOcr2ImageProcessor", .configure = configure, .preprocess = preprocess, .expand = expand)
