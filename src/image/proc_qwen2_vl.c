/* Qwen2VLImageProcessor: smart resize to multiples of patch * merge between
 * min_pixels and max_pixels (BICUBIC, CLIP mean/std), the frame repeated
 * temporal_patch_size times and cut into patches in merge-window order;
 * <|image_pad|> becomes one token per merged patch. */
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
        mx_cfg_i32(pre, "merge_size", 2, 1, 16, &p->merge) || mx_cfg_i32(pre, "temporal_patch_size", 2, 1, 16, &p->temporal))
        return MX_ERR;
    /* min/max_pixels at the top (released checkpoints), else in size, under
     * either spelling newer transformers writes */
    if (mx_improc_size(pre, "size", "shortest_edge", 56 * 56, 1, 1 << 28, &lo) ||
        mx_improc_size(pre, "size", "min_pixels", lo, 1, 1 << 28, &lo) || mx_cfg_i32(pre, "min_pixels", lo, 1, 1 << 28, &lo) ||
        mx_improc_size(pre, "size", "longest_edge", 28 * 28 * 1280, 1, 1 << 28, &hi) ||
        mx_improc_size(pre, "size", "max_pixels", hi, 1, 1 << 28, &hi) || mx_cfg_i32(pre, "max_pixels", hi, 1, 1 << 28, &hi))
        return MX_ERR;
    if (lo > hi) return mx_set_err("%s: min_pixels %d is above max_pixels %d", pre->file, lo, hi);
    p->min_pixels = lo;
    p->max_pixels = hi;
    strcpy(p->image_token, "<|image_pad|>");
    return MX_OK;
}

MX_IMAGE_PROCESSOR(qwen2_vl, .name = "Qwen2VLImageProcessor", .configure = configure)
