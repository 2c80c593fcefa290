/* LFM2: layer_types conv (gated short convolution) / full_attention (GQA,
 * per-head q/k RMSNorm, rope), each followed by a SwiGLU (w1 gate, w3 up,
 * w2 down) whose width may be auto-adjusted; the final norm is called
 * embedding_norm; tied embeddings. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

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
        mx_cfg_i32(c, "block_multiple_of", 256, 1, 1 << 20, &mult_of))
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
    json_t *lt = mx_cfg_get(c, "layer_types");
    if (!lt || !json_is_array(lt) || (int)json_array_size(lt) != a->n_layers)
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)i));
        if (!t) return mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
        if (!strcmp(t, "conv")) a->layers[i].mixer = &mx_block_shortconv;
        else if (strcmp(t, "full_attention")) return mx_set_err("%s: layer_types[%d]: unsupported '%s'", c->file, i, t);
    }
    return 0;
}

MX_FAMILY(lfm2, .name = "lfm2", .base = "llama", .features = "hybrid: gated short-conv / attention (per-head qk rmsnorm), swiglu, tied",
          .configure = configure)
