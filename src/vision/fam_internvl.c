/* InternVL (the transformers-native "internvl" checkpoints): InternViT on
 * every GOT-OCR2 tile and the thumbnail (patch embedding with bias, a CLS
 * row, learned positions; pre-norm blocks with LayerNorm or RMSNorm, optional
 * whole-width q/k RMSNorm, layer scale lambda_1 / lambda_2 on the attention
 * and MLP outputs; the final LayerNorm unless use_mean_pooling), the CLS row
 * dropped, pixel shuffle by 1 / downsample_ratio, then the projector:
 * LayerNorm -> linear_1 -> GELU -> linear_2. The rows fill <IMG_CONTEXT> in a
 * Qwen2 (or other) text model, causally, unscaled. */
#include "vision.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

/* an int or a square [n, n] pair (image_size, patch_size) */
static int read_side(const mx_cfg *c, const char *key, int def, int *out) {
    json_t *v = mx_cfg_get(c, key);
    if (v && json_is_array(v)) {
        if (json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 0)) ||
            json_integer_value(json_array_get(v, 0)) != json_integer_value(json_array_get(v, 1)))
            return mx_set_err("%s: vision %s: expected an integer or a square [n, n]", c->file, key);
        json_int_t n = json_integer_value(json_array_get(v, 0));
        if (n < 1 || n > 8192) return mx_set_err("%s: vision %s %lld is out of range", c->file, key, (long long)n);
        *out = (int)n;
        return MX_OK;
    }
    return mx_cfg_i32(c, key, def, 1, 8192, out);
}

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    int layers, heads, err = 0, image_size;
    bool qkv_bias, qk_norm, mean_pool;
    float eps, ratio;
    const char *norm = mx_cfg_str(vc, "norm_type", "layer_norm", &err);
    const char *act = mx_cfg_str(top, "projector_hidden_act", "gelu", &err);
    const char *strategy = mx_cfg_str(top, "vision_feature_select_strategy", "default", &err);
    if (err || mx_cfg_i32(vc, "hidden_size", 1024, 1, 1 << 16, &t->hidden) || mx_cfg_i32(vc, "intermediate_size", 4096, 1, 1 << 18, &t->ffn) ||
        mx_cfg_i32(vc, "num_hidden_layers", 24, 1, MX_MAX_LAYERS, &layers) || mx_cfg_i32(vc, "num_attention_heads", 16, 1, 4096, &heads) ||
        mx_cfg_bool(vc, "attention_bias", false, &qkv_bias) || mx_cfg_bool(vc, "use_qk_norm", false, &qk_norm) ||
        mx_cfg_bool(vc, "use_mean_pooling", true, &mean_pool) || mx_cfg_f32(vc, "layer_norm_eps", 1e-6f, 0, 1, &eps) ||
        read_side(vc, "patch_size", 14, &d->patch_size) || read_side(vc, "image_size", 448, &image_size) ||
        mx_cfg_i32(vc, "num_channels", 3, 1, 16, &d->channels) || mx_arch_act_default(t, vc, "gelu") || mx_arch_layers(t, layers) ||
        mx_cfg_i32(top, "image_token_id", 151667, 0, 1 << 30, &d->image_token) ||
        mx_cfg_f32(top, "downsample_ratio", 0.5f, 1e-3f, 1, &ratio) || mx_vision_feature_layer(top, layers, -1, &d->run_layers))
        return MX_ERR;
    if (t->hidden % heads) return mx_set_err("%s: vision hidden_size %d is not a multiple of num_attention_heads %d", vc->file, t->hidden, heads);
    if (d->channels != 3) return mx_set_err("%s: vision num_channels %d (images have 3)", vc->file, d->channels);
    if (strcmp(norm, "layer_norm") && strcmp(norm, "rms_norm"))
        return mx_set_err("%s: vision norm_type \"%s\" is not layer_norm or rms_norm", vc->file, norm);
    if (strcmp(strategy, "default")) return mx_set_err("%s: vision_feature_select_strategy \"%s\": only \"default\" is supported", top->file, strategy);
    if (mx_act_parse(act, &d->proj_act)) return mx_set_err("%s: projector_hidden_act: unsupported '%s'", top->file, act);
    d->shuffle = (int)lroundf(1.0f / ratio);
    if (fabsf(1.0f / ratio - (float)d->shuffle) > 1e-4f || d->shuffle < 1 || d->shuffle > 16)
        return mx_set_err("%s: downsample_ratio %g is not 1 / n", top->file, ratio);
    int side = image_size / d->patch_size;
    if (side % d->shuffle) return mx_set_err("%s: %d patches per side do not shuffle by %d", vc->file, side, d->shuffle);
    bool rms = !strcmp(norm, "rms_norm");
    mx_attn_spec *s = t->attn;
    mx_vit_attn(s, heads, t->hidden / heads);
    s->q_bias = s->k_bias = s->v_bias = qkv_bias;
    s->o_bias = true;
    s->names = (mx_attn_names){.q = "encoder.layer.%d.attention.q_proj", .k = "encoder.layer.%d.attention.k_proj",
                               .v = "encoder.layer.%d.attention.v_proj", .o = "encoder.layer.%d.attention.projection_layer"};
    if (qk_norm) {
        s->qk_norm = MX_QKNORM_FULL;
        s->qk_norm_spec = (mx_norm_spec){MX_NORM_RMS, 0, true, false, eps};
        s->names.q_norm = "encoder.layer.%d.attention.q_norm";
        s->names.k_norm = "encoder.layer.%d.attention.k_norm";
    }
    t->norm = (mx_norm_spec){rms ? MX_NORM_RMS : MX_NORM_LAYER, 0, true, !rms, eps};
    t->mlp = MX_MLP_PLAIN;
    t->mlp_bias = true;
    t->pos = MX_POS_NONE;
    t->embed_scale = t->logit_scale = t->residual_scale = 1;
    t->bos_id = -1;
    for (int i = 0; i < t->n_layers; i++) t->layers[i].rope = false;
    t->names = (mx_names){.attn_norm = "encoder.layer.%d.layernorm_before", .ffn_norm = "encoder.layer.%d.layernorm_after",
                          .up = "encoder.layer.%d.mlp.fc1", .down = "encoder.layer.%d.mlp.fc2",
                          .attn_scale = "encoder.layer.%d.lambda_1", .ffn_scale = "encoder.layer.%d.lambda_2"};
    /* last_hidden_state goes through the final LayerNorm (an identity with
     * mean pooling); an earlier layer's hidden state does not */
    if (!mean_pool && d->run_layers == layers) t->names.final_norm = "layernorm";
    else mx_arch_ignore(t, "layernorm.*");
    d->prefix[0] = "model.vision_tower.";
    d->prefix[1] = "vision_tower.";
    d->patch = "embeddings.patch_embeddings.projection";
    d->patch_bias = true;
    d->cls = "embeddings.cls_token";
    d->pos = "embeddings.position_embeddings";
    d->drop_cls = true;
    d->proj_prefix[0] = "model.multi_modal_projector.";
    d->proj_prefix[1] = "multi_modal_projector.";
    d->proj = MX_VPROJ_SHUFFLE_MLP;
    d->proj_norm = "layer_norm";
    d->proj_norm_eps = 1e-5f;
    d->proj_in = "linear_1";
    d->proj_out = "linear_2";
    d->mask = MX_VMASK_CAUSAL;
    return MX_OK;
}

MX_VISION_FAMILY(internvl, .name = "internvl", .configure = configure,
                  .features = "internvit (cls, learned positions, layer scale) per tile + thumbnail, pixel shuffle + layernorm/mlp; got-ocr2 tiling")
