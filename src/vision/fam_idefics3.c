/* Idefics3 (and SmolVLM: v1 published as idefics3, SmolVLM2 as smolvlm, the
 * same model under its own class names): a SigLIP-style tower on
 * every tile and the global view (last layer, post-norm), pixel shuffle by
 * scale_factor and a bias-free linear connector; rows enter a Llama text
 * model causally, unscaled. */
#include "vision.h"
#include "../base/base.h"

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    if (mx_vit_configure(t, vc, 1152, 3072, 12, 16, "gelu_pytorch_tanh", 1e-6f) ||
        mx_cfg_i32(vc, "patch_size", 32, 1, 1024, &d->patch_size) ||
        mx_cfg_i32(top, "image_token_id", 128257, 0, 1 << 30, &d->image_token) ||
        mx_cfg_i32(top, "scale_factor", 2, 1, 16, &d->shuffle))
        return MX_ERR;
    mx_siglip_tower(d, t, "model.vision_model.", "vision_model.");
    d->proj_prefix[0] = "model.connector.";
    d->proj_prefix[1] = "connector.";
    d->proj = MX_VPROJ_SHUFFLE;
    d->proj_in = "modality_projection.proj";
    d->mask = MX_VMASK_CAUSAL;
    return MX_OK;
}

static const char *const aliases[] = {"smolvlm", NULL};
MX_VISION_FAMILY(idefics3, .name = "idefics3", .aliases = aliases, .configure = configure,
                  .features = "siglip per tile + global image, pixel shuffle + linear; idefics3 splitting; llama text")
