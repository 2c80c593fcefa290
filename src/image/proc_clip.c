/* CLIPImageProcessor (LLaVA 1.5): shortest edge to S, center crop, CLIP
 * mean/std; each <image> becomes one token per patch of the tower, plus the
 * CLS row under the "full" feature strategy. */
#include "processor.h"
#include "../base/base.h"
#include <string.h>

int mx_improc_clip_sizes(mx_image_processor *p, const mx_cfg *pre, int def) {
    json_t *size = mx_cfg_get(pre, "size");
    bool exact = size && json_is_object(size) && !json_object_get(size, "shortest_edge") && json_object_get(size, "height");
    p->resize = exact ? MX_IP_RESIZE_EXACT : MX_IP_RESIZE_SHORTEST_EDGE;
    if (exact) {
        if (mx_improc_size(pre, "size", "height", def, 1, 8192, &p->size_h) ||
            mx_improc_size(pre, "size", "width", def, 1, 8192, &p->size_w))
            return MX_ERR;
    } else if (mx_improc_size(pre, "size", "shortest_edge", def, 1, 8192, &p->size_w)) {
        return MX_ERR;
    }
    return mx_improc_size(pre, "crop_size", "height", def, 1, 8192, &p->crop_h) ||
                   mx_improc_size(pre, "crop_size", "width", def, 1, 8192, &p->crop_w)
               ? MX_ERR
               : MX_OK;
}

int mx_improc_llava_tokens(mx_image_processor *p, const mx_cfg *proc, const mx_cfg *model) {
    int patch, extra, err = 0;
    if (mx_cfg_i32(model, "patch_size", 14, 1, 1024, &patch) || mx_cfg_i32(proc, "patch_size", patch, 1, 1024, &p->feature_patch))
        return MX_ERR;
    /* a CLIP tower has a CLS row, SigLIP towers none */
    const char *tower = mx_cfg_str(model, "model_type", "clip_vision_model", &err);
    const char *strategy = mx_cfg_str(model, "vision_feature_select_strategy", "default", &err);
    if (err) return MX_ERR;
    strategy = mx_cfg_str(proc, "vision_feature_select_strategy", strategy, &err);
    if (err || mx_cfg_i32(proc, "num_additional_image_tokens", !strcmp(tower, "clip_vision_model"), 0, 16, &extra)) return MX_ERR;
    if (strcmp(strategy, "default") && strcmp(strategy, "full"))
        return mx_set_err("%s: vision_feature_select_strategy \"%s\" is not \"default\" or \"full\"", proc->file, strategy);
    p->extra_tokens = extra - !strcmp(strategy, "default");
    return MX_OK;
}

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    p->layout = MX_IP_LAYOUT_SINGLE;
    p->prompt = MX_IP_PROMPT_REPEAT;
    p->do_center_crop = true;
    if (mx_improc_common(p, pre) || mx_improc_clip_sizes(p, pre, 224) || mx_improc_llava_tokens(p, proc, model) ||
        mx_improc_str(proc, "image_token", "<image>", p->image_token, sizeof p->image_token))
        return MX_ERR;
    return MX_OK;
}

MX_IMAGE_PROCESSOR(clip, .name = "CLIPImageProcessor", .configure = configure)
