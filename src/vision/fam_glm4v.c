/* GLM-4.1V / GLM-4.5V: a ViT over temporal x spatial patches (Conv3d patch
 * embedding with bias, then RMSNorm), a learned [S, S] position table
 * resampled to each image's patch grid with bicubic grid_sample, RMSNorm
 * blocks (fused qkv and proj without bias, 2-D rope as Qwen2-VL's, a SwiGLU
 * MLP whose width is out_hidden_size), post RMSNorm; then each 2x2 merge
 * window through the downsample Conv2d to the text width and the GLU merger
 * (proj -> LayerNorm -> GELU -> down(silu(gate) * up), the vision
 * intermediate_size wide). The text model is GLM-4 with M-RoPE on its partial
 * interleaved rotary dims (src/models/glm4v.c); image rows enter causally,
 * unscaled, their M-RoPE positions from the <|begin_of_image|> marker.
 * GLM-4.5V (glm4v_moe) has the same tower over a GLM-4.5 MoE text model
 * (src/models/glm4v_moe.c). */
#include "vision.h"
#include "../base/base.h"
#include <math.h>

static int configure_tower(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, int def_image_token) {
    int depth, D, heads, out, ctx;
    float eps;
    bool bias;
    if (mx_cfg_i32(vc, "depth", 24, 1, MX_MAX_LAYERS, &depth) || mx_cfg_i32(vc, "hidden_size", 1536, 1, 1 << 16, &D) ||
        mx_cfg_i32(vc, "num_heads", 12, 1, 4096, &heads) || mx_cfg_i32(vc, "out_hidden_size", 4096, 1, 1 << 18, &out) ||
        mx_cfg_i32(vc, "intermediate_size", 13696, 1, 1 << 18, &ctx) ||
        mx_cfg_i32(vc, "patch_size", 14, 1, 1024, &d->patch_size) || mx_cfg_i32(vc, "in_channels", 3, 1, 16, &d->channels) ||
        mx_cfg_i32(vc, "spatial_merge_size", 2, 1, 16, &d->merge) ||
        mx_cfg_i32(vc, "temporal_patch_size", 2, 1, 16, &d->temporal) || mx_cfg_f32(vc, "rms_norm_eps", 1e-5f, 0, 1, &eps) ||
        mx_cfg_bool(vc, "attention_bias", false, &bias) || mx_arch_act_default(t, vc, "silu") ||
        mx_cfg_i32(top, "image_token_id", def_image_token, 0, 1 << 30, &d->image_token) ||
        mx_cfg_i32(top, "image_start_token_id", 151339, 0, 1 << 30, &d->vision_start) || mx_arch_layers(t, depth))
        return MX_ERR;
    if (D % heads || (D / heads) % 4) return mx_set_err("%s: vision hidden_size %d / num_heads %d is not a multiple of 4", vc->file, D, heads);
    if (out != d->proj_dim) return mx_set_err("%s: vision_config.out_hidden_size %d differs from the text hidden size %d", vc->file, out, d->proj_dim);
    if (d->channels != 3) return mx_set_err("%s: vision in_channels %d (images have 3)", vc->file, d->channels);
    mx_attn_spec *s = t->attn;
    t->hidden = D;
    d->run_layers = depth;
    mx_vit_attn(s, heads, D / heads);
    s->q_bias = s->k_bias = s->v_bias = bias;
    s->o_bias = false;
    s->names = (mx_attn_names){.qkv = "blocks.%d.attn.qkv", .o = "blocks.%d.attn.proj"};
    t->ffn = out; /* the blocks' MLP is out_hidden_size wide */
    t->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, eps};
    t->mlp = MX_MLP_GATED;
    t->mlp_bias = false;
    t->embed_scale = t->logit_scale = t->residual_scale = 1;
    t->bos_id = -1;
    t->pos = MX_POS_ROPE;
    t->n_rope = 1;
    t->rope[0] = (mx_rope){.kind = MX_ROPE_DEFAULT, .theta = 10000, .dim = s->head_dim, .factor = 1, .attn_factor = 1,
                           .n_axes = 2, .section = {s->head_dim / 4, s->head_dim / 4}, .section_restart = true};
    t->names = (mx_names){.attn_norm = "blocks.%d.norm1", .ffn_norm = "blocks.%d.norm2", .gate = "blocks.%d.mlp.gate_proj",
                          .up = "blocks.%d.mlp.up_proj", .down = "blocks.%d.mlp.down_proj", .final_norm = "post_layernorm"};
    mx_arch_ignore(t, "embeddings.position_ids");
    d->prefix[0] = "model.visual.";
    d->prefix[1] = "visual.";
    d->prefix[2] = "vision_tower.";
    d->patch = "patch_embed.proj";
    d->patch_bias = true;
    d->patch_norm = "post_conv_layernorm";
    d->patch_norm_eps = eps;
    d->pos = "embeddings.position_embedding";
    d->pos_bicubic = true;
    for (int k = 0; k < MX_VISION_PREFIXES; k++) d->proj_prefix[k] = d->prefix[k];
    d->proj = MX_VPROJ_GLU_MERGER;
    d->downsample = "downsample";
    d->proj_in = "merger.proj";
    d->proj_norm = "merger.post_projection_norm";
    d->proj_gate = "merger.gate_proj";
    d->proj_up = "merger.up_proj";
    d->proj_out = "merger.down_proj";
    d->proj_norm_eps = 1e-5f; /* nn.LayerNorm's default */
    d->proj_ctx = ctx;
    d->proj_act = t->act;
    d->mask = MX_VMASK_CAUSAL;
    d->mrope = true;
    return MX_OK;
}

static int configure(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    return configure_tower(d, t, vc, top, 151343);
}

/* GLM-4.5V (glm4v_moe): the same tower; Glm4vMoeConfig's image token differs */
static int configure_moe(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text) {
    (void)text;
    return configure_tower(d, t, vc, top, 151363);
}

MX_VISION_FAMILY(glm4v, .name = "glm4v", .configure = configure)
MX_VISION_FAMILY(glm4v_moe, .name = "glm4v_moe", .configure = configure_moe)
