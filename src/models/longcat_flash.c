/* LongCat-Flash: num_layers logical layers, each of TWO attention sublayers
 * (self_attn.0/1: DeepSeek latent attention with a LoRA q, q scaled by
 * sqrt(hidden / q_lora_rank) and the normed latent by sqrt(hidden /
 * kv_lora_rank)), two dense SwiGLU MLPs (mlps.0/1, ffn_hidden_size) and one
 * shortcut MoE (mlp) that reads the first MLP's input and joins the residual
 * at the end of the layer. The engine runs each sublayer pair as two layers
 * (the checkpoint's names are rewritten: self_attn.J, input_layernorm.J,
 * post_attention_layernorm.J, mlps.J of layer I -> layer 2I+J; the MoE ->
 * layer 2I's shortcut), as HF's cache does (layer indices 2I, 2I+1). MoE:
 * softmax over n_routed_experts + zero_expert_num router logits, top moe_topk
 * of the probabilities + e_score_correction_bias, weights the probabilities
 * times routed_scaling_factor (not renormalised); experts fused
 * (gate_up_proj [E + Z, 2F, H], whose identity-expert rows are unused;
 * down_proj [E, H, F]); an identity ("zero") expert adds w * x. The MTP
 * module (model.mtp.*) is ignored. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static const mx_rename renames[] = {
    {"model.layers.%d.self_attn.%d.", "model.layers.%d.self_attn.", 2},
    {"model.layers.%d.input_layernorm.%d.", "model.layers.%d.input_layernorm.", 2},
    {"model.layers.%d.post_attention_layernorm.%d.", "model.layers.%d.post_attention_layernorm.", 2},
    {"model.layers.%d.mlps.%d.", "model.layers.%d.mlp.", 2},
    {"model.layers.%d.mlp.", "model.layers.%d.moe.", 2},
};

static int configure(mx_arch *a, const mx_cfg *c) {
    int nl, hl, qk;
    if (mx_cfg_i32(c, "num_layers", 28, 1, MX_MAX_LAYERS / 2, &nl) || mx_cfg_i32(c, "num_hidden_layers", 2 * nl, 1, MX_MAX_LAYERS, &hl))
        return -1;
    if (hl != 2 * nl) return mx_set_err("%s: num_hidden_layers %d is not 2 * num_layers (%d)", c->file, hl, nl);
    /* the Llama keys under LongCat's names: two engine layers per layer, the dense MLP width */
    json_t *t = c->root ? json_copy(c->root) : json_object();
    json_t *ffn = mx_cfg_get(c, "ffn_hidden_size");
    if (!t || json_object_set_new(t, "num_hidden_layers", json_integer(2 * nl)) ||
        json_object_set(t, "intermediate_size", ffn ? ffn : json_integer(12288)))
        return json_decref(t), mx_set_err("out of memory");
    mx_cfg tc = {t, c->sub, c->file};
    int rc = mx_arch_hf_defaults(a, &tc) || mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) ||
             mx_deepseek_mla_configure(a, c, &mx_deepseek_mla_defaults) ? -1 : 0;
    json_decref(t);
    if (rc) return -1;
    mx_mla_spec *m = &a->mla;
    mx_moe_spec *s = &a->moe;
    if (m->q_lora_rank < 1) return mx_set_err("%s: q_lora_rank is required (LongCat's queries always go through the LoRA)", c->file);
    if (mx_cfg_i32(c, "qk_head_dim", m->qk_nope_dim + m->qk_rope_dim, 1, 1 << 15, &qk)) return -1;
    if (qk != m->qk_nope_dim + m->qk_rope_dim)
        return mx_set_err("%s: qk_head_dim %d is not qk_nope_head_dim + qk_rope_head_dim (%d)", c->file, qk, m->qk_nope_dim + m->qk_rope_dim);
    a->rope_decl[0].theta = 10000000.0;
    m->q_scale = (float)sqrt((double)a->hidden / m->q_lora_rank);
    m->kv_scale = (float)sqrt((double)a->hidden / m->kv_lora_rank);
    if (mx_cfg_i32(c, "n_routed_experts", 512, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "zero_expert_num", 256, 0, MX_MAX_EXPERTS, &s->n_zero) ||
        mx_cfg_i32(c, "moe_topk", 12, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "expert_ffn_hidden_size", 2048, 1, 1 << 20, &s->ffn) ||
        mx_cfg_f32(c, "routed_scaling_factor", 6.0f, 0, 1e6f, &s->routed_scale) ||
        mx_cfg_bool(c, "router_bias", false, &s->router_bias) || mx_arch_ignore(a, "model.mtp.*"))
        return -1;
    s->route = MX_ROUTE_SOFTMAX;
    s->gated = true;
    s->act = a->act;
    s->router = "model.layers.%d.moe.router.classifier";
    s->score_bias = "model.layers.%d.moe.router.e_score_correction_bias";
    s->experts = (mx_expert_names){.gate_up = "model.layers.%d.moe.experts.gate_up_proj", .down = "model.layers.%d.moe.experts.down_proj"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i].shortcut = i % 2 == 0 ? &mx_block_moe : NULL;
    a->renames = renames;
    a->n_renames = (int)MX_ARRAY_LEN(renames);
    return 0;
}

MX_FAMILY(longcat_flash, .name = "longcat_flash",
          .features = "two mla sublayers (lora scales) + two dense mlps per layer, shortcut moe with identity (zero) experts, softmax router with correction bias; mtp ignored",
          .configure = configure)
