/* Gemma 4 (text): Gemma 3's sandwich-normed decoder with plain x * w
 * RMSNorms, q/k norms and a weightless v norm, attention scale 1, and
 * - sliding layers (layer_types; the last layer is always full) with the
 *   "default" rope of rope_parameters.sliding_attention, full layers with
 *   their own head size (global_head_dim), "proportional" rope
 *   (rope_parameters.full_attention) and, with attention_k_eq_v,
 *   num_global_key_value_heads heads whose values are the key projection;
 * - the last num_kv_shared_layers layers attend over the K/V of the last
 *   earlier layer of their type (no k/v projections), with a MLP twice as
 *   wide when use_double_wide_mlp;
 * - per-layer inputs (hidden_size_per_layer_input) added at the end of
 *   every layer, then the layer's output times its stored layer_scalar;
 * - final logit soft-capping. The MoE block (enable_moe_block) is refused. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

int mx_gemma_kv_shared(mx_arch *a, const mx_cfg *c, int first_shared) {
    for (int i = first_shared; i < a->n_layers; i++) {
        mx_layer_spec *ls = &a->layers[i];
        int src = -1;
        for (int j = 0; j < first_shared; j++)
            if ((a->layers[j].window != 0) == (ls->window != 0)) src = j;
        if (src < 0) return mx_set_err("%s: layer %d shares the K/V of an earlier layer of its type, and there is none", c->file, i);
        ls->kv_shared = true;
        ls->kv_from = src;
    }
    return 0;
}

void mx_gemma_ple_spec(mx_arch *a, int dim, int vocab) {
    for (int i = 0; i < a->n_layers; i++) a->layers[i].post = &mx_block_ple;
    a->ple = (mx_ple_spec){.dim = dim, .vocab = vocab, .act = a->act,
                           .embed = "model.embed_tokens_per_layer", .proj = "model.per_layer_model_projection",
                           .proj_norm = "model.per_layer_projection_norm", .gate = "model.layers.%d.per_layer_input_gate",
                           .up = "model.layers.%d.per_layer_projection", .norm = "model.layers.%d.post_per_layer_input_norm"};
}

static int configure(mx_arch *a, const mx_cfg *c) {
    int w, global_hd, global_kv, n_shared, ple_dim, ple_vocab, err = 0;
    bool k_eq_v, double_mlp, moe;
    mx_attn_spec *s = a->attn;
    if (mx_cfg_i32(c, "sliding_window", 512, 1, 1 << 30, &w) || mx_cfg_i32(c, "global_head_dim", 512, 0, 1 << 14, &global_hd) ||
        mx_cfg_i32(c, "num_global_key_value_heads", s->n_kv_heads, 1, 4096, &global_kv) ||
        mx_cfg_i32(c, "num_kv_shared_layers", 0, 0, a->n_layers, &n_shared) ||
        mx_cfg_i32(c, "hidden_size_per_layer_input", 256, 0, 1 << 16, &ple_dim) ||
        mx_cfg_i32(c, "vocab_size_per_layer_input", 262144, 1, 1 << 24, &ple_vocab) ||
        mx_cfg_bool(c, "attention_k_eq_v", false, &k_eq_v) || mx_cfg_bool(c, "use_double_wide_mlp", false, &double_mlp) ||
        mx_cfg_bool(c, "enable_moe_block", false, &moe))
        return -1;
    if (moe) return mx_set_err("%s: enable_moe_block: Gemma 4's MoE block is not supported", c->file);
    const char *bidir = mx_cfg_str(c, "use_bidirectional_attention", NULL, &err);
    if (err) return -1;
    if (bidir && strcmp(bidir, "vision")) /* "vision" concerns image tokens only: text stays causal */
        return mx_set_err("%s: use_bidirectional_attention: '%s' is not supported for Gemma 4", c->file, bidir);
    if (!global_hd) global_hd = s->head_dim;
    a->norm.offset = 0;
    s->bidirectional = false; /* Gemma 3's reading of use_bidirectional_attention does not apply */
    s->qk_norm_spec = a->norm;
    s->scale = 1.0f;
    s->softcap = 0;
    s->v_norm = true;
    mx_attn_spec *g = mx_arch_add_attn(a, s);
    if (!g) return -1;
    g->head_dim = global_hd;
    if (k_eq_v) {
        if (s->n_heads % global_kv) return mx_set_err("%s: num_attention_heads is not a multiple of num_global_key_value_heads", c->file);
        g->n_kv_heads = global_kv;
        g->k_eq_v = true;
    }
    /* rope per layer type: [0] full (proportional over the global head), [1] sliding */
    json_t *rp = mx_cfg_get(c, "rope_parameters"), *full = rp ? json_object_get(rp, "full_attention") : NULL;
    const char *full_type = full ? json_string_value(json_object_get(full, "rope_type")) : NULL;
    a->rope_decl[0] = (mx_rope_decl){.params_key = "full_attention", .dim = full_type && !strcmp(full_type, "proportional") ? global_hd : s->head_dim};
    a->rope_decl[1] = (mx_rope_decl){.params_key = "sliding_attention", .dim = s->head_dim};
    a->n_rope = 2;
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    int L = a->n_layers, first_shared = L - n_shared;
    for (int i = 0; i < L; i++) {
        mx_layer_spec *ls = &a->layers[i];
        if (!r) ls->window = (i + 1) % 6 ? w : 0; /* Gemma4TextConfig's default: 5 sliding, 1 full */
        if (i == L - 1) ls->window = 0;           /* the last layer is always full */
        ls->attn = ls->window ? s : g;
        ls->rope_idx = ls->window ? 1 : 0;
        if (i >= first_shared && double_mlp && first_shared > 0) ls->ffn_width = 2 * a->ffn;
    }
    if (mx_gemma_kv_shared(a, c, first_shared)) return -1;
    if (ple_dim) mx_gemma_ple_spec(a, ple_dim, ple_vocab);
    a->names.layer_scale = "model.layers.%d.layer_scalar";
    return 0;
}

MX_FAMILY(gemma4_text, .name = "gemma4_text", .aliases = MX_ALIASES("gemma4"), .base = "gemma3_text",
          .features = "sliding / full layers with their own head size and proportional rope, k=v and kv-shared layers, v norm, "
                      "double-wide mlp, per-layer inputs, layer scalars, attention scale 1, final softcap",
          .configure = configure)
