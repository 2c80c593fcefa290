#include "arch.h"
#include "../base/base.h"
#include <float.h>
#include <stddef.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

static const mx_names llama_names = {
    .embed = "model.embed_tokens", .final_norm = "model.norm", .lm_head = "lm_head",
    .attn_norm = "model.layers.%d.input_layernorm",
    .ffn_norm = "model.layers.%d.post_attention_layernorm",
    .gate = "model.layers.%d.mlp.gate_proj", .up = "model.layers.%d.mlp.up_proj",
    .down = "model.layers.%d.mlp.down_proj",
};
static const mx_attn_names llama_attn_names = {
    .q = "model.layers.%d.self_attn.q_proj", .k = "model.layers.%d.self_attn.k_proj",
    .v = "model.layers.%d.self_attn.v_proj", .o = "model.layers.%d.self_attn.o_proj",
};

/* Owned allocations: a singly linked list of blocks, each after its link. */
struct mx_arch_mem {
    mx_arch_mem *next;
    max_align_t data[];
};

void *mx_arch_alloc(mx_arch *a, size_t bytes) {
    if (bytes > ((size_t)1 << 32)) { mx_set_err("arch description of %zu bytes is too large", bytes); return NULL; }
    mx_arch_mem *m = mx_calloc(1, sizeof *m + bytes);
    if (!m) return NULL;
    m->next = a->mem;
    a->mem = m;
    return m->data;
}

void mx_arch_free(mx_arch *a) {
    if (a->encoder) mx_arch_free(a->encoder); /* lives in a's memory; its own memory first */
    for (mx_arch_mem *m = a->mem, *n; m; m = n) {
        n = m->next;
        free(m);
    }
    memset(a, 0, sizeof *a);
}

mx_attn_spec *mx_arch_add_attn(mx_arch *a, const mx_attn_spec *like) {
    if (a->n_attn_specs >= MX_MAX_ATTN_SPECS) { mx_set_err("more than %d attention specs", MX_MAX_ATTN_SPECS); return NULL; }
    mx_attn_spec *s = mx_arch_alloc(a, sizeof *s);
    if (!s) return NULL;
    if (like) *s = *like;
    a->attn_specs[a->n_attn_specs++] = s;
    return s;
}

int mx_arch_layers(mx_arch *a, int n) {
    if (n < 1 || n > MX_MAX_LAYERS) return mx_set_err("%d layers is out of range (1 to %d)", n, MX_MAX_LAYERS);
    if (!a->attn && !(a->attn = mx_arch_add_attn(a, NULL))) return MX_ERR;
    if (!(a->layers = mx_arch_alloc(a, (size_t)n * sizeof *a->layers))) return MX_ERR;
    a->n_layers = n;
    for (int i = 0; i < n; i++)
        a->layers[i] = (mx_layer_spec){.mixer = &mx_block_attention, .ffn = &mx_block_mlp, .attn = a->attn, .rope = true};
    return MX_OK;
}

int mx_arch_ignore(mx_arch *a, const char *pattern) {
    if (a->n_ignore >= MX_MAX_IGNORE) return mx_set_err("too many ignore patterns");
    a->ignore[a->n_ignore++] = pattern;
    return MX_OK;
}

int mx_arch_ignore_mtp(mx_arch *a, const mx_cfg *c, const char *key) {
    int n;
    if (mx_cfg_i32(c, key, 0, 0, 8, &n)) return MX_ERR;
    for (int i = a->n_layers; i < a->n_layers + n; i++) {
        char *pat = mx_arch_alloc(a, 32);
        if (!pat) return MX_ERR;
        snprintf(pat, 32, "model.layers.%d.*", i);
        if (mx_arch_ignore(a, pat)) return MX_ERR;
    }
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

int mx_arch_mlp_layer_types(mx_arch *a, const mx_cfg *c, const mx_block_ops *sparse) {
    json_t *lt = mx_cfg_get(c, "mlp_layer_types");
    if (!lt) return 0;
    if (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers)
        return mx_set_err("%s: mlp_layer_types: expected %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        if (!s) return mx_set_err("%s: mlp_layer_types[%d]: expected a string", c->file, i);
        if (!strcmp(s, "dense")) a->layers[i].ffn = &mx_block_mlp;
        else if (!strcmp(s, "sparse")) a->layers[i].ffn = sparse;
        else return mx_set_err("%s: mlp_layer_types[%d]: unsupported type '%s' (dense, sparse)", c->file, i, s);
    }
    return 1;
}

void mx_arch_rope_per_type(mx_arch *a, const mx_cfg *c, double full_theta, double sliding_theta) {
    json_t *rp = mx_cfg_get(c, "rope_parameters");
    static const char *const key[2] = {"full_attention", "sliding_attention"};
    for (int r = 0; r < 2; r++)
        a->rope_decl[r] = (mx_rope_decl){.theta = r ? sliding_theta : full_theta,
                                         .params_key = json_is_object(json_object_get(rp, key[r])) ? key[r] : NULL};
    a->n_rope = 2;
    for (int i = 0; i < a->n_layers; i++) a->layers[i].rope_idx = a->layers[i].window ? 1 : 0;
}

int mx_arch_ropes(mx_arch *a, const mx_cfg *c) {
    for (int r = 0; a->pos == MX_POS_ROPE && r < a->n_rope; r++) {
        const mx_rope_decl *d = &a->rope_decl[r];
        mx_cfg src = *c, none = {NULL, NULL, c->file};
        if (d->section) {
            json_t *o = mx_cfg_get(c, d->section);
            if (o && !json_is_object(o)) return mx_set_err("%s: %s must be an object", c->file, d->section);
            src = (mx_cfg){o, NULL, c->file};
        }
        double theta, partial;
        if (mx_cfg_float(&src, d->theta_key ? d->theta_key : "rope_theta", d->theta ? d->theta : 10000.0, 1e-3, 1e15, &theta) ||
            mx_cfg_float(&src, "partial_rotary_factor", d->partial ? d->partial : 1.0, 1e-3, 1.0, &partial))
            return MX_ERR;
        /* transformers v5 keeps rope_theta, partial_rotary_factor and the scaling keys in one
         * rope_parameters object (per layer type when params_key says which) */
        json_t *rs = d->plain ? NULL : mx_cfg_get(&src, "rope_scaling"), *rp = d->plain ? NULL : mx_cfg_get(&src, "rope_parameters");
        if (rp && !json_is_object(rp)) return mx_set_err("%s: rope_parameters: expected an object", c->file);
        if (rp && d->params_key) {
            rp = json_object_get(rp, d->params_key);
            if (!json_is_object(rp)) return mx_set_err("%s: rope_parameters.%s: expected an object", c->file, d->params_key);
        }
        if (!rp && d->params_key) return mx_set_err("%s: rope_parameters is missing", c->file);
        if (rp) {
            mx_cfg p = {rp, NULL, c->file};
            if ((!d->theta_key && mx_cfg_float(&p, "rope_theta", theta, 1e-3, 1e15, &theta)) ||
                mx_cfg_float(&p, "partial_rotary_factor", partial, 1e-3, 1.0, &partial))
                return MX_ERR;
            if (!rs) rs = rp;
        }
        json_t *def = NULL;
        if (!d->plain && d->scaling_default && mx_cfg_absent(&src, "rope_scaling") && mx_cfg_absent(&src, "rope_parameters") &&
            !(rs = def = json_loads(d->scaling_default, 0, NULL)))
            return mx_set_err("%s: the family's default rope scaling does not parse", c->file);
        int rot = d->dim ? d->dim : (int)(a->attn->head_dim * partial);
        rot -= rot % 2;
        int rc = mx_rope_from_scaling(&a->rope[r], d->plain ? &none : &src, rs, theta * (d->theta_scale ? d->theta_scale : 1), rot, a->max_pos,
                                      d->yarn_factor_given);
        json_decref(def);
        if (rc) return MX_ERR;
        a->rope[r].interleaved = d->interleaved;
        a->rope[r].reversed = d->reversed;
        if (d->attn_factor > 0) a->rope[r].attn_factor = d->attn_factor;
        if (d->mrope && mx_rope_mrope_section(&a->rope[r], &src)) return MX_ERR;
    }
    return MX_OK;
}

/* hidden_act: the kernels' activations, or xIELU (its parameters are per
 * layer; model binding refuses it where the family binds none). */
static int parse_hidden_act(const char *s, mx_act *out) {
    if (!strcmp(s, "xielu")) { *out = MX_ACT_XIELU; return 0; }
    return mx_act_parse(s, out);
}

int mx_arch_act_default(mx_arch *a, const mx_cfg *c, const char *def) {
    int err = 0;
    const char *act = mx_cfg_str(c, "hidden_act", def, &err);
    if (err) return MX_ERR;
    if (parse_hidden_act(act, &a->act)) return mx_set_err("%s: hidden_act: unsupported activation '%s'", c->file, act);
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
    a->names = llama_names;
    int n_layers, heads, kv_heads;
    if (mx_cfg_i32(c, "hidden_size", 0, 1, 1 << 18, &a->hidden) ||
        mx_cfg_i32(c, "num_hidden_layers", 0, 1, MX_MAX_LAYERS, &n_layers) ||
        mx_cfg_i32(c, "num_attention_heads", 0, 1, 4096, &heads) ||
        mx_cfg_i32(c, "num_key_value_heads", heads, 1, 4096, &kv_heads) ||
        mx_cfg_i32(c, "vocab_size", 0, 1, 1 << 24, &a->vocab) ||
        mx_cfg_i32(c, "max_position_embeddings", 4096, 1, 1 << 26, &a->max_pos))
        return MX_ERR;
    if (!a->hidden) return mx_set_err("%s: hidden_size is missing", c->file);
    if (!n_layers) return mx_set_err("%s: num_hidden_layers is missing", c->file);
    if (!heads) return mx_set_err("%s: num_attention_heads is missing", c->file);
    if (!a->vocab) return mx_set_err("%s: vocab_size is missing", c->file);
    if (heads % kv_heads)
        return mx_set_err("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", c->file, heads, kv_heads);
    if (mx_arch_layers(a, n_layers)) return MX_ERR;
    mx_attn_spec *at = a->attn;
    *at = (mx_attn_spec){.n_heads = heads, .n_kv_heads = kv_heads, .names = llama_attn_names};
    int hd_def = a->hidden % at->n_heads == 0 ? a->hidden / at->n_heads : 0;
    if (mx_cfg_i32(c, "head_dim", hd_def, 1, 1 << 14, &at->head_dim)) return MX_ERR;
    if (!at->head_dim) return mx_set_err("%s: hidden_size %d is not divisible by num_attention_heads %d and head_dim is missing", c->file, a->hidden, at->n_heads);
    json_t *is = mx_cfg_get(c, "intermediate_size");
    if (json_is_array(is)) { /* one width per layer (Gemma 3n): arch.ffn is layer 0's */
        if ((int)json_array_size(is) != n_layers)
            return mx_set_err("%s: intermediate_size: %zu entries for %d layers", c->file, json_array_size(is), n_layers);
        for (int i = 0; i < n_layers; i++) {
            double v;
            if (mx_json_num(json_array_get(is, i), c->file, "intermediate_size", 1, 1 << 20, &v)) return MX_ERR;
            if (v != floor(v)) return mx_set_err("%s: intermediate_size: entry %d is not an integer", c->file, i);
            a->layers[i].ffn_width = (int)v;
        }
        a->ffn = a->layers[0].ffn_width;
    } else if (mx_cfg_i32(c, "intermediate_size", 4 * a->hidden, 1, 1 << 20, &a->ffn)) return MX_ERR;
    float eps;
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-6f, 0, 1, &eps)) return MX_ERR;
    a->norm = (mx_norm_spec){MX_NORM_RMS, 0, true, false, eps};
    at->qk_norm_spec = a->norm;
    int err = 0;
    const char *act = mx_cfg_str(c, "hidden_act", "silu", &err);
    if (err) return MX_ERR;
    if (parse_hidden_act(act, &a->act)) return mx_set_err("%s: hidden_act: unsupported activation '%s'", c->file, act);
    bool bias;
    if (mx_cfg_bool(c, "attention_bias", false, &bias) || mx_cfg_bool(c, "mlp_bias", false, &a->mlp_bias) ||
        mx_cfg_bool(c, "tie_word_embeddings", false, &a->tied))
        return MX_ERR;
    at->q_bias = at->k_bias = at->v_bias = at->o_bias = bias;
    a->n_rope = 1; /* built by mx_arch_ropes after the family's configure */
    a->pos = MX_POS_ROPE;
    at->scale = 1.0f / sqrtf((float)at->head_dim);
    a->embed_scale = 1;
    a->logit_scale = 1;
    a->residual_scale = 1;
    a->mlp = MX_MLP_GATED;
    a->residual = MX_RES_SEQUENTIAL;
    if (mx_cfg_i32(c, "bos_token_id", -1, -1, 1 << 30, &a->bos_id)) a->bos_id = -1;
    mx_arch_ignore(a, "*rotary_emb.inv_freq");
    return MX_OK;
}
