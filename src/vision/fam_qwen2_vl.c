/* Qwen2-VL: the Qwen ViT (src/vision/qwen_vit.h: Conv3d patch embedding
 * without bias, fused qkv with bias, 2-D rope) with LayerNorm 1e-6 blocks and
 * a quick-GELU MLP, then the merger: LayerNorm, 2x2 patches joined, linear ->
 * GELU -> linear. The text model is Qwen2 with M-RoPE (src/models/qwen2_vl.c);
 * image rows enter causally, unscaled. */
#include "qwen_vit.h"
#include "../base/base.h"

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    int depth, D, heads, ratio, out;
    if (mx_cfg_i32(vc, "depth", 32, 1, MX_MAX_LAYERS, &depth) || mx_cfg_i32(vc, "embed_dim", 1280, 1, 1 << 16, &D) ||
        mx_cfg_i32(vc, "num_heads", 16, 1, 4096, &heads) || mx_cfg_i32(vc, "mlp_ratio", 4, 1, 64, &ratio) ||
        mx_cfg_i32(vc, "hidden_size", 3584, 1, 1 << 18, &out) || mx_arch_act_default(t, vc, "quick_gelu") ||
        mx_qwen_vit_common(d, t, vc, top, depth, D, heads, out, 14))
        return MX_ERR;
    t->ffn = D * ratio;
    t->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, 1e-6f};
    t->mlp = MX_MLP_PLAIN;
    t->names = (mx_names){.attn_norm = "blocks.%d.norm1", .ffn_norm = "blocks.%d.norm2", .up = "blocks.%d.mlp.fc1", .down = "blocks.%d.mlp.fc2"};
    d->proj_norm = "ln_q";
    d->proj_in = "mlp.0";
    d->proj_out = "mlp.2";
    return MX_OK;
}

MX_VISION_FAMILY(qwen2_vl, .name = "qwen2_vl", .configure = configure)
