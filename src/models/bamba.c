/* Bamba: Mamba2 mixers with full attention at attn_layer_indices (GQA,
 * partial rope), every layer followed by a SwiGLU MLP (feed_forward.*,
 * pre_ff_layernorm); final_layernorm. The mamba_* keys describe the Mamba2
 * mixer, as in the other Mamba2 hybrids (Granite-MoE-Hybrid, Falcon-H1). */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

/* Reads the hybrid Mamba2 keys (mamba_n_heads, mamba_d_head, ...); d_inner
 * = mamba_d_ssm, or mamba_expand * hidden_size when absent; gated RMSNorm over d_inner
 * with eps rms_norm_eps; dt unclamped. */
int mx_hybrid_mamba2_config(mx_ssm_spec *s, const mx_cfg *c, const mx_arch *a, const char *prefix) {
    int expand;
    if (mx_cfg_i32(c, "mamba_expand", 2, 1, 64, &expand) || mx_cfg_i32(c, "mamba_n_heads", 128, 1, 1 << 16, &s->n_heads) ||
        mx_cfg_i32(c, "mamba_n_groups", 1, 1, 1 << 16, &s->n_groups) ||
        mx_cfg_i32(c, "mamba_d_state", 256, 1, 1 << 12, &s->d_state) ||
        mx_cfg_i32(c, "mamba_d_conv", 4, 1, 64, &s->d_conv) ||
        mx_cfg_bool(c, "mamba_conv_bias", true, &s->conv_bias) || mx_cfg_bool(c, "mamba_proj_bias", false, &s->in_bias))
        return MX_ERR;
    if (mx_cfg_i32(c, "mamba_d_ssm", expand * a->hidden, 1, 1 << 20, &s->d_inner)) return MX_ERR; /* Falcon-H1 */
    json_t *dh = mx_cfg_get(c, "mamba_d_head");
    if (dh && json_is_string(dh) && !strcmp(json_string_value(dh), "auto")) s->head_dim = s->d_inner / s->n_heads;
    else if (mx_cfg_i32(c, "mamba_d_head", s->d_inner / s->n_heads, 1, 1 << 16, &s->head_dim)) return MX_ERR;
    if (s->n_heads * s->head_dim != s->d_inner)
        return mx_set_err("%s: mamba_n_heads * mamba_d_head = %d differs from the mamba inner size %d", c->file,
                          s->n_heads * s->head_dim, s->d_inner);
    s->kind = MX_SSM_MAMBA2;
    s->out_bias = s->in_bias;
    s->gated_norm = true;
    s->norm_groups = 1;
    s->norm_eps = a->norm.eps;
    s->dt_min = 0;
    s->dt_max = INFINITY;
    s->act = a->act;
    s->prefix = prefix;
    return MX_OK;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_hybrid_mamba2_config(&a->ssm, c, a, "model.layers.%d.mamba")) return -1;
    a->rope_decl[0].partial = 0.5;
    a->names.ffn_norm = "model.layers.%d.pre_ff_layernorm";
    a->names.final_norm = "model.final_layernorm";
    a->names.gate = "model.layers.%d.feed_forward.gate_proj";
    a->names.up = "model.layers.%d.feed_forward.up_proj";
    a->names.down = "model.layers.%d.feed_forward.down_proj";
    for (int i = 0; i < a->n_layers; i++) a->layers[i].mixer = &mx_block_mamba2;
    json_t *idx = mx_cfg_get(c, "attn_layer_indices");
    if (idx && !json_is_array(idx)) return mx_set_err("%s: attn_layer_indices: expected an array", c->file);
    for (size_t k = 0; idx && k < json_array_size(idx); k++) {
        json_t *v = json_array_get(idx, k);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= a->n_layers)
            return mx_set_err("%s: attn_layer_indices[%zu]: expected a layer index below %d", c->file, k, a->n_layers);
        a->layers[json_integer_value(v)].mixer = &mx_block_attention;
    }
    return 0;
}

MX_FAMILY(bamba, .name = "bamba", .base = "llama", .features = "hybrid: mamba-2 + attention (partial rope) at attn_layer_indices, swiglu mlp",
          .configure = configure)
