/* Aya Vision: a SigLIP tower on every GOT-OCR2 tile and the thumbnail, read
 * at vision_feature_layer (default the last layer, before post_layernorm),
 * then the projector: pixel shuffle by downsample_factor, LayerNorm
 * (adapter_layer_norm_eps) -> linear_1 (to alignment_intermediate_size, by
 * default the text hidden size) -> SwiGLU (first half x, second half
 * gate) -> linear_2. The rows fill <|IMG_PATCH|> in a Cohere2 text model,
 * causally, unscaled; the package's own lm_head gives the logits, without
 * Cohere's logit_scale (text-only runs of the folder too). */
#include "vision.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    int err = 0;
    const char *strategy = mx_cfg_str(top, "vision_feature_select_strategy", "full", &err);
    if (err || mx_vit_configure(t, vc, 1152, 4304, 27, 16, "gelu_pytorch_tanh", 1e-6f) ||
        mx_cfg_i32(vc, "patch_size", 14, 1, 1024, &d->patch_size) || mx_cfg_i32(top, "image_token_index", 255036, 0, 1 << 30, &d->image_token) ||
        mx_cfg_i32(top, "downsample_factor", 2, 1, 16, &d->shuffle) ||
        mx_cfg_i32(top, "alignment_intermediate_size", d->proj_dim, 2, 1 << 18, &d->proj_mid) ||
        mx_cfg_f32(top, "adapter_layer_norm_eps", 1e-6f, 0, 1, &d->proj_norm_eps) ||
        mx_vision_feature_layer(top, t->n_layers, -1, &d->run_layers))
        return MX_ERR;
    if (strcmp(strategy, "full")) return mx_set_err("%s: vision_feature_select_strategy \"%s\": only \"full\" is supported", top->file, strategy);
    int run = d->run_layers;
    mx_siglip_tower(d, t, "model.vision_tower.vision_model.", "vision_tower.vision_model.");
    d->run_layers = run;
    t->names.final_norm = NULL; /* hidden_states[layer]: before post_layernorm */
    mx_arch_ignore(t, "post_layernorm.*");
    mx_arch_ignore(t, "head.*"); /* SigLIP's pooling head: not used */
    d->proj_prefix[0] = "model.multi_modal_projector.";
    d->proj_prefix[1] = "multi_modal_projector.";
    d->proj = MX_VPROJ_SHUFFLE_MLP;
    d->proj_glu = true;
    d->proj_norm = "layernorm";
    d->proj_in = "linear_1";
    d->proj_out = "linear_2";
    d->mask = MX_VMASK_CAUSAL;
    d->head_unscaled = true; /* AyaVisionForConditionalGeneration's lm_head: no Cohere logit_scale */
    return MX_OK;
}

MX_VISION_FAMILY(aya_vision, .name = "aya_vision", .configure = configure,
                  .features = "siglip per tile + thumbnail, pixel shuffle + layernorm/swiglu; got-ocr2 tiling with TILE_k markers; cohere2 text")
