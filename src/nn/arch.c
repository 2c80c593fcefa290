#include "arch.h"
#include "../base/base.h"
#include <float.h>
#include <math.h>
#include <string.h>

static const mx_names llama_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head",
    .attn_norm = "model.layers.%d.input_layernorm",
    .q = "model.layers.%d.self_attn.q_proj", .k = "model.layers.%d.self_attn.k_proj",
    .v = "model.layers.%d.self_attn.v_proj", .o = "model.layers.%d.self_attn.o_proj",
    .ffn_norm = "model.layers.%d.post_attention_layernorm",
    .gate = "model.layers.%d.mlp.gate_proj", .up = "model.layers.%d.mlp.up_proj",
    .down = "model.layers.%d.mlp.down_proj",
};

int mx_arch_ignore(mx_arch *a, const char *pattern) {
    if (a->n_ignore >= MX_MAX_IGNORE) return mx_set_err("too many ignore patterns");
    a->ignore[a->n_ignore++] = pattern;
    return MX_OK;
}

void mx_arch_set_window_all(mx_arch *a, int window) {
    for (int i = 0; i < a->n_layers; i++) a->layers[i].window = window;
}

int mx_arch_layer_types(mx_arch *a, const mx_cfg *c, int window) {
    json_t *lt = mx_cfg_get(c, "layer_types");
    if (!lt) return 0;
    if (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers)
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        if (!s) return mx_set_err("%s: layer_types[%d]: expected a string", c->file, i);
        if (!strcmp(s, "sliding_attention")) a->layers[i].window = window;
        else if (!strcmp(s, "full_attention")) a->layers[i].window = 0;
        else return mx_set_err("%s: layer_types[%d]: unsupported layer type '%s'", c->file, i, s);
    }
    return 1;
}

int mx_arch_rope_defaults(mx_arch *a, const mx_cfg *c, double theta_def, double partial_def) {
    double theta, partial;
    if (mx_cfg_float(c, "rope_theta", theta_def, 1e-3, 1e15, &theta) ||
        mx_cfg_float(c, "partial_rotary_factor", partial_def, 1e-3, 1.0, &partial))
        return MX_ERR;
    int rot = (int)(a->head_dim * partial);
    rot -= rot % 2;
    bool il = a->rope[0].interleaved;
    if (mx_rope_from_config(&a->rope[0], c, theta, rot, a->max_pos)) return MX_ERR;
    a->rope[0].interleaved = il;
    return MX_OK;
}

int mx_arch_act_default(mx_arch *a, const mx_cfg *c, const char *def) {
    int err = 0;
    const char *act = mx_cfg_str(c, "hidden_act", def, &err);
    if (err) return MX_ERR;
    if (mx_act_parse(act, &a->act)) return mx_set_err("%s: hidden_act: unsupported activation '%s'", c->file, act);
    return MX_OK;
}

int mx_ssm_time_step_limit(mx_ssm_spec *s, const mx_cfg *c) {
    json_t *lim = mx_cfg_get(c, "time_step_limit");
    if (!lim) return MX_OK;
    double lo, hi;
    if (!json_is_array(lim) || json_array_size(lim) != 2 ||
        mx_json_num(json_array_get(lim, 0), c->file, "time_step_limit[0]", 0, DBL_MAX, &lo) ||
        mx_json_num(json_array_get(lim, 1), c->file, "time_step_limit[1]", 0, DBL_MAX, &hi))
        return mx_set_err("%s: time_step_limit: expected [min, max]", c->file);
    if (lo > s->dt_min) s->dt_min = (float)lo;
    if (hi < 3.4e38 && hi < s->dt_max) s->dt_max = (float)hi;
    return MX_OK;
}

int mx_arch_hf_defaults(mx_arch *a, const mx_cfg *c) {
    memset(a, 0, sizeof *a);
    a->names = llama_names;
    if (mx_cfg_i32(c, "hidden_size", 0, 1, 1 << 18, &a->hidden) ||
        mx_cfg_i32(c, "num_hidden_layers", 0, 1, MX_MAX_LAYERS, &a->n_layers) ||
        mx_cfg_i32(c, "num_attention_heads", 0, 1, 4096, &a->n_heads) ||
        mx_cfg_i32(c, "num_key_value_heads", a->n_heads, 1, 4096, &a->n_kv_heads) ||
        mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 24, &a->vocab) ||
        mx_cfg_i32(c, "max_position_embeddings", 4096, 1, 1 << 26, &a->max_pos))
        return MX_ERR;
    if (!a->hidden) return mx_set_err("%s: hidden_size is missing", c->file);
    if (!a->n_layers) return mx_set_err("%s: num_hidden_layers is missing", c->file);
    if (!a->n_heads) return mx_set_err("%s: num_attention_heads is missing", c->file);
    if (!a->vocab) return mx_set_err("%s: vocab_size is missing", c->file);
    if (a->n_heads % a->n_kv_heads)
        return mx_set_err("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", c->file, a->n_heads, a->n_kv_heads);
    int hd_def = a->hidden % a->n_heads == 0 ? a->hidden / a->n_heads : 0;
    if (mx_cfg_i32(c, "head_dim", hd_def, 1, 1 << 14, &a->head_dim)) return MX_ERR;
    if (!a->head_dim) return mx_set_err("%s: hidden_size %d is not divisible by num_attention_heads %d and head_dim is missing", c->file, a->hidden, a->n_heads);
    if (mx_cfg_i32(c, "intermediate_size", 4 * a->hidden, 1, 1 << 20, &a->ffn)) return MX_ERR;
    float eps;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-6f, 0, 1, &eps)) return MX_ERR;
    a->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, eps};
    a->qk_norm_spec = a->norm;
    int err = 0;
    const char *act = mx_cfg_str(c, "hidden_act", "silu", &err);
    if (err) return MX_ERR;
    if (mx_act_parse(act, &a->act)) return mx_set_err("%s: hidden_act: unsupported activation '%s'", c->file, act);
    bool bias;
    if (mx_cfg_bool(c, "attention_bias", false, &bias) || mx_cfg_bool(c, "mlp_bias", false, &a->mlp_bias) ||
        mx_cfg_bool(c, "tie_word_embeddings", false, &a->tied))
        return MX_ERR;
    a->q_bias = a->k_bias = a->v_bias = a->o_bias = bias;
    double theta, partial;
    if (mx_cfg_float(c, "rope_theta", 10000.0, 1e-3, 1e15, &theta) ||
        mx_cfg_float(c, "partial_rotary_factor", 1.0, 1e-3, 1.0, &partial))
        return MX_ERR;
    int rot = (int)(a->head_dim * partial);
    rot -= rot % 2;
    if (mx_rope_from_config(&a->rope[0], c, theta, rot, a->max_pos)) return MX_ERR;
    a->n_rope = 1;
    a->pos = MX_POS_ROPE;
    a->attn_scale = 1.0f / sqrtf((float)a->head_dim);
    a->embed_scale = 1;
    a->logit_scale = 1;
    a->residual_scale = 1;
    a->mlp = MX_MLP_GATED;
    a->residual = MX_RES_SEQUENTIAL;
    if (mx_cfg_i32(c, "bos_token_id", -1, -1, 1 << 30, &a->bos_id)) a->bos_id = -1;
    for (int i = 0; i < a->n_layers; i++) a->layers[i] = (mx_layer_spec){.rope = true, .mixer = &mx_block_attention, .ffn = &mx_block_mlp};
    mx_arch_ignore(a, "*rotary_emb.inv_freq");
    return MX_OK;
}
