/* Mistral 3 (Mistral Small 3.x): the Pixtral tower at native resolution
 * (Conv2d patches without bias, ln_pre RMSNorm, RMSNorm / SwiGLU blocks
 * without biases, a 2-D rope over the patch grid: rows on the even
 * frequencies of a head_dim rope, columns on the odd ones), every layer's
 * output used; the projector: RMSNorm (the text rms_norm_eps), 2x2
 * neighbouring patches joined (torch unfold order) and merged by a bias-free
 * linear, then linear_1 -> GELU -> linear_2. The image rows replace the
 * [IMG] tokens of a Mistral text model ([IMG_BREAK] / [IMG_END] are text),
 * causally and unscaled. */
#include "vision.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    int layers, heads, head_dim, image_size, err = 0;
    float theta;
    const char *act = mx_cfg_str(top, "projector_hidden_act", "gelu", &err);
    if (err || mx_cfg_i32(vc, "hidden_size", 1024, 1, 1 << 16, &t->hidden) || mx_cfg_i32(vc, "intermediate_size", 4096, 1, 1 << 18, &t->ffn) ||
        mx_cfg_i32(vc, "num_hidden_layers", 24, 1, MX_MAX_LAYERS, &layers) || mx_cfg_i32(vc, "num_attention_heads", 16, 1, 4096, &heads) ||
        mx_cfg_i32(vc, "patch_size", 16, 1, 1024, &d->patch_size) || mx_cfg_i32(vc, "image_size", 1024, 1, 1 << 16, &image_size) ||
        mx_cfg_i32(vc, "num_channels", 3, 1, 16, &d->channels) || mx_cfg_f32(vc, "rope_theta", 10000, 1, 1e12f, &theta) ||
        mx_arch_act_default(t, vc, "gelu") || mx_arch_layers(t, layers) ||
        mx_cfg_i32(top, "image_token_index", 10, 0, 1 << 30, &d->image_token) ||
        mx_cfg_i32(top, "spatial_merge_size", 2, 1, 16, &d->merge) ||
        mx_cfg_bool(top, "multimodal_projector_bias", false, &d->proj_bias) ||
        mx_cfg_f32(text, "rms_norm_eps", 1e-6f, 0, 1, &d->proj_norm_eps) || mx_vision_feature_layer(top, layers, -1, &d->run_layers))
        return MX_ERR;
    if (mx_cfg_i32(vc, "head_dim", t->hidden / heads, 1, 4096, &head_dim)) return MX_ERR;
    if (d->channels != 3) return mx_set_err("%s: vision num_channels %d (images have 3)", vc->file, d->channels);
    if (head_dim % 4 || head_dim / 2 > MX_ROPE_MAX_HALF)
        return mx_set_err("%s: vision head_dim %d: the 2-D rope needs a multiple of 4 up to %d", vc->file, head_dim, 2 * MX_ROPE_MAX_HALF);
    if (mx_act_parse(act, &d->proj_act)) return mx_set_err("%s: projector_hidden_act: unsupported '%s'", top->file, act);
    d->max_side = image_size / d->patch_size;
    if (d->max_side < 1) return mx_set_err("%s: vision image_size %d is smaller than patch_size %d", vc->file, image_size, d->patch_size);
    mx_attn_spec *s = t->attn;
    mx_vit_attn(s, heads, head_dim);
    s->names = (mx_attn_names){.q = "transformer.layers.%d.attention.q_proj", .k = "transformer.layers.%d.attention.k_proj",
                               .v = "transformer.layers.%d.attention.v_proj", .o = "transformer.layers.%d.attention.o_proj"};
    t->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, 1e-5f};
    t->mlp = MX_MLP_GATED;
    t->embed_scale = t->logit_scale = t->residual_scale = 1;
    t->bos_id = -1;
    t->pos = MX_POS_ROPE;
    t->n_rope = 1;
    t->rope[0] = (mx_rope){.kind = MX_ROPE_DEFAULT, .theta = theta, .dim = head_dim, .factor = 1, .attn_factor = 1,
                           .n_axes = 2, .section = {head_dim / 4, head_dim / 4}, .section_strided = true};
    t->names = (mx_names){.embed_norm = "ln_pre", .attn_norm = "transformer.layers.%d.attention_norm",
                          .ffn_norm = "transformer.layers.%d.ffn_norm", .gate = "transformer.layers.%d.feed_forward.gate_proj",
                          .up = "transformer.layers.%d.feed_forward.up_proj", .down = "transformer.layers.%d.feed_forward.down_proj"};
    d->prefix[0] = "model.vision_tower.";
    d->prefix[1] = "vision_tower.";
    d->patch = "patch_conv";
    d->proj_prefix[0] = "model.multi_modal_projector.";
    d->proj_prefix[1] = "multi_modal_projector.";
    d->proj = MX_VPROJ_PATCH_MERGE;
    d->proj_norm = "norm";
    d->proj_merge = "patch_merger.merging_layer";
    d->proj_in = "linear_1";
    d->proj_out = "linear_2";
    d->mask = MX_VMASK_CAUSAL;
    return MX_OK;
}

MX_VISION_FAMILY(mistral3, .name = "mistral3", .configure = configure,
                  .features = "pixtral vit (2-d rope, rmsnorm, swiglu) at native resolution, rmsnorm + 2x2 patch merger + mlp; [IMG_BREAK]/[IMG_END] rows; mistral text")
