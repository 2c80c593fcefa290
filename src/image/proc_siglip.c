/* SiglipImageProcessor (PaliGemma): straight to S x S, mean = std = 0.5; the
 * image tokens go before BOS and the text, which ends with "\n". */
#include "processor.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    (void)proc;
    p->resize = MX_IP_RESIZE_EXACT;
    p->layout = MX_IP_LAYOUT_SINGLE;
    p->prompt = MX_IP_PROMPT_PREFIX;
    for (int c = 0; c < 3; c++) p->mean[c] = p->std[c] = 0.5f;
    if (mx_improc_common(p, pre) || mx_improc_size(pre, "size", "height", 224, 1, 8192, &p->size_h) ||
        mx_improc_size(pre, "size", "width", 224, 1, 8192, &p->size_w))
        return MX_ERR;
    /* image_seq_length, else the text model's num_image_tokens, else one per patch */
    int patch, def;
    json_t *text = model->root ? json_object_get(model->root, "text_config") : NULL;
    mx_cfg tc = {model->root, text, model->file};
    if (mx_cfg_i32(model, "patch_size", 14, 1, 1024, &patch)) return MX_ERR;
    def = (p->size_h / patch) * (p->size_w / patch);
    if ((text && mx_cfg_i32(&tc, "num_image_tokens", def, 1, 1 << 16, &def)) ||
        mx_cfg_i32(pre, "image_seq_length", def, 1, 1 << 16, &p->tokens_per_view))
        return MX_ERR;
    memcpy(p->image_token, "<image>", 8);
    return MX_OK;
}

MX_IMAGE_PROCESSOR(siglip, .name = "SiglipImageProcessor", .configure = configure)
