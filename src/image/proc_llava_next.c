/* LlavaNextImageProcessor (any-res): the CLIP pipeline on a base view (the
 * whole image squashed to S x S) and on the tiles of the pinpoint resolution
 * that best fits the image (resized keeping the aspect ratio, zero-padded);
 * the token count follows the model's unpadding of the tile features plus a
 * newline row end. Padding: (d // 2) before and the rest after, as current
 * transformers (4.48 padded d // 2 on both sides; equal for even d). */
#include "processor.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    p->layout = MX_IP_LAYOUT_ANYRES;
    p->prompt = MX_IP_PROMPT_REPEAT;
    p->do_center_crop = true;
    if (mx_improc_common(p, pre) || mx_improc_clip_sizes(p, pre, 224) || mx_improc_llava_tokens(p, proc, model) ||
        mx_improc_str(proc, "image_token", "<image>", p->image_token, sizeof p->image_token))
        return MX_ERR;
    if (p->crop_h != p->crop_w) return mx_set_err("%s: crop_size: any-res tiles need a square crop", pre->file);
    /* the base view: size (S, S), or the smaller of height and width */
    if (p->resize == MX_IP_RESIZE_EXACT) p->size_w = MX_MIN(p->size_h, p->size_w);
    json_t *pp = mx_cfg_get(pre, "image_grid_pinpoints");
    const char *file = pre->file;
    if (!pp && model->root) {
        pp = json_object_get(model->root, "image_grid_pinpoints");
        file = model->file;
    }
    static const int def[5][2] = {{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}};
    if (!pp || json_is_null(pp)) {
        p->n_pinpoints = 5;
        memcpy(p->pinpoints, def, sizeof def);
        return MX_OK;
    }
    if (!json_is_array(pp) || !json_array_size(pp) || json_array_size(pp) > MX_IP_MAX_PINPOINTS)
        return mx_set_err("%s: image_grid_pinpoints: expected 1 to %d [height, width] pairs", file, MX_IP_MAX_PINPOINTS);
    for (size_t i = 0; i < json_array_size(pp); i++) {
        json_t *e = json_array_get(pp, i);
        double v[2];
        if (!json_is_array(e) || json_array_size(e) != 2) return mx_set_err("%s: image_grid_pinpoints[%zu]: expected [height, width]", file, i);
        for (int k = 0; k < 2; k++)
            if (mx_json_num(json_array_get(e, (size_t)k), file, "image_grid_pinpoints", 1, 8192, &v[k])) return MX_ERR;
        p->pinpoints[i][0] = (int)v[0];
        p->pinpoints[i][1] = (int)v[1];
    }
    p->n_pinpoints = (int)json_array_size(pp);
    return MX_OK;
}

MX_IMAGE_PROCESSOR(llava_next, .name = "LlavaNextImageProcessor", .configure = configure)
