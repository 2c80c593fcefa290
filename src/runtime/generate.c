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
    s->img_start = -1;
    if (!s->kv || !s->ctx || !s->logits || !s->history) { mx_session_free(s); return MX_ERR; }
    return MX_OK;
}

void mx_session_free(mx_session *s) {
    mx_kv_free(s->kv);
    free(s->hidden);
    mx_ctx_free(s->ctx);
    free(s->logits);
    free(s->history);
    memset(s, 0, sizeof *s);
}

/* the next pass's hidden states go to their positions' rows (mx_session_keep_hidden) */
static void hidden_at(mx_session *s, int pos) {
    mx_ctx_set_hidden_out(s->ctx, s->hidden ? s->hidden + (size_t)pos * s->e->model.arch.hidden : NULL);
}

int mx_session_keep_hidden(mx_session *s) {
    s->hidden_from = s->n_history;
    if (!s->hidden && !(s->hidden = mx_malloc(sizeof(float) * (size_t)s->cap * s->e->model.arch.hidden))) return MX_ERR;
    return MX_OK;
}

/* tokens in chunks, each token with its row of hid (a next-n draft's target rows; NULL: none) */
static int feed(mx_session *s, const int32_t *tok, const float *hid, int n, float *all_logits, float *last) {
    int V = s->e->model.arch.vocab;
    if (s->n_history + n > s->cap) return mx_set_err("context size %d exceeded (%d tokens in cache, %d more)", s->cap, s->n_history, n);
    for (int i = 0; i < n; i += s->chunk) {
        int m = MX_MIN(s->chunk, n - i);
        mx_seq_in in = {.kv = s->kv, .tokens = tok + i, .n = m, .seg_end = s->n_history - i + n, .rope_shift = s->rope_shift,
                        .hidden = hid ? hid + (size_t)i * s->e->model.arch.hidden : NULL};
        float *out = all_logits ? all_logits + (size_t)i * V : s->logits;
        hidden_at(s, s->n_history);
        if (mx_forward(s->ctx, &in, 1, out, all_logits != NULL)) return MX_ERR;
        memcpy(s->history + s->n_history, tok + i, (size_t)m * sizeof(int32_t));
        s->n_history += m;
        if (!all_logits && last && i + m == n) memcpy(last, s->logits, (size_t)V * sizeof(float));
    }
    if (all_logits && last && n > 0) memcpy(last, all_logits + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    return MX_OK;
}

int mx_session_feed(mx_session *s, const int32_t *tok, int n, float *all_logits, float *last) { return feed(s, tok, NULL, n, all_logits, last); }

int mx_session_feed_hidden(mx_session *s, const int32_t *tok, const float *hid, int n, float *last) { return feed(s, tok, hid, n, NULL, last); }

int mx_session_feed_images(mx_session *s, const int32_t *tok, int n, const mx_vision_layout *lay, const float *rows,
                           bool rows_scaled, float *all_logits, float *last) {
    int V = s->e->model.arch.vocab, base = s->n_history;
    if (lay->n != n) return mx_set_err("image layout of %d tokens for %d tokens", lay->n, n);
    if (base + n > s->cap) return mx_set_err("context size %d exceeded (%d tokens in cache, %d more)", s->cap, base, n);
    /* absolute spans and positions for this segment */
    int *lo = NULL, *hi = NULL, *mpos = NULL, r = MX_ERR;
    if (lay->span_lo && (!(lo = mx_malloc(sizeof(int) * (size_t)n)) || !(hi = mx_malloc(sizeof(int) * (size_t)n)))) goto done;
    if (lay->mpos && !(mpos = mx_malloc(sizeof(int) * 3 * (size_t)n))) goto done;
    for (int i = 0; lo && i < n; i++) {
        lo[i] = lay->span_hi[i] > lay->span_lo[i] ? base + lay->span_lo[i] : 0;
        hi[i] = lay->span_hi[i] > lay->span_lo[i] ? base + lay->span_hi[i] : 0;
    }
    for (int i = 0; mpos && i < 3 * n; i++) mpos[i] = lay->mpos[i] + base + s->rope_shift;
    for (int i = 0; i < n;) {
        int m = MX_MIN(s->chunk, n - i);
        for (int k = i; lay->span_lo && k < i + m; k++) /* keep a span in one pass */
            if (lay->span_hi[k] > lay->span_lo[k] && lay->span_hi[k] > i + m) m = lay->span_hi[k] - i;
        if (m > mx_ctx_max_tokens(s->ctx)) { /* a span longer than the chunk: a larger pass */
            mx_ctx *c = mx_ctx_new(&s->e->model, m, s->cap, s->pool);
            if (!c) goto done;
            mx_ctx_free(s->ctx);
            s->ctx = c;
        }
        int *seg_mpos = NULL;
        if (mpos) { /* this pass's [3][m] slice */
            if (!(seg_mpos = mx_malloc(sizeof(int) * 3 * (size_t)m))) goto done;
            for (int k = 0; k < 3; k++) memcpy(seg_mpos + (size_t)k * m, mpos + (size_t)k * n + i, sizeof(int) * (size_t)m);
        }
        mx_seq_in in = {.kv = s->kv, .tokens = tok + i, .n = m, .seg_end = base + n, .embeds = rows,
                        .embed_row = lay->embed_row + i, .embeds_scaled = rows_scaled, .n_deep = lay->n_deep, .mpos = seg_mpos,
                        .rope_shift = s->rope_shift, .span_lo = lo ? lo + i : NULL, .span_hi = hi ? hi + i : NULL};
        float *out = all_logits ? all_logits + (size_t)i * V : s->logits;
        hidden_at(s, s->n_history);
        int e = mx_forward(s->ctx, &in, 1, out, all_logits != NULL);
        free(seg_mpos);
        if (e) goto done;
        memcpy(s->history + s->n_history, tok + i, (size_t)m * sizeof(int32_t));
        s->n_history += m;
        if (!all_logits && last && i + m == n) memcpy(last, s->logits, (size_t)V * sizeof(float));
        i += m;
    }
    if (all_logits && last && n > 0) memcpy(last, all_logits + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    s->rope_shift += lay->rope_shift;
    if (s->img_start < 0) s->img_start = base;
    s->img_end = base + n;
    r = MX_OK;
done:
    free(lo);
    free(hi);
    free(mpos);
    return r;
}

int mx_session_feed_pass(mx_session *s, const int32_t *tok, int n, float *rows) {
    if (n > s->batch) return mx_set_err("%d tokens in one pass, at most %d", n, s->batch);
    if (s->n_history + n > s->cap) return mx_set_err("context size %d exceeded (%d tokens in cache, %d more)", s->cap, s->n_history, n);
    mx_seq_in in = {.kv = s->kv, .tokens = tok, .n = n, .rope_shift = s->rope_shift};
    hidden_at(s, s->n_history);
    if (mx_forward(s->ctx, &in, 1, rows, true)) return MX_ERR;
    memcpy(s->history + s->n_history, tok, (size_t)n * sizeof(int32_t));
    s->n_history += n;
    return MX_OK;
}

void mx_session_truncate(mx_session *s, int n) {
    if (n < s->n_history) {
        /* recurrent state cannot be cut back, a ring of rows only by what it still holds */
        if (mx_model_recurrent(&s->e->model) || n < mx_kv_min_len(&s->e->model, s->kv)) n = 0;
        if (s->img_start >= 0 && n < s->img_end) { /* image rows are not in the history: refeed them */
            n = MX_MIN(n, s->img_start);
            s->img_start = -1;
            s->rope_shift = 0;
        }
        s->n_history = n;
        s->kv->len = n;
        s->hidden_from = MX_MIN(s->hidden_from, n);
    }
}
