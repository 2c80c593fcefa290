/* The HTTP side of the server: connections, routing, limits, auth, errors,
 * and the OpenAI request/response shapes. Generation itself runs in the
 * scheduler's engine thread; each handler only waits on its request. */
#define _GNU_SOURCE
#include "server.h"
#include "../runtime/outparse.h"
#include "../runtime/sampling_opts.h"
#include "../base/base.h"
#include "../runtime/scheduler.h"
#include "../runtime/textmodel.h"
#include "server_int.h"
#include "../runtime/vlprompt.h"
#include "audio_api.h"
#include <arpa/inet.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef struct {
    mx_buf body;
    bool too_big;
} conn_state;

/* ---------- small helpers ---------- */

enum MHD_Result mx_srv_send_json(struct MHD_Connection *c, unsigned code, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) s = strdup("{}");
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

enum MHD_Result mx_srv_send_error(server *sv, struct MHD_Connection *c, unsigned code, const char *type, const char *msg) {
    atomic_fetch_add(&sv->n_errors, 1);
    return mx_srv_send_json(c, code, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", msg, "type", type, "param", "code"));
}

enum MHD_Result mx_srv_bad_request(server *sv, struct MHD_Connection *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mx_srv_send_error(sv, c, 400, "invalid_request_error", msg);
}

static bool client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {ci->connect_fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char b;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static bool keys_equal(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0;
}

/* ---------- request parameters ---------- */

typedef struct {
    mx_req_params p;
    int32_t *prompt;
    int32_t *bias_ids;
    float *bias_vals;
    char **stops;
    int n_stops;
    bool stream, include_usage, chat, logprobs, tools, echo;
    bool starts_in_think;
} gen_params;

static void gen_params_free(gen_params *g) {
    free(g->prompt);
    free(g->bias_ids);
    free(g->bias_vals);
    for (int i = 0; i < g->n_stops; i++) free(g->stops[i]);
    free(g->stops);
}

/* Reads an optional number field with a range; false (and *err set) when bad. */
static bool opt_int(json_t *req, const char *key, long lo, long hi, int *out, char *err, size_t errn) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, errn, "'%s' must be an integer in [%ld, %ld]", key, lo, hi);
        return false;
    }
    *out = (int)json_integer_value(v);
    return true;
}

static bool opt_bool(json_t *req, const char *key, bool *out, char *err, size_t errn) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) { snprintf(err, errn, "'%s' must be a boolean", key); return false; }
    *out = json_is_true(v);
    return true;
}

/* The sampling and limit fields both routes share. */
static bool parse_common(server *sv, json_t *req, gen_params *g, char *err, size_t errn) {
    if (sv->o.sampling) g->p.samp = *sv->o.sampling;
    else {
        mx_sampling_defaults(&g->p.samp);
        g->p.samp.temperature = 1.0f;
        g->p.samp.seed = MX_SEED_RANDOM;
    }
    g->p.top_logprobs = -1;
    int max_tokens = -1, n = 1;
    json_t *model = json_object_get(req, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) { snprintf(err, errn, "'model' must be a string"); return false; }
        if (strcmp(json_string_value(model), sv->name) != 0) {
            snprintf(err, errn, "model '%s' is not served here (available: '%s')", json_string_value(model), sv->name);
            return false;
        }
    }
    if (!opt_int(req, "max_tokens", 1, 1 << 24, &max_tokens, err, errn) ||
        !opt_int(req, "max_completion_tokens", 1, 1 << 24, &max_tokens, err, errn) ||
        !opt_int(req, "n", 1, 1 << 20, &n, err, errn) ||
        !opt_bool(req, "stream", &g->stream, err, errn) || !opt_bool(req, "ignore_eos", &g->p.ignore_eos, err, errn))
        return false;
    /* the sampling fields: the table the CLI's options come from, with the same ranges */
    if (mx_sampling_from_json(&g->p.samp, req)) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
    if (g->p.samp.seed == MX_SEED_RANDOM) g->p.samp.seed = (uint64_t)time(NULL) ^ (uint64_t)rand();
    if (n != 1) { snprintf(err, errn, "'n' must be 1: this server returns one choice per request"); return false; }
    g->p.max_tokens = max_tokens > 0 ? max_tokens : sv->o.ctx_size;
    json_t *so = json_object_get(req, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) { snprintf(err, errn, "'stream_options' must be an object"); return false; }
        if (!opt_bool(so, "include_usage", &g->include_usage, err, errn)) return false;
    }
    json_t *stop = json_object_get(req, "stop");
    if (stop && !json_is_null(stop)) {
        size_t cnt = json_is_string(stop) ? 1 : json_is_array(stop) ? json_array_size(stop) : 0;
        if ((!json_is_string(stop) && !json_is_array(stop)) || cnt > 16) { snprintf(err, errn, "'stop' must be a string or a list of at most 16 strings"); return false; }
        g->stops = calloc(cnt + 1, sizeof(char *));
        for (size_t i = 0; i < cnt; i++) {
            json_t *s = json_is_string(stop) ? stop : json_array_get(stop, i);
            if (!json_is_string(s) || !json_string_length(s)) { snprintf(err, errn, "'stop' entries must be non-empty strings"); return false; }
            g->stops[g->n_stops++] = strdup(json_string_value(s));
        }
    }
    json_t *lb = json_object_get(req, "logit_bias");
    if (lb && !json_is_null(lb)) {
        if (!json_is_object(lb) || json_object_size(lb) > 4096) { snprintf(err, errn, "'logit_bias' must be an object of token id -> bias"); return false; }
        size_t cnt = json_object_size(lb);
        g->bias_ids = calloc(cnt + 1, sizeof(int32_t));
        g->bias_vals = calloc(cnt + 1, sizeof(float));
        const char *k;
        json_t *v;
        json_object_foreach(lb, k, v) {
            char *end;
            long id = strtol(k, &end, 10);
            if (*end || end == k || id < 0 || id >= sv->tm.e.model.arch.vocab || !json_is_number(v) ||
                json_number_value(v) < -100 || json_number_value(v) > 100) {
                snprintf(err, errn, "'logit_bias': '%s' must be a token id with a bias in [-100, 100]", k);
                return false;
            }
            g->bias_ids[g->p.n_bias] = (int32_t)id;
            g->bias_vals[g->p.n_bias++] = (float)json_number_value(v);
        }
        g->p.bias_ids = g->bias_ids;
        g->p.bias_vals = g->bias_vals;
    }
    return true;
}

/* Message content: a string, or a list of parts: {"type":"text","text":...}
 * and, for a vision-language model, {"type":"image_url","image_url":{"url":
 * "data:image/png;base64,..."}} (a local file only under --allowed-image-dir;
 * remote URLs are refused: the server does not fetch for a client). Images
 * are decoded into vp in order; a message with images keeps its parts for
 * the template as [{"type":"image"}, {"type":"text", ...}] (the plain chat
 * format gets the processor's placeholder in the text instead). */
static bool normalize_messages(server *sv, json_t *msgs, mx_vlprompt *vp, char *err, size_t errn) {
    if (!json_is_array(msgs) || !json_array_size(msgs)) { snprintf(err, errn, "'messages' must be a non-empty list"); return false; }
    const mx_engine *e = &sv->tm.e;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) { snprintf(err, errn, "messages[%zu] must be an object", i); return false; }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) { snprintf(err, errn, "messages[%zu].role must be a string", i); return false; }
        json_t *c = json_object_get(m, "content");
        if (json_is_array(c)) {
            mx_buf t = {0};
            json_t *parts = json_array();
            bool images = false;
            size_t k;
            json_t *part;
            json_array_foreach(c, k, part) {
                json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
                const char *ty = json_string_value(type);
                if (ty && !strcmp(ty, "text") && json_is_string(text)) {
                    mx_buf_append(&t, json_string_value(text), json_string_length(text));
                    json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", text));
                    continue;
                }
                if (!ty || strcmp(ty, "image_url")) {
                    snprintf(err, errn, "messages[%zu].content[%zu]: only text and image_url parts are supported", i, k);
                    goto fail;
                }
                if (!e->vision) {
                    snprintf(err, errn, "messages[%zu].content[%zu]: this model does not take images", i, k);
                    goto fail;
                }
                json_t *iu = json_object_get(part, "image_url"), *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
                if (!json_is_string(url)) {
                    snprintf(err, errn, "messages[%zu].content[%zu].image_url.url must be a string", i, k);
                    goto fail;
                }
                char *data, what[64];
                size_t len;
                snprintf(what, sizeof what, "messages[%zu].content[%zu]", i, k);
                if (mx_image_source_read(json_string_value(url), sv->o.image_dir, &data, &len)) {
                    snprintf(err, errn, "%s: %s", what, mx_errmsg());
                    goto fail;
                }
                int r = mx_vlprompt_add(vp, e, data, len, 0, what);
                free(data);
                if (r) {
                    snprintf(err, errn, "%s", mx_errmsg());
                    goto fail;
                }
                images = true;
                mx_buf_puts(&t, mx_vision_processor(e->vision)->placeholder);
                json_array_append_new(parts, json_pack("{s:s}", "type", "image"));
            }
            if (images && !mx_textmodel_plain_chat(&sv->tm)) json_object_set(m, "content", parts);
            else json_object_set_new(m, "content", json_stringn(t.data ? t.data : "", t.len));
            json_decref(parts);
            mx_buf_free(&t);
            continue;
        fail:
            json_decref(parts);
            mx_buf_free(&t);
            return false;
        } else if (c && !json_is_string(c) && !json_is_null(c)) {
            snprintf(err, errn, "messages[%zu].content must be a string or a list of text and image_url parts", i);
            return false;
        }
    }
    return true;
}

/* ---------- generation state shared by streaming and blocking replies ---------- */

typedef struct {
    server *sv;
    gen_params g;
    mx_req *req;
    mx_detok *dt;
    mx_outparse op;
    mx_buf content, reasoning; /* whole texts (blocking replies) */
    mx_buf piece, dc, dr;      /* scratch per event */
    json_t *lp_content;        /* chat logprobs entries */
    json_t *lp_tokens, *lp_token_lp, *lp_top;
    int n_gen;
    const char *finish;
    json_t *calls;
    char id[48];
    long created;
    mx_buf sse;
    size_t sse_off;
    bool done, finished, sent_role;
} gen;

static void gen_free(gen *x) {
    if (x->req) mx_req_release(x->req);
    mx_detok_free(x->dt);
    mx_out_free(&x->op);
    mx_buf_free(&x->content); mx_buf_free(&x->reasoning); mx_buf_free(&x->piece);
    mx_buf_free(&x->dc); mx_buf_free(&x->dr); mx_buf_free(&x->sse);
    json_decref(x->lp_content); json_decref(x->lp_tokens); json_decref(x->lp_token_lp); json_decref(x->lp_top);
    json_decref(x->calls);
    gen_params_free(&x->g);
    free(x);
}

static json_t *token_text(server *sv, int32_t id) {
    mx_buf b = {0};
    mx_tok_decode(sv->tm.tok, &id, 1, false, &b);
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    if (!s) s = json_string("\xef\xbf\xbd"); /* a lone byte of a multi-byte character */
    mx_buf_free(&b);
    return s;
}

static json_t *byte_list(json_t *s) {
    json_t *a = json_array();
    const unsigned char *p = (const unsigned char *)json_string_value(s);
    for (size_t i = 0; i < json_string_length(s); i++) json_array_append_new(a, json_integer(p[i]));
    return a;
}

static void record_logprobs(gen *x, const mx_tok_event *ev) {
    server *sv = x->sv;
    json_t *tt = token_text(sv, ev->token);
    if (x->g.chat) {
        json_t *top = json_array();
        for (int i = 0; i < ev->n_top; i++) {
            json_t *t2 = token_text(sv, ev->top_ids[i]);
            json_array_append_new(top, json_pack("{s:O,s:f,s:o}", "token", t2, "logprob", (double)ev->top_lp[i], "bytes", byte_list(t2)));
            json_decref(t2);
        }
        json_array_append_new(x->lp_content, json_pack("{s:O,s:f,s:o,s:o}", "token", tt, "logprob", (double)ev->logprob, "bytes", byte_list(tt), "top_logprobs", top));
    } else {
        json_array_append(x->lp_tokens, tt);
        json_array_append_new(x->lp_token_lp, json_real(ev->logprob));
        json_t *top = json_object();
        for (int i = 0; i < ev->n_top; i++) {
            json_t *t2 = token_text(sv, ev->top_ids[i]);
            json_object_set_new(top, json_string_value(t2), json_real(ev->top_lp[i]));
            json_decref(t2);
        }
        json_array_append_new(x->lp_top, top);
    }
    json_decref(tt);
}

static json_t *usage_json(gen *x) {
    int pt = mx_req_prompt_tokens(x->req);
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", pt, "completion_tokens", x->n_gen, "total_tokens", pt + x->n_gen,
                     "prompt_tokens_details", "cached_tokens", mx_req_cached_tokens(x->req));
}

static void sse_put(gen *x, json_t *chunk) {
    char *s = json_dumps(chunk, JSON_COMPACT);
    json_decref(chunk);
    if (!s) return;
    mx_buf_puts(&x->sse, "data: ");
    mx_buf_puts(&x->sse, s);
    mx_buf_puts(&x->sse, "\n\n");
    free(s);
}

static json_t *chunk_base(gen *x) {
    return json_pack("{s:s,s:s,s:i,s:s}", "id", x->id, "object", x->g.chat ? "chat.completion.chunk" : "text_completion",
                     "created", (json_int_t)x->created, "model", x->sv->name);
}

static void stream_delta(gen *x, const char *content, size_t cn, const char *reasoning, size_t rn, json_t *lp) {
    json_t *ch = chunk_base(x), *choice;
    if (x->g.chat) {
        json_t *delta = json_object();
        if (!x->sent_role) { json_object_set_new(delta, "role", json_string("assistant")); x->sent_role = true; }
        if (cn || !rn) json_object_set_new(delta, "content", json_stringn(content ? content : "", cn));
        if (rn) json_object_set_new(delta, "reasoning_content", json_stringn(reasoning, rn));
        choice = json_pack("{s:i,s:o,s:o,s:n}", "index", 0, "delta", delta, "logprobs", lp ? lp : json_null(), "finish_reason");
    } else {
        choice = json_pack("{s:i,s:s%,s:o,s:n}", "index", 0, "text", content ? content : "", cn, "logprobs", lp ? lp : json_null(), "finish_reason");
    }
    json_object_set_new(ch, "choices", json_pack("[o]", choice));
    sse_put(x, ch);
}

static void stream_final(gen *x) {
    json_t *ch = chunk_base(x), *choice;
    if (x->g.chat) {
        json_t *delta = json_object();
        if (x->calls) {
            json_t *calls = json_deep_copy(x->calls);
            size_t i;
            json_t *c;
            json_array_foreach(calls, i, c) json_object_set_new(c, "index", json_integer((json_int_t)i));
            json_object_set_new(delta, "tool_calls", calls);
        }
        choice = json_pack("{s:i,s:o,s:n,s:s}", "index", 0, "delta", delta, "logprobs", "finish_reason", x->finish);
    } else choice = json_pack("{s:i,s:s,s:n,s:s}", "index", 0, "text", "", "logprobs", "finish_reason", x->finish);
    json_object_set_new(ch, "choices", json_pack("[o]", choice));
    sse_put(x, ch);
    if (x->g.include_usage) {
        json_t *u = chunk_base(x);
        json_object_set_new(u, "choices", json_array());
        json_object_set_new(u, "usage", usage_json(x));
        sse_put(x, u);
    }
    mx_buf_puts(&x->sse, "data: [DONE]\n\n");
}

static void set_finish(gen *x) {
    mx_finish f = mx_req_finish(x->req);
    if (x->op.stopped) x->finish = "stop";
    else if (f == MX_FIN_LENGTH) x->finish = "length";
    else x->finish = "stop";
    if (x->calls) x->finish = "tool_calls";
}

/* Waits for and handles one event. Returns false once generation is over. */
static bool gen_step(gen *x, int timeout_ms) {
    if (x->finished) return false;
    mx_tok_event ev;
    int r = mx_req_next(x->req, &ev, timeout_ms);
    if (r == 0) return true;
    x->dc.len = x->dr.len = 0;
    json_t *lp = NULL;
    if (r > 0) {
        x->n_gen++;
        bool eos = mx_textmodel_is_eos(&x->sv->tm, ev.token) && !x->g.p.ignore_eos;
        if (x->g.logprobs) record_logprobs(x, &ev);
        if (!eos) {
            x->piece.len = 0;
            mx_detok_push(x->dt, ev.token, &x->piece);
            if (x->piece.len && mx_out_push(&x->op, x->piece.data, x->piece.len, &x->dc, &x->dr)) {
                mx_req_cancel(x->req); /* a stop string ended the reply */
            }
        }
        if (x->g.stream && x->g.logprobs) {
            if (x->g.chat) lp = json_pack("{s:[O]}", "content", json_array_get(x->lp_content, json_array_size(x->lp_content) - 1));
            else lp = json_pack("{s:[O],s:[O],s:[O]}", "tokens", json_array_get(x->lp_tokens, json_array_size(x->lp_tokens) - 1),
                                "token_logprobs", json_array_get(x->lp_token_lp, json_array_size(x->lp_token_lp) - 1), "top_logprobs",
                                json_array_get(x->lp_top, json_array_size(x->lp_top) - 1));
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
    if (x->g.stream && (x->dc.len || x->dr.len || lp)) stream_delta(x, x->dc.data, x->dc.len, x->dr.data, x->dr.len, lp);
    else json_decref(lp);
    if (x->finished && x->g.stream) stream_final(x);
    return !x->finished;
}

static json_t *blocking_reply(gen *x) {
    json_t *choice;
    const char *content = x->content.data ? x->content.data : "";
    if (x->g.chat) {
        json_t *msg = json_pack("{s:s,s:s%}", "role", "assistant", "content", content, x->content.len);
        if (x->reasoning.len) json_object_set_new(msg, "reasoning_content", json_stringn(x->reasoning.data, x->reasoning.len));
        if (x->calls) {
            json_object_set(msg, "tool_calls", x->calls);
            if (!x->content.len) json_object_set_new(msg, "content", json_null());
        }
        choice = json_pack("{s:i,s:o,s:o,s:s}", "index", 0, "message", msg, "logprobs",
                           x->g.logprobs ? json_pack("{s:O}", "content", x->lp_content) : json_null(), "finish_reason", x->finish);
    } else {
        choice = json_pack("{s:i,s:s%,s:o,s:s}", "index", 0, "text", content, x->content.len, "logprobs",
                           x->g.logprobs ? json_pack("{s:O,s:O,s:O}", "tokens", x->lp_tokens, "token_logprobs", x->lp_token_lp, "top_logprobs", x->lp_top)
                                         : json_null(),
                           "finish_reason", x->finish);
    }
    return json_pack("{s:s,s:s,s:i,s:s,s:[o],s:o}", "id", x->id, "object", x->g.chat ? "chat.completion" : "text_completion", "created",
                     (json_int_t)x->created, "model", x->sv->name, "choices", choice, "usage", usage_json(x));
}

static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    gen *x = cls;
    for (;;) {
        if (x->sse_off < x->sse.len) {
            size_t n = MX_MIN(max, x->sse.len - x->sse_off);
            memcpy(buf, x->sse.data + x->sse_off, n);
            x->sse_off += n;
            if (x->sse_off == x->sse.len) x->sse.len = x->sse_off = 0;
            return (ssize_t)n;
        }
        if (x->done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (x->finished) { x->done = true; continue; }
        int before = x->n_gen;
        gen_step(x, 1000);
        /* an idle second: a comment line keeps proxies open and detects a gone client */
        if (x->n_gen == before && !x->finished) mx_buf_puts(&x->sse, ": keep-alive\n\n");
    }
}

static void sse_free(void *cls) { gen_free(cls); }

static enum MHD_Result run_generation(server *sv, struct MHD_Connection *c, gen_params *g) {
    gen *x = calloc(1, sizeof *x);
    if (!x) return mx_srv_send_error(sv, c, 500, "server_error", "out of memory");
    x->sv = sv;
    x->g = *g;
    memset(g, 0, sizeof *g);
    x->g.p.prompt = x->g.prompt;
    x->req = mx_sched_submit(sv->sched, &x->g.p);
    x->g.p.lay = NULL; /* the request copied the images; the caller frees them */
    x->g.p.rows = NULL;
    x->g.p.tags = NULL;
    if (!x->req) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mx_errmsg());
        gen_free(x);
        return mx_srv_bad_request(sv, c, "%s", msg);
    }
    atomic_fetch_add(&sv->n_completions, 1);
    x->dt = mx_detok_new(sv->tm.tok, true);
    mx_out_init(&x->op, x->g.chat && sv->tm.reasoning, x->g.starts_in_think, x->g.tools, (const char *const *)x->g.stops, x->g.n_stops);
    x->lp_content = json_array();
    x->lp_tokens = json_array();
    x->lp_token_lp = json_array();
    x->lp_top = json_array();
    snprintf(x->id, sizeof x->id, "%s-%08x%08x", x->g.chat ? "chatcmpl" : "cmpl", (unsigned)rand(), (unsigned)rand());
    x->created = (long)time(NULL);
    if (x->g.stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_reader, x, sse_free);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return rc;
    }
    while (gen_step(x, 200)) {
        if (client_gone(c)) { mx_req_cancel(x->req); }
    }
    json_t *reply = blocking_reply(x);
    gen_free(x);
    return mx_srv_send_json(c, 200, reply);
}

/* ---------- routes ---------- */

static enum MHD_Result route_chat(server *sv, struct MHD_Connection *c, json_t *req) {
    char err[512] = "";
    gen_params g = {0};
    g.chat = true;
    if (!parse_common(sv, req, &g, err, sizeof err)) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "%s", err); }
    if (!sv->tm.tok) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "this model has no tokenizer; use /v1/completions with token ids"); }
    json_t *lp = json_object_get(req, "logprobs");
    if (lp && !json_is_null(lp) && !json_is_boolean(lp)) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "'logprobs' must be a boolean"); }
    g.logprobs = json_is_true(lp);
    int top = 0;
    if (!opt_int(req, "top_logprobs", 0, MX_MAX_TOP_LOGPROBS, &top, err, sizeof err)) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "%s", err); }
    if (g.logprobs) g.p.top_logprobs = top;
    json_t *msgs = json_deep_copy(json_object_get(req, "messages"));
    mx_vlprompt vp = {0};
    if (!normalize_messages(sv, msgs, &vp, err, sizeof err)) {
        json_decref(msgs);
        mx_vlprompt_free(&vp);
        gen_params_free(&g);
        return mx_srv_bad_request(sv, c, "%s", err);
    }
    json_t *ctx = json_object();
    json_object_set_new(ctx, "messages", msgs);
    json_t *tools = json_object_get(req, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) { json_decref(ctx); gen_params_free(&g); return mx_srv_bad_request(sv, c, "'tools' must be a list"); }
        json_t *tc = json_object_get(req, "tool_choice");
        bool none = json_is_string(tc) && !strcmp(json_string_value(tc), "none");
        if (json_array_size(tools) && !none) { json_object_set(ctx, "tools", tools); g.tools = true; }
    }
    const char *pass[] = {"documents", "chat_template_kwargs"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(req, pass[i]);
        if (!v) continue;
        if (i == 1 && json_is_object(v)) json_object_update(ctx, v);
        else json_object_set(ctx, pass[i], v);
    }
    bool cont = false;
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    json_t *role = json_object_get(last, "role");
    if (json_is_string(role) && !strcmp(json_string_value(role), "assistant")) cont = true;
    json_object_set_new(ctx, cont ? "continue_final_message" : "add_generation_prompt", json_true());
    mx_buf text = {0};
    if (mx_textmodel_render(&sv->tm, ctx, &text)) {
        json_decref(ctx);
        mx_vlprompt_free(&vp);
        gen_params_free(&g);
        return mx_srv_bad_request(sv, c, "chat template: %s", mx_errmsg());
    }
    json_decref(ctx);
    /* a template that leaves the reply inside an open <think> block */
    if (sv->tm.reasoning && text.len) {
        size_t e = text.len;
        while (e && (text.data[e - 1] == '\n' || text.data[e - 1] == ' ')) e--;
        g.starts_in_think = e >= 7 && !memcmp(text.data + e - 7, "<think>", 7);
    }
    int n = 0, rc;
    uint64_t *tags = NULL;
    if (vp.n) { /* images: placeholders expanded, rows encoded (or cached), their layout */
        rc = mx_vlprompt_tokenize(&vp, &sv->tm, text.data ? text.data : "", true, &g.prompt, &n);
        if (!rc) rc = mx_vlprompt_prepare(&vp, &sv->tm.e, g.prompt, n, sv->vpool);
        if (!rc && !(tags = malloc(sizeof(uint64_t) * (size_t)(n ? n : 1)))) rc = mx_set_err("out of memory");
        if (!rc) {
            mx_vlprompt_tags(&vp, tags);
            g.p.lay = &vp.lay;
            g.p.rows = vp.rows;
            g.p.n_rows = vp.n_rows;
            g.p.tags = tags;
        }
    } else rc = mx_textmodel_encode_chat(&sv->tm, text.data ? text.data : "", text.len, &g.prompt, &n);
    if (!rc && mx_textmodel_plain_chat(&sv->tm) && !cont) {
        /* the plain format's next turn marks the end of the reply */
        char **st = realloc(g.stops, sizeof(char *) * (size_t)(g.n_stops + 1));
        if (st) g.stops = st;
        if (!st || !(g.stops[g.n_stops] = strdup(mx_textmodel_plain_stop))) rc = mx_set_err("out of memory");
        else g.n_stops++;
    }
    mx_buf_free(&text);
    if (rc) {
        free(tags);
        mx_vlprompt_free(&vp);
        gen_params_free(&g);
        return mx_srv_bad_request(sv, c, "%s", mx_errmsg());
    }
    g.p.n_prompt = n;
    enum MHD_Result res = run_generation(sv, c, &g); /* the scheduler keeps its own copy of the images */
    free(tags);
    mx_vlprompt_free(&vp);
    return res;
}

static enum MHD_Result route_completions(server *sv, struct MHD_Connection *c, json_t *req) {
    char err[512] = "";
    gen_params g = {0};
    if (!parse_common(sv, req, &g, err, sizeof err)) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "%s", err); }
    int lp = -1;
    if (!opt_int(req, "logprobs", 0, MX_MAX_TOP_LOGPROBS, &lp, err, sizeof err)) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "%s", err); }
    if (lp >= 0) { g.logprobs = true; g.p.top_logprobs = lp; }
    json_t *prompt = json_object_get(req, "prompt");
    if (json_is_array(prompt) && json_array_size(prompt) == 1 && json_is_string(json_array_get(prompt, 0))) prompt = json_array_get(prompt, 0);
    if (json_is_string(prompt)) {
        if (!sv->tm.tok) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "this model has no tokenizer: send 'prompt' as a list of token ids"); }
        int n = 0;
        if (mx_textmodel_encode(&sv->tm, json_string_value(prompt), json_string_length(prompt), true, &g.prompt, &n)) {
            gen_params_free(&g);
            return mx_srv_bad_request(sv, c, "%s", mx_errmsg());
        }
        g.p.n_prompt = n;
    } else if (json_is_array(prompt) && json_array_size(prompt)) {
        size_t n = json_array_size(prompt);
        g.prompt = calloc(n, sizeof(int32_t));
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(prompt, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
                gen_params_free(&g);
                return mx_srv_bad_request(sv, c, "'prompt' must be a string or a list of token ids");
            }
            g.prompt[i] = (int32_t)json_integer_value(v);
        }
        g.p.n_prompt = (int)n;
    } else {
        gen_params_free(&g);
        return mx_srv_bad_request(sv, c, "'prompt' must be a non-empty string or list of token ids");
    }
    if (!sv->tm.tok) { gen_params_free(&g); return mx_srv_bad_request(sv, c, "this model has no tokenizer to turn generated ids into text"); }
    return run_generation(sv, c, &g);
}

static enum MHD_Result route_tokenize(server *sv, struct MHD_Connection *c, json_t *req) {
    json_t *content = json_object_get(req, "content");
    if (!content) content = json_object_get(req, "text");
    if (!json_is_string(content)) return mx_srv_bad_request(sv, c, "'content' must be a string");
    json_t *as = json_object_get(req, "add_special");
    if (as && !json_is_boolean(as)) return mx_srv_bad_request(sv, c, "'add_special' must be a boolean");
    if (!sv->tok) return mx_srv_bad_request(sv, c, "this model has no tokenizer");
    int32_t *ids = NULL;
    int n = 0;
    if (mx_tok_encode(sv->tok, json_string_value(content), json_string_length(content), as ? json_is_true(as) : false, &ids, &n))
        return mx_srv_bad_request(sv, c, "%s", mx_errmsg());
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    free(ids);
    return mx_srv_send_json(c, 200, json_pack("{s:o}", "tokens", arr));
}

static enum MHD_Result route_detokenize(server *sv, struct MHD_Connection *c, json_t *req) {
    json_t *toks = json_object_get(req, "tokens");
    if (!json_is_array(toks)) return mx_srv_bad_request(sv, c, "'tokens' must be a list of token ids");
    if (!sv->tok) return mx_srv_bad_request(sv, c, "this model has no tokenizer");
    size_t n = json_array_size(toks);
    int32_t *ids = calloc(n + 1, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(toks, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= mx_tok_vocab_size(sv->tok)) {
            free(ids);
            return mx_srv_bad_request(sv, c, "tokens[%zu] is not a token id of this vocabulary", i);
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    mx_buf out = {0};
    int rc = mx_tok_decode(sv->tok, ids, (int)n, false, &out);
    free(ids);
    if (rc) { mx_buf_free(&out); return mx_srv_bad_request(sv, c, "%s", mx_errmsg()); }
    json_t *s = json_stringn(out.data ? out.data : "", out.len);
    mx_buf_free(&out);
    if (!s) s = json_string("");
    return mx_srv_send_json(c, 200, json_pack("{s:o}", "content", s));
}

static enum MHD_Result route_metrics(server *sv, struct MHD_Connection *c) {
    mx_sched_stats st = {0};
    if (sv->sched) mx_sched_stats_get(sv->sched, &st);
    mx_buf b = {0};
    mx_buf_printf(&b,
                  "# HELP mlxcel_http_requests_total HTTP requests received.\n# TYPE mlxcel_http_requests_total counter\n"
                  "mlxcel_http_requests_total %llu\n"
                  "# HELP mlxcel_http_errors_total Requests answered with an error.\n# TYPE mlxcel_http_errors_total counter\n"
                  "mlxcel_http_errors_total %llu\n"
                  "# HELP mlxcel_requests_total Generation requests accepted.\n# TYPE mlxcel_requests_total counter\n"
                  "mlxcel_requests_total %llu\n"
                  "# HELP mlxcel_prompt_tokens_total Prompt tokens processed.\n# TYPE mlxcel_prompt_tokens_total counter\n"
                  "mlxcel_prompt_tokens_total %llu\n"
                  "# HELP mlxcel_prompt_tokens_cached_total Prompt tokens reused from the prompt cache.\n# TYPE mlxcel_prompt_tokens_cached_total counter\n"
                  "mlxcel_prompt_tokens_cached_total %llu\n"
                  "# HELP mlxcel_generation_tokens_total Tokens generated.\n# TYPE mlxcel_generation_tokens_total counter\n"
                  "mlxcel_generation_tokens_total %llu\n"
                  "# HELP mlxcel_requests_active Requests being generated.\n# TYPE mlxcel_requests_active gauge\n"
                  "mlxcel_requests_active %d\n"
                  "# HELP mlxcel_queue_depth Requests waiting for a slot.\n# TYPE mlxcel_queue_depth gauge\n"
                  "mlxcel_queue_depth %d\n"
                  "# HELP mlxcel_time_to_first_token_seconds Mean time from request to first token.\n# TYPE mlxcel_time_to_first_token_seconds gauge\n"
                  "mlxcel_time_to_first_token_seconds %.6f\n"
                  "# HELP mlxcel_decode_tokens_per_second Aggregate decode rate of the last step.\n# TYPE mlxcel_decode_tokens_per_second gauge\n"
                  "mlxcel_decode_tokens_per_second %.3f\n",
                  (unsigned long long)atomic_load(&sv->n_http), (unsigned long long)atomic_load(&sv->n_errors),
                  (unsigned long long)st.requests, (unsigned long long)st.prompt_tokens, (unsigned long long)st.cached_tokens,
                  (unsigned long long)st.gen_tokens, st.active, st.queued, st.ttft_count ? st.ttft_sum / st.ttft_count : 0.0, st.decode_tps);
    if (sv->sched && sv->tm.e.vision) {
        unsigned long enc, hits;
        mx_vision_counts(sv->tm.e.vision, &enc, &hits);
        mx_buf_printf(&b,
                      "# HELP mlxcel_images_encoded_total Images run through the vision tower.\n# TYPE mlxcel_images_encoded_total counter\n"
                      "mlxcel_images_encoded_total %lu\n"
                      "# HELP mlxcel_images_cached_total Images whose rows came from the cache (seen before).\n"
                      "# TYPE mlxcel_images_cached_total counter\nmlxcel_images_cached_total %lu\n",
                      enc, hits);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *sv = cls;
    conn_state *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st) return MHD_NO;
        *con_cls = st;
        atomic_fetch_add(&sv->n_http, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > sv->o.max_body) st->too_big = true;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!st->too_big && st->body.len + *upload_size <= sv->o.max_body) mx_buf_append(&st->body, upload, *upload_size);
        else st->too_big = true;
        *upload_size = 0;
        return MHD_YES;
    }
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health")) {
        if (!get) return mx_srv_send_error(sv, c, 405, "invalid_request_error", "use GET");
        return atomic_load(&sv->ready) ? mx_srv_send_json(c, 200, json_pack("{s:s}", "status", "ok"))
                                       : mx_srv_send_json(c, 503, json_pack("{s:{s:s,s:s}}", "error", "message", "loading model", "type", "unavailable_error"));
    }
    if (sv->o.api_key) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        bool ok = auth && !strncmp(auth, "Bearer ", 7) && keys_equal(auth + 7, sv->o.api_key);
        if (!ok) return mx_srv_send_error(sv, c, 401, "authentication_error", "invalid or missing API key");
    }
    if (st->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is larger than %zu bytes", sv->o.max_body);
        return mx_srv_send_error(sv, c, 413, "invalid_request_error", msg);
    }
    if (!atomic_load(&sv->ready)) return mx_srv_send_error(sv, c, 503, "unavailable_error", "the model is still loading");
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
        if (!get) return mx_srv_send_error(sv, c, 405, "invalid_request_error", "use GET");
        return mx_srv_send_json(c, 200, json_pack("{s:s,s:[{s:s,s:s,s:i,s:s}]}", "object", "list", "data", "id", sv->name, "object", "model",
                                           "created", (json_int_t)time(NULL), "owned_by", "mlxcel"));
    }
    if (!strcmp(url, "/metrics")) return get ? route_metrics(sv, c) : mx_srv_send_error(sv, c, 405, "invalid_request_error", "use GET");
    if (!strcmp(url, "/v1/audio/transcriptions") || !strcmp(url, "/audio/transcriptions") || !strcmp(url, "/v1/audio/translations") ||
        !strcmp(url, "/audio/translations")) {
        if (!post) return mx_srv_send_error(sv, c, 405, "invalid_request_error", "use POST");
        if (!sv->speech) return mx_srv_bad_request(sv, c, "this server does not run a speech-to-text model (Whisper)");
        mx_audio_reply rep;
        mx_audio_api(sv->speech, strstr(url, "translations") != NULL, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"),
                     st->body.data ? st->body.data : "", st->body.len, &rep);
        if (rep.code != 200) {
            mx_buf_free(&rep.body);
            return rep.code == 400 ? mx_srv_bad_request(sv, c, "%s", rep.err) : mx_srv_send_error(sv, c, rep.code, "server_error", rep.err);
        }
        struct MHD_Response *r = MHD_create_response_from_buffer(rep.body.len, rep.body.data, MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(r, "Content-Type", rep.content_type);
        enum MHD_Result rc = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return rc;
    }
    enum { R_NONE, R_CHAT, R_COMPL, R_TOK, R_DETOK, R_EMB, R_RERANK } route = R_NONE;
    if (!strcmp(url, "/v1/embeddings") || !strcmp(url, "/embeddings")) route = R_EMB;
    else if (!strcmp(url, "/v1/rerank") || !strcmp(url, "/rerank") || !strcmp(url, "/v2/rerank")) route = R_RERANK;
    else if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions")) route = R_CHAT;
    else if (!strcmp(url, "/v1/completions") || !strcmp(url, "/completions")) route = R_COMPL;
    else if (!strcmp(url, "/tokenize")) route = R_TOK;
    else if (!strcmp(url, "/detokenize")) route = R_DETOK;
    if (route == R_NONE) return mx_srv_send_error(sv, c, 404, "not_found_error", "no such route");
    if (!post) return mx_srv_send_error(sv, c, 405, "invalid_request_error", "use POST");
    json_error_t je;
    json_t *req = json_loadb(st->body.data ? st->body.data : "", st->body.len, 0, &je);
    if (!req) return mx_srv_bad_request(sv, c, "request body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    if (!json_is_object(req)) { json_decref(req); return mx_srv_bad_request(sv, c, "request body must be a JSON object"); }
    if ((route == R_CHAT || route == R_COMPL || route == R_EMB || route == R_RERANK) && sv->speech) {
        json_decref(req);
        return mx_srv_bad_request(sv, c, "this server runs a speech-to-text model: use /v1/audio/transcriptions or /v1/audio/translations");
    }
    if ((route == R_CHAT || route == R_COMPL) && !sv->sched) {
        json_decref(req);
        return mx_srv_bad_request(sv, c, "this server runs an embedding model: use /v1/embeddings%s", sv->emb && mx_embed_batcher_reranks(sv->emb) ? " or /v1/rerank" : "");
    }
    enum MHD_Result rc = route == R_CHAT ? route_chat(sv, c, req) : route == R_COMPL ? route_completions(sv, c, req)
                         : route == R_EMB ? mx_route_embeddings(sv, c, req) : route == R_RERANK ? mx_route_rerank(sv, c, req)
                         : route == R_TOK ? route_tokenize(sv, c, req) : route_detokenize(sv, c, req);
    json_decref(req);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)c; (void)toe;
    conn_state *st = *con_cls;
    if (!st) return;
    mx_buf_free(&st->body);
    free(st);
    *con_cls = NULL;
}

int mx_serve(const mx_serve_opts *o) {
    static server sv;
    memset(&sv, 0, sizeof sv);
    sv.o = *o;
    srand((unsigned)time(NULL));
    /* signals go to sigwait below, not to worker threads */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *addr;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, o->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)o->port);
        addr = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, o->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)o->port);
        addr = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        fprintf(stderr, "mlxcel serve: --host '%s' is not an IPv4 or IPv6 address\n", o->host);
        return 2;
    }
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, &sv, MHD_OPTION_SOCK_ADDR, addr,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, &sv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)512, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "mlxcel serve: cannot listen on %s:%d\n", o->host, o->port);
        return 1;
    }
    fprintf(stderr, "mlxcel serve: listening on http://%s:%d, loading %s\n", o->host, o->port, o->model_dir);
    int rc = 0;
    mx_task task = MX_TASK_CAUSAL_LM;
    {
        mx_ckpt probe;
        if (mx_ckpt_open(o->model_dir, false, &probe)) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            MHD_stop_daemon(d);
            return 1;
        }
        json_t *archs = mx_cfg_get(&probe.cfg, "architectures");
        if (json_is_string(json_array_get(archs, 0))) task = mx_task_from_arch(json_string_value(json_array_get(archs, 0)));
        mx_ckpt_close(&probe);
    }
    bool speech = mx_speech_folder(o->model_dir);
    if (speech) {
        if (mx_speech_open(o->model_dir, o->threads, &sv.speech)) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            MHD_stop_daemon(d);
            return 1;
        }
        snprintf(sv.name, sizeof sv.name, "%s", mx_speech_name(sv.speech));
        sv.tok = mx_speech_tokenizer(sv.speech);
    } else if (task == MX_TASK_CAUSAL_LM) {
        if (mx_textmodel_open(o->model_dir, &sv.tm) ||
            ((o->chat_template || o->chat_template_file) && mx_textmodel_set_template(&sv.tm, o->chat_template, o->chat_template_file)) ||
            !(sv.sched = mx_sched_new(&sv.tm.e, o->parallel, o->ctx_size, o->step_tokens, o->threads))) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            MHD_stop_daemon(d);
            mx_textmodel_close(&sv.tm);
            return 1;
        }
        snprintf(sv.name, sizeof sv.name, "%s", o->model_name ? o->model_name : sv.tm.name);
        sv.tok = sv.tm.tok;
        if (sv.tm.e.vision && !(sv.vpool = mx_pool_new(o->threads))) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            MHD_stop_daemon(d);
            mx_sched_free(sv.sched);
            mx_textmodel_close(&sv.tm);
            return 1;
        }
        if (sv.tok) mx_textmodel_warn_plain(&sv.tm, "mlxcel serve");
    } else {
        if (mx_embed_batcher_new(o->model_dir, o->threads, &sv.emb)) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            MHD_stop_daemon(d);
            return 1;
        }
        if (o->model_name) snprintf(sv.name, sizeof sv.name, "%s", o->model_name);
        else mx_model_dir_name(o->model_dir, sv.name, sizeof sv.name);
        sv.tok = mx_embed_batcher_tokenizer(sv.emb);
    }
    atomic_store(&sv.ready, true);
    if (sv.speech) fprintf(stderr, "mlxcel serve: ready (speech-to-text model '%s')\n", sv.name);
    else if (sv.sched) fprintf(stderr, "mlxcel serve: ready (model '%s', %d slots of %d tokens)\n", sv.name, o->parallel, o->ctx_size);
    else fprintf(stderr, "mlxcel serve: ready (embedding model '%s')\n", sv.name);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "mlxcel serve: signal %d, shutting down\n", sig);
    atomic_store(&sv.ready, false);
    /* finish what is running as cancelled so blocked handlers return, stop
     * listening (waits for the handlers), then free the engine */
    if (sv.sched) mx_sched_stop(sv.sched);
    MHD_stop_daemon(d);
    mx_sched_free(sv.sched);
    sv.sched = NULL;
    mx_embed_batcher_free(sv.emb);
    sv.emb = NULL;
    mx_pool_free(sv.vpool);
    mx_speech_close(sv.speech);
    sv.speech = NULL;
    if (task == MX_TASK_CAUSAL_LM && !speech) mx_textmodel_close(&sv.tm);
    return rc;
}
