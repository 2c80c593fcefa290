/* Nemotron-H: one block per entry of layers_block_type (mamba / attention /
 * moe), each h = h + mixer(RMSNorm(h)) with no separate ffn; attention has
 * no position encoding; the MoE is non-gated relu2 experts with a sigmoid
 * router (correction bias, group limit, renormalised, routed scaling) and a
 * shared expert; the Mamba2 mixer clamps dt below at time_step_min and
 * normalises each of its n_groups channel groups. num_hidden_layers is
 * len(layers_block_type). Older checkpoints give the blocks as
 * hybrid_override_pattern (M mamba, * attention, - dense relu2 MLP
 * down(act(up x)), E moe); the MLP block has no fixture (the stored upstream
 * version has no such block) and follows NemotronHMLP. */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

/* Block kind of layer i: layers_block_type[i], or the older
 * hybrid_override_pattern character (M mamba, * attention, - mlp, E moe). */
static const char *block_kind(const mx_cfg *c, int i) {
    json_t *bt = mx_cfg_get(c, "layers_block_type");
    if (bt) return json_string_value(json_array_get(bt, (size_t)i));
    const char *p = json_string_value(mx_cfg_get(c, "hybrid_override_pattern"));
    if (!p || i >= (int)strlen(p)) return NULL;
    switch (p[i]) {
    case 'M': return "mamba";
    case '*': return "attention";
    case '-': return "mlp";
    case 'E': return "moe";
    default: return "?";
    }
}

static int configure(mx_arch *a, const mx_cfg *c) {
    json_t *bt = mx_cfg_get(c, "layers_block_type"), *pat = mx_cfg_get(c, "hybrid_override_pattern");
    size_t nl = bt && json_is_array(bt) ? json_array_size(bt) : pat && json_is_string(pat) ? strlen(json_string_value(pat)) : 0;
    if (nl < 1 || nl > MX_MAX_LAYERS)
        return mx_set_err("%s: layers_block_type / hybrid_override_pattern: expected 1 to %d layers", c->file, MX_MAX_LAYERS);
    /* the generic reader wants num_hidden_layers: read a copy that has it */
    json_t *root = json_copy(c->root);
    if (!root || json_object_set_new(root, "num_hidden_layers", json_integer((json_int_t)nl))) {
        json_decref(root);
        return mx_set_err("out of memory");
    }
    mx_cfg t = {root, c->sub, c->file};
    int rc = mx_arch_hf_defaults(a, &t);
    json_decref(root);
    if (rc) return -1;
    mx_ssm_spec *s = &a->ssm;
    mx_moe_spec *moe = &a->moe;
    int err = 0;
    float eps, tmin;
    bool norm;
    if (mx_cfg_f32(c, "layer_norm_epsilon", 1e-5f, 0, 1, &eps) ||
        mx_cfg_i32(c, "mamba_num_heads", 128, 1, 1 << 16, &s->n_heads) ||
        mx_cfg_i32(c, "mamba_head_dim", 64, 1, 1 << 16, &s->head_dim) ||
        mx_cfg_i32(c, "n_groups", 8, 1, 1 << 16, &s->n_groups) ||
        mx_cfg_i32(c, "ssm_state_size", 128, 1, 1 << 12, &s->d_state) ||
        mx_cfg_i32(c, "conv_kernel", 4, 1, 64, &s->d_conv) ||
        mx_cfg_bool(c, "use_bias", false, &s->in_bias) || mx_cfg_bool(c, "use_conv_bias", true, &s->conv_bias) ||
        mx_cfg_f32(c, "time_step_min", 0.001f, 0, 1e3f, &tmin) ||
        mx_cfg_i32(c, "n_routed_experts", 8, 1, MX_MAX_EXPERTS, &moe->n_experts) ||
        mx_cfg_i32(c, "num_experts_per_tok", 2, 1, MX_MAX_EXPERTS, &moe->top_k) ||
        mx_cfg_i32(c, "moe_intermediate_size", 7688, 1, 1 << 20, &moe->ffn) ||
        mx_cfg_i32(c, "moe_shared_expert_intermediate_size", 7688, 0, 1 << 20, &moe->shared_ffn) ||
        mx_cfg_i32(c, "n_group", 1, 1, 64, &moe->n_group) || mx_cfg_i32(c, "topk_group", 1, 1, 64, &moe->topk_group) ||
        mx_cfg_bool(c, "norm_topk_prob", true, &norm) ||
        mx_cfg_f32(c, "routed_scaling_factor", 1.0f, 0, 1e6f, &moe->routed_scale))
        return -1;
    json_t *lat = mx_cfg_get(c, "moe_latent_size");
    if (lat) return mx_set_err("%s: moe_latent_size (latent MoE projections) is not supported", c->file);
    const char *mact = mx_cfg_str(c, "mamba_hidden_act", "silu", &err), *fact = mx_cfg_str(c, "mlp_hidden_act", "relu2", &err);
    if (err) return -1;
    if (mx_act_parse(mact, &s->act)) return mx_set_err("%s: mamba_hidden_act: unsupported '%s'", c->file, mact);
    if (mx_act_parse(fact, &moe->act)) return mx_set_err("%s: mlp_hidden_act: unsupported '%s'", c->file, fact);
    a->act = moe->act; /* dense MLP blocks: down(act(up x)) */
    a->mlp = MX_MLP_PLAIN;
    a->norm.eps = eps;
    a->pos = MX_POS_NONE;
    a->n_rope = 0;
    s->kind = MX_SSM_MAMBA2;
    s->d_inner = s->n_heads * s->head_dim;
    s->out_bias = s->in_bias;
    s->gated_norm = true;
    s->norm_groups = s->n_groups;
    s->norm_eps = eps;
    s->dt_min = tmin;
    s->dt_max = INFINITY;
    if (mx_ssm_time_step_limit(s, c)) return MX_ERR;
    s->prefix = "model.layers.%d.mixer";
    moe->route = MX_ROUTE_SIGMOID;
    moe->norm_p = norm ? 1 : 0;
    moe->norm_eps = 1e-20f;
    moe->gated = false;
    moe->router = "model.layers.%d.mixer.gate";
    moe->score_bias = "model.layers.%d.mixer.gate.e_score_correction_bias";
    moe->experts = (mx_expert_names){.up = "model.layers.%d.mixer.experts.up_proj", .down = "model.layers.%d.mixer.experts.down_proj"};
    moe->shared = (mx_expert_names){.up = "model.layers.%d.mixer.shared_experts.up_proj",
                                    .down = "model.layers.%d.mixer.shared_experts.down_proj"};
    a->names = (mx_names){.embed = "model.embeddings", .final_norm = "model.norm_f", .lm_head = "lm_head",
                          .attn_norm = "model.layers.%d.norm",
                          .up = "model.layers.%d.mixer.up_proj", .down = "model.layers.%d.mixer.down_proj"};
    a->attn->names = (mx_attn_names){.q = "model.layers.%d.mixer.q_proj", .k = "model.layers.%d.mixer.k_proj",
                                     .v = "model.layers.%d.mixer.v_proj", .o = "model.layers.%d.mixer.o_proj"};
    for (int i = 0; i < a->n_layers; i++) {
        const char *k = block_kind(c, i);
        if (!k) return mx_set_err("%s: layers_block_type[%d]: expected a string", c->file, i);
        const mx_block_ops *b = !strcmp(k, "mamba") ? &mx_block_mamba2 : !strcmp(k, "attention") ? &mx_block_attention
                                : !strcmp(k, "moe") ? &mx_block_moe : !strcmp(k, "mlp") ? &mx_block_mlp : NULL;
        if (!b) return mx_set_err("%s: layers_block_type[%d]: unsupported block type '%s'", c->file, i, k);
        a->layers[i] = (mx_layer_spec){.mixer = b, .attn = a->attn};
    }
    return 0;
}

MX_FAMILY(nemotron_h, .name = "nemotron_h",
          .features = "hybrid: mamba-2 (grouped gated norm, dt floor) / nope attention / relu2 sigmoid-routed moe blocks",
          .configure = configure)
