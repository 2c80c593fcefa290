#include "generate.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

int mx_session_init(mx_session *s, mx_engine *e, int ctx_size, int chunk, mx_pool *pool) {
    return mx_session_init_batch(s, e, ctx_size, chunk, chunk, pool);
}

int mx_session_init_batch(mx_session *s, mx_engine *e, int ctx_size, int chunk, int batch, mx_pool *pool) {
    memset(s, 0, sizeof *s);
    if (chunk < 1) chunk = 1;
    if (chunk > ctx_size) chunk = ctx_size;
    if (batch < chunk) batch = chunk;
    if (batch > ctx_size) batch = ctx_size;
    s->batch = batch;
    s->e = e;
    s->pool = pool;
    s->chunk = chunk;
    s->cap = ctx_size;
    s->kv = mx_kv_new(&e->model, ctx_size);
    s->ctx = s->kv ? mx_ctx_new(&e->model, batch, ctx_size, pool) : NULL;
    s->logits = mx_malloc((size_t)e->model.arch.vocab * sizeof(float)); /* last-token rows only */
    s->history = mx_malloc((size_t)ctx_size * sizeof(int32_t));
    if (!s->kv || !s->ctx || !s->logits || !s->history) { mx_session_free(s); return MX_ERR; }
    return MX_OK;
}

void mx_session_free(mx_session *s) {
    mx_kv_free(s->kv);
    mx_ctx_free(s->ctx);
    free(s->logits);
    free(s->history);
    memset(s, 0, sizeof *s);
}

int mx_session_feed(mx_session *s, const int32_t *tok, int n, float *all_logits, float *last) {
    int V = s->e->model.arch.vocab;
    if (s->n_history + n > s->cap) return mx_set_err("context size %d exceeded (%d tokens in cache, %d more)", s->cap, s->n_history, n);
    for (int i = 0; i < n; i += s->chunk) {
        int m = MX_MIN(s->chunk, n - i);
        mx_seq_in in = {s->kv, tok + i, m, s->n_history - i + n};
        float *out = all_logits ? all_logits + (size_t)i * V : s->logits;
        if (mx_forward(s->ctx, &in, 1, out, all_logits != NULL)) return MX_ERR;
        memcpy(s->history + s->n_history, tok + i, (size_t)m * sizeof(int32_t));
        s->n_history += m;
        if (!all_logits && last && i + m == n) memcpy(last, s->logits, (size_t)V * sizeof(float));
    }
    if (all_logits && last && n > 0) memcpy(last, all_logits + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    return MX_OK;
}

int mx_session_feed_pass(mx_session *s, const int32_t *tok, int n, float *rows) {
    if (n > s->batch) return mx_set_err("%d tokens in one pass, at most %d", n, s->batch);
    if (s->n_history + n > s->cap) return mx_set_err("context size %d exceeded (%d tokens in cache, %d more)", s->cap, s->n_history, n);
    mx_seq_in in = {s->kv, tok, n, 0};
    if (mx_forward(s->ctx, &in, 1, rows, true)) return MX_ERR;
    memcpy(s->history + s->n_history, tok, (size_t)n * sizeof(int32_t));
    s->n_history += n;
    return MX_OK;
}

void mx_session_truncate(mx_session *s, int n) {
    if (n < s->n_history) {
        if (mx_model_recurrent(&s->e->model)) n = 0; /* recurrent state cannot be cut back */
        s->n_history = n;
        s->kv->len = n;
    }
}
