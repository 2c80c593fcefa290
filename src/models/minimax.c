/* MiniMax (MiniMax-Text): Mixtral's MoE (softmax top-k, renormalised) under
 * a hybrid of full attention and lightning attention layers (layer_types;
 * default: even layers full), rope_theta 1e6 by default, and DeepNorm-style
 * residuals: each sublayer's residual is its normed input, scaled by alpha,
 * plus the sublayer output scaled by beta (per layer type for the mixer). */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_lightning_spec *s = &a->lightning;
    float fa, fb, la, lb, ma, mb;
    if (mx_cfg_f32(c, "full_attn_alpha_factor", 1, -1e6f, 1e6f, &fa) || mx_cfg_f32(c, "full_attn_beta_factor", 1, -1e6f, 1e6f, &fb) ||
        mx_cfg_f32(c, "linear_attn_alpha_factor", 1, -1e6f, 1e6f, &la) ||
        mx_cfg_f32(c, "linear_attn_beta_factor", 1, -1e6f, 1e6f, &lb) ||
        mx_cfg_f32(c, "mlp_alpha_factor", 1, -1e6f, 1e6f, &ma) || mx_cfg_f32(c, "mlp_beta_factor", 1, -1e6f, 1e6f, &mb))
        return -1;
    if (!fa || !la || !ma) return mx_set_err("%s: the residual alpha factors must be non-zero", c->file);
    a->rope_decl[0].theta = 1000000.0;
    s->n_heads = a->attn->n_heads;
    s->head_dim = a->attn->head_dim;
    s->norm_eps = 1e-6f; /* MiniMaxRMSNorm's default: the lightning output norm is built without the config eps */
    s->act = a->act;
    s->prefix = "model.layers.%d.self_attn";
    mx_arch_ignore(a, "model.layers.*.self_attn.query_decay"); /* buffers derived from slope_rate */
    mx_arch_ignore(a, "model.layers.*.self_attn.key_decay");
    mx_arch_ignore(a, "model.layers.*.self_attn.diagonal_decay");
    json_t *lt = mx_cfg_get(c, "layer_types");
    if (lt && (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers))
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        mx_layer_spec *ls = &a->layers[i];
        const char *t = lt ? json_string_value(json_array_get(lt, (size_t)i)) : i % 2 ? "linear_attention" : "full_attention";
        if (!t) return mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
        bool linear = !strcmp(t, "linear_attention");
        if (!linear && strcmp(t, "full_attention")) return mx_set_err("%s: layer_types[%d]: unsupported '%s'", c->file, i, t);
        if (linear) ls->mixer = &mx_block_lightning;
        ls->res_alpha[0] = linear ? la : fa;
        ls->res_beta[0] = linear ? lb : fb;
        ls->res_alpha[1] = ma;
        ls->res_beta[1] = mb;
    }
    return 0;
}

MX_FAMILY(minimax, .name = "minimax", .base = "mixtral",
          .features = "hybrid: lightning attention (decayed linear attention, output gate) / full attention, deepnorm residual factors, "
                      "softmax top-k moe",
          .configure = configure)
