/* LLaVA and LLaVA-NeXT: a CLIP tower read at vision_feature_layer (default
 * the second to last layer's output, no post-norm), the CLS row dropped under
 * the "default" strategy, a linear -> act -> linear projector; LLaVA-NeXT runs
 * the tower on every any-res view and packs the tiles with image_newline.
 * Image rows enter a Llama-style text model causally, unscaled. */
#include "vision.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    int err = 0;
    const char *act = mx_cfg_str(top, "projector_hidden_act", "gelu", &err);
    const char *strategy = mx_cfg_str(top, "vision_feature_select_strategy", "default", &err);
    if (err || mx_vit_configure(t, vc, 768, 3072, 12, 12, "quick_gelu", 1e-5f) ||
        mx_cfg_i32(vc, "patch_size", 32, 1, 1024, &d->patch_size) || mx_cfg_i32(top, "image_token_index", 32000, 0, 1 << 30, &d->image_token) ||
        mx_cfg_bool(top, "multimodal_projector_bias", true, &d->proj_bias) || mx_vision_feature_layer(top, t->n_layers, -2, &d->run_layers))
        return MX_ERR;
    if (mx_act_parse(act, &d->proj_act)) return mx_set_err("%s: projector_hidden_act: unsupported '%s'", top->file, act);
    if (strcmp(strategy, "default") && strcmp(strategy, "full"))
        return mx_set_err("%s: vision_feature_select_strategy \"%s\" is not \"default\" or \"full\"", top->file, strategy);
    d->drop_cls = !strcmp(strategy, "default");
    d->prefix[0] = "vision_tower.vision_model.";
    d->prefix[1] = "model.vision_tower.vision_model.";
    d->patch = "embeddings.patch_embedding";
    d->cls = "embeddings.class_embedding";
    d->pos = "embeddings.position_embedding";
    t->names.embed_norm = "pre_layrnorm";
    mx_arch_ignore(t, "post_layernorm.*"); /* pools the CLS row only: not used */
    mx_arch_ignore(t, "embeddings.position_ids");
    d->proj_prefix[0] = "multi_modal_projector.";
    d->proj_prefix[1] = "model.multi_modal_projector.";
    d->proj = MX_VPROJ_MLP;
    d->proj_in = "linear_1";
    d->proj_out = "linear_2";
    d->mask = MX_VMASK_CAUSAL;
    return MX_OK;
}

static int configure_next(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    if (configure(d, t, vc, top, text)) return MX_ERR;
    d->newline[0] = "image_newline";
    d->newline[1] = "model.image_newline";
    return MX_OK;
}

MX_VISION_FAMILY(llava, .name = "llava", .configure = configure,
                  .features = "clip vit at vision_feature_layer, mlp projector; shortest-edge resize + center crop")
MX_VISION_FAMILY(llava_next, .name = "llava_next", .configure = configure_next,
                  .features = "clip vit on any-res tiles, mlp projector, unpadded packing with image_newline")
