/* Granite-MoE-Hybrid (Granite 4.0): layer_types mamba (Mamba2 mixer) /
 * attention (rope or NoPE per position_embedding_type), each followed by a
 * top-k-then-softmax MoE of stacked fused experts plus a dense shared SwiGLU
 * (shared_mlp), or by the shared MLP alone when there are no experts; Granite
 * multipliers (embedding, residual, attention scale, logits divisor). */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    int err = 0;
    if (mx_cfg_i32(c, "num_local_experts", 8, 0, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 2, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "shared_intermediate_size", 1024, 0, 1 << 20, &s->shared_ffn) ||
        mx_hybrid_mamba2_config(&a->ssm, c, a, "model.layers.%d.mamba"))
        return -1;
    const char *pe = mx_cfg_str(c, "position_embedding_type", "nope", &err);
    if (err) return -1;
    a->names.ffn_norm = "model.layers.%d.post_attention_layernorm";
    bool rope = !strcmp(pe, "rope");
    if (!rope) { a->pos = MX_POS_NONE; a->n_rope = 0; }
    mx_granite_moe_spec(a);
    s->shared = (mx_expert_names){.gate_up = "model.layers.%d.shared_mlp.input_linear",
                                  .down = "model.layers.%d.shared_mlp.output_linear"};
    if (s->n_experts == 0) { /* dense: the shared MLP is the whole ffn */
        a->ffn = s->shared_ffn;
        a->names.gate_up = "model.layers.%d.shared_mlp.input_linear";
        a->names.down = "model.layers.%d.shared_mlp.output_linear";
    }
    json_t *lt = mx_cfg_get(c, "layer_types");
    if (lt && (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers))
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        const char *t = lt ? json_string_value(json_array_get(lt, (size_t)i)) : "mamba";
        if (!t) return mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
        if (!strcmp(t, "mamba")) a->layers[i].mixer = &mx_block_mamba2;
        else if (strcmp(t, "attention")) return mx_set_err("%s: layer_types[%d]: unsupported '%s'", c->file, i, t);
        a->layers[i].rope = rope;
        a->layers[i].ffn = s->n_experts ? &mx_block_moe : &mx_block_mlp;
    }
    return 0;
}

MX_FAMILY(granitemoehybrid, .name = "granitemoehybrid", .base = "granite",
          .features = "hybrid: mamba-2 / attention layers, top-k-softmax moe + shared swiglu, granite multipliers",
          .configure = configure)
