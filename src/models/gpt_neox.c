/* GPT-NeoX (Pythia): LayerNorm with bias, partial rotary (rotary_pct), a
 * fused query_key_value laid out per head as [q | k | v], biases, a plain
 * GELU MLP, and a parallel residual with separate attention and MLP norms
 * (sequential when use_parallel_residual is false). */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    bool par, bias;
    if (mx_cfg_f32(c, "layer_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
        mx_cfg_bool(c, "use_parallel_residual", true, &par) || mx_cfg_bool(c, "attention_bias", true, &bias))
        return -1;
    a->attn->q_bias = a->attn->o_bias = bias;
    /* older configs name the rotary fraction and base rotary_pct / rotary_emb_base:
     * they are the defaults of partial_rotary_factor and rope_theta */
    mx_rope_decl *r = &a->rope_decl[0];
    if (mx_cfg_float(c, "rotary_pct", 0.25, 1e-3, 1, &r->partial) ||
        mx_cfg_float(c, "rotary_emb_base", 10000, 1e-3, 1e15, &r->theta) || mx_arch_act_default(a, c, "gelu"))
        return -1;
    a->norm.kind = MX_NORM_LAYER;
    a->norm.bias = true;
    a->mlp = MX_MLP_PLAIN;
    a->mlp_bias = true;
    a->attn->qkv_layout = MX_QKV_GROUPED;
    if (par) {
        a->residual = MX_RES_PARALLEL;
        a->parallel_two_norms = true;
    }
    a->names = (mx_names){
        .embed = "gpt_neox.embed_in", .final_norm = "gpt_neox.final_layer_norm", .lm_head = "embed_out",
        .attn_norm = "gpt_neox.layers.%d.input_layernorm", .ffn_norm = "gpt_neox.layers.%d.post_attention_layernorm",
        .up = "gpt_neox.layers.%d.mlp.dense_h_to_4h", .down = "gpt_neox.layers.%d.mlp.dense_4h_to_h",
    };
    a->attn->names = (mx_attn_names){.qkv = "gpt_neox.layers.%d.attention.query_key_value", .o = "gpt_neox.layers.%d.attention.dense"};
    mx_arch_ignore(a, "gpt_neox.layers.*.attention.bias");
    mx_arch_ignore(a, "gpt_neox.layers.*.attention.masked_bias");
    return 0;
}

MX_FAMILY(gpt_neox, .name = "gpt_neox", .base = "llama", .features = "parallel residual with two norms, partial rotary, per-head fused qkv, biases",
          .configure = configure)
