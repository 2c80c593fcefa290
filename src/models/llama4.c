/* Llama 4 (text): interleaved rope (theta 5e5 by default) on the layers
 * no_rope_layers marks, which attend within chunks of attention_chunk_size
 * (layer_types chunked_attention) and normalise q/k after rope with a
 * weightless RMSNorm (use_qk_norm); the other layers are causal without
 * positions and scale q by 1 + attn_scale * log1p(floor((pos + 1) /
 * floor_scale)) (attn_temperature_tuning). moe_layers hold a sigmoid top-k
 * MoE whose weight scales the expert INPUT, with fused [E, in, out] experts
 * (x @ W) and a shared expert; the other layers a SwiGLU of
 * intermediate_size_mlp. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static bool explicit_null(const mx_cfg *c, const char *key) {
    json_t *v = c->sub ? json_object_get(c->sub, key) : NULL;
    if (!v && c->root) v = json_object_get(c->root, key);
    return v && json_is_null(v);
}

/* an optional array of integers (of n entries when n >= 0); NULL when absent */
static int int_list(const mx_cfg *c, const char *key, int n, json_t **out) {
    *out = mx_cfg_get(c, key);
    if (*out && (!json_is_array(*out) || (n >= 0 && (int)json_array_size(*out) != n)))
        return n >= 0 ? mx_set_err("%s: %s: expected %d entries", c->file, key, n) : mx_set_err("%s: %s: expected an array", c->file, key);
    for (size_t i = 0; *out && i < json_array_size(*out); i++)
        if (!json_is_integer(json_array_get(*out, i))) return mx_set_err("%s: %s[%zu]: expected an integer", c->file, key, i);
    return MX_OK;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int chunk, interval, step;
    bool qk_norm, tuning;
    float floor_scale, temp_scale;
    json_t *nope, *moe_layers, *lt;
    if (mx_cfg_i32(c, "intermediate_size_mlp", 16384, 1, 1 << 20, &a->ffn) ||
        mx_cfg_i32(c, "intermediate_size", 8192, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "num_local_experts", 16, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 1, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "attention_chunk_size", 8192, 1, 1 << 30, &chunk) ||
        mx_cfg_i32(c, "no_rope_layer_interval", 4, 1, 1 << 20, &interval) ||
        mx_cfg_i32(c, "interleave_moe_layer_step", 1, 1, 1 << 20, &step) || mx_cfg_bool(c, "use_qk_norm", true, &qk_norm) ||
        mx_cfg_bool(c, "attn_temperature_tuning", true, &tuning) ||
        mx_cfg_f32(c, "floor_scale", 8192, 1, 1e9f, &floor_scale) || mx_cfg_f32(c, "attn_scale", 0.1f, -1e3f, 1e3f, &temp_scale) ||
        int_list(c, "no_rope_layers", a->n_layers, &nope) || int_list(c, "moe_layers", -1, &moe_layers))
        return -1;
    if (explicit_null(c, "attention_chunk_size")) chunk = 0;
    a->rope_decl[0].theta = 500000.0;
    a->rope_decl[0].interleaved = true;
    /* NoPE layers: no q/k norm, temperature tuning; rope layers: q/k norm after rope */
    mx_attn_spec *nope_attn = mx_arch_add_attn(a, a->attn);
    if (!nope_attn) return -1;
    if (tuning) {
        nope_attn->temp_scale = temp_scale;
        nope_attn->temp_floor = floor_scale;
    }
    if (qk_norm) {
        a->attn->qk_norm = MX_QKNORM_HEAD; /* Llama4TextL2Norm: x * rsqrt(mean(x^2) + rms_norm_eps), no weight */
        a->attn->qk_norm_spec = (mx_norm_spec){MX_NORM_RMS, 0, false, false, a->norm.eps};
        a->attn->qk_norm_after_rope = true;
    }
    a->names.gate = "model.layers.%d.feed_forward.gate_proj";
    a->names.up = "model.layers.%d.feed_forward.up_proj";
    a->names.down = "model.layers.%d.feed_forward.down_proj";
    s->route = MX_ROUTE_SIGMOID; /* top-k of the logits = top-k of their sigmoids */
    s->scale_input = true;
    s->gated = true;
    s->act = a->act;
    s->shared_ffn = s->ffn;
    s->router = "model.layers.%d.feed_forward.router";
    s->experts = (mx_expert_names){.gate_up = "model.layers.%d.feed_forward.experts.gate_up_proj",
                                   .down = "model.layers.%d.feed_forward.experts.down_proj",
                                   .transposed = MX_EXP_T_GATE_UP | MX_EXP_T_DOWN};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.feed_forward.experts.gate_proj", .up = "model.layers.%d.feed_forward.experts.up_proj",
                               .down = "model.layers.%d.feed_forward.experts.down_proj"};
    s->shared = (mx_expert_names){.gate = "model.layers.%d.feed_forward.shared_expert.gate_proj",
                                  .up = "model.layers.%d.feed_forward.shared_expert.up_proj",
                                  .down = "model.layers.%d.feed_forward.shared_expert.down_proj"};
    lt = mx_cfg_get(c, "layer_types");
    if (lt && (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers))
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        mx_layer_spec *ls = &a->layers[i];
        ls->rope = nope ? json_integer_value(json_array_get(nope, (size_t)i)) != 0 : (i + 1) % interval != 0;
        const char *t = lt ? json_string_value(json_array_get(lt, (size_t)i)) : ls->rope ? "chunked_attention" : "full_attention";
        if (!t) return mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
        if (!strcmp(t, "chunked_attention")) ls->chunk = chunk;
        else if (strcmp(t, "full_attention")) return mx_set_err("%s: layer_types[%d]: unsupported '%s'", c->file, i, t);
        if (!ls->rope) ls->attn = nope_attn;
        bool moe = false;
        if (moe_layers)
            for (size_t k = 0; k < json_array_size(moe_layers); k++) moe |= json_integer_value(json_array_get(moe_layers, k)) == i;
        else moe = (i + 1) % step == 0;
        if (moe) ls->ffn = &mx_block_moe;
    }
    return 0;
}

MX_FAMILY(llama4_text, .name = "llama4_text", .aliases = MX_ALIASES("llama4"), .base = "llama",
          .features = "chunked attention with interleaved rope + weightless qk norm / nope layers with attention temperature tuning, "
                      "sigmoid top-k moe scaling the expert input, fused [E, in, out] experts, shared expert",
          .configure = configure)
