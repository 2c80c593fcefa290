/* Zamba2: Mamba2 layers (h += mamba(norm(h))) and hybrid layers, which first
 * run a shared transformer block on [h | embeddings] (per-use LoRA adapters,
 * attention over 2 * hidden with head_dim 2 * hidden / heads scaled by
 * (head_dim / 2)^-0.5, rope iff use_mem_rope, GELU MLP), project it with the
 * layer's linear and feed h + t through the layer's own Mamba2
 * (mamba_decoder); the Mamba2 norm groups are mamba_ngroups and dt is floored
 * at time_step_min. Tied embeddings by default. */
#include "family.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_ssm_spec *s = &a->ssm;
    mx_shared_block_spec *b = &a->shared_block;
    int expand, ahd;
    bool rope, longctx;
    float tmin;
    if (mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) ||
        mx_arch_act_default(a, c, "gelu") ||
        mx_cfg_i32(c, "attention_head_dim", 2 * a->hidden / a->attn->n_heads, 1, 1 << 14, &ahd) ||
        mx_cfg_bool(c, "use_mem_rope", false, &rope) || mx_cfg_bool(c, "use_long_context", false, &longctx) ||
        mx_cfg_i32(c, "num_mem_blocks", 1, 1, 1 << 10, &b->n_blocks) ||
        mx_cfg_i32(c, "adapter_rank", 128, 1, 1 << 16, &b->adapter_rank) ||
        mx_cfg_bool(c, "use_shared_attention_adapter", false, &b->attn_adapters) ||
        mx_cfg_bool(c, "add_bias_linear", false, &b->bias) ||
        mx_cfg_i32(c, "mamba_expand", 2, 1, 64, &expand) || mx_cfg_i32(c, "n_mamba_heads", 8, 1, 1 << 16, &s->n_heads) ||
        mx_cfg_i32(c, "mamba_ngroups", 1, 1, 1 << 16, &s->n_groups) ||
        mx_cfg_i32(c, "mamba_d_state", 64, 1, 1 << 12, &s->d_state) ||
        mx_cfg_i32(c, "mamba_d_conv", 4, 1, 64, &s->d_conv) || mx_cfg_f32(c, "time_step_min", 0.001f, 0, 1e3f, &tmin))
        return -1;
    /* the shared attention */
    b->heads = a->attn->n_heads;
    b->kv_heads = a->attn->n_kv_heads;
    b->head_dim = ahd;
    b->attn_scale = 1.0f / sqrtf(ahd / 2.0f);
    b->ffn = a->ffn;
    b->act = a->act;
    b->rope = rope;
    b->shared = "model.layers.%d.shared_transformer";
    b->linear = "model.layers.%d.linear";
    b->mamba_norm = "model.layers.%d.mamba_decoder.input_layernorm";
    b->mamba = "model.layers.%d.mamba_decoder.mamba";
    if (b->heads * ahd != 2 * a->hidden) return mx_set_err("%s: attention heads * attention_head_dim must be 2 * hidden_size", c->file);
    a->attn->head_dim = ahd;
    if (rope) a->rope_decl[0] = (mx_rope_decl){.dim = ahd, .theta_scale = longctx ? pow(8.0, ahd / (ahd - 2.0)) : 1};
    else {
        a->pos = MX_POS_NONE;
        a->n_rope = 0;
    }
    /* the Mamba2 mixers */
    s->kind = MX_SSM_MAMBA2;
    s->d_inner = expand * a->hidden;
    if (mx_cfg_i32(c, "mamba_headdim", s->d_inner / s->n_heads, 1, 1 << 16, &s->head_dim)) return -1;
    if (s->n_heads * s->head_dim != s->d_inner) return mx_set_err("%s: n_mamba_heads * mamba_headdim differs from the mamba inner size", c->file);
    s->in_bias = s->out_bias = b->bias;
    s->conv_bias = true;
    s->gated_norm = true;
    s->norm_groups = s->n_groups;
    s->norm_eps = 1e-5f;
    s->dt_min = tmin;
    s->dt_max = INFINITY;
    if (mx_ssm_time_step_limit(s, c)) return MX_ERR;
    s->act = MX_ACT_SILU;
    s->prefix = "model.layers.%d.mamba";
    a->names = (mx_names){.embed = "model.embed_tokens", .final_norm = "model.final_layernorm", .lm_head = "lm_head",
                          .attn_norm = "model.layers.%d.input_layernorm"};
    json_t *bt = mx_cfg_get(c, "layers_block_type");
    if (!bt || !json_is_array(bt) || (int)json_array_size(bt) != a->n_layers)
        return mx_set_err("%s: layers_block_type: expected %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        const char *t = json_string_value(json_array_get(bt, (size_t)i));
        if (!t) return mx_set_err("%s: layers_block_type[%d]: expected a string", c->file, i);
        if (!strcmp(t, "mamba")) a->layers[i] = (mx_layer_spec){.mixer = &mx_block_mamba2, .attn = a->attn};
        else if (!strcmp(t, "hybrid")) a->layers[i] = (mx_layer_spec){.mixer = &mx_block_zamba, .attn = a->attn, .no_attn_norm = true};
        else return mx_set_err("%s: layers_block_type[%d]: unsupported '%s'", c->file, i, t);
    }
    return 0;
}

MX_FAMILY(zamba2, .name = "zamba2", .base = "llama",
          .features = "hybrid: mamba-2 layers + shared transformer block on [h | embeddings] with lora adapters",
          .configure = configure)
