/* Gemma 3: a SigLIP tower (last layer, post-norm); the projector average-
 * pools the patch map to mm_tokens_per_image, applies a (1 + w) RMSNorm and
 * multiplies by mm_input_projection_weight; the rows enter unscaled and each
 * image's block of tokens attends both ways (in every layer). */
#include "vision.h"
#include "../base/base.h"

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    if (mx_vit_configure(t, vc, 1152, 4304, 27, 16, "gelu_pytorch_tanh", 1e-6f) ||
        mx_cfg_i32(vc, "patch_size", 14, 1, 1024, &d->patch_size) ||
        mx_cfg_f32(vc, "layer_norm_eps", 1e-6f, 0, 1, &d->proj_norm_eps) ||
        mx_cfg_i32(top, "image_token_index", 262144, 0, 1 << 30, &d->image_token) ||
        mx_cfg_i32(top, "mm_tokens_per_image", 256, 1, 1 << 16, &d->pool_tokens))
        return MX_ERR;
    mx_siglip_tower(d, t, "vision_tower.vision_model.", "model.vision_tower.vision_model.");
    mx_arch_ignore(t, "head.*");
    d->proj_prefix[0] = "multi_modal_projector.";
    d->proj_prefix[1] = "model.multi_modal_projector.";
    d->proj = MX_VPROJ_POOL_NORM;
    d->proj_in = "mm_input_projection_weight";
    d->proj_norm = "mm_soft_emb_norm";
    d->mask = MX_VMASK_IMAGE_BLOCK;
    return MX_OK;
}

MX_VISION_FAMILY(gemma3, .name = "gemma3", .configure = configure,
                  .features = "siglip, avg pool + (1+w) rmsnorm + projection; each image block attends both ways; gemma3 text")
