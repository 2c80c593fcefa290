/* Glm4vImageProcessor: Qwen2-VL's layout (smart resize to multiples of
 * patch * merge, BICUBIC, CLIP mean/std, the frame repeated
 * temporal_patch_size times and cut into patches in merge-window order) with
 * GLM-4V's smart resize: the image counts as temporal_patch_size frames
 * against size.shortest_edge / size.longest_edge (pixel bounds), small images
 * are scaled up. <|image|> becomes one token per merged patch. */
#include "processor.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    (void)proc;
    (void)model;
    p->resize = MX_IP_RESIZE_SMART;
    p->layout = MX_IP_LAYOUT_PATCHIFY;
    p->prompt = MX_IP_PROMPT_REPEAT;
    int lo, hi;
    if (mx_improc_common(p, pre) || mx_cfg_i32(pre, "patch_size", 14, 1, 1024, &p->patch) ||
        mx_cfg_i32(pre, "merge_size", 2, 1, 16, &p->merge) || mx_cfg_i32(pre, "temporal_patch_size", 2, 1, 16, &p->temporal) ||
        mx_improc_size(pre, "size", "shortest_edge", 112 * 112, 1, 1 << 28, &lo) ||
        mx_improc_size(pre, "size", "longest_edge", 28 * 28 * 15000, 1, 1 << 28, &hi))
        return MX_ERR;
    if (lo > hi) return mx_set_err("%s: size.shortest_edge %d is above size.longest_edge %d", pre->file, lo, hi);
    p->min_pixels = lo;
    p->max_pixels = hi;
    p->smart_frames = p->temporal;
    strcpy(p->image_token, "<|image|>");
    return MX_OK;
}

MX_IMAGE_PROCESSOR(glm4v, .name = "Glm4vImageProcessor", .configure = configure)
