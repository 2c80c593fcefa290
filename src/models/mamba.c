/* Mamba: a stack of pre-norm residual Mamba-1 mixers (no attention, no MLP,
 * no positions), backbone.* names, RMSNorm, tied embeddings by default. */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

/* The model-level part shared by the pure state-space families (Mamba,
 * FalconMamba, Mamba2): embeddings, layer norms, final norm, head. */
int mx_mamba_configure_base(mx_arch *a, const mx_cfg *c, const mx_block_ops *mixer) {
    float eps;
    int n_layers;
    if (mx_cfg_i32(c, "hidden_size", 768, 1, 1 << 18, &a->hidden) ||
        mx_cfg_i32(c, "num_hidden_layers", 32, 1, MX_MAX_LAYERS, &n_layers) || mx_arch_layers(a, n_layers) ||
        mx_cfg_i32(c, "vocab_size", 50280, 1, 1 << 24, &a->vocab) ||
        mx_cfg_f32(c, "layer_norm_epsilon", 1e-5f, 0, 1, &eps) ||
        mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) ||
        mx_arch_act_default(a, c, "silu"))
        return MX_ERR;
    if (mx_cfg_i32(c, "bos_token_id", -1, -1, 1 << 30, &a->bos_id)) a->bos_id = -1;
    a->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, eps};
    a->max_pos = 1 << 26;
    a->pos = MX_POS_NONE;
    a->embed_scale = a->logit_scale = a->residual_scale = 1;
    a->names = (mx_names){.embed = "backbone.embeddings", .final_norm = "backbone.norm_f", .lm_head = "lm_head",
                          .attn_norm = "backbone.layers.%d.norm"};
    for (int i = 0; i < a->n_layers; i++) a->layers[i] = (mx_layer_spec){.mixer = mixer, .attn = a->attn};
    return MX_OK;
}

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_mamba_configure_base(a, c, &mx_block_mamba)) return MX_ERR;
    mx_ssm_spec *s = &a->ssm;
    double expand;
    if (mx_cfg_float(c, "expand", 2, 1e-3, 64, &expand) ||
        mx_cfg_i32(c, "intermediate_size", (int)(expand * a->hidden), 1, 1 << 20, &s->d_inner) ||
        mx_cfg_i32(c, "state_size", 16, 1, 1 << 12, &s->d_state) ||
        mx_cfg_i32(c, "conv_kernel", 4, 1, 64, &s->d_conv) ||
        mx_cfg_bool(c, "use_bias", false, &s->in_bias) || mx_cfg_bool(c, "use_conv_bias", true, &s->conv_bias))
        return MX_ERR;
    json_t *r = mx_cfg_get(c, "time_step_rank");
    if (r && json_is_string(r) && !strcmp(json_string_value(r), "auto")) s->dt_rank = (a->hidden + 15) / 16;
    else if (mx_cfg_i32(c, "time_step_rank", (a->hidden + 15) / 16, 1, 1 << 16, &s->dt_rank)) return MX_ERR;
    s->kind = MX_SSM_MAMBA1;
    s->out_bias = s->in_bias;
    s->act = a->act;
    s->prefix = "backbone.layers.%d.mixer";
    return MX_OK;
}

MX_FAMILY(mamba, .name = "mamba", .features = "ssm: mamba-1 selective scan, rmsnorm, tied embeddings, no attention",
          .configure = configure)
