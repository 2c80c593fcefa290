/* Sentence embeddings and reranking (see embed.h). */
#include "embed.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PM_CLS, PM_MAX, PM_MEAN, PM_MEAN_SQRT, PM_LAST, PM_COUNT }; /* sentence-transformers concat order */
static const char *const pm_names[PM_COUNT] = {"cls", "max", "mean", "mean_sqrt_len", "last"};

#define MAX_DENSE 4
typedef struct {
    mx_st_file f;
    mx_weight w;
    float *b;
    mx_act act;
} emb_dense;

struct mx_embedder {
    mx_engine eng;
    mx_enc *enc;      /* scratch for enc_cap tokens, grown on demand up to max_tokens */
    int enc_cap;
    mx_pool *pool;
    mx_embed_opts opts;
    mx_tokenizer *tok;
    int H, max_len, max_tokens;
    bool mode[PM_COUNT];
    bool include_prompt;
    emb_dense dense[MAX_DENSE];
    int n_dense;
    bool normalize;
    int out_dim, dim; /* after the pipeline; after --dimensions */
    float *hidden;    /* [enc_cap, H] */
    float *v1, *v2;   /* pipeline scratch */
    size_t vcap;
    mx_enc_seq *seqs;
    char desc[512];
};

mx_engine *mx_embedder_engine(mx_embedder *e) { return &e->eng; }
int mx_embedder_dim(const mx_embedder *e) { return e->dim; }
int mx_embedder_hidden(const mx_embedder *e) { return e->H; }
int mx_embedder_max_len(const mx_embedder *e) { return e->max_len; }
bool mx_embedder_normalizes(const mx_embedder *e) { return e->normalize; }
int mx_embedder_labels(const mx_embedder *e) { return mx_head_labels(&e->eng.model); }
const char *mx_embedder_describe(const mx_embedder *e) { return e->desc; }

void mx_embedder_close(mx_embedder *e) {
    if (!e) return;
    for (int i = 0; i < e->n_dense; i++) {
        mx_weight_free(&e->dense[i].w);
        free(e->dense[i].b);
        mx_st_close(&e->dense[i].f);
    }
    mx_enc_free(e->enc);
    mx_tok_free(e->tok);
    mx_engine_close(&e->eng);
    mx_aligned_free(e->hidden);
    free(e->v1);
    free(e->v2);
    free(e->seqs);
    free(e);
}

/* ---- sentence-transformers config ---- */

static int parse_act(const char *s, mx_act *out) {
    const char *last = strrchr(s, '.');
    last = last ? last + 1 : s;
    static const struct { const char *n; mx_act a; } map[] = {
        {"Identity", MX_ACT_IDENTITY}, {"Tanh", MX_ACT_TANH}, {"GELU", MX_ACT_GELU}, {"ReLU", MX_ACT_RELU},
        {"Sigmoid", MX_ACT_SIGMOID}, {"SiLU", MX_ACT_SILU},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(map); i++)
        if (!strcmp(last, map[i].n)) { *out = map[i].a; return MX_OK; }
    return MX_ERR;
}

static int load_dense(mx_embedder *e, const char *dir, int in_dim) {
    if (e->n_dense >= MAX_DENSE) return mx_set_err("%s: more than %d Dense modules", dir, MAX_DENSE);
    emb_dense *d = &e->dense[e->n_dense];
    char *cp = mx_path_join(dir, "config.json"), *wp = mx_path_join(dir, "model.safetensors");
    json_t *cfg = cp ? mx_json_load_file(cp, 1 << 20) : NULL;
    int rc = MX_ERR;
    if (!cfg) goto out;
    mx_cfg c = {cfg, NULL, cp};
    int fin, fout, err = 0;
    bool bias;
    if (mx_cfg_i32(&c, "in_features", 0, 1, 1 << 20, &fin) || mx_cfg_i32(&c, "out_features", 0, 1, 1 << 20, &fout) ||
        mx_cfg_bool(&c, "bias", true, &bias))
        goto out;
    const char *act = mx_cfg_str(&c, "activation_function", "torch.nn.modules.activation.Tanh", &err);
    if (err) goto out;
    if (parse_act(act, &d->act)) { mx_set_err("%s: activation_function '%s' is not supported", cp, act); goto out; }
    if (fin != in_dim) { mx_set_err("%s: in_features %d does not match the %d-dim input it gets", cp, fin, in_dim); goto out; }
    if (!mx_file_exists(wp)) { mx_set_err("%s: no model.safetensors (only safetensors Dense weights are read)", dir); goto out; }
    if (mx_st_open(wp, &d->f)) goto out;
    e->n_dense++; /* closed with the embedder from here on */
    const mx_tensor *w = mx_st_find(&d->f, "linear.weight"), *b = mx_st_find(&d->f, "linear.bias");
    if (!w || w->ndim != 2 || w->shape[0] != fout || w->shape[1] != fin) {
        mx_set_err("%s: linear.weight missing or not [%d, %d]", wp, fout, fin);
        goto out;
    }
    mx_wfmt fmt = w->dtype == MX_DT_F32 ? MX_W_F32 : w->dtype == MX_DT_F16 ? MX_W_F16 : w->dtype == MX_DT_BF16 ? MX_W_BF16 : MX_W_NONE;
    if (!fmt) { mx_set_err("%s: linear.weight has unsupported dtype %s", wp, mx_dtype_name(w->dtype)); goto out; }
    d->w = (mx_weight){.fmt = fmt, .rows = fout, .cols = fin, .data = w->data, .row_bytes = (size_t)fin * mx_dtype_size(w->dtype)};
    if (bias) {
        if (!b || b->numel != fout) { mx_set_err("%s: linear.bias missing or not [%d]", wp, fout); goto out; }
        if (!(d->b = mx_malloc((size_t)fout * sizeof(float))) || mx_tensor_to_f32(b, d->b)) goto out;
    }
    rc = MX_OK;
out:
    json_decref(cfg);
    free(cp);
    free(wp);
    return rc;
}

static int load_pooling(mx_embedder *e, const char *dir) {
    char *cp = mx_path_join(dir, "config.json");
    json_t *cfg = cp ? mx_json_load_file(cp, 1 << 20) : NULL;
    int rc = MX_ERR;
    if (!cfg) goto out;
    mx_cfg c = {cfg, NULL, cp};
    static const char *const keys[PM_COUNT] = {"pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens",
                                               "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_lasttoken"};
    for (int i = 0; i < PM_COUNT; i++)
        if (mx_cfg_bool(&c, keys[i], false, &e->mode[i])) goto out;
    bool wm;
    if (mx_cfg_bool(&c, "pooling_mode_weightedmean_tokens", false, &wm) || mx_cfg_bool(&c, "include_prompt", true, &e->include_prompt))
        goto out;
    if (wm) { mx_set_err("%s: pooling_mode_weightedmean_tokens is not supported", cp); goto out; }
    int any = 0;
    for (int i = 0; i < PM_COUNT; i++) any += e->mode[i];
    if (!any) { mx_set_err("%s: no pooling mode is set", cp); goto out; }
    rc = MX_OK;
out:
    json_decref(cfg);
    free(cp);
    return rc;
}

/* Reads modules.json; *model_dir gets the Transformer module's folder. */
static int load_st(const char *dir, char **model_dir, bool *have_pooling, json_t **modules) {
    *model_dir = mx_strdup(dir);
    *have_pooling = false;
    *modules = NULL;
    if (!*model_dir) return MX_ERR;
    char *mp = mx_path_join(dir, "modules.json");
    if (!mp) return MX_ERR;
    if (!mx_file_exists(mp)) { free(mp); return MX_OK; }
    json_t *mods = mx_json_load_file(mp, 1 << 20);
    if (!mods) { free(mp); return MX_ERR; }
    if (!json_is_array(mods)) { json_decref(mods); mx_set_err("%s: expected a list of modules", mp); free(mp); return MX_ERR; }
    for (size_t i = 0; i < json_array_size(mods); i++) {
        json_t *m = json_array_get(mods, i);
        const char *type = json_string_value(json_object_get(m, "type")), *path = json_string_value(json_object_get(m, "path"));
        if (!type || !path) { json_decref(mods); mx_set_err("%s: module %zu has no type or path", mp, i); free(mp); return MX_ERR; }
        if (strstr(type, ".Transformer") && *path) {
            free(*model_dir);
            *model_dir = mx_path_join(dir, path);
            if (!*model_dir) { json_decref(mods); free(mp); return MX_ERR; }
        }
    }
    free(mp);
    *modules = mods;
    return MX_OK;
}

/* Dense / Normalize / Pooling modules, once the model is open (dims known). */
static int apply_st(mx_embedder *e, const char *dir, json_t *mods, bool *have_pooling) {
    int dim = 0;
    for (size_t i = 0; mods && i < json_array_size(mods); i++) {
        json_t *m = json_array_get(mods, i);
        const char *type = json_string_value(json_object_get(m, "type")), *path = json_string_value(json_object_get(m, "path"));
        char *sub = mx_path_join(dir, path);
        if (!sub) return MX_ERR;
        int rc = MX_OK;
        if (strstr(type, ".Transformer")) {
        } else if (strstr(type, ".Pooling")) {
            rc = load_pooling(e, sub);
            *have_pooling = true;
        } else if (strstr(type, ".Dense")) {
            if (!dim) { free(sub); return mx_set_err("%s: a Dense module comes before the Pooling module", dir); }
            rc = load_dense(e, sub, dim);
            if (!rc) dim = e->dense[e->n_dense - 1].w.rows;
        } else if (strstr(type, ".Normalize")) {
            e->normalize = true;
        } else {
            rc = mx_set_err("%s/modules.json: module type '%s' is not supported", dir, type);
        }
        free(sub);
        if (rc) return rc;
        if (strstr(type, ".Pooling")) {
            dim = 0;
            for (int k = 0; k < PM_COUNT; k++) dim += e->mode[k] * e->H;
        }
    }
    return MX_OK;
}

static int read_max_len(mx_embedder *e, const char *dir) {
    const mx_arch *a = &e->eng.model.arch;
    e->max_len = a->max_pos;
    char *p = mx_path_join(dir, "sentence_bert_config.json");
    if (!p) return MX_ERR;
    if (mx_file_exists(p)) {
        json_t *j = mx_json_load_file(p, 1 << 20);
        if (!j) { free(p); return MX_ERR; }
        mx_cfg c = {j, NULL, p};
        int v;
        int rc = mx_cfg_i32(&c, "max_seq_length", e->max_len, 1, 1 << 24, &v);
        json_decref(j);
        if (rc) { free(p); return MX_ERR; }
        if (a->pos == MX_POS_LEARNED && v > a->max_pos) v = a->max_pos;
        e->max_len = v;
    }
    free(p);
    return MX_OK;
}

int mx_embedder_open(const char *dir, const mx_embed_opts *opts, mx_pool *pool, mx_embedder **out) {
    *out = NULL;
    mx_embedder *e = mx_calloc(1, sizeof *e);
    if (!e) return MX_ERR;
    if (opts) e->opts = *opts;
    else e->opts.pooling = MX_EMB_POOL_AUTO;
    e->pool = pool;
    e->include_prompt = true;
    char *model_dir = NULL;
    json_t *mods = NULL;
    bool have_pooling = false;
    if (load_st(dir, &model_dir, &have_pooling, &mods)) goto fail;
    if (mx_engine_open(model_dir, &e->eng)) goto fail;
    e->H = e->eng.model.arch.hidden;
    if (apply_st(e, dir, mods, &have_pooling) || read_max_len(e, dir)) goto fail;
    for (int k = 0; k < 2 && !e->tok; k++) { /* the tokenizer: in the folder, or beside the Transformer module's weights */
        const char *td = k ? model_dir : dir;
        char *tj = mx_path_join(td, "tokenizer.json"), *tm = mx_path_join(td, "tokenizer.model");
        bool have = (tj && mx_file_exists(tj)) || (tm && mx_file_exists(tm));
        free(tj);
        free(tm);
        if (have && !(e->tok = mx_tok_load(td))) goto fail;
    }
    int pm = e->opts.pooling;
    if (pm >= 0 || pm == MX_EMB_POOL_NONE || !have_pooling) { /* an explicit choice replaces the configured pooling */
        if (pm >= 0 && e->n_dense) { mx_set_err("%s: --pooling cannot change the pooling of a pipeline with Dense modules", dir); goto fail; }
        memset(e->mode, 0, sizeof e->mode);
        e->include_prompt = true;
        if (pm == MX_EMB_POOL_AUTO) pm = e->eng.model.arch.attn->bidirectional ? MX_POOL_MEAN : MX_POOL_LAST;
        if (pm >= 0) e->mode[pm == MX_POOL_CLS ? PM_CLS : pm == MX_POOL_MEAN ? PM_MEAN : pm == MX_POOL_MAX ? PM_MAX : PM_LAST] = true;
    }
    e->out_dim = 0;
    for (int k = 0; k < PM_COUNT; k++) e->out_dim += e->mode[k] * e->H;
    if (e->n_dense) e->out_dim = e->dense[e->n_dense - 1].w.rows;
    e->dim = e->out_dim;
    if (e->opts.dimensions) {
        if (e->opts.dimensions < 1 || e->opts.dimensions > e->out_dim) {
            mx_set_err("dimensions %d: the model gives %d-dim embeddings", e->opts.dimensions, e->out_dim);
            goto fail;
        }
        e->dim = e->opts.dimensions;
    }
    e->max_tokens = e->opts.max_tokens > 0 ? e->opts.max_tokens : 8192;
    if (e->max_tokens < e->max_len) e->max_tokens = e->max_len;
    e->vcap = (size_t)PM_COUNT * e->H;
    for (int i = 0; i < e->n_dense; i++) e->vcap = MX_MAX(e->vcap, (size_t)e->dense[i].w.rows);
    e->v1 = mx_malloc(e->vcap * sizeof(float));
    e->v2 = mx_malloc(e->vcap * sizeof(float));
    e->seqs = mx_calloc((size_t)e->max_tokens, sizeof(mx_enc_seq));
    if (!e->v1 || !e->v2 || !e->seqs) goto fail;
    /* description */
    mx_buf d = {0};
    int first = 1;
    for (int k = 0; k < PM_COUNT; k++)
        if (e->mode[k]) { mx_buf_printf(&d, "%s%s", first ? "" : "+", pm_names[k]); first = 0; }
    if (first) mx_buf_puts(&d, "none");
    if (!e->include_prompt) mx_buf_puts(&d, " (without prompt)");
    for (int i = 0; i < e->n_dense; i++) mx_buf_printf(&d, " -> dense %d->%d", e->dense[i].w.cols, e->dense[i].w.rows);
    if (e->normalize) mx_buf_puts(&d, " -> normalize");
    if (e->dim != e->out_dim) mx_buf_printf(&d, " -> first %d dims%s", e->dim, e->normalize ? ", renormalized" : "");
    snprintf(e->desc, sizeof e->desc, "%s", d.data ? d.data : "");
    mx_buf_free(&d);
    json_decref(mods);
    free(model_dir);
    *out = e;
    return MX_OK;
fail:
    json_decref(mods);
    free(model_dir);
    mx_embedder_close(e);
    return MX_ERR;
}

/* ---- running ---- */

static int check_len(const mx_embedder *e, int i, int len, int *use) {
    *use = 0;
    if (len < 1) return mx_set_err("input %d is empty", i);
    if (len > e->max_len && e->opts.no_truncate)
        return mx_set_err("input %d has %d tokens, more than the maximum %d (truncation is off)", i, len, e->max_len);
    *use = MX_MIN(len, e->max_len);
    return MX_OK;
}

static void l2norm(float *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    float inv = (float)(1.0 / fmax(sqrt(s), 1e-12));
    for (int i = 0; i < n; i++) v[i] *= inv;
}

/* hidden rows of one input -> its output vector */
static void pipeline(mx_embedder *e, const float *h, int n, int prompt_len, float *out) {
    int H = e->H, dim = 0;
    uint8_t *mask = NULL;
    if (!e->include_prompt && prompt_len > 0 && prompt_len < n && (mask = malloc((size_t)n))) {
        for (int t = 0; t < n; t++) mask[t] = t >= prompt_len;
    }
    float *v = e->v1;
    for (int k = 0; k < PM_COUNT; k++) {
        if (!e->mode[k]) continue;
        float *o = v + dim;
        switch (k) {
        case PM_CLS: mx_pooling_apply(MX_POOL_CLS, h, n, H, NULL, o); break;
        case PM_MAX: mx_pooling_apply(MX_POOL_MAX, h, n, H, mask, o); break;
        case PM_MEAN: mx_pooling_apply(MX_POOL_MEAN, h, n, H, mask, o); break;
        case PM_LAST: mx_pooling_apply(MX_POOL_LAST, h, n, H, mask, o); break;
        case PM_MEAN_SQRT: {
            int cnt = 0;
            for (int t = 0; t < n; t++) cnt += !mask || mask[t];
            mx_pooling_apply(MX_POOL_MEAN, h, n, H, mask, o);
            mx_scale(o, sqrtf((float)cnt), H); /* sum / sqrt(count) */
            break;
        }
        }
        dim += H;
    }
    free(mask);
    mx_fwd f = {.m = &e->eng.model, .pool = NULL};
    for (int i = 0; i < e->n_dense; i++) {
        float *w = v == e->v1 ? e->v2 : e->v1;
        mx_linear(&f, &e->dense[i].w, e->dense[i].b, v, 1, dim, w, e->dense[i].w.rows);
        dim = e->dense[i].w.rows;
        mx_act_apply(e->dense[i].act, w, dim);
        v = w;
    }
    if (e->normalize) l2norm(v, dim);
    memcpy(out, v, (size_t)e->dim * sizeof(float));
    if (e->normalize && e->dim != dim) l2norm(out, e->dim);
}

/* Scratch for a pass of `tokens` tokens (grows, never shrinks). */
static int ensure_enc(mx_embedder *e, int tokens) {
    if (tokens <= e->enc_cap) return MX_OK;
    int cap = MX_MIN(e->max_tokens, MX_MAX(tokens, 2 * e->enc_cap));
    mx_enc_free(e->enc);
    mx_aligned_free(e->hidden);
    e->enc_cap = 0;
    e->enc = mx_enc_new(&e->eng.model, cap, e->pool);
    e->hidden = mx_aligned_alloc((size_t)cap * e->H * sizeof(float));
    if (!e->enc || !e->hidden) return MX_ERR;
    e->enc_cap = cap;
    return MX_OK;
}

void mx_embed_truncate_dims(const mx_embedder *e, const float *v, int d, float *out) {
    d = MX_MAX(1, MX_MIN(d, e->dim));
    memmove(out, v, (size_t)d * sizeof(float));
    if (e->normalize) l2norm(out, d);
}

/* Runs inputs [i, j) that fit one pass; calls back per input with its rows. */
typedef void (*each_fn)(mx_embedder *e, int idx, const float *h, int n, void *ctx);
static int run_inputs(mx_embedder *e, const int32_t *const *ids, const int32_t *const *types, const int *lens, int n,
                      each_fn fn, void *ctx) {
    if (n < 0) return mx_set_err("negative input count");
    int i = 0;
    while (i < n) {
        int k = 0, tok = 0, use = 0;
        while (i + k < n) {
            if (check_len(e, i + k, lens[i + k], &use)) return MX_ERR;
            if (tok + use > e->max_tokens) break;
            e->seqs[k] = (mx_enc_seq){.tokens = ids[i + k], .type_ids = types ? types[i + k] : NULL, .n = use};
            tok += use;
            k++;
        }
        if (ensure_enc(e, tok) || mx_encode(e->enc, e->seqs, k, e->hidden)) return mx_err_prefix("input %d", i);
        for (int s = 0, t = 0; s < k; t += e->seqs[s].n, s++) fn(e, i + s, e->hidden + (size_t)t * e->H, e->seqs[s].n, ctx);
        i += k;
    }
    return MX_OK;
}

typedef struct { float *out; const int *prompt_lens; } emb_ctx;
static void emb_each(mx_embedder *e, int idx, const float *h, int n, void *p) {
    emb_ctx *c = p;
    pipeline(e, h, n, c->prompt_lens ? c->prompt_lens[idx] : 0, c->out + (size_t)idx * e->dim);
}

int mx_embed_batch_ex(mx_embedder *e, const int32_t *const *ids, const int32_t *const *type_ids, const int *lens,
                      const int *prompt_lens, int n, float *out) {
    if (e->out_dim == 0) return mx_set_err("pooling 'none' gives per-token states: use mx_embed_hidden");
    emb_ctx c = {out, prompt_lens};
    return run_inputs(e, ids, type_ids, lens, n, emb_each, &c);
}

int mx_embed_batch(mx_embedder *e, const int32_t *const *ids, const int *lens, int n, float *out) {
    return mx_embed_batch_ex(e, ids, NULL, lens, NULL, n, out);
}

int mx_embed_hidden(mx_embedder *e, const int32_t *ids, const int32_t *type_ids, int len, float *hidden, int *out_len,
                    float *pooler, bool *has_pooler) {
    int use = 0;
    if (check_len(e, 0, len, &use)) return MX_ERR;
    mx_enc_seq s = {.tokens = ids, .type_ids = type_ids, .n = use};
    if (ensure_enc(e, use) || mx_encode(e->enc, &s, 1, hidden)) return MX_ERR;
    *out_len = use;
    bool hp = mx_head_has_pooler(&e->eng.model);
    if (has_pooler) *has_pooler = hp && pooler;
    if (hp && pooler && mx_head_forward(&e->eng.model, e->pool, hidden, use, NULL, pooler, NULL)) return MX_ERR;
    return MX_OK;
}

typedef struct { float *logits, *scores; int labels; int err; } rr_ctx;
static void rr_each(mx_embedder *e, int idx, const float *h, int n, void *p) {
    rr_ctx *c = p;
    float *lg = c->logits + (size_t)idx * c->labels;
    if (mx_head_forward(&e->eng.model, NULL, h, n, NULL, NULL, lg)) { c->err = 1; return; }
    if (c->scores) c->scores[idx] = c->labels == 1 ? 1.0f / (1.0f + expf(-lg[0])) : NAN;
}

int mx_rerank_batch(mx_embedder *e, const int32_t *const *ids, const int32_t *const *type_ids, const int *lens, int n,
                    float *logits, float *scores) {
    int labels = mx_head_labels(&e->eng.model);
    if (labels < 1) return mx_set_err("the model is not a cross-encoder (no sequence-classification head)");
    rr_ctx c = {logits, scores, labels, 0};
    if (run_inputs(e, ids, type_ids, lens, n, rr_each, &c)) return MX_ERR;
    return c.err ? MX_ERR : MX_OK;
}

int mx_pair_ids(const mx_embedder *e, int32_t cls, int32_t sep, const int32_t *q, int nq, const int32_t *d, int nd,
                int32_t **ids, int32_t **types, int *n) {
    const mx_model *m = &e->eng.model;
    bool roberta = m->arch.pos_skip_pad, typed = m->type_embed.fmt && m->arch.n_types >= 2;
    int total = nq + nd + (roberta ? 4 : 3);
    *ids = mx_malloc((size_t)total * sizeof(int32_t));
    *types = mx_calloc((size_t)total, sizeof(int32_t));
    if (!*ids || !*types) { free(*ids); free(*types); *ids = *types = NULL; return MX_ERR; }
    int k = 0;
    (*ids)[k++] = cls;
    memcpy(*ids + k, q, (size_t)nq * sizeof(int32_t));
    k += nq;
    (*ids)[k++] = sep;
    if (roberta) (*ids)[k++] = sep;
    int second = k;
    memcpy(*ids + k, d, (size_t)nd * sizeof(int32_t));
    k += nd;
    (*ids)[k++] = sep;
    if (typed)
        for (int i = second; i < k; i++) (*types)[i] = 1;
    *n = k;
    return MX_OK;
}

/* ---- text ---- */

const mx_tokenizer *mx_embedder_tokenizer(const mx_embedder *e) { return e->tok; }

/* Where the plain encoding sits inside the one with special tokens:
 * with = prefix + raw + suffix. */
typedef struct { int32_t *with, *raw; int nw, nr, pre, suf; } wrapped;

static void wrapped_free(wrapped *w) { free(w->with); free(w->raw); }

static int encode_wrapped(const mx_embedder *e, const char *text, size_t len, wrapped *w) {
    memset(w, 0, sizeof *w);
    if (!e->tok) return mx_set_err("the model folder has no tokenizer (tokenizer.json or tokenizer.model): use --prompt-ids");
    if (mx_tok_encode(e->tok, text, len, true, &w->with, &w->nw) || mx_tok_encode(e->tok, text, len, false, &w->raw, &w->nr)) {
        wrapped_free(w);
        return MX_ERR;
    }
    for (int k = 0; k + w->nr <= w->nw; k++)
        if (!memcmp(w->with + k, w->raw, (size_t)w->nr * sizeof(int32_t))) {
            w->pre = k;
            w->suf = w->nw - k - w->nr;
            return MX_OK;
        }
    w->pre = -1; /* not a plain wrap: only a plain cut is possible */
    return MX_OK;
}

int mx_embed_encode_text(const mx_embedder *e, const char *text, size_t len, int32_t **ids, int *n) {
    wrapped w;
    if (encode_wrapped(e, text, len, &w)) return MX_ERR;
    if (w.nw > e->max_len) {
        if (e->opts.no_truncate) {
            wrapped_free(&w);
            return mx_set_err("the text has %d tokens, more than the maximum %d (truncation is off)", w.nw, e->max_len);
        }
        if (w.pre >= 0 && w.pre + w.suf < e->max_len) { /* cut the text, keep the special tokens */
            int keep = e->max_len - w.pre - w.suf;
            memmove(w.with + w.pre + keep, w.with + w.pre + w.nr, (size_t)w.suf * sizeof(int32_t));
        }
        w.nw = e->max_len;
    }
    *ids = w.with;
    *n = w.nw;
    free(w.raw);
    return MX_OK;
}

int mx_rerank_encode_pair(const mx_embedder *e, const char *query, const char *doc, int32_t **ids, int32_t **types, int *n) {
    wrapped q, d;
    if (encode_wrapped(e, query, strlen(query), &q)) return MX_ERR;
    if (encode_wrapped(e, doc, strlen(doc), &d)) { wrapped_free(&q); return MX_ERR; }
    int rc = MX_ERR;
    if (q.pre != 1 || q.suf != 1) {
        mx_set_err("the tokenizer does not wrap text as [CLS] text [SEP]: pass the pairs with --prompt-ids");
        goto out;
    }
    int extra = e->eng.model.arch.pos_skip_pad ? 4 : 3, nq = q.nr, nd = d.nr;
    if (nq + nd + extra > e->max_len) {
        if (e->opts.no_truncate) {
            mx_set_err("the pair has %d tokens, more than the maximum %d (truncation is off)", nq + nd + extra, e->max_len);
            goto out;
        }
        while (nq + nd + extra > e->max_len && nq + nd > 0) { /* longest first */
            if (nq > nd) nq--;
            else nd--;
        }
    }
    rc = mx_pair_ids(e, q.with[0], q.with[q.nw - 1], q.raw, nq, d.raw, nd, ids, types, n);
out:
    wrapped_free(&q);
    wrapped_free(&d);
    return rc;
}
