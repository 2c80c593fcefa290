/* api: the public C API (include/mlxcel.h) over the runtime. A handle is a
 * text model (tokenizer, chat template, one generation session kept between
 * calls) or an embedder; every entry point checks its arguments, calls the
 * runtime, and turns MX_ERR into a status code, the message staying in the
 * thread's error (mx_errmsg). Nothing here prints or exits. */
#include "../../include/mlxcel.h"
#include "../base/base.h"
#include "../base/threadpool.h"
#include "../base/version.h"
#include "../format/checkpoint.h"
#include "../format/json.h"
#include "../kernels/policy.h"
#include "../runtime/embed.h"
#include "../runtime/generate.h"
#include "../runtime/sampling_opts.h"
#include "../runtime/textmodel.h"
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API_CHUNK 512     /* prefill chunk, as `mlxcel generate` */
#define API_CONTEXT 4096  /* default context, as `mlxcel serve` */

struct mlxcel_model {
    int kind, threads, context;
    mx_pool *pool;
    mx_textmodel tm;  /* MLXCEL_KIND_GENERATE */
    mx_embedder *emb; /* MLXCEL_KIND_EMBED */
    bool has_session; /* s is made at the first generation and reused */
    mx_session s;
    float *last;      /* [vocab] */
};

/* ---- errors and versions ---- */

static int err(int code, const char *fmt, ...) MX_PRINTF(2, 3);
static int err(int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mx_set_err("%s", msg);
    return code;
}

MLXCEL_API const char *mlxcel_version(void) { return MX_VERSION; }
MLXCEL_API int mlxcel_api_version(void) { return MLXCEL_API_VERSION; }
MLXCEL_API const char *mlxcel_last_error(void) { return mx_errmsg(); }
MLXCEL_API void mlxcel_free(void *p) { free(p); }

MLXCEL_API const char *mlxcel_status_name(int status) {
    switch (status) {
    case MLXCEL_OK: return "MLXCEL_OK";
    case MLXCEL_ERR_ARG: return "MLXCEL_ERR_ARG";
    case MLXCEL_ERR_LOAD: return "MLXCEL_ERR_LOAD";
    case MLXCEL_ERR_UNSUPPORTED: return "MLXCEL_ERR_UNSUPPORTED";
    case MLXCEL_ERR_CONTEXT: return "MLXCEL_ERR_CONTEXT";
    case MLXCEL_ERR_RUNTIME: return "MLXCEL_ERR_RUNTIME";
    default: return "unknown status";
    }
}

/* ---- models ---- */

/* The CLI's kernel policy from the environment, once per process. */
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;
static void policy_init(void) {
    mx_kpolicy kp = mx_kpolicy_default();
    mx_kpolicy_env(&kp);
    mx_kpolicy_set_default(&kp);
}

MLXCEL_API mlxcel_model_options mlxcel_model_options_default(void) {
    return (mlxcel_model_options){.threads = 0, .context = 0, .kind = MLXCEL_KIND_AUTO};
}

/* What a folder is for, from its config's architectures, as `mlxcel serve` decides. */
static int probe_kind(const char *dir, int *kind) {
    mx_ckpt probe;
    if (mx_ckpt_open(dir, false, &probe)) return MX_ERR;
    mx_task task = MX_TASK_CAUSAL_LM;
    json_t *archs = mx_cfg_get(&probe.cfg, "architectures");
    if (json_is_string(json_array_get(archs, 0))) task = mx_task_from_arch(json_string_value(json_array_get(archs, 0)));
    mx_ckpt_close(&probe);
    *kind = task == MX_TASK_CAUSAL_LM ? MLXCEL_KIND_GENERATE : MLXCEL_KIND_EMBED;
    return MX_OK;
}

MLXCEL_API int mlxcel_model_load(const char *dir, const mlxcel_model_options *opts, mlxcel_model **out) {
    if (out) *out = NULL;
    if (!dir || !out) return err(MLXCEL_ERR_ARG, "mlxcel_model_load: dir and out must not be NULL");
    mlxcel_model_options o = opts ? *opts : mlxcel_model_options_default();
    if (o.threads < 0 || o.threads > 1024) return err(MLXCEL_ERR_ARG, "mlxcel_model_load: threads %d is not in [0, 1024]", o.threads);
    if (o.context < 0 || o.context > (1 << 24))
        return err(MLXCEL_ERR_ARG, "mlxcel_model_load: context %d is not in [0, 16777216]", o.context);
    if (o.kind < MLXCEL_KIND_AUTO || o.kind > MLXCEL_KIND_EMBED)
        return err(MLXCEL_ERR_ARG, "mlxcel_model_load: kind %d is not an mlxcel_kind", o.kind);
    pthread_once(&policy_once, policy_init);
    if (o.kind == MLXCEL_KIND_AUTO && probe_kind(dir, &o.kind)) return MLXCEL_ERR_LOAD;
    mlxcel_model *m = calloc(1, sizeof *m);
    if (!m) return err(MLXCEL_ERR_RUNTIME, "mlxcel_model_load: out of memory");
    m->kind = o.kind;
    m->threads = o.threads ? o.threads : mx_default_threads();
    m->context = o.context ? o.context : API_CONTEXT;
    if (!(m->pool = mx_pool_new(m->threads))) { free(m); return MLXCEL_ERR_RUNTIME; }
    if (m->kind == MLXCEL_KIND_EMBED) {
        if (mx_embedder_open(dir, NULL, m->pool, &m->emb)) { mx_pool_free(m->pool); free(m); return MLXCEL_ERR_LOAD; }
    } else {
        if (mx_textmodel_open(dir, &m->tm)) { mx_pool_free(m->pool); free(m); return MLXCEL_ERR_LOAD; }
        if (m->tm.e.task != MX_TASK_CAUSAL_LM) {
            mx_set_err("%s: a %s model (config.json architectures) does not generate: open it as MLXCEL_KIND_EMBED", dir,
                       mx_task_name(m->tm.e.task));
            mlxcel_model_free(m);
            return MLXCEL_ERR_UNSUPPORTED;
        }
    }
    *out = m;
    return MLXCEL_OK;
}

MLXCEL_API void mlxcel_model_free(mlxcel_model *m) {
    if (!m) return;
    if (m->has_session) mx_session_free(&m->s);
    free(m->last);
    if (m->kind == MLXCEL_KIND_EMBED) mx_embedder_close(m->emb);
    else mx_textmodel_close(&m->tm);
    mx_pool_free(m->pool);
    free(m);
}

static const mx_engine *engine(const mlxcel_model *m) {
    return m->kind == MLXCEL_KIND_EMBED ? mx_embedder_engine(m->emb) : &m->tm.e;
}

MLXCEL_API int mlxcel_model_kind(const mlxcel_model *m) { return m ? m->kind : 0; }
MLXCEL_API const char *mlxcel_model_type(const mlxcel_model *m) { return m ? engine(m)->model_type : ""; }
MLXCEL_API int mlxcel_model_vocab_size(const mlxcel_model *m) { return m ? engine(m)->model.arch.vocab : 0; }
MLXCEL_API int mlxcel_model_context(const mlxcel_model *m) { return m ? m->context : 0; }
MLXCEL_API int mlxcel_model_embedding_size(const mlxcel_model *m) {
    return m && m->kind == MLXCEL_KIND_EMBED ? mx_embedder_dim(m->emb) : 0;
}
MLXCEL_API int mlxcel_token_is_eos(const mlxcel_model *m, int32_t token) { return m && mx_engine_is_eos(engine(m), token); }

/* ---- text ---- */

static const mx_tokenizer *tokenizer(const mlxcel_model *m, const char *who) {
    const mx_tokenizer *t = m->kind == MLXCEL_KIND_EMBED ? mx_embedder_tokenizer(m->emb) : m->tm.tok;
    if (!t) mx_set_err("%s: the model has no tokenizer (tokenizer.json, tokenizer.model or vocab.json)", who);
    return t;
}

/* Hands an int-counted id array to the caller. */
static int give_ids(int32_t *ids, int n, int32_t **out, size_t *n_out) {
    if (!ids && !(ids = malloc(sizeof *ids))) return err(MLXCEL_ERR_RUNTIME, "out of memory");
    *out = ids;
    *n_out = (size_t)n;
    return MLXCEL_OK;
}

MLXCEL_API int mlxcel_tokenize(const mlxcel_model *m, const char *text, size_t len, int add_special, int32_t **ids,
                               size_t *n_ids) {
    if (!m || (!text && len) || !ids || !n_ids) return err(MLXCEL_ERR_ARG, "mlxcel_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    const mx_tokenizer *t = tokenizer(m, "mlxcel_tokenize");
    if (!t) return MLXCEL_ERR_UNSUPPORTED;
    int32_t *v = NULL;
    int n = 0;
    int rc = m->kind == MLXCEL_KIND_EMBED ? mx_tok_encode(t, text ? text : "", len, add_special != 0, &v, &n)
                                          : mx_textmodel_encode(&m->tm, text ? text : "", len, add_special != 0, &v, &n);
    if (rc) return MLXCEL_ERR_RUNTIME;
    return give_ids(v, n, ids, n_ids);
}

/* Hands an mx_buf's text, NUL-terminated, to the caller. */
static int give_text(mx_buf *b, char **text, size_t *len) {
    if (mx_buf_append(b, "", 1)) { mx_buf_free(b); return MLXCEL_ERR_RUNTIME; }
    *text = b->data;
    if (len) *len = b->len - 1;
    return MLXCEL_OK;
}

MLXCEL_API int mlxcel_detokenize(const mlxcel_model *m, const int32_t *ids, size_t n_ids, int skip_special, char **text,
                                 size_t *len) {
    if (!m || (!ids && n_ids) || !text) return err(MLXCEL_ERR_ARG, "mlxcel_detokenize: NULL argument");
    *text = NULL;
    if (len) *len = 0;
    if (n_ids > INT_MAX) return err(MLXCEL_ERR_ARG, "mlxcel_detokenize: %zu ids is too many", n_ids);
    const mx_tokenizer *t = tokenizer(m, "mlxcel_detokenize");
    if (!t) return MLXCEL_ERR_UNSUPPORTED;
    int V = mx_tok_vocab_size(t);
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return err(MLXCEL_ERR_ARG, "mlxcel_detokenize: ids[%zu] = %d is outside the vocabulary (size %d)", i, ids[i], V);
    mx_buf b = {0};
    if (mx_tok_decode(t, ids, (int)n_ids, skip_special != 0, &b)) { mx_buf_free(&b); return MLXCEL_ERR_RUNTIME; }
    return give_text(&b, text, len);
}

static int generator(const mlxcel_model *m, const char *who) {
    if (m->kind == MLXCEL_KIND_GENERATE) return MLXCEL_OK;
    return err(MLXCEL_ERR_UNSUPPORTED, "%s: the model was opened as an embedder (MLXCEL_KIND_EMBED)", who);
}

/* The conversation as the template context {messages, add_generation_prompt}. */
static int chat_render(const mlxcel_model *m, const mlxcel_message *msgs, size_t n_msgs, int add_gen, const char *who,
                       mx_buf *text) {
    if (!m || (!msgs && n_msgs)) return err(MLXCEL_ERR_ARG, "%s: NULL argument", who);
    int rc = generator(m, who);
    if (rc) return rc;
    if (!tokenizer(m, who)) return MLXCEL_ERR_UNSUPPORTED;
    json_t *arr = json_array();
    json_t *ctx = json_pack("{s:o,s:b}", "messages", arr, "add_generation_prompt", add_gen != 0);
    if (!arr || !ctx) { json_decref(ctx); return err(MLXCEL_ERR_RUNTIME, "%s: out of memory", who); }
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content) { json_decref(ctx); return err(MLXCEL_ERR_ARG, "%s: msgs[%zu] has a NULL role or content", who, i); }
        json_t *r = json_string(msgs[i].role), *c = json_string(msgs[i].content);
        if (!r || !c) {
            json_decref(r);
            json_decref(c);
            json_decref(ctx);
            return err(MLXCEL_ERR_ARG, "%s: msgs[%zu]: role and content must be UTF-8", who, i);
        }
        json_array_append_new(arr, json_pack("{s:o,s:o}", "role", r, "content", c));
    }
    rc = mx_textmodel_render(&m->tm, ctx, text);
    json_decref(ctx);
    return rc ? MLXCEL_ERR_RUNTIME : MLXCEL_OK;
}

MLXCEL_API int mlxcel_chat_apply(const mlxcel_model *m, const mlxcel_message *msgs, size_t n_msgs, int add_generation_prompt,
                                 char **text, size_t *len) {
    if (!text) return err(MLXCEL_ERR_ARG, "mlxcel_chat_apply: NULL argument");
    *text = NULL;
    if (len) *len = 0;
    mx_buf b = {0};
    int rc = chat_render(m, msgs, n_msgs, add_generation_prompt, "mlxcel_chat_apply", &b);
    if (rc) { mx_buf_free(&b); return rc; }
    return give_text(&b, text, len);
}

MLXCEL_API int mlxcel_chat_tokenize(const mlxcel_model *m, const mlxcel_message *msgs, size_t n_msgs,
                                    int add_generation_prompt, int32_t **ids, size_t *n_ids) {
    if (!ids || !n_ids) return err(MLXCEL_ERR_ARG, "mlxcel_chat_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    mx_buf b = {0};
    int rc = chat_render(m, msgs, n_msgs, add_generation_prompt, "mlxcel_chat_tokenize", &b);
    int32_t *v = NULL;
    int n = 0;
    if (!rc && mx_textmodel_encode_chat(&m->tm, b.data ? b.data : "", b.len, &v, &n)) rc = MLXCEL_ERR_RUNTIME;
    mx_buf_free(&b);
    return rc ? rc : give_ids(v, n, ids, n_ids);
}

/* ---- generation ---- */

MLXCEL_API mlxcel_gen_params mlxcel_gen_params_default(void) {
    mx_sampling s;
    mx_sampling_defaults(&s);
    return (mlxcel_gen_params){.temperature = s.temperature, .top_k = s.top_k, .top_p = s.top_p, .min_p = s.min_p,
                               .repetition_penalty = s.repetition_penalty, .presence_penalty = s.presence_penalty,
                               .frequency_penalty = s.frequency_penalty, .penalty_last_n = s.penalty_last_n, .seed = 0,
                               .max_tokens = 256, .ignore_eos = 0};
}

/* The parameters as the sampler's, each checked against the range the CLI
 * and the server accept (runtime/sampling_opts.c's table). */
static int to_sampling(const mlxcel_gen_params *p, mx_sampling *s) {
    mx_sampling_defaults(s);
    s->temperature = p->temperature;
    s->top_k = p->top_k;
    s->top_p = p->top_p;
    s->min_p = p->min_p;
    s->repetition_penalty = p->repetition_penalty;
    s->presence_penalty = p->presence_penalty;
    s->frequency_penalty = p->frequency_penalty;
    s->penalty_last_n = p->penalty_last_n;
    s->seed = p->seed;
    static const struct { size_t off; const char *name; } names[] = {
        {offsetof(mx_sampling, temperature), "temperature"},
        {offsetof(mx_sampling, top_k), "top_k"},
        {offsetof(mx_sampling, top_p), "top_p"},
        {offsetof(mx_sampling, min_p), "min_p"},
        {offsetof(mx_sampling, repetition_penalty), "repetition_penalty"},
        {offsetof(mx_sampling, presence_penalty), "presence_penalty"},
        {offsetof(mx_sampling, frequency_penalty), "frequency_penalty"},
        {offsetof(mx_sampling, penalty_last_n), "penalty_last_n"},
        {offsetof(mx_sampling, seed), "seed"},
    };
    int checked = 0;
    for (int i = 0; i < mx_n_samp_fields; i++) {
        const mx_samp_field *f = &mx_samp_fields[i];
        const char *name = NULL;
        for (size_t k = 0; k < MX_ARRAY_LEN(names); k++)
            if (names[k].off == f->off) name = names[k].name;
        if (!name) continue;
        checked++;
        char field[64];
        snprintf(field, sizeof field, "mlxcel_gen_params.%s", name);
        const char *at = (const char *)s + f->off;
        double v;
        if (f->kind == MX_SF_FLOAT) v = *(const float *)at;
        else if (f->kind == MX_SF_INT) v = *(const int *)at;
        else {
            if (s->seed > (uint64_t)INT64_MAX) return err(MLXCEL_ERR_ARG, "%s: %llu is not in [0, 2^63-1]", field, (unsigned long long)s->seed);
            continue;
        }
        if (mx_samp_set(s, f, v, field)) return MLXCEL_ERR_ARG;
    }
    if (checked != (int)MX_ARRAY_LEN(names)) return err(MLXCEL_ERR_RUNTIME, "sampling parameter table out of step with the API");
    if (p->max_tokens < 1) return err(MLXCEL_ERR_ARG, "mlxcel_gen_params.max_tokens: %d is not >= 1", p->max_tokens);
    return MLXCEL_OK;
}

/* The session, emptied: made at the first use, reused after. */
static int session(mlxcel_model *m) {
    if (m->has_session) {
        mx_session_truncate(&m->s, 0);
        return MLXCEL_OK;
    }
    if (!(m->last = malloc(sizeof(float) * (size_t)m->tm.e.model.arch.vocab))) return err(MLXCEL_ERR_RUNTIME, "out of memory");
    if (mx_session_init(&m->s, &m->tm.e, m->context, API_CHUNK, m->pool)) return MLXCEL_ERR_RUNTIME;
    m->has_session = true;
    return MLXCEL_OK;
}

static int check_prompt(const mlxcel_model *m, const int32_t *ids, size_t n, size_t more, const char *who) {
    if (!n) return err(MLXCEL_ERR_ARG, "%s: the prompt is empty", who);
    if (n > (size_t)m->context || more > (size_t)m->context - n)
        return err(MLXCEL_ERR_CONTEXT, "%s: %zu prompt tokens + %zu more exceed the context of %d", who, n, more, m->context);
    int V = m->tm.e.model.arch.vocab;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) return err(MLXCEL_ERR_ARG, "%s: prompt[%zu] = %d is outside the vocabulary (size %d)", who, i, ids[i], V);
    return MLXCEL_OK;
}

MLXCEL_API int mlxcel_generate(mlxcel_model *m, const int32_t *prompt, size_t n_prompt, const mlxcel_gen_params *p,
                               mlxcel_token_fn cb, void *user, size_t *n_generated) {
    if (n_generated) *n_generated = 0;
    if (!m || (!prompt && n_prompt)) return err(MLXCEL_ERR_ARG, "mlxcel_generate: NULL argument");
    int rc = generator(m, "mlxcel_generate");
    if (rc) return rc;
    mlxcel_gen_params gp = p ? *p : mlxcel_gen_params_default();
    mx_sampling samp;
    if ((rc = to_sampling(&gp, &samp)) || (rc = check_prompt(m, prompt, n_prompt, (size_t)gp.max_tokens, "mlxcel_generate")) ||
        (rc = session(m)))
        return rc;
    int V = m->tm.e.model.arch.vocab;
    mx_sampler *smp = mx_sampler_new(&samp, V);
    mx_detok *dt = m->tm.tok ? mx_detok_new(m->tm.tok, true) : NULL;
    mx_buf piece = {0};
    if (!smp || (m->tm.tok && !dt)) { rc = err(MLXCEL_ERR_RUNTIME, "mlxcel_generate: out of memory"); goto out; }
    if (mx_session_feed(&m->s, prompt, (int)n_prompt, NULL, m->last)) { rc = MLXCEL_ERR_RUNTIME; goto out; }
    for (int ng = 0; ng < gp.max_tokens;) {
        int32_t tok = mx_sampler_sample(smp, m->last, m->s.history, m->s.n_history);
        ng++;
        if (n_generated) *n_generated = (size_t)ng;
        bool eos = !gp.ignore_eos && mx_engine_is_eos(&m->tm.e, tok);
        bool end = eos || ng == gp.max_tokens;
        piece.len = 0;
        if (dt && !eos && mx_detok_push(dt, tok, &piece)) { rc = MLXCEL_ERR_RUNTIME; goto out; }
        /* what the detokenizer still holds back comes with the last token */
        if (dt && end && mx_detok_flush(dt, &piece)) { rc = MLXCEL_ERR_RUNTIME; goto out; }
        if (cb && cb(user, tok, piece.data ? piece.data : "", piece.len)) break;
        if (end) break;
        if (mx_session_feed(&m->s, &tok, 1, NULL, m->last)) { rc = MLXCEL_ERR_RUNTIME; goto out; }
    }
out:
    mx_buf_free(&piece);
    mx_detok_free(dt);
    mx_sampler_free(smp);
    return rc;
}

MLXCEL_API int mlxcel_logits(mlxcel_model *m, const int32_t *prompt, size_t n_prompt, int all_rows, float **logits) {
    if (logits) *logits = NULL;
    if (!m || (!prompt && n_prompt) || !logits) return err(MLXCEL_ERR_ARG, "mlxcel_logits: NULL argument");
    int rc = generator(m, "mlxcel_logits");
    if (rc || (rc = check_prompt(m, prompt, n_prompt, 0, "mlxcel_logits")) || (rc = session(m))) return rc;
    size_t V = (size_t)m->tm.e.model.arch.vocab, rows = all_rows ? n_prompt : 1, bytes;
    if (!mx_mul_ok(rows * V, sizeof(float), &bytes)) return err(MLXCEL_ERR_ARG, "mlxcel_logits: [%zu, %zu] logits overflow", rows, V);
    float *out = malloc(bytes);
    if (!out) return err(MLXCEL_ERR_RUNTIME, "mlxcel_logits: out of memory for %zu bytes of logits", bytes);
    if (mx_session_feed(&m->s, prompt, (int)n_prompt, all_rows ? out : NULL, all_rows ? NULL : out)) {
        free(out);
        return MLXCEL_ERR_RUNTIME;
    }
    *logits = out;
    return MLXCEL_OK;
}

/* ---- embeddings ---- */

MLXCEL_API int mlxcel_embed(mlxcel_model *m, const int32_t *const *ids, const size_t *lens, size_t n_inputs, float **vectors) {
    if (vectors) *vectors = NULL;
    if (!m || !ids || !lens || !vectors) return err(MLXCEL_ERR_ARG, "mlxcel_embed: NULL argument");
    if (m->kind != MLXCEL_KIND_EMBED)
        return err(MLXCEL_ERR_UNSUPPORTED, "mlxcel_embed: the model was opened as a generator (open it with kind MLXCEL_KIND_EMBED)");
    if (!n_inputs || n_inputs > INT_MAX) return err(MLXCEL_ERR_ARG, "mlxcel_embed: %zu inputs (need 1 to %d)", n_inputs, INT_MAX);
    int V = mlxcel_model_vocab_size(m);
    for (size_t i = 0; i < n_inputs; i++) {
        if (!lens[i] || lens[i] > INT_MAX || !ids[i]) return err(MLXCEL_ERR_ARG, "mlxcel_embed: input %zu is empty or too long", i);
        for (size_t j = 0; j < lens[i]; j++)
            if (ids[i][j] < 0 || ids[i][j] >= V)
                return err(MLXCEL_ERR_ARG, "mlxcel_embed: ids[%zu][%zu] = %d is outside the vocabulary (size %d)", i, j, ids[i][j], V);
    }
    size_t dim = (size_t)mx_embedder_dim(m->emb), bytes;
    int *il = malloc(sizeof(int) * n_inputs);
    float *out = mx_mul_ok(n_inputs * dim, sizeof(float), &bytes) ? malloc(bytes) : NULL;
    if (!il || !out) { free(il); free(out); return err(MLXCEL_ERR_RUNTIME, "mlxcel_embed: out of memory"); }
    for (size_t i = 0; i < n_inputs; i++) il[i] = (int)lens[i];
    int rc = mx_embed_batch(m->emb, ids, il, (int)n_inputs, out);
    free(il);
    if (rc) { free(out); return MLXCEL_ERR_RUNTIME; }
    *vectors = out;
    return MLXCEL_OK;
}
