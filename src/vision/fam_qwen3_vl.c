/* Qwen3-VL (and Qwen3-VL-MoE, the same tower): the Qwen ViT
 * (src/vision/qwen_vit.h) with a Conv3d patch embedding with bias, a learned
 * position table interpolated bilinearly to the patch grid, LayerNorm 1e-6
 * blocks with a GELU(tanh) MLP, full attention, the merger (LayerNorm ->
 * 2x2 rows joined -> fc1 -> GELU -> fc2), and DeepStack: the outputs of the
 * layers in deepstack_visual_indexes through mergers of their own (the norm
 * after the 2x2 grouping) give extra rows, added to the text model's hidden
 * states at the image tokens after its first layers (src/models/qwen3_vl.c). */
#include "qwen_vit.h"
#include "../base/base.h"

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    int depth, D, heads, ffn, out;
    if (mx_cfg_i32(vc, "depth", 27, 1, MX_MAX_LAYERS, &depth) || mx_cfg_i32(vc, "hidden_size", 1152, 1, 1 << 16, &D) ||
        mx_cfg_i32(vc, "num_heads", 16, 1, 4096, &heads) || mx_cfg_i32(vc, "intermediate_size", 4304, 1, 1 << 18, &ffn) ||
        mx_cfg_i32(vc, "out_hidden_size", 3584, 1, 1 << 18, &out) ||
        mx_arch_act_default(t, vc, "gelu_pytorch_tanh") ||
        mx_qwen_vit_common(d, t, vc, top, depth, D, heads, out, 16))
        return MX_ERR;
    json_t *deep = mx_cfg_get(vc, "deepstack_visual_indexes");
    static const int def_deep[] = {8, 16, 24};
    if (deep && !json_is_array(deep)) return mx_set_err("%s: deepstack_visual_indexes: expected a list", vc->file);
    d->n_deep = deep ? (int)json_array_size(deep) : 3;
    if (d->n_deep > MX_VISION_MAX_DEEP) return mx_set_err("%s: deepstack_visual_indexes: more than %d layers", vc->file, MX_VISION_MAX_DEEP);
    for (int k = 0; k < d->n_deep; k++) {
        json_t *v = deep ? json_array_get(deep, (size_t)k) : NULL;
        long long l = v ? (json_is_integer(v) ? json_integer_value(v) : -1) : def_deep[k];
        if (l < 0 || l >= depth) return mx_set_err("%s: deepstack_visual_indexes[%d]: expected a layer index below %d", vc->file, k, depth);
        for (int j = 0; j < k; j++)
            if (d->deep_layer[j] == l) return mx_set_err("%s: deepstack_visual_indexes: layer %lld is listed twice", vc->file, l);
        d->deep_layer[k] = (int)l;
    }
    t->ffn = ffn;
    t->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, 1e-6f};
    t->mlp = MX_MLP_PLAIN;
    t->names = (mx_names){.attn_norm = "blocks.%d.norm1", .ffn_norm = "blocks.%d.norm2", .up = "blocks.%d.mlp.linear_fc1",
                          .down = "blocks.%d.mlp.linear_fc2"};
    d->patch_bias = true;
    d->pos = "pos_embed";
    d->pos_interp = true;
    d->proj_norm = "norm";
    d->proj_in = "linear_fc1";
    d->proj_out = "linear_fc2";
    d->deep_proj = "deepstack_merger_list.%d.";
    return MX_OK;
}

MX_VISION_FAMILY(qwen3_vl, .name = "qwen3_vl", .aliases = (const char *const[]){"qwen3_vl_moe", NULL}, .configure = configure)
