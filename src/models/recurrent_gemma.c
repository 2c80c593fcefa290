/* RecurrentGemma (Griffin): Gemma-style residual blocks whose temporal block
 * is, per block_types (cycled over the layers), an RG-LRU recurrent block or
 * local (sliding-window) MQA attention with partial rope and an o_proj bias;
 * the MLP is a biased GeGLU of width intermediate_size / 2; embeddings scaled
 * by sqrt(hidden) rounded to bfloat16 (HF keeps that normalizer in bf16);
 * final logits soft-capped. */
#include "family.h"
#include "../base/base.h"
#include "../base/half.h"
#include <math.h>
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_rglru_spec *s = &a->rglru;
    int window, inter;
    bool bias;
    if (mx_cfg_i32(c, "lru_width", a->hidden, 1, 1 << 20, &s->width) ||
        mx_cfg_i32(c, "conv1d_width", 4, 1, 64, &s->d_conv) ||
        mx_cfg_i32(c, "attention_window_size", 2048, 1, 1 << 30, &window) ||
        mx_cfg_i32(c, "intermediate_size", 3 * a->hidden, 2, 1 << 21, &inter) ||
        mx_cfg_f32(c, "logits_soft_cap", 30, 0, 1e9f, &a->final_softcap) ||
        mx_cfg_bool(c, "attention_bias", false, &bias))
        return -1;
    a->rope_decl[0].partial = 0.5;
    s->n_heads = a->attn->n_heads;
    s->act = a->act;
    s->prefix = "model.layers.%d.temporal_block";
    a->ffn = inter / 2;
    a->mlp_bias = true;
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = bias;
    a->attn->o_bias = true;
    a->embed_scale = mx_bf16_to_f32(mx_f32_to_bf16(sqrtf((float)a->hidden)));
    a->attn->names = (mx_attn_names){.q = "model.layers.%d.temporal_block.q_proj", .k = "model.layers.%d.temporal_block.k_proj",
                                     .v = "model.layers.%d.temporal_block.v_proj", .o = "model.layers.%d.temporal_block.o_proj"};
    a->names = (mx_names){
        .embed = "model.embed_tokens", .final_norm = "model.final_norm", .lm_head = "lm_head",
        .attn_norm = "model.layers.%d.temporal_pre_norm", .ffn_norm = "model.layers.%d.channel_pre_norm",
        .gate = "model.layers.%d.mlp_block.gate_proj", .up = "model.layers.%d.mlp_block.up_proj",
        .down = "model.layers.%d.mlp_block.down_proj",
    };
    json_t *bt = mx_cfg_get(c, "block_types");
    static const char *const def_types[] = {"recurrent", "recurrent", "attention"};
    int nt = bt ? (int)json_array_size(bt) : 3;
    if (bt && (!json_is_array(bt) || nt < 1)) return mx_set_err("%s: block_types: expected a non-empty array", c->file);
    for (int i = 0; i < a->n_layers; i++) {
        const char *t = bt ? json_string_value(json_array_get(bt, (size_t)(i % nt))) : def_types[i % 3];
        if (!t) return mx_set_err("%s: block_types[%d]: expected a string", c->file, i % nt);
        if (!strcmp(t, "recurrent")) a->layers[i].mixer = &mx_block_rglru;
        else if (!strcmp(t, "attention")) a->layers[i].window = window;
        else return mx_set_err("%s: block_types: unsupported block type '%s'", c->file, t);
    }
    return 0;
}

MX_FAMILY(recurrent_gemma, .name = "recurrent_gemma", .base = "gemma",
          .features = "hybrid: rg-lru recurrent blocks + local mqa attention (partial rope), biased geglu, softcap",
          .configure = configure)
