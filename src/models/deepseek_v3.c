/* DeepSeek V3: multi-head latent attention in every layer (q low-rank with
 * RMSNorm, compressed kv latent + one shared rope key, rope on the rope
 * slices only, interleaved when rope_interleave; scale qk_head_dim^-0.5,
 * times mscale^2 under yarn with mscale_all_dim), dense MLPs in the first
 * first_k_dense_replace layers, then MoE: sigmoid router whose selection adds
 * e_score_correction_bias and is limited to the topk_group best of n_group
 * groups, weights renormalised (+1e-20) and times routed_scaling_factor, plus
 * n_shared_experts always-on experts fused into one MLP. The MLA and MoE
 * set-ups are shared with the DeepSeek-derived families (family.h). */
#include "family.h"
#include "../base/base.h"
#include <math.h>

void mx_deepseek_moe_names(mx_moe_spec *s) {
    s->experts = (mx_expert_names){.gate = "model.layers.%d.mlp.experts.%d.gate_proj", .up = "model.layers.%d.mlp.experts.%d.up_proj",
                                   .down = "model.layers.%d.mlp.experts.%d.down_proj"};
    s->alt = (mx_expert_names){.gate = "model.layers.%d.mlp.switch_mlp.gate_proj", .up = "model.layers.%d.mlp.switch_mlp.up_proj",
                               .down = "model.layers.%d.mlp.switch_mlp.down_proj"};
    s->shared = (mx_expert_names){.gate = "model.layers.%d.mlp.shared_experts.gate_proj", .up = "model.layers.%d.mlp.shared_experts.up_proj",
                                  .down = "model.layers.%d.mlp.shared_experts.down_proj"};
    /* transformers v5 saves the experts fused: gate_up_proj [E, 2F, H] ([gate | up]), down_proj [E, H, F] */
    s->alt2 = (mx_expert_names){.gate_up = "model.layers.%d.mlp.experts.gate_up_proj", .down = "model.layers.%d.mlp.experts.down_proj"};
}

int mx_deepseek_moe_configure(mx_arch *a, const mx_cfg *c, const mx_dsmoe_defaults *d) {
    mx_moe_spec *s = &a->moe;
    int dense, n_shared, freq;
    bool norm;
    if (mx_cfg_i32(c, "first_k_dense_replace", d->dense, 0, MX_MAX_LAYERS, &dense) ||
        mx_cfg_i32(c, "moe_layer_freq", 1, 1, MX_MAX_LAYERS, &freq) ||
        mx_cfg_i32(c, "n_routed_experts", d->experts, 1, MX_MAX_EXPERTS, &s->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", d->top_k, 1, MX_MAX_EXPERTS, &s->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", d->ffn, 1, 1 << 20, &s->ffn) ||
        mx_cfg_i32(c, "n_shared_experts", d->shared, 0, 1 << 10, &n_shared) ||
        mx_cfg_i32(c, "n_group", d->n_group, 1, 64, &s->n_group) || mx_cfg_i32(c, "topk_group", d->topk_group, 1, 64, &s->topk_group) ||
        mx_cfg_bool(c, "norm_topk_prob", d->norm, &norm) ||
        mx_cfg_f32(c, "routed_scaling_factor", d->scale, 0, 1e6f, &s->routed_scale) ||
        mx_arch_ignore_mtp(a, c, "num_nextn_predict_layers"))
        return -1;
    s->route = MX_ROUTE_SIGMOID;
    s->norm_p = norm ? 1 : 0;
    s->norm_eps = 1e-20f;
    s->gated = true;
    s->act = a->act;
    s->shared_ffn = s->ffn * n_shared;
    s->router = "model.layers.%d.mlp.gate";
    s->score_bias = "model.layers.%d.mlp.gate.e_score_correction_bias";
    mx_deepseek_moe_names(s);
    for (int i = 0; i < a->n_layers; i++) a->layers[i].ffn = i >= dense && i % freq == 0 ? &mx_block_moe : &mx_block_mlp;
    return 0;
}

const mx_mla_defaults mx_deepseek_mla_defaults = {.q_lora = 1536, .kv_lora = 512, .nope = 128, .rope = 64, .v = 128, .interleave = true};

/* A key present with JSON null (a config class then applies its null meaning). */
static bool cfg_null(const mx_cfg *c, const char *key) { return !mx_cfg_absent(c, key) && !mx_cfg_get(c, key); }

int mx_deepseek_mla_configure(mx_arch *a, const mx_cfg *c, const mx_mla_defaults *d) {
    mx_mla_spec *m = &a->mla;
    bool il = d->interleave;
    bool q_null = cfg_null(c, "q_lora_rank"), v_null = cfg_null(c, "v_head_dim");
    int v_def = d->v ? d->v : a->hidden / a->attn->n_heads;
    if (mx_cfg_i32(c, "q_lora_rank", q_null ? 0 : d->q_lora, 0, 1 << 20, &m->q_lora_rank) ||
        mx_cfg_i32(c, "kv_lora_rank", d->kv_lora, 1, 1 << 20, &m->kv_lora_rank) ||
        mx_cfg_i32(c, "qk_nope_head_dim", d->nope, 0, 1 << 14, &m->qk_nope_dim) ||
        mx_cfg_i32(c, "qk_rope_head_dim", d->rope, 2, 2 * MX_ROPE_MAX_HALF, &m->qk_rope_dim) ||
        (!v_null && mx_cfg_i32(c, "v_head_dim", v_def, 1, 1 << 14, &m->v_head_dim)) ||
        (!d->fixed_rope && mx_cfg_bool(c, "rope_interleave", d->interleave, &il)))
        return -1;
    if (v_null) m->v_head_dim = v_def;
    if (m->v_head_dim < 1) return mx_set_err("%s: v_head_dim (hidden_size / num_attention_heads) is 0", c->file);
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
    if (!rs) rs = mx_cfg_get(c, "rope_parameters");
    if (rs) {
        mx_cfg r = {rs, NULL, c->file};
        double msa, factor;
        if (mx_cfg_float(&r, "mscale_all_dim", 0, 0, 1e6, &msa) || mx_cfg_float(&r, "factor", 1, 1e-6, 1e6, &factor)) return -1;
        if (msa > 0 && factor > 1) {
            double ms = 0.1 * msa * log(factor) + 1.0;
            a->attn->scale *= (float)(ms * ms);
        }
    }
    for (int i = 0; i < a->n_layers; i++) a->layers[i].mixer = &mx_block_mla;
    return 0;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 256, .top_k = 8, .ffn = 2048, .shared = 1, .n_group = 8, .topk_group = 4,
                                        .dense = 3, .scale = 2.5f, .norm = true};
    return mx_deepseek_mla_configure(a, c, &mx_deepseek_mla_defaults) || mx_deepseek_moe_configure(a, c, &d) ? -1 : 0;
}

MX_FAMILY(deepseek_v3, .name = "deepseek_v3", .base = "llama",
          .features = "mla (q lora, latent kv cache, rope slice), sigmoid group-limited moe with correction bias, routed scaling, shared experts, dense first layers",
          .configure = configure)
