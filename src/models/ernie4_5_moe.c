/* ERNIE 4.5 MoE: the ERNIE 4.5 attention (interleaved rope over the whole
 * head, theta 5e5, use_bias on every projection and the head, tied
 * embeddings by default; head_dim hidden / heads unless given); layer i is a
 * MoE when (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i
 * <= moe_layer_end_index (-1: the last), else a dense SwiGLU. MoE: softmax
 * router (mlp.gate), experts chosen on the probabilities plus
 * moe_statics.e_score_correction_bias, weights the chosen probabilities over
 * max(their sum, moe_norm_min), shared experts of moe_intermediate_size *
 * moe_num_shared_experts. The MTP module (model.mtp_*) is ignored. ERNIE 4.5
 * configs with model_type ernie4_5 that carry MoE layers configure as this
 * family too (ernie4_5.c). */
#include "family.h"
#include "../base/base.h"
#include <math.h>

int mx_ernie4_5_moe_configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int start, end, interval, n_shared;
    bool bias;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) ||
        mx_cfg_bool(c, "use_bias", false, &bias) ||
        mx_cfg_i32(c, "moe_num_experts", 64, 1, MX_MAX_EXPERTS, &s->n_experts) || mx_cfg_i32(c, "moe_k", 6, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 1536, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "moe_num_shared_experts", 2, 0, 1 << 10, &n_shared) ||
        mx_cfg_i32(c, "moe_layer_start_index", 1, 0, MX_MAX_LAYERS, &start) ||
        mx_cfg_i32(c, "moe_layer_end_index", -1, -1, MX_MAX_LAYERS, &end) ||
        mx_cfg_i32(c, "moe_layer_interval", 1, 1, MX_MAX_LAYERS, &interval) ||
        mx_cfg_f32(c, "moe_norm_min", 1e-12f, 0, 1, &s->norm_min) || mx_arch_ignore(a, "model.mtp_*"))
        return -1;
    mx_attn_spec *at = a->attn;
    at->qk_norm_spec = a->norm;
    a->rope_decl[0] = (mx_rope_decl){.theta = 500000.0, .interleaved = true};
    at->q_bias = at->k_bias = at->v_bias = at->o_bias = a->mlp_bias = a->lm_head_bias = bias;
    if (end == -1) end = a->n_layers - 1;
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = 1;
    s->gated = true;
    s->expert_bias = bias;
    s->act = a->act;
    s->shared_ffn = s->ffn * n_shared;
    s->router = "model.layers.%d.mlp.gate";
    s->score_bias = "model.layers.%d.mlp.moe_statics.e_score_correction_bias";
    mx_deepseek_moe_names(s);
    for (int i = 0; i < a->n_layers; i++)
        a->layers[i].ffn = (i + 1) % interval == 0 && i >= start && i <= end ? &mx_block_moe : &mx_block_mlp;
    return 0;
}

MX_FAMILY(ernie4_5_moe, .name = "ernie4_5_moe", .base = "llama",
          .features = "ernie4_5 attention + softmax moe with selection bias, renormalised (clamped), shared experts, dense/moe layer interval; mtp ignored",
          .configure = mx_ernie4_5_moe_configure)
