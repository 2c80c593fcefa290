/* Qwen2.5-VL: the Qwen ViT (src/vision/qwen_vit.h) with RMSNorm 1e-6 blocks,
 * a SwiGLU MLP with biases and window attention: the layers not in
 * fullatt_block_indexes attend only inside windows of window_size /
 * spatial_merge_size / patch_size merged units per side (the last row and
 * column of windows smaller); the merger normalises with RMSNorm (ln_q).
 * The text model is Qwen2-VL's (src/models/qwen2_5_vl.c). */
#include "qwen_vit.h"
#include "../base/base.h"

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    int depth, D, heads, ffn, out, win;
    if (mx_cfg_i32(vc, "depth", 32, 1, MX_MAX_LAYERS, &depth) || mx_cfg_i32(vc, "hidden_size", 3584, 1, 1 << 16, &D) ||
        mx_cfg_i32(vc, "num_heads", 16, 1, 4096, &heads) || mx_cfg_i32(vc, "intermediate_size", 3420, 1, 1 << 18, &ffn) ||
        mx_cfg_i32(vc, "out_hidden_size", 3584, 1, 1 << 18, &out) || mx_cfg_i32(vc, "window_size", 112, 1, 1 << 16, &win) ||
        mx_arch_act_default(t, vc, "silu") || mx_qwen_vit_common(d, t, vc, top, depth, D, heads, out, 14))
        return MX_ERR;
    d->window = win / d->merge / d->patch_size;
    if (d->window < 1)
        return mx_set_err("%s: window_size %d is smaller than one merged unit (%d pixels)", vc->file, win, d->merge * d->patch_size);
    for (int l = 0; l < depth; l++) d->windowed[l] = true;
    json_t *full = mx_cfg_get(vc, "fullatt_block_indexes");
    if (full && !json_is_array(full)) return mx_set_err("%s: fullatt_block_indexes: expected a list", vc->file);
    if (!full)
        for (int l = 7; l < depth; l += 8) d->windowed[l] = false; /* the config class's [7, 15, 23, 31] */
    for (size_t k = 0; full && k < json_array_size(full); k++) {
        json_t *v = json_array_get(full, k);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= depth)
            return mx_set_err("%s: fullatt_block_indexes[%zu]: expected a layer index below %d", vc->file, k, depth);
        d->windowed[json_integer_value(v)] = false;
    }
    t->ffn = ffn;
    t->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, 1e-6f};
    t->mlp = MX_MLP_GATED;
    t->names = (mx_names){.attn_norm = "blocks.%d.norm1", .ffn_norm = "blocks.%d.norm2", .gate = "blocks.%d.mlp.gate_proj",
                          .up = "blocks.%d.mlp.up_proj", .down = "blocks.%d.mlp.down_proj"};
    d->proj_norm = "ln_q";
    d->proj_norm_rms = true;
    d->proj_in = "mlp.0";
    d->proj_out = "mlp.2";
    return MX_OK;
}

MX_VISION_FAMILY(qwen2_5_vl, .name = "qwen2_5_vl", .configure = configure)
