/* Jamba: a hybrid of Mamba-1 mixers (with weighted RMSNorms on dt, B and C)
 * and attention without positional encoding (layer i attends when
 * i % attn_layer_period == attn_layer_offset), each followed by a dense
 * SwiGLU MLP or, when i % expert_layer_period == expert_layer_offset, a
 * softmax top-k MoE (weights not renormalised). */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    int ap, ao, ep, eo, expand;
    mx_ssm_spec *s = &a->ssm;
    mx_moe_spec *moe = &a->moe;
    if (mx_cfg_i32(c, "attn_layer_period", 8, 1, 1 << 20, &ap) || mx_cfg_i32(c, "attn_layer_offset", 4, 0, 1 << 20, &ao) ||
        mx_cfg_i32(c, "expert_layer_period", 2, 1, 1 << 20, &ep) ||
        mx_cfg_i32(c, "expert_layer_offset", 1, 0, 1 << 20, &eo) ||
        mx_cfg_i32(c, "num_experts", 16, 1, MX_MAX_EXPERTS, &moe->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 2, 1, MX_MAX_EXPERTS, &moe->top_k) ||
        mx_cfg_i32(c, "mamba_d_state", 16, 1, 1 << 12, &s->d_state) ||
        mx_cfg_i32(c, "mamba_d_conv", 4, 1, 64, &s->d_conv) ||
        mx_cfg_i32(c, "mamba_expand", 2, 1, 64, &expand) ||
        mx_cfg_bool(c, "mamba_conv_bias", true, &s->conv_bias) ||
        mx_cfg_bool(c, "mamba_proj_bias", false, &s->in_bias) ||
        mx_cfg_bool(c, "tie_word_embeddings", false, &a->tied))
        return -1;
    if (moe->top_k > moe->n_experts) return mx_set_err("%s: num_experts_per_tok exceeds num_experts", c->file);
    json_t *r = mx_cfg_get(c, "mamba_dt_rank");
    if (r && json_is_string(r) && !strcmp(json_string_value(r), "auto")) s->dt_rank = (a->hidden + 15) / 16;
    else if (mx_cfg_i32(c, "mamba_dt_rank", (a->hidden + 15) / 16, 1, 1 << 16, &s->dt_rank)) return -1;
    s->kind = MX_SSM_MAMBA1;
    s->d_inner = expand * a->hidden;
    s->out_bias = s->in_bias;
    s->bcdt_norm = s->bcdt_weight = true;
    s->bcdt_eps = a->norm.eps;
    s->act = a->act;
    s->prefix = "model.layers.%d.mamba";
    moe->ffn = a->ffn;
    moe->route = MX_ROUTE_SOFTMAX;
    moe->gated = true;
    moe->act = a->act;
    moe->router = "model.layers.%d.feed_forward.router";
    moe->experts = (mx_expert_names){.gate = "model.layers.%d.feed_forward.experts.%d.gate_proj",
                                     .up = "model.layers.%d.feed_forward.experts.%d.up_proj",
                                     .down = "model.layers.%d.feed_forward.experts.%d.down_proj"};
    a->pos = MX_POS_NONE;
    a->n_rope = 0;
    a->names.ffn_norm = "model.layers.%d.pre_ff_layernorm";
    a->names.final_norm = "model.final_layernorm";
    a->names.gate = "model.layers.%d.feed_forward.gate_proj";
    a->names.up = "model.layers.%d.feed_forward.up_proj";
    a->names.down = "model.layers.%d.feed_forward.down_proj";
    for (int i = 0; i < a->n_layers; i++) {
        a->layers[i].rope = false;
        a->layers[i].mixer = i % ap == ao ? &mx_block_attention : &mx_block_mamba;
        a->layers[i].ffn = i % ep == eo ? &mx_block_moe : &mx_block_mlp;
    }
    return 0;
}

MX_FAMILY(jamba, .name = "jamba", .base = "llama",
          .features = "hybrid: mamba-1 (rmsnorm on dt/B/C) + attention without rope, dense mlp / softmax top-k moe",
          .configure = configure)
