/* The generation runner: submits a request to the scheduler, turns its
 * token events into content, reasoning and tool calls (detokenizer + output
 * parser), and drives the reply in the request's format — streamed as
 * server-sent events or as one body at the end. Generation itself runs in
 * the scheduler's engine thread; this side only waits on its request. */
#include "gen.h"
#include "../base/base.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void gen_free(mx_gen *x) {
    if (x->req) mx_req_release(x->req);
    mx_detok_free(x->dt);
    mx_out_free(&x->op);
    mx_buf_free(&x->content); mx_buf_free(&x->reasoning); mx_buf_free(&x->piece);
    mx_buf_free(&x->dc); mx_buf_free(&x->dr); mx_buf_free(&x->sse);
    json_decref(x->lp);
    json_decref(x->calls);
    mx_gen_params_free(&x->g);
    free(x);
}

json_t *mx_gen_token_text(server *sv, int32_t id) {
    mx_buf b = {0};
    mx_tok_decode(sv->tm.tok, &id, 1, false, &b);
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    if (!s) s = json_string("\xef\xbf\xbd"); /* a lone byte of a multi-byte character */
    mx_buf_free(&b);
    return s;
}

json_t *mx_gen_usage(mx_gen *x) {
    int pt = mx_req_prompt_tokens(x->req);
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", pt, "completion_tokens", x->n_gen, "total_tokens", pt + x->n_gen,
                     "prompt_tokens_details", "cached_tokens", mx_req_cached_tokens(x->req));
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

static void set_finish(mx_gen *x) {
    mx_finish f = mx_req_finish(x->req);
    if (x->op.stopped) x->finish = "stop";
    else if (f == MX_FIN_LENGTH) x->finish = "length";
    else x->finish = "stop";
    if (x->calls) x->finish = "tool_calls";
}

/* Waits for and handles one event. Returns false once generation is over. */
static bool gen_step(mx_gen *x, int timeout_ms) {
    if (x->finished) return false;
    mx_tok_event ev;
    int r = mx_req_next(x->req, &ev, timeout_ms);
    if (r == 0) return true;
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
        x->finished = true;
        set_finish(x);
    }
    mx_buf_append(&x->content, x->dc.data, x->dc.len);
    mx_buf_append(&x->reasoning, x->dr.data, x->dr.len);
    if (x->g.stream && (x->dc.len || x->dr.len || lp)) x->fmt->delta(x, x->dc.data, x->dc.len, x->dr.data, x->dr.len, lp);
    else json_decref(lp);
    if (x->finished && x->g.stream) x->fmt->final(x);
    return !x->finished;
}

static ssize_t sse_read(void *arg, char *buf, size_t max) {
    mx_gen *x = arg;
    for (;;) {
        if (x->sse_off < x->sse.len) {
            size_t n = MX_MIN(max, x->sse.len - x->sse_off);
            memcpy(buf, x->sse.data + x->sse_off, n);
            x->sse_off += n;
            if (x->sse_off == x->sse.len) x->sse.len = x->sse_off = 0;
            return (ssize_t)n;
        }
        if (x->done) return -1;
        if (x->finished) { x->done = true; continue; }
        int before = x->n_gen;
        gen_step(x, 1000);
        /* an idle second: a comment line keeps proxies open and detects a gone client */
        if (x->n_gen == before && !x->finished) mx_buf_puts(&x->sse, ": keep-alive\n\n");
    }
}

static void sse_done(void *arg) { gen_free(arg); }

int mx_gen_run(server *sv, mx_srv_req *rq, mx_gen_params *g, const mx_gen_format *fmt) {
    mx_gen *x = calloc(1, sizeof *x);
    if (!x) { mx_gen_params_free(g); return mx_srv_error(sv, rq, 500, "server_error", "out of memory"); }
    x->sv = sv;
    x->fmt = fmt;
    x->g = *g;
    memset(g, 0, sizeof *g);
    x->g.p.prompt = x->g.prompt;
    x->req = mx_sched_submit(sv->sched, &x->g.p);
    if (!x->req) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mx_errmsg());
        gen_free(x);
        return mx_srv_bad_request(sv, rq, "%s", msg);
    }
    atomic_fetch_add(&sv->n_completions, 1);
    x->dt = mx_detok_new(sv->tm.tok, true);
    mx_out_init(&x->op, x->g.reasoning, x->g.starts_in_think, x->g.tools, (const char *const *)x->g.stops, x->g.n_stops);
    snprintf(x->id, sizeof x->id, "%s-%08x%08x", fmt->id_prefix, (unsigned)rand(), (unsigned)rand());
    x->created = (long)time(NULL);
    if (x->g.stream) return mx_srv_stream(rq, sse_read, sse_done, x);
    while (gen_step(x, 200)) {
        if (mx_srv_client_gone(rq)) mx_req_cancel(x->req);
    }
    json_t *reply = fmt->reply(x);
    gen_free(x);
    return mx_srv_json(rq, 200, reply);
}
