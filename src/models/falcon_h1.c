/* Falcon-H1: every layer runs attention and a Mamba2 mixer side by side on
 * the same normed input (h += attention_out * attn(x * attention_in) +
 * ssm_out * mamba(x)), then a SwiGLU MLP with mlp_multipliers (gate output,
 * MLP output); muP multipliers on the embeddings, the lm head, the keys, the
 * Mamba2 input and its five in_proj segments (ssm_multipliers).
 * attn(x * s) has q, k, v scaled by s (no attention biases), so it is taken
 * as scores * s^2 and output * s; keys * key_multiplier as scores * that. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int read_floats(const mx_cfg *c, const char *key, int n, float *out) {
    json_t *v = mx_cfg_get(c, key);
    if (!v) { for (int i = 0; i < n; i++) out[i] = 1; return 0; }
    if (!json_is_array(v) || (int)json_array_size(v) != n) return mx_set_err("%s: %s: expected %d numbers", c->file, key, n);
    for (int i = 0; i < n; i++) {
        double d;
        if (mx_json_num(json_array_get(v, (size_t)i), c->file, key, -1e9, 1e9, &d)) return -1;
        out[i] = (float)d;
    }
    return 0;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_ssm_spec *s = &a->ssm;
    float att_in, att_out, key_mult, ssm_in, ssm_out, lm_mult, mlp_m[2];
    bool rms, before, pbias;
    if (mx_hybrid_mamba2_config(s, c, a, "model.layers.%d.mamba") ||
        mx_cfg_f32(c, "embedding_multiplier", 1, -1e9f, 1e9f, &a->embed_scale) ||
        mx_cfg_f32(c, "lm_head_multiplier", 1, -1e9f, 1e9f, &lm_mult) ||
        mx_cfg_f32(c, "attention_in_multiplier", 1, -1e9f, 1e9f, &att_in) ||
        mx_cfg_f32(c, "attention_out_multiplier", 1, -1e9f, 1e9f, &att_out) ||
        mx_cfg_f32(c, "key_multiplier", 1, -1e9f, 1e9f, &key_mult) ||
        mx_cfg_f32(c, "ssm_in_multiplier", 1, -1e9f, 1e9f, &ssm_in) ||
        mx_cfg_f32(c, "ssm_out_multiplier", 1, -1e9f, 1e9f, &ssm_out) ||
        read_floats(c, "mlp_multipliers", 2, mlp_m) || read_floats(c, "ssm_multipliers", 5, s->seg_scale) ||
        mx_cfg_bool(c, "mamba_rms_norm", false, &rms) || mx_cfg_bool(c, "mamba_norm_before_gate", true, &before) ||
        mx_cfg_bool(c, "projectors_bias", false, &pbias))
        return -1;
    if ((a->attn->q_bias || a->attn->k_bias || a->attn->v_bias) && att_in != 1.0f)
        return mx_set_err("%s: attention_in_multiplier with attention biases is not supported", c->file);
    a->rope_decl[0].theta = 100000.0;
    s->gated_norm = rms;
    s->norm_before_gate = before;
    s->norm_groups = s->n_groups;
    s->out_bias = pbias;
    s->in_scale = ssm_in;
    a->logit_scale = lm_mult;
    a->attn->scale *= att_in * att_in * key_mult;
    a->mixer_scale = att_out * att_in;
    a->mixer2_scale = ssm_out;
    a->mlp_gate_scale = mlp_m[0];
    a->mlp_out_scale = mlp_m[1];
    a->names.ffn_norm = "model.layers.%d.pre_ff_layernorm";
    a->names.final_norm = "model.final_layernorm";
    a->names.gate = "model.layers.%d.feed_forward.gate_proj";
    a->names.up = "model.layers.%d.feed_forward.up_proj";
    a->names.down = "model.layers.%d.feed_forward.down_proj";
    for (int i = 0; i < a->n_layers; i++) a->layers[i].mixer2 = &mx_block_mamba2;
    return 0;
}

MX_FAMILY(falcon_h1, .name = "falcon_h1", .base = "llama",
          .features = "hybrid: attention and mamba-2 in parallel per layer, muP multipliers (ssm mup vector, mlp, key)",
          .configure = configure)
