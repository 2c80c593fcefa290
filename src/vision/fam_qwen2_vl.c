/* Qwen2-VL: a ViT over temporal x spatial patches (Conv3d patch embedding
 * without bias, fused qkv with bias, LayerNorm 1e-6, quick-GELU MLP) with a
 * 2-D rope (first half of the frequencies on the patch row, second half on
 * the column), then the merger: LayerNorm, 2x2 patches joined, linear ->
 * GELU -> linear. The text model is Qwen2 with M-RoPE (src/models/qwen2_vl.c);
 * image rows enter causally, unscaled. */
#include "vision.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    int depth, D, heads, ratio, out;
    if (mx_cfg_i32(vc, "depth", 32, 1, MX_MAX_LAYERS, &depth) || mx_cfg_i32(vc, "embed_dim", 1280, 1, 1 << 16, &D) ||
        mx_cfg_i32(vc, "num_heads", 16, 1, 4096, &heads) || mx_cfg_i32(vc, "mlp_ratio", 4, 1, 64, &ratio) ||
        mx_cfg_i32(vc, "hidden_size", 3584, 1, 1 << 18, &out) || mx_cfg_i32(vc, "patch_size", 14, 1, 1024, &d->patch_size) ||
        mx_cfg_i32(vc, "in_channels", 3, 1, 16, &d->channels) || mx_cfg_i32(vc, "spatial_merge_size", 2, 1, 16, &d->merge) ||
        mx_cfg_i32(vc, "temporal_patch_size", 2, 1, 16, &d->temporal) || mx_arch_act_default(t, vc, "quick_gelu") ||
        mx_cfg_i32(top, "image_token_id", 151655, 0, 1 << 30, &d->image_token) ||
        mx_cfg_i32(top, "vision_start_token_id", 151652, 0, 1 << 30, &d->vision_start) || mx_arch_layers(t, depth))
        return MX_ERR;
    if (D % heads || (D / heads) % 4) return mx_set_err("%s: vision embed_dim %d / num_heads %d is not a multiple of 4", vc->file, D, heads);
    if (out != d->proj_dim) return mx_set_err("%s: vision_config.hidden_size %d differs from the text hidden size %d", vc->file, out, d->proj_dim);
    if (d->channels != 3) return mx_set_err("%s: vision in_channels %d (images have 3)", vc->file, d->channels);
    mx_attn_spec *s = t->attn;
    t->hidden = D;
    d->run_layers = depth;
    s->n_heads = s->n_kv_heads = heads;
    s->head_dim = D / heads;
    s->scale = 1.0f / sqrtf((float)s->head_dim);
    s->q_bias = s->k_bias = s->v_bias = s->o_bias = true;
    s->bidirectional = true;
    s->names = (mx_attn_names){.qkv = "blocks.%d.attn.qkv", .o = "blocks.%d.attn.proj"};
    t->ffn = D * ratio;
    t->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, 1e-6f};
    t->mlp = MX_MLP_PLAIN;
    t->mlp_bias = true;
    t->embed_scale = t->logit_scale = t->residual_scale = 1;
    t->bos_id = -1;
    /* 2-D rope over the whole head: rows on the first half of the
     * frequencies, columns on the second, each a rope of dim head_dim / 2 */
    t->pos = MX_POS_ROPE;
    t->n_rope = 1;
    t->rope[0] = (mx_rope){.kind = MX_ROPE_DEFAULT, .theta = 10000, .dim = s->head_dim, .factor = 1, .attn_factor = 1,
                           .n_axes = 2, .section = {s->head_dim / 4, s->head_dim / 4}, .section_restart = true};
    t->names = (mx_names){.attn_norm = "blocks.%d.norm1", .ffn_norm = "blocks.%d.norm2", .up = "blocks.%d.mlp.fc1", .down = "blocks.%d.mlp.fc2"};
    d->prefix[0] = "visual.";
    d->prefix[1] = "model.visual.";
    d->prefix[2] = "vision_tower.";
    d->patch = "patch_embed.proj";
    d->proj_prefix[0] = "visual.merger.";
    d->proj_prefix[1] = "model.visual.merger.";
    d->proj_prefix[2] = "vision_tower.merger.";
    d->proj = MX_VPROJ_MERGER;
    d->proj_norm = "ln_q";
    d->proj_in = "mlp.0";
    d->proj_out = "mlp.2";
    d->proj_norm_eps = 1e-6f;
    d->mask = MX_VMASK_CAUSAL;
    d->mrope = true;
    return MX_OK;
}

MX_VISION_FAMILY(qwen2_vl, .name = "qwen2_vl", .configure = configure)
