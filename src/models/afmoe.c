/* AFMoE (Arcee Trinity): sandwich-normed blocks (input / post_attention,
 * pre_mlp / post_mlp norms); Qwen3 attention (per-head q/k RMSNorm, no biases)
 * whose output is multiplied by sigmoid(gate_proj(x)) before o_proj, sliding
 * layers with rope and full layers without (layer_types, else every
 * global_attn_every_n_layers-th layer full); embeddings times sqrt(hidden)
 * when mup_enabled; the first num_dense_layers MLPs dense, the others a MoE:
 * sigmoid router (mlp.router.gate) choosing on score + mlp.expert_bias,
 * weights renormalised (+1e-20) times route_scale, shared experts. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    mx_attn_spec *at = a->attn;
    int w, every, dense, n_shared;
    bool mup;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_cfg_i32(c, "head_dim", 128, 1, 1 << 14, &at->head_dim) ||
        mx_cfg_i32(c, "intermediate_size", 6144, 1, 1 << 20, &a->ffn) || mx_cfg_bool(c, "mup_enabled", false, &mup) ||
        mx_cfg_i32(c, "sliding_window", 1024, 1, 1 << 30, &w) || mx_cfg_i32(c, "global_attn_every_n_layers", 4, 1, 1 << 20, &every) ||
        mx_cfg_i32(c, "num_dense_layers", 1, 0, MX_MAX_LAYERS, &dense) ||
        mx_cfg_i32(c, "num_experts", 64, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 6, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 1408, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "num_shared_experts", 2, 0, 1 << 10, &n_shared) || mx_cfg_f32(c, "route_scale", 1.0f, 0, 1e6f, &s->routed_scale))
        return -1;
    at->qk_norm_spec = a->norm;
    at->scale = 1.0f / sqrtf((float)at->head_dim);
    at->q_bias = at->k_bias = at->v_bias = at->o_bias = false; /* the config class forces attention_bias off */
    at->names.gate = "model.layers.%d.self_attn.gate_proj";
    if (mup) a->embed_scale = sqrtf((float)a->hidden);
    a->names.post_attn_norm = "model.layers.%d.post_attention_layernorm";
    a->names.ffn_norm = "model.layers.%d.pre_mlp_layernorm";
    a->names.post_ffn_norm = "model.layers.%d.post_mlp_layernorm";
    mx_arch_set_window_all(a, 0); /* qwen3's use_sliding_window does not apply */
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    for (int i = 0; i < a->n_layers; i++) {
        mx_layer_spec *ls = &a->layers[i];
        if (!r) ls->window = (i + 1) % every ? w : 0;
        ls->rope = ls->window > 0;
        ls->ffn = i < dense ? &mx_block_mlp : &mx_block_moe;
    }
    s->route = MX_ROUTE_SIGMOID;
    s->norm_p = 1;
    s->norm_eps = 1e-20f;
    s->gated = true;
    s->act = a->act;
    s->shared_ffn = s->ffn * n_shared;
    s->router = "model.layers.%d.mlp.router.gate";
    s->score_bias = "model.layers.%d.mlp.expert_bias";
    mx_deepseek_moe_names(s);
    return 0;
}

MX_FAMILY(afmoe, .name = "afmoe", .base = "qwen3",
          .features = "sandwich norms, qwen3 attention with a sigmoid output gate, sliding rope / nope full layers, muP embedding scale, "
                      "sigmoid moe with expert bias, routed scale and shared experts after dense layers",
          .configure = configure)
