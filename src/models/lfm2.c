/* LFM2: layer_types conv (gated short convolution) / full_attention (GQA,
 * per-head q/k RMSNorm, rope), each followed by a SwiGLU (w1 gate, w3 up,
 * w2 down) whose width may be auto-adjusted; the final norm is called
 * embedding_norm; tied embeddings. The bidirectional encoders built on it
 * (LFM2.5-Embedding / -ColBERT: model_type lfm2_bidirectional, or lfm2 with
 * an Lfm2Bidirectional* architecture) attend to the whole sequence and run
 * their short convolutions centered (non-causal). */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static void lfm2_bidirectional(mx_arch *a);

static int configure(mx_arch *a, const mx_cfg *c) {
    bool adjust;
    int mult_of;
    float eps;
    if (mx_cfg_f32(c, "norm_eps", 1e-5f, 0, 1, &eps) ||
        mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) ||
        mx_cfg_bool(c, "tie_embedding", a->tied, &a->tied) || /* Lfm2Config's alias */
        mx_cfg_i32(c, "conv_L_cache", 3, 1, 64, &a->shortconv.d_conv) ||
        mx_cfg_bool(c, "conv_bias", false, &a->shortconv.bias) ||
        mx_cfg_bool(c, "block_auto_adjust_ff_dim", true, &adjust) ||
        mx_cfg_i32(c, "block_multiple_of", 256, 1, 1 << 20, &mult_of) ||
        mx_cfg_i32(c, "block_ff_dim", a->ffn, 1, 1 << 20, &a->ffn)) /* the legacy key wins, as Lfm2Config reads it */
        return -1;
    a->norm.eps = eps;
    a->rope_decl[0].theta = 1000000.0;
    a->attn->qk_norm = MX_QKNORM_HEAD;
    a->attn->qk_norm_spec = a->norm;
    a->shortconv.prefix = "model.layers.%d.conv";
    if (adjust) {
        int I = (int)(2 * a->ffn / 3);
        json_t *m = mx_cfg_get(c, "block_ffn_dim_multiplier");
        if (m) {
            double mul;
            if (mx_cfg_float(c, "block_ffn_dim_multiplier", 1.0, 1e-6, 1e6, &mul)) return -1;
            I = (int)(mul * I);
            I = mult_of * ((I + mult_of - 1) / mult_of);
        }
        a->ffn = I;
    }
    a->names = (mx_names){
        .embed = "model.embed_tokens", .final_norm = "model.embedding_norm", .lm_head = "lm_head",
        .attn_norm = "model.layers.%d.operator_norm", .ffn_norm = "model.layers.%d.ffn_norm",
        .gate = "model.layers.%d.feed_forward.w1", .up = "model.layers.%d.feed_forward.w3",
        .down = "model.layers.%d.feed_forward.w2",
    };
    a->attn->names.o = "model.layers.%d.self_attn.out_proj";
    a->attn->names.q_norm = "model.layers.%d.self_attn.q_layernorm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.k_layernorm";
    json_t *lt = mx_cfg_get(c, "layer_types"), *idx = lt ? NULL : mx_cfg_get(c, "full_attn_idxs");
    if (lt && (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers))
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    if (idx && !json_is_array(idx)) return mx_set_err("%s: full_attn_idxs: expected an array", c->file);
    for (int i = 0; i < a->n_layers; i++) {
        bool attn = !idx; /* neither key: every layer attention, as Lfm2Config defaults */
        if (lt) {
            const char *t = json_string_value(json_array_get(lt, (size_t)i));
            if (!t) return mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
            if (strcmp(t, "conv") && strcmp(t, "full_attention")) return mx_set_err("%s: layer_types[%d]: unsupported '%s'", c->file, i, t);
            attn = !strcmp(t, "full_attention");
        }
        for (size_t k = 0; idx && k < json_array_size(idx); k++) attn |= json_integer_value(json_array_get(idx, k)) == i;
        if (!attn) a->layers[i].mixer = &mx_block_shortconv;
    }
    json_t *arch = json_array_get(mx_cfg_get(c, "architectures"), 0);
    if (json_is_string(arch) && !strncmp(json_string_value(arch), "Lfm2Bidir", 9)) lfm2_bidirectional(a);
    return 0;
}

/* the encoders: every key of the sequence, centered short convolutions */
static void lfm2_bidirectional(mx_arch *a) {
    a->attn->bidirectional = true;
    a->shortconv.centered = true;
}

static int configure_bidirectional(mx_arch *a, const mx_cfg *c) {
    (void)c;
    lfm2_bidirectional(a);
    return 0;
}

MX_FAMILY(lfm2, .name = "lfm2", .base = "llama", .features = "hybrid: gated short-conv / attention (per-head qk rmsnorm), swiglu, tied",
          .configure = configure)
MX_FAMILY(lfm2_bidirectional, .name = "lfm2_bidirectional", .base = "lfm2",
          .features = "lfm2 as a bidirectional encoder (LFM2.5-Embedding): full-sequence attention, centered short convolutions",
          .configure = configure_bidirectional)
