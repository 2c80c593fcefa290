/* The generation runner: submits a request to the scheduler, turns its
 * token events into content, reasoning and tool calls (detokenizer + output
 * parser), and drives the reply in the request's format — streamed as
 * server-sent events or as one body at the end. Generation runs in the
 * scheduler's engine thread, which wakes the connection for each token
 * (mx_req_set_notify -> mx_srv_wake); the reply is built on the I/O thread
 * from what has arrived, never waiting.
 *
 * A generation ends normally (finish_reason "stop", "length",
 * "tool_calls") only when the model ended it (EOS, a stop string, the
 * token limit). A cancelled or failed one ends with an explicit error: an
 * error event and [DONE] on a stream, a 503/500 error body otherwise. */
#include "gen.h"
#include "../base/base.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void gen_free(mx_gen *x) {
    if (x->req) mx_req_release(x->req); /* after this the scheduler no longer wakes x->rq */
    if (x->rq) mx_srv_drop(x->rq);
    mx_detok_free(x->dt);
    mx_out_free(&x->op);
    mx_buf_free(&x->content); mx_buf_free(&x->reasoning); mx_buf_free(&x->piece);
    mx_buf_free(&x->dc); mx_buf_free(&x->dr); mx_buf_free(&x->sse);
    json_decref(x->lp);
    json_decref(x->calls);
    mx_gen_params_free(&x->g);
    free(x);
}

/* The length of the valid UTF-8 sequence at s (0: invalid there). */
static size_t u8_seq(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f)) return 0;
    return len;
}

/* A token's bytes as it adds them mid-text (no first-token rules, no cleanup). */
static void token_raw(server *sv, int32_t id, mx_buf *b) {
    if (mx_tok_token_bytes(sv->tm.tok, id, b)) b->len = 0;
}

json_t *mx_gen_token_text(server *sv, int32_t id) {
    mx_buf b = {0}, t = {0};
    token_raw(sv, id, &b);
    /* a byte that is not part of a whole character (a split one) becomes U+FFFD */
    for (size_t i = 0; i < b.len;) {
        size_t l = u8_seq((const unsigned char *)b.data + i, b.len - i);
        if (l) mx_buf_append(&t, b.data + i, l);
        else mx_buf_puts(&t, "\xef\xbf\xbd");
        i += l ? l : 1;
    }
    json_t *s = json_stringn(t.data ? t.data : "", t.len);
    mx_buf_free(&b);
    mx_buf_free(&t);
    return s ? s : json_string("");
}

json_t *mx_gen_token_bytes(server *sv, int32_t id) {
    mx_buf b = {0};
    token_raw(sv, id, &b);
    json_t *a = json_array();
    for (size_t i = 0; i < b.len; i++) json_array_append_new(a, json_integer((unsigned char)b.data[i]));
    mx_buf_free(&b);
    return a;
}

/* n > 1: the choices of one request, streamed or answered together. */
struct mx_gen_multi {
    mx_srv_req *rq;            /* held */
    int n;
    mx_gen **c;                /* c[0] owns the parameters (prompt, stops, ...) */
    mx_buf sse;                /* streaming bytes not yet sent, whole events of every choice */
    size_t sse_off;
    double last_out;
    bool ended;
};

static int completion_tokens(mx_gen *x) {
    if (!x->multi) return x->n_gen;
    int n = 0;
    for (int i = 0; i < x->multi->n; i++) n += x->multi->c[i]->n_gen;
    return n;
}

json_t *mx_gen_usage(mx_gen *x) {
    mx_gen *x0 = x->multi ? x->multi->c[0] : x; /* the prompt counts once */
    int pt = mx_req_prompt_tokens(x0->req), ct = completion_tokens(x);
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", pt, "completion_tokens", ct, "total_tokens", pt + ct,
                     "prompt_tokens_details", "cached_tokens", mx_req_cached_tokens(x0->req));
}

void mx_gen_sse_put(mx_gen *x, json_t *chunk) {
    char *s = json_dumps(chunk, JSON_COMPACT);
    json_decref(chunk);
    if (!s) return;
    mx_buf_puts(&x->sse, "data: ");
    mx_buf_puts(&x->sse, s);
    mx_buf_puts(&x->sse, "\n\n");
    free(s);
}

/* How it ended: a finish reason, or an error when it was cut. */
static void set_finish(mx_gen *x) {
    mx_finish f = mx_req_finish(x->req);
    x->finish = NULL;
    if (x->op.stopped || f == MX_FIN_STOP) x->finish = "stop";
    else if (f == MX_FIN_LENGTH) x->finish = "length";
    else if (f == MX_FIN_CANCELLED) {
        x->err_type = "unavailable_error";
        x->err_msg = atomic_load(&x->sv->stopping) ? "the server is shutting down; the generation was cut" : "the generation was cancelled";
    } else {
        x->err_type = "server_error";
        x->err_msg = "the generation failed";
    }
    if (x->finish && x->calls) x->finish = "tool_calls";
}

/* Handles one event when one is there. Returns false when there was none
 * (or generation is over). */
static bool gen_step(mx_gen *x) {
    if (x->finished) return false;
    mx_tok_event ev;
    int r = mx_req_next(x->req, &ev, 0);
    if (r == 0) return false;
    x->dc.len = x->dr.len = 0;
    json_t *lp = NULL;
    if (r > 0) {
        x->n_gen++;
        bool eos = mx_textmodel_is_eos(&x->sv->tm, ev.token) && !x->g.p.ignore_eos;
        if (x->g.logprobs) lp = x->fmt->logprob(x, &ev);
        if (!eos) {
            x->piece.len = 0;
            mx_detok_push(x->dt, ev.token, &x->piece);
            if (x->piece.len && mx_out_push(&x->op, x->piece.data, x->piece.len, &x->dc, &x->dr)) {
                mx_req_cancel(x->req); /* a stop string ended the reply */
            }
        }
    } else {
        x->piece.len = 0;
        if (!x->op.stopped) {
            mx_detok_flush(x->dt, &x->piece);
            if (x->piece.len) mx_out_push(&x->op, x->piece.data, x->piece.len, &x->dc, &x->dr);
        }
        mx_out_finish(&x->op, &x->dc, &x->dr, &x->calls);
        /* parallel_tool_calls false: the first call only */
        if (x->g.one_call && x->calls) while (json_array_size(x->calls) > 1) json_array_remove(x->calls, json_array_size(x->calls) - 1);
        x->finished = true;
        set_finish(x);
    }
    if (x->rq) mx_srv_note_tokens(x->rq, mx_req_prompt_tokens(x->req), x->n_gen);
    mx_buf_append(&x->content, x->dc.data, x->dc.len);
    mx_buf_append(&x->reasoning, x->dr.data, x->dr.len);
    if (x->g.stream && (x->dc.len || x->dr.len || lp)) x->fmt->delta(x, x->dc.data, x->dc.len, x->dr.data, x->dr.len, lp);
    else json_decref(lp);
    if (x->finished && x->g.stream) {
        if (x->finish) x->fmt->final(x);
        else x->fmt->fail(x, x->err_type, x->err_msg);
    }
    return true;
}

static ssize_t sse_read(void *arg, char *buf, size_t max) {
    mx_gen *x = arg;
    for (;;) {
        if (x->sse_off < x->sse.len) {
            size_t n = MX_MIN(max, x->sse.len - x->sse_off);
            memcpy(buf, x->sse.data + x->sse_off, n);
            x->sse_off += n;
            if (x->sse_off == x->sse.len) x->sse.len = x->sse_off = 0;
            x->last_out = mx_now();
            return (ssize_t)n;
        }
        if (x->finished) return -1;
        /* everything that has arrived, in as few writes as the buffer takes */
        while (x->sse.len < max && gen_step(x)) {}
        if (x->sse.len) continue;
        if (x->finished) return -1;
        /* an idle second: a comment line keeps proxies open and finds a gone client */
        if (mx_now() - x->last_out >= 1.0) { mx_buf_puts(&x->sse, ": keep-alive\n\n"); continue; }
        return 0;
    }
}

static void gen_done(void *arg) { gen_free(arg); }

static bool blocking_poll(void *arg, mx_srv_req *rq) {
    mx_gen *x = arg;
    while (gen_step(x)) {}
    if (!x->finished) {
        if (mx_srv_client_gone(rq)) mx_req_cancel(x->req);
        return false;
    }
    if (x->finish) mx_srv_json(rq, 200, x->fmt->reply(x));
    else if (!strcmp(x->err_type, "unavailable_error")) mx_srv_unavailable(x->sv, rq, x->err_msg);
    else mx_srv_error(x->sv, rq, 500, x->err_type, x->err_msg);
    return true;
}

static void wake(void *arg) { mx_srv_wake(arg); }

/* ---- n > 1 ---- */

static void multi_free(void *arg) {
    mx_gen_multi *m = arg;
    for (int i = m->n - 1; m->c && i >= 0; i--) /* c[0] last: the others' output parsers read its stop strings */
        if (m->c[i]) gen_free(m->c[i]);
    if (m->rq) mx_srv_drop(m->rq);
    mx_buf_free(&m->sse);
    free(m->c);
    free(m);
}

static void multi_note(mx_gen_multi *m) {
    mx_srv_note_tokens(m->rq, mx_req_prompt_tokens(m->c[0]->req), completion_tokens(m->c[0]));
}

static ssize_t multi_sse_read(void *arg, char *buf, size_t max) {
    mx_gen_multi *m = arg;
    for (;;) {
        if (m->sse_off < m->sse.len) {
            size_t n = MX_MIN(max, m->sse.len - m->sse_off);
            memcpy(buf, m->sse.data + m->sse_off, n);
            m->sse_off += n;
            if (m->sse_off == m->sse.len) m->sse.len = m->sse_off = 0;
            m->last_out = mx_now();
            return (ssize_t)n;
        }
        if (m->ended) return -1;
        bool all = true;
        for (int i = 0; i < m->n && !m->ended; i++) {
            mx_gen *x = m->c[i];
            while (x->sse.len < max && gen_step(x)) {}
            mx_buf_append(&m->sse, x->sse.data, x->sse.len);
            x->sse.len = 0;
            if (x->finished && !x->finish) { /* its error event and [DONE] end the stream */
                m->ended = true;
                for (int k = 0; k < m->n; k++) mx_req_cancel(m->c[k]->req);
            }
            all = all && x->finished;
        }
        multi_note(m);
        if (!m->ended && all) {
            mx_gen *x0 = m->c[0];
            x0->fmt->close(x0);
            mx_buf_append(&m->sse, x0->sse.data, x0->sse.len);
            x0->sse.len = 0;
            m->ended = true;
        }
        if (m->sse.len) continue;
        if (m->ended) return -1;
        if (mx_now() - m->last_out >= 1.0) { mx_buf_puts(&m->sse, ": keep-alive\n\n"); continue; }
        return 0;
    }
}

static bool multi_poll(void *arg, mx_srv_req *rq) {
    mx_gen_multi *m = arg;
    bool all = true;
    for (int i = 0; i < m->n; i++) {
        while (gen_step(m->c[i])) {}
        all = all && m->c[i]->finished;
    }
    multi_note(m);
    if (!all) {
        if (mx_srv_client_gone(rq))
            for (int i = 0; i < m->n; i++) mx_req_cancel(m->c[i]->req);
        return false;
    }
    for (int i = 0; i < m->n; i++) {
        mx_gen *x = m->c[i];
        if (x->finish) continue;
        if (!strcmp(x->err_type, "unavailable_error")) mx_srv_unavailable(x->sv, rq, x->err_msg);
        else mx_srv_error(x->sv, rq, 500, x->err_type, x->err_msg);
        return true;
    }
    json_t *body = m->c[0]->fmt->reply(m->c[0]), *choices = json_object_get(body, "choices");
    for (int i = 1; i < m->n; i++) {
        json_t *r = m->c[i]->fmt->reply(m->c[i]);
        json_array_append(choices, json_array_get(json_object_get(r, "choices"), 0));
        json_decref(r);
    }
    mx_srv_json(rq, 200, body);
    return true;
}

static int run_multi(server *sv, mx_srv_req *rq, mx_gen_params *g, const mx_gen_format *fmt) {
    int n = g->n;
    if (!fmt->close) {
        mx_gen_params_free(g);
        return mx_srv_bad_request(sv, rq, "'n' must be 1 on this route");
    }
    mx_gen_multi *m = calloc(1, sizeof *m);
    mx_req **reqs = calloc((size_t)n, sizeof *reqs);
    if (m) m->c = calloc((size_t)n, sizeof *m->c);
    for (int i = 0; m && m->c && i < n; i++) m->c[i] = calloc(1, sizeof(mx_gen));
    bool ok = m && m->c && reqs;
    for (int i = 0; ok && i < n; i++) ok = m->c[i] != NULL;
    if (!ok) {
        if (m) { m->n = n; multi_free(m); }
        free(reqs);
        mx_gen_params_free(g);
        return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    }
    m->n = n;
    mx_gen *x0 = m->c[0];
    x0->g = *g;
    memset(g, 0, sizeof *g);
    x0->g.p.prompt = x0->g.prompt;
    for (int i = 1; i < n; i++) { /* the same settings; c[0] owns what is allocated */
        mx_gen_params *gi = &m->c[i]->g;
        *gi = x0->g;
        gi->prompt = NULL; gi->bias_ids = NULL; gi->bias_vals = NULL; gi->stops = NULL; gi->n_stops = 0;
        gi->images = NULL; gi->tags = NULL; gi->route_data = NULL; gi->p.grammar = NULL;
    }
    if (mx_sched_submit_n(sv->sched, &x0->g.p, n, reqs)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mx_errmsg());
        multi_free(m);
        free(reqs);
        return atomic_load(&sv->stopping) ? mx_srv_unavailable(sv, rq, msg) : mx_srv_bad_request(sv, rq, "%s", msg);
    }
    mx_gen_images_free(&x0->g); /* the requests copied them */
    atomic_fetch_add(&sv->n_completions, 1);
    char id[48];
    snprintf(id, sizeof id, "%s-%08x%08x", fmt->id_prefix, (unsigned)rand(), (unsigned)rand());
    for (int i = 0; i < n; i++) {
        mx_gen *x = m->c[i];
        x->sv = sv;
        x->fmt = fmt;
        x->req = reqs[i];
        x->index = i;
        x->multi = m;
        x->dt = mx_detok_new(sv->tm.tok, true);
        mx_out_init(&x->op, x->g.reasoning, x->g.starts_in_think, x->g.tools, (const char *const *)x0->g.stops, x0->g.n_stops);
        snprintf(x->id, sizeof x->id, "%s", id);
        x->created = (long)time(NULL);
        x->last_out = mx_now();
    }
    free(reqs);
    m->last_out = mx_now();
    m->rq = rq;
    mx_srv_hold(rq);
    for (int i = 0; i < n; i++) mx_req_set_notify(m->c[i]->req, wake, rq);
    if (x0->g.stream) return mx_srv_stream(rq, multi_sse_read, multi_free, m);
    return mx_srv_defer(rq, multi_poll, multi_free, m);
}

int mx_gen_run(server *sv, mx_srv_req *rq, mx_gen_params *g, const mx_gen_format *fmt) {
    if (atomic_load(&sv->stopping)) {
        mx_gen_params_free(g);
        return mx_srv_unavailable(sv, rq, "the server is shutting down");
    }
    if (g->n > 1) return run_multi(sv, rq, g, fmt);
    mx_gen *x = calloc(1, sizeof *x);
    if (!x) { mx_gen_params_free(g); return mx_srv_error(sv, rq, 500, "server_error", "out of memory"); }
    x->sv = sv;
    x->fmt = fmt;
    x->g = *g;
    memset(g, 0, sizeof *g);
    x->g.p.prompt = x->g.prompt;
    x->req = mx_sched_submit(sv->sched, &x->g.p);
    mx_gen_images_free(&x->g); /* the request copied them */
    if (!x->req) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mx_errmsg());
        gen_free(x);
        return atomic_load(&sv->stopping) ? mx_srv_unavailable(sv, rq, msg) : mx_srv_bad_request(sv, rq, "%s", msg);
    }
    atomic_fetch_add(&sv->n_completions, 1);
    x->dt = mx_detok_new(sv->tm.tok, true);
    mx_out_init(&x->op, x->g.reasoning, x->g.starts_in_think, x->g.tools, (const char *const *)x->g.stops, x->g.n_stops);
    snprintf(x->id, sizeof x->id, "%s-%08x%08x", fmt->id_prefix, (unsigned)rand(), (unsigned)rand());
    x->created = (long)time(NULL);
    x->last_out = mx_now();
    x->rq = rq;
    mx_srv_hold(rq);
    mx_req_set_notify(x->req, wake, rq);
    if (x->g.stream) return mx_srv_stream(rq, sse_read, gen_done, x);
    return mx_srv_defer(rq, blocking_poll, gen_done, x);
}
