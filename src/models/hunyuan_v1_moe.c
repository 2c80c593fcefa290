/* HunYuan v1 MoE: the HunYuan v1 attention (q/k norms after rope, NTK-alpha
 * rope) and in every layer a MoE: softmax router (mlp.gate.wg), top-k
 * renormalised, SwiGLU experts of intermediate_size, plus a shared SwiGLU of
 * the same width (mlp.shared_mlp) unless use_mixed_mlp_moe is false.
 * num_experts / moe_topk / moe_intermediate_size / num_shared_expert may be
 * per-layer lists (the released configs): only uniform ones that match this
 * math are accepted. */
#include "family.h"
#include "../base/base.h"

/* an integer, or a list of equal integers, one per layer */
static int uniform_int(const mx_cfg *c, const char *key, int def, int lo, int hi, int n_layers, int *out) {
    json_t *v = mx_cfg_get(c, key);
    if (!json_is_array(v)) return mx_cfg_i32(c, key, def, lo, hi, out);
    if ((int)json_array_size(v) != n_layers) return mx_set_err("%s: %s: expected %d entries", c->file, key, n_layers);
    for (int i = 0; i < n_layers; i++) {
        double d;
        if (mx_json_num(json_array_get(v, (size_t)i), c->file, key, lo, hi, &d) || d != (int)d)
            return mx_set_err("%s: %s[%d]: expected an integer in [%d, %d]", c->file, key, i, lo, hi);
        if (i && (int)d != *out) return mx_set_err("%s: %s: per-layer values that differ are not supported", c->file, key);
        *out = (int)d;
    }
    return MX_OK;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    bool shared;
    int moe_ffn, n_shared;
    if (uniform_int(c, "num_experts", 1, 1, MX_MAX_EXPERTS, a->n_layers, &s->n_experts) ||
        uniform_int(c, "moe_topk", 1, 1, MX_MAX_EXPERTS, a->n_layers, &s->top_k) ||
        uniform_int(c, "moe_intermediate_size", a->ffn, 1, 1 << 20, a->n_layers, &moe_ffn) ||
        uniform_int(c, "num_shared_expert", 1, 0, 64, a->n_layers, &n_shared) || mx_cfg_bool(c, "use_mixed_mlp_moe", true, &shared))
        return -1;
    if (moe_ffn != a->ffn)
        return mx_set_err("%s: moe_intermediate_size %d differs from intermediate_size %d (the experts' width in this model)", c->file, moe_ffn, a->ffn);
    if (shared && n_shared != 1) return mx_set_err("%s: num_shared_expert %d is not supported (one shared MLP)", c->file, n_shared);
    s->ffn = a->ffn;
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = 1;
    s->gated = true;
    s->act = a->act;
    s->shared_ffn = shared ? a->ffn : 0;
    s->router = "model.layers.%d.mlp.gate.wg";
    s->experts = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.%d.gate_proj", .up = "model.layers.%d.mlp.experts.%d.up_proj",
                                   .down = "model.layers.%d.mlp.experts.%d.down_proj"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.switch_mlp.gate_proj", .up = "model.layers.%d.mlp.switch_mlp.up_proj",
                               .down = "model.layers.%d.mlp.switch_mlp.down_proj"};
    s->shared = (mx_expert_names){.gate = "model.layers.%d.mlp.shared_mlp.gate_proj", .up = "model.layers.%d.mlp.shared_mlp.up_proj",
                                  .down = "model.layers.%d.mlp.shared_mlp.down_proj"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = &mx_block_moe;
    return 0;
}

MX_FAMILY(hunyuan_v1_moe, .name = "hunyuan_v1_moe", .aliases = MX_ALIASES("hunyuan"), .base = "hunyuan_v1_dense",
          .features = "hunyuan_v1_dense attention + softmax top-k moe (renormalised), shared mlp", .configure = configure)
