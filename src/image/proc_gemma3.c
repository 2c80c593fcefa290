/* Gemma3ImageProcessor: straight to S x S with BILINEAR, mean = std = 0.5;
 * each <start_of_image> becomes "\n\n<start_of_image>" + <image_soft_token> x
 * mm_tokens_per_image + "<end_of_image>\n\n". Pan-and-scan crops are not
 * implemented and refused. */
#include "processor.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model) {
    p->resize = MX_IP_RESIZE_EXACT;
    p->layout = MX_IP_LAYOUT_SINGLE;
    p->prompt = MX_IP_PROMPT_WRAP;
    p->resample = MX_RESAMPLE_BILINEAR;
    for (int c = 0; c < 3; c++) p->mean[c] = p->std[c] = 0.5f;
    bool pan;
    int def;
    if (mx_improc_common(p, pre) || mx_improc_size(pre, "size", "height", 224, 1, 8192, &p->size_h) ||
        mx_improc_size(pre, "size", "width", 224, 1, 8192, &p->size_w) || mx_cfg_bool(pre, "do_pan_and_scan", false, &pan))
        return MX_ERR;
    if (pan) return mx_set_err("%s: do_pan_and_scan: pan-and-scan crops are not supported", pre->file);
    mx_cfg root = {model->root, NULL, model->file};
    if (mx_cfg_i32(&root, "mm_tokens_per_image", 256, 1, 1 << 16, &def) ||
        mx_cfg_i32(proc, "image_seq_length", def, 1, 1 << 16, &p->tokens_per_view))
        return MX_ERR;
    strcpy(p->placeholder, "<start_of_image>");
    strcpy(p->image_token, "<image_soft_token>");
    strcpy(p->pre, "\n\n<start_of_image>");
    strcpy(p->post, "<end_of_image>\n\n");
    return MX_OK;
}

MX_IMAGE_PROCESSOR(gemma3, .name = "Gemma3ImageProcessor", .configure = configure)
