/* Laguna (Poolside): Qwen3 attention (per-head q/k RMSNorm before rope) with
 * - a number of query heads per layer (num_attention_heads_per_layer; one
 *   attention spec per distinct count),
 * - an output gate softplus(g_proj(x)), one value per head (gating true or
 *   "per-head") or per (head, dim) ("per-element"),
 * - layer_types sliding / full (all full by default), each type with its own
 *   rope theta and rotary fraction from rope_parameters (full: 5e5 over half
 *   the head, sliding: 1e4 over all of it, by default);
 * and mlp_layer_types dense (SwiGLU) / sparse (default: the first dense): a
 * sigmoid MoE whose router logits may be soft-capped
 * (moe_router_logit_softcapping), choosing on score +
 * e_score_correction_bias, weights renormalised times
 * moe_routed_scaling_factor, plus a shared expert of
 * shared_expert_intermediate_size. */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

/* num_attention_heads_per_layer: layer i gets a copy of arch.attn with its count */
static int heads_per_layer(mx_arch *a, const mx_cfg *c) {
    json_t *hl = mx_cfg_get(c, "num_attention_heads_per_layer");
    if (!hl) return MX_OK;
    if (!json_is_array(hl) || (int)json_array_size(hl) != a->n_layers)
        return mx_set_err("%s: num_attention_heads_per_layer: expected %d entries", c->file, a->n_layers);
    mx_attn_spec *base = a->attn;
    for (int i = 0; i < a->n_layers; i++) {
        json_t *v = json_array_get(hl, (size_t)i);
        json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
        if (n < 1 || n > 4096 || n % base->n_kv_heads)
            return mx_set_err("%s: num_attention_heads_per_layer[%d]: expected a positive multiple of num_key_value_heads", c->file, i);
        mx_attn_spec *s = NULL;
        for (int k = 0; k < a->n_attn_specs && !s; k++)
            if (a->attn_specs[k]->n_heads == n) s = a->attn_specs[k];
        if (!s) {
            if (!(s = mx_arch_add_attn(a, base))) return MX_ERR;
            s->n_heads = (int)n;
        }
        a->layers[i].attn = s;
    }
    return MX_OK;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    mx_attn_spec *at = a->attn;
    int w;
    bool on_input;
    if (mx_cfg_i32(c, "head_dim", 128, 1, 1 << 14, &at->head_dim) || mx_cfg_i32(c, "intermediate_size", 8192, 1, 1 << 20, &a->ffn) ||
        mx_cfg_i32(c, "sliding_window", 512, 1, 1 << 30, &w) ||
        mx_cfg_i32(c, "num_experts", 256, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 8, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 512, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "shared_expert_intermediate_size", 512, 0, 1 << 20, &s->shared_ffn) ||
        mx_cfg_f32(c, "moe_routed_scaling_factor", 1.0f, 0, 1e6f, &s->routed_scale) ||
        mx_cfg_f32(c, "moe_router_logit_softcapping", 0, 0, 1e6f, &s->router_softcap) ||
        mx_cfg_bool(c, "moe_apply_router_weight_on_input", false, &on_input))
        return -1;
    if (on_input) return mx_set_err("%s: moe_apply_router_weight_on_input: not supported (nor by transformers)", c->file);
    at->scale = 1.0f / sqrtf((float)at->head_dim);
    json_t *g = mx_cfg_get(c, "gating");
    const char *gs = json_string_value(g);
    if (g && !json_is_boolean(g) && !(gs && (!strcmp(gs, "per-head") || !strcmp(gs, "per-element"))))
        return mx_set_err("%s: gating: expected true, false, \"per-head\" or \"per-element\"", c->file);
    if (!g || json_is_true(g) || gs) {
        at->names.gate = "model.layers.%d.self_attn.g_proj";
        at->gate_softplus = true;
        at->gate_per_head = !gs || !strcmp(gs, "per-head");
    }
    if (heads_per_layer(a, c)) return -1;
    mx_arch_set_window_all(a, 0); /* qwen3's use_sliding_window does not apply */
    if (mx_arch_layer_types(a, c, w) < 0) return -1;
    mx_arch_rope_per_type(a, c, 500000.0, 10000.0);
    if (!a->rope_decl[0].params_key) a->rope_decl[0].partial = 0.5; /* the class's full-attention default */
    s->route = MX_ROUTE_SIGMOID;
    s->norm_p = 1;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.mlp.gate";
    s->score_bias = "model.layers.%d.mlp.gate.e_score_correction_bias";
    mx_deepseek_moe_names(s);
    int r = mx_arch_mlp_layer_types(a, c, &mx_block_moe);
    if (r < 0) return -1;
    if (!r)
        for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = i ? &mx_block_moe : &mx_block_mlp;
    return 0;
}

MX_FAMILY(laguna, .name = "laguna", .base = "qwen3",
          .features = "qwen3 attention with per-layer head counts and a softplus output gate, sliding / full layers with their own rope "
                      "and rotary fraction, sigmoid moe with soft-capped router logits, correction bias and a shared expert",
          .configure = configure)
