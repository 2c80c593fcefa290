/* Embedding-mode routes: POST /v1/embeddings (OpenAI shape) and
 * /v1/rerank, /rerank, /v2/rerank (Cohere/Jina shape). Requests queue their
 * inputs; one worker thread (jobs.c) runs everything queued as one batch,
 * so concurrent requests share forward passes, and wakes each request's
 * connection when its batch is done (the reply is built there). An input's vector does not
 * depend on what it is batched with (mx_embed_batch runs each sequence at
 * its own length). */
#include "server_int.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_INPUTS 2048

typedef struct job {
    mx_srv_job base;
    bool rerank;
    int n;
    int32_t **ids, **types;
    int *lens;
    float *out;    /* embed: [n][dim]; rerank: logits [n][labels] */
    float *scores; /* rerank: [n] */
    int rc;
    char err[512];
    /* for the reply */
    mx_embed_batcher *b;
    json_t *req;   /* the request (rerank returns documents) */
    int dims;      /* embeddings: dimensions asked for; rerank: top_n */
    bool b64;
    long total;    /* tokens */
} job;

struct mx_embed_batcher {
    mx_embedder *e;
    mx_pool *pool;
    mx_srv_jobs *q;
};

static void job_free(mx_srv_job *base) {
    job *j = (job *)base;
    for (int i = 0; i < j->n; i++) {
        free(j->ids[i]);
        if (j->types) free(j->types[i]);
    }
    free(j->ids);
    free(j->types);
    free(j->lens);
    free(j->out);
    free(j->scores);
    json_decref(j->req);
    free(j);
}

/* Runs a group of jobs of one kind as a single batch; on failure, each job
 * alone so the error lands on the request that caused it. */
static void run_group(mx_embed_batcher *b, job **js, int nj) {
    if (!nj) return;
    int total = 0;
    for (int k = 0; k < nj; k++) total += js[k]->n;
    const int32_t **ids = calloc((size_t)total, sizeof *ids), **types = calloc((size_t)total, sizeof *types);
    int *lens = calloc((size_t)total, sizeof(int));
    int dim = js[0]->rerank ? mx_embedder_labels(b->e) : mx_embedder_dim(b->e);
    float *out = calloc((size_t)total * (size_t)dim, sizeof(float)), *scores = calloc((size_t)total, sizeof(float));
    int rc = MX_ERR;
    if (ids && types && lens && out && scores) {
        int t = 0;
        for (int k = 0; k < nj; k++)
            for (int i = 0; i < js[k]->n; i++, t++) {
                ids[t] = js[k]->ids[i];
                types[t] = js[k]->types ? js[k]->types[i] : NULL;
                lens[t] = js[k]->lens[i];
            }
        rc = js[0]->rerank ? mx_rerank_batch(b->e, ids, types, lens, total, out, scores)
                           : mx_embed_batch_ex(b->e, ids, types, lens, NULL, total, out);
    }
    if (rc && nj > 1) {
        for (int k = 0; k < nj; k++) run_group(b, &js[k], 1);
    } else {
        int t = 0;
        for (int k = 0; k < nj; k++) {
            job *j = js[k];
            j->rc = rc;
            if (rc) snprintf(j->err, sizeof j->err, "%s", mx_errmsg());
            else {
                memcpy(j->out, out + (size_t)t * dim, sizeof(float) * (size_t)j->n * dim);
                if (j->scores) memcpy(j->scores, scores + t, sizeof(float) * (size_t)j->n);
            }
            t += j->n;
        }
    }
    free(ids); free(types); free(lens); free(out); free(scores);
}

/* The jobs queued so far, as one batch per kind. */
static void run(void *ctx, mx_srv_job *list) {
    mx_embed_batcher *b = ctx;
    job *groups[2][256];
    int ng[2] = {0, 0};
    for (mx_srv_job *x = list; x; x = x->next) {
        job *j = (job *)x;
        int g = j->rerank;
        if (ng[g] == 256) { run_group(b, groups[g], ng[g]); ng[g] = 0; }
        groups[g][ng[g]++] = j;
    }
    run_group(b, groups[0], ng[0]);
    run_group(b, groups[1], ng[1]);
}

int mx_embed_batcher_new(const char *dir, int threads, mx_embed_batcher **out) {
    mx_embed_batcher *b = mx_calloc(1, sizeof *b);
    if (!b) return MX_ERR;
    b->pool = mx_pool_new(threads);
    if (!b->pool || mx_embedder_open(dir, NULL, b->pool, &b->e)) { mx_embed_batcher_free(b); return MX_ERR; }
    if (!mx_embedder_tokenizer(b->e)) { mx_set_err("%s: an embedding server needs the model's tokenizer", dir); mx_embed_batcher_free(b); return MX_ERR; }
    if (mx_srv_jobs_new(run, b, 0, &b->q)) { mx_embed_batcher_free(b); return MX_ERR; }
    *out = b;
    return MX_OK;
}

void mx_embed_batcher_stop(mx_embed_batcher *b) {
    if (b) mx_srv_jobs_stop(b->q);
}

void mx_embed_batcher_free(mx_embed_batcher *b) {
    if (!b) return;
    mx_srv_jobs_free(b->q);
    mx_embedder_close(b->e);
    mx_pool_free(b->pool);
    free(b);
}

bool mx_embed_batcher_reranks(const mx_embed_batcher *b) { return mx_embedder_labels(b->e) > 0; }
const mx_tokenizer *mx_embed_batcher_tokenizer(const mx_embed_batcher *b) { return mx_embedder_tokenizer(b->e); }

static json_t *embed_reply(job *j, server *sv);
static json_t *rerank_reply(job *j, server *sv);

static void job_reply(mx_srv_job *base, server *sv, mx_srv_req *rq) {
    job *j = (job *)base;
    if (j->rc) mx_srv_bad_request(sv, rq, "%s", j->err);
    else mx_srv_json(rq, 200, j->rerank ? rerank_reply(j, sv) : embed_reply(j, sv));
}

static const mx_srv_job_ops job_ops = {job_reply, job_free};

/* Queues the job; the reply follows when the worker is done with it. */
static int submit(server *sv, mx_srv_req *rq, json_t *req, job *j, int dims, bool b64, long total) {
    j->req = json_incref(req);
    j->dims = dims;
    j->b64 = b64;
    j->total = total;
    return mx_srv_jobs_submit(sv->emb->q, sv, rq, &j->base);
}

static job *job_new(mx_embed_batcher *b, int n, bool rerank, int dim) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->base.ops = &job_ops;
    j->b = b;
    j->rerank = rerank;
    j->ids = calloc((size_t)n, sizeof(int32_t *));
    j->types = calloc((size_t)n, sizeof(int32_t *));
    j->lens = calloc((size_t)n, sizeof(int));
    j->out = calloc((size_t)n * (size_t)(dim > 0 ? dim : 1), sizeof(float));
    if (rerank) j->scores = calloc((size_t)n, sizeof(float));
    if (!j->ids || !j->types || !j->lens || !j->out || (rerank && !j->scores)) { job_free(&j->base); return NULL; }
    return j;
}

static char *base64_f32(const float *v, int n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = (size_t)n * 4;
    const uint8_t *p = (const uint8_t *)v; /* little-endian f32, as OpenAI's base64 format */
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
        *o++ = tab[x >> 18 & 63];
        *o++ = tab[x >> 12 & 63];
        *o++ = i + 1 < len ? tab[x >> 6 & 63] : '=';
        *o++ = i + 2 < len ? tab[x & 63] : '=';
    }
    *o = 0;
    return out;
}

static bool check_model(server *sv, json_t *req, char *err, size_t n) {
    json_t *m = json_object_get(req, "model");
    if (!m || json_is_null(m)) return true;
    (void)sv; /* one model is served: any name means it */
    if (!json_is_string(m)) { snprintf(err, n, "'model' must be a string"); return false; }
    return true;
}

int mx_route_embeddings(server *sv, mx_srv_req *rq, json_t *req) {
    char err[512];
    mx_embed_batcher *b = sv->emb; /* the route table's MX_RT_EMBEDS */
    if (!check_model(sv, req, err, sizeof err)) return mx_srv_bad_request(sv, rq, "%s", err);
    json_t *input = json_object_get(req, "input");
    /* string | [string] | [int] | [[int]] */
    bool one = json_is_string(input) || (json_is_array(input) && json_array_size(input) && json_is_integer(json_array_get(input, 0)));
    size_t n = one ? 1 : json_is_array(input) ? json_array_size(input) : 0;
    if (!n) return mx_srv_bad_request(sv, rq, "'input' must be a non-empty string, list of strings, list of token ids or list of lists of token ids");
    if (n > MAX_INPUTS) return mx_srv_bad_request(sv, rq, "'input' has %zu items; at most %d per request", n, MAX_INPUTS);
    json_t *fmt = json_object_get(req, "encoding_format");
    bool b64 = false;
    if (fmt && !json_is_null(fmt)) {
        if (!json_is_string(fmt) || (strcmp(json_string_value(fmt), "float") && strcmp(json_string_value(fmt), "base64")))
            return mx_srv_bad_request(sv, rq, "'encoding_format' must be \"float\" or \"base64\"");
        b64 = !strcmp(json_string_value(fmt), "base64");
    }
    int dim = mx_embedder_dim(b->e), dims = dim;
    json_t *jd = json_object_get(req, "dimensions");
    if (jd && !json_is_null(jd)) {
        if (!json_is_integer(jd) || json_integer_value(jd) < 1 || json_integer_value(jd) > dim)
            return mx_srv_bad_request(sv, rq, "'dimensions' must be an integer in [1, %d]", dim);
        dims = (int)json_integer_value(jd);
    }
    job *j = job_new(b, (int)n, false, dim);
    if (!j) return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    j->n = (int)n;
    long total = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *it = one ? input : json_array_get(input, i);
        int len = 0;
        if (json_is_string(it)) {
            if (!json_string_length(it)) { job_free(&j->base); return mx_srv_bad_request(sv, rq, "input[%zu] is an empty string", i); }
            if (mx_embed_encode_text(b->e, json_string_value(it), json_string_length(it), &j->ids[i], &len)) {
                snprintf(err, sizeof err, "input[%zu]: %s", i, mx_errmsg());
                job_free(&j->base);
                return mx_srv_bad_request(sv, rq, "%s", err);
            }
        } else if (json_is_array(it) && json_array_size(it)) {
            size_t m = json_array_size(it);
            j->ids[i] = malloc(sizeof(int32_t) * m);
            for (size_t k = 0; k < m; k++) {
                json_t *v = json_array_get(it, k);
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= mx_embedder_engine(b->e)->model.arch.vocab) {
                    job_free(&j->base);
                    return mx_srv_bad_request(sv, rq, "input[%zu][%zu] is not a token id of this vocabulary", i, k);
                }
                j->ids[i][k] = (int32_t)json_integer_value(v);
            }
            len = (int)m;
        } else {
            job_free(&j->base);
            return mx_srv_bad_request(sv, rq, "input[%zu] must be a non-empty string or list of token ids", i);
        }
        j->lens[i] = len;
        total += len;
    }
    return submit(sv, rq, req, j, dims, b64, total);
}

static json_t *embed_reply(job *j, server *sv) {
    mx_embed_batcher *b = j->b;
    int dim = mx_embedder_dim(b->e), dims = j->dims;
    json_t *data = json_array();
    for (int i = 0; i < j->n; i++) {
        float *v = j->out + (size_t)i * (size_t)dim;
        if (dims < dim && mx_embedder_normalizes(b->e)) { /* Matryoshka: cut, then re-normalise */
            double ss = 0;
            for (int k = 0; k < dims; k++) ss += (double)v[k] * v[k];
            float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0;
            for (int k = 0; k < dims; k++) v[k] *= inv;
        }
        json_t *emb;
        if (j->b64) {
            char *s = base64_f32(v, dims);
            emb = json_string(s ? s : "");
            free(s);
        } else {
            emb = json_array();
            for (int k = 0; k < dims; k++) json_array_append_new(emb, json_real(v[k]));
        }
        json_array_append_new(data, json_pack("{s:s,s:i,s:o}", "object", "embedding", "index", (json_int_t)i, "embedding", emb));
    }
    return json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model", sv->name, "usage", "prompt_tokens",
                     (json_int_t)j->total, "total_tokens", (json_int_t)j->total);
}

typedef struct { int index; float score; } ranked;
static int by_score(const void *a, const void *b) {
    float x = ((const ranked *)a)->score, y = ((const ranked *)b)->score;
    return x < y ? 1 : x > y ? -1 : ((const ranked *)a)->index - ((const ranked *)b)->index;
}

int mx_route_rerank(server *sv, mx_srv_req *rq, json_t *req) {
    char err[512];
    mx_embed_batcher *b = sv->emb;
    if (!mx_embed_batcher_reranks(b)) return mx_srv_bad_request(sv, rq, "this server does not run a reranker (a *ForSequenceClassification model)");
    if (!check_model(sv, req, err, sizeof err)) return mx_srv_bad_request(sv, rq, "%s", err);
    json_t *q = json_object_get(req, "query"), *docs = json_object_get(req, "documents");
    if (!json_is_string(q) || !json_string_length(q)) return mx_srv_bad_request(sv, rq, "'query' must be a non-empty string");
    if (!json_is_array(docs) || !json_array_size(docs)) return mx_srv_bad_request(sv, rq, "'documents' must be a non-empty list");
    size_t n = json_array_size(docs);
    if (n > MAX_INPUTS) return mx_srv_bad_request(sv, rq, "'documents' has %zu items; at most %d per request", n, MAX_INPUTS);
    int top_n = (int)n;
    json_t *tn = json_object_get(req, "top_n");
    if (tn && !json_is_null(tn)) {
        if (!json_is_integer(tn) || json_integer_value(tn) < 1) return mx_srv_bad_request(sv, rq, "'top_n' must be a positive integer");
        if (json_integer_value(tn) < top_n) top_n = (int)json_integer_value(tn);
    }
    json_t *rd = json_object_get(req, "return_documents");
    if (rd && !json_is_null(rd) && !json_is_boolean(rd)) return mx_srv_bad_request(sv, rq, "'return_documents' must be a boolean");
    int labels = mx_embedder_labels(b->e);
    job *j = job_new(b, (int)n, true, labels);
    if (!j) return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    j->n = (int)n;
    long total = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(docs, i);
        if (json_is_object(d)) d = json_object_get(d, "text");
        if (!json_is_string(d)) { job_free(&j->base); return mx_srv_bad_request(sv, rq, "documents[%zu] must be a string or an object with 'text'", i); }
        if (mx_rerank_encode_pair(b->e, json_string_value(q), json_string_value(d), &j->ids[i], &j->types[i], &j->lens[i])) {
            snprintf(err, sizeof err, "documents[%zu]: %s", i, mx_errmsg());
            job_free(&j->base);
            return mx_srv_bad_request(sv, rq, "%s", err);
        }
        total += j->lens[i];
    }
    return submit(sv, rq, req, j, top_n, false, total);
}

static json_t *rerank_reply(job *j, server *sv) {
    size_t n = (size_t)j->n;
    int top_n = j->dims;
    json_t *docs = json_object_get(j->req, "documents"), *rd = json_object_get(j->req, "return_documents");
    ranked *r = calloc(n, sizeof *r);
    json_t *results = json_array();
    if (r) {
        for (size_t i = 0; i < n; i++) r[i] = (ranked){(int)i, j->scores[i]};
        qsort(r, n, sizeof *r, by_score);
        for (int k = 0; k < top_n; k++) {
            json_t *item = json_pack("{s:i,s:f}", "index", r[k].index, "relevance_score", (double)r[k].score);
            if (json_is_true(rd)) {
                json_t *d = json_array_get(docs, (size_t)r[k].index);
                json_object_set_new(item, "document", json_pack("{s:O}", "text", json_is_object(d) ? json_object_get(d, "text") : d));
            }
            json_array_append_new(results, item);
        }
        free(r);
    }
    char id[40];
    snprintf(id, sizeof id, "rerank-%08x%08x", (unsigned)rand(), (unsigned)rand());
    return json_pack("{s:s,s:s,s:o,s:{s:I,s:I},s:{s:{s:i}}}", "id", id, "model", sv->name, "results", results, "usage", "prompt_tokens",
                     (json_int_t)j->total, "total_tokens", (json_int_t)j->total, "meta", "billed_units", "search_units", 1);
}
