/* Qwen3-Next: layer_types linear_attention (gated DeltaNet) / full_attention
 * (gated attention: q_proj gives per head [q | gate], output * sigmoid(gate);
 * per-head q/k RMSNorm; partial rope), RMSNorms x * (1 + w); MoE layers
 * (softmax top-k, renormalised iff norm_topk_prob, a sigmoid-gated shared
 * expert) except mlp_only_layers, which have a dense SwiGLU. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_deltanet_spec *d = &a->deltanet;
    mx_moe_spec *s = &a->moe;
    int interval, step;
    bool norm;
    if (mx_cfg_i32(c, "linear_num_key_heads", 16, 1, 4096, &d->n_k_heads) ||
        mx_cfg_i32(c, "linear_num_value_heads", 32, 1, 4096, &d->n_v_heads) ||
        mx_cfg_i32(c, "linear_key_head_dim", 128, 1, 4096, &d->dk) ||
        mx_cfg_i32(c, "linear_value_head_dim", 128, 1, 4096, &d->dv) ||
        mx_cfg_i32(c, "linear_conv_kernel_dim", 4, 1, 64, &d->d_conv) ||
        mx_cfg_i32(c, "full_attention_interval", 4, 1, 1 << 20, &interval) ||
        mx_cfg_i32(c, "num_experts", 512, 0, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 10, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 512, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "shared_expert_intermediate_size", 512, 0, 1 << 20, &s->shared_ffn) ||
        mx_cfg_i32(c, "decoder_sparse_step", 1, 1, 1 << 20, &step) || mx_cfg_bool(c, "norm_topk_prob", true, &norm))
        return -1;
    if (d->n_v_heads % d->n_k_heads) return mx_set_err("%s: linear_num_value_heads must be a multiple of linear_num_key_heads", c->file);
    a->rope_decl[0].partial = 0.25;
    a->norm.offset = 1;
    a->attn->qk_norm = MX_QKNORM_HEAD;
    a->attn->qk_norm_spec = a->norm;
    a->attn->gate = true;
    a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    d->norm_eps = a->norm.eps;
    d->prefix = "model.layers.%d.linear_attn";
    mx_arch_ignore(a, "mtp.*"); /* multi-token prediction head */
    s->route = MX_ROUTE_SOFTMAX;
    s->norm_p = norm ? 1 : 0;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.mlp.gate";
    s->shared_gate = s->shared_ffn ? "model.layers.%d.mlp.shared_expert_gate" : NULL;
    s->experts = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.%d.gate_proj", .up = "model.layers.%d.mlp.experts.%d.up_proj",
                                   .down = "model.layers.%d.mlp.experts.%d.down_proj"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.switch_mlp.gate_proj", .up = "model.layers.%d.mlp.switch_mlp.up_proj",
                               .down = "model.layers.%d.mlp.switch_mlp.down_proj"};
    s->shared = (mx_expert_names){.gate = "model.layers.%d.mlp.shared_expert.gate_proj",
                                  .up = "model.layers.%d.mlp.shared_expert.up_proj",
                                  .down = "model.layers.%d.mlp.shared_expert.down_proj"};
    json_t *lt = mx_cfg_get(c, "layer_types"), *dense = mx_cfg_get(c, "mlp_only_layers");
    if (lt && (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers))
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    if (dense && !json_is_array(dense)) return mx_set_err("%s: mlp_only_layers: expected an array", c->file);
    for (int i = 0; i < a->n_layers; i++) {
        const char *t = lt ? json_string_value(json_array_get(lt, (size_t)i))
                           : (i + 1) % interval == 0 ? "full_attention" : "linear_attention";
        if (!t) return mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
        if (!strcmp(t, "linear_attention")) a->layers[i].mixer = &mx_block_deltanet;
        else if (strcmp(t, "full_attention")) return mx_set_err("%s: layer_types[%d]: unsupported '%s'", c->file, i, t);
        bool mlp_only = false;
        for (size_t k = 0; dense && k < json_array_size(dense); k++)
            mlp_only |= json_is_integer(json_array_get(dense, k)) && json_integer_value(json_array_get(dense, k)) == i;
        a->layers[i].ffn = !mlp_only && s->n_experts > 0 && (i + 1) % step == 0 ? &mx_block_moe : &mx_block_mlp;
    }
    return 0;
}

MX_FAMILY(qwen3_next, .name = "qwen3_next", .aliases = MX_ALIASES("qwen3next"), .base = "llama",
          .features = "hybrid: gated deltanet / gated attention (partial rope, qk norm), (1+w) rmsnorm, moe + gated shared expert",
          .configure = configure)
