/* Nemotron: Llama with LayerNorm1p (weight + 1, with bias; key norm_eps), a
 * plain up -> relu^2 -> down MLP without gate, and partial rotary (half of
 * each head by default). */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    float eps;
    int err = 0;
    if (mx_cfg_f32(c, "norm_eps", 1e-5f, 0, 1, &eps)) return -1;
    a->rope_decl[0].partial = 0.5;
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 1.0f, true, true, eps};
    a->attn->qk_norm_spec = a->norm;
    const char *act = mx_cfg_str(c, "hidden_act", "relu2", &err);
    if (err) return -1;
    if (mx_act_parse(act, &a->act)) return mx_set_err("%s: hidden_act: unsupported activation '%s'", c->file, act);
    a->mlp = MX_MLP_PLAIN;
    a->names.gate = NULL;
    return 0;
}

MX_FAMILY(nemotron, .name = "nemotron", .base = "llama", .features = "llama + layernorm1p, relu2 mlp without gate, partial rotary",
          .configure = configure)
