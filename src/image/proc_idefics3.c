/* Idefics3ImageProcessor (and SmolVLMImageProcessor, the same steps): LANCZOS, mean = std = 0.5, the
 * longest edge to size.longest_edge, then up to multiples of
 * max_image_size.longest_edge (M), cut into M x M tiles plus the whole image
 * at M x M; transparency composited over white. The prompt gets
 * <fake_token_around_image><row_r_col_c><image> x image_seq_len per tile.
 * HF resizes in the file's own mode and converts afterwards (gray and palette
 * images with nearest, RGBA premultiplied); here the image is converted
 * first, which is the same for RGB images. */
#include "processor.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    (void)model;
    p->resize = MX_IP_RESIZE_LONGEST_EDGE;
    p->layout = MX_IP_LAYOUT_SPLIT;
    p->prompt = MX_IP_PROMPT_GRID;
    p->alpha_white = true;
    p->resample = MX_RESAMPLE_LANCZOS;
    for (int c = 0; c < 3; c++) p->mean[c] = p->std[c] = 0.5f;
    if (mx_improc_common(p, pre) || mx_cfg_bool(pre, "do_image_splitting", true, &p->do_split) ||
        mx_improc_size(pre, "size", "longest_edge", 4 * 364, 1, 4096, &p->size_w) ||
        mx_improc_size(pre, "max_image_size", "longest_edge", 364, 1, 4096, &p->tile) ||
        mx_cfg_i32(proc, "image_seq_len", 169, 1, 1 << 16, &p->tokens_per_view))
        return MX_ERR;
    strcpy(p->image_token, "<image>");
    strcpy(p->fake_token, "<fake_token_around_image>");
    strcpy(p->global_token, "<global-img>");
    return MX_OK;
}

static const char *const aliases[] = {"SmolVLMImageProcessor", NULL};
MX_IMAGE_PROCESSOR(idefics3, .name = "Idefics3ImageProcessor", .aliases = aliases, .configure = configure)
