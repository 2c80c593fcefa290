/* DeepSeek V3: multi-head latent attention in every layer (q low-rank with
 * RMSNorm, compressed kv latent + one shared rope key, rope on the rope
 * slices only, interleaved when rope_interleave; scale qk_head_dim^-0.5,
 * times mscale^2 under yarn with mscale_all_dim), dense MLPs in the first
 * first_k_dense_replace layers, then MoE: sigmoid router whose selection adds
 * e_score_correction_bias and is limited to the topk_group best of n_group
 * groups, weights renormalised (+1e-20) and times routed_scaling_factor, plus
 * n_shared_experts always-on experts fused into one MLP. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_moe_spec *s = &a->moe;
    mx_mla_spec *m = &a->mla;
    int dense, n_shared, mtp;
    bool norm, il;
    /* q_lora_rank: absent means the config class default 1536, null means a plain q_proj */
    bool q_null = (c->sub && json_is_null(json_object_get(c->sub, "q_lora_rank"))) ||
                  (c->root && json_is_null(json_object_get(c->root, "q_lora_rank")));
    if (mx_cfg_i32(c, "q_lora_rank", q_null ? 0 : 1536, 0, 1 << 20, &m->q_lora_rank) ||
        mx_cfg_i32(c, "kv_lora_rank", 512, 1, 1 << 20, &m->kv_lora_rank) ||
        mx_cfg_i32(c, "qk_nope_head_dim", 128, 0, 1 << 14, &m->qk_nope_dim) ||
        mx_cfg_i32(c, "qk_rope_head_dim", 64, 2, 2 * MX_ROPE_MAX_HALF, &m->qk_rope_dim) ||
        mx_cfg_i32(c, "v_head_dim", 128, 1, 1 << 14, &m->v_head_dim) || mx_cfg_bool(c, "rope_interleave", true, &il) ||
        mx_cfg_i32(c, "first_k_dense_replace", 3, 0, MX_MAX_LAYERS, &dense) ||
        mx_cfg_i32(c, "n_routed_experts", 256, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 8, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 2048, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "n_shared_experts", 1, 0, 1 << 10, &n_shared) || mx_cfg_i32(c, "n_group", 8, 1, 64, &s->n_group) ||
        mx_cfg_i32(c, "topk_group", 4, 1, 64, &s->topk_group) || mx_cfg_bool(c, "norm_topk_prob", true, &norm) ||
        mx_cfg_f32(c, "routed_scaling_factor", 2.5f, 0, 1e6f, &s->routed_scale) ||
        mx_cfg_i32(c, "num_nextn_predict_layers", 0, 0, 16, &mtp))
        return -1;
    /* MLA */
    if (m->qk_rope_dim % 2) return mx_set_err("%s: qk_rope_head_dim %d must be even", c->file, m->qk_rope_dim);
    a->rope_decl[0] = (mx_rope_decl){.dim = m->qk_rope_dim, .interleaved = il};
    m->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, 1e-6f};
    m->q_a = "model.layers.%d.self_attn.q_a_proj";
    m->q_a_norm = "model.layers.%d.self_attn.q_a_layernorm";
    m->q_b = "model.layers.%d.self_attn.q_b_proj";
    m->kv_a = "model.layers.%d.self_attn.kv_a_proj_with_mqa";
    m->kv_a_norm = "model.layers.%d.self_attn.kv_a_layernorm";
    m->kv_b = "model.layers.%d.self_attn.kv_b_proj";
    m->embed_q = "model.layers.%d.self_attn.embed_q";         /* MLX conversions */
    m->unembed_out = "model.layers.%d.self_attn.unembed_out";
    a->attn->scale = 1.0f / sqrtf((float)(m->qk_nope_dim + m->qk_rope_dim));
    json_t *rs = mx_cfg_get(c, "rope_scaling");
    if (rs) {
        mx_cfg r = {rs, NULL, c->file};
        double msa, factor;
        if (mx_cfg_float(&r, "mscale_all_dim", 0, 0, 1e6, &msa) || mx_cfg_float(&r, "factor", 1, 1e-6, 1e6, &factor)) return -1;
        if (msa > 0 && factor > 1) {
            double ms = 0.1 * msa * log(factor) + 1.0;
            a->attn->scale *= (float)(ms * ms);
        }
    }
    /* MoE */
    s->route = MX_ROUTE_SIGMOID;
    s->norm_p = norm ? 1 : 0;
    s->norm_eps = 1e-20f;
    s->gated = true;
    s->act = a->act;
    s->shared_ffn = s->ffn * n_shared;
    s->router = "model.layers.%d.mlp.gate";
    s->score_bias = "model.layers.%d.mlp.gate.e_score_correction_bias";
    s->experts = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.%d.gate_proj", .up = "model.layers.%d.mlp.experts.%d.up_proj",
                                   .down = "model.layers.%d.mlp.experts.%d.down_proj"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.switch_mlp.gate_proj", .up = "model.layers.%d.mlp.switch_mlp.up_proj",
                               .down = "model.layers.%d.mlp.switch_mlp.down_proj"};
    s->shared = (mx_expert_names){.gate = "model.layers.%d.mlp.shared_experts.gate_proj", .up = "model.layers.%d.mlp.shared_experts.up_proj",
                                  .down = "model.layers.%d.mlp.shared_experts.down_proj"};
    /* multi-token-prediction layers stored after the last layer are not used (as HF) */
    for (int i = a->n_layers; i < a->n_layers + mtp; i++) {
        char *pat = mx_arch_alloc(a, 32);
        if (!pat) return -1;
        snprintf(pat, 32, "model.layers.%d.*", i);
        if (mx_arch_ignore(a, pat)) return -1;
    }
    for (int i = 0; i < a->n_layers; i++) {
        a->layers[i].mixer = &mx_block_mla;
        a->layers[i].ffn = i < dense ? &mx_block_mlp : &mx_block_moe;
    }
    return 0;
}

MX_FAMILY(deepseek_v3, .name = "deepseek_v3", .base = "llama",
          .features = "mla (q lora, latent kv cache, rope slice), sigmoid group-limited moe with correction bias, routed scaling, shared experts, dense first layers",
          .configure = configure)
