/* PaliGemma: a SigLIP tower (last layer, post-norm), one linear projector;
 * the image rows are divided by sqrt(hidden) and then take Gemma's embedding
 * scale like the tokens; the whole prompt (image, BOS, text, "\n") attends
 * both ways during the prompt pass. */
#include "vision.h"
#include "../base/base.h"

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    if (mx_vit_configure(t, vc, 768, 3072, 12, 12, "gelu_pytorch_tanh", 1e-6f) ||
        mx_cfg_i32(vc, "patch_size", 16, 1, 1024, &d->patch_size) ||
        mx_cfg_i32(top, "image_token_index", 256000, 0, 1 << 30, &d->image_token))
        return MX_ERR;
    mx_siglip_tower(d, t, "vision_tower.vision_model.", "model.vision_tower.vision_model.");
    mx_arch_ignore(t, "head.*"); /* SigLIP's pooling head: not used */
    d->proj_prefix[0] = "multi_modal_projector.";
    d->proj_prefix[1] = "model.multi_modal_projector.";
    d->proj = MX_VPROJ_LINEAR;
    d->proj_in = "linear";
    d->proj_bias = true;
    d->rows_scaled = d->rows_div_sqrt = true;
    d->mask = MX_VMASK_PREFIX;
    return MX_OK;
}

MX_VISION_FAMILY(paligemma, .name = "paligemma", .configure = configure,
                  .features = "siglip, linear projector; the prompt attends both ways (prefix-lm); gemma text")
