/* Replies: built on any thread, sent by the connection's I/O thread
 * (transport.c queues rq->resp), streamed (server-sent events, suspended
 * while there is nothing to send), or deferred (polled on wake-ups). */
#define _GNU_SOURCE
#include "transport_int.h"
#include "../base/base.h"
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int set_reply(mx_srv_req *rq, unsigned code, struct MHD_Response *r) {
    if (!r) return MX_ERR;
    if (rq->resp) MHD_destroy_response(rq->resp);
    rq->resp = r;
    rq->code = code;
    return MX_OK;
}

int mx_srv_json(mx_srv_req *rq, unsigned code, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) s = strdup("{}");
    if (!s) return MX_ERR;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (r) MHD_add_response_header(r, "Content-Type", "application/json");
    else free(s);
    return set_reply(rq, code, r);
}

int mx_srv_error(server *sv, mx_srv_req *rq, unsigned code, const char *type, const char *msg) {
    atomic_fetch_add(&sv->n_errors, 1);
    /* OpenAI's shape; the top-level "type" makes it Anthropic's too */
    return mx_srv_json(rq, code, json_pack("{s:s,s:{s:s,s:s,s:n,s:n}}", "type", "error", "error", "message", msg, "type", type, "param", "code"));
}

int mx_srv_bad_request(server *sv, mx_srv_req *rq, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mx_srv_error(sv, rq, 400, "invalid_request_error", msg);
}

int mx_srv_retry_after(mx_srv_req *rq, int rc, unsigned seconds, bool close) {
    if (rc || !rq->resp) return rc;
    char v[16];
    snprintf(v, sizeof v, "%u", seconds);
    MHD_add_response_header(rq->resp, "Retry-After", v);
    if (close) MHD_add_response_header(rq->resp, "Connection", "close");
    return rc;
}

int mx_srv_unavailable(server *sv, mx_srv_req *rq, const char *msg) {
    bool leaving = atomic_load(&sv->draining);
    return mx_srv_retry_after(rq, mx_srv_error(sv, rq, 503, "unavailable_error", msg), 1, leaving);
}

int mx_srv_text(mx_srv_req *rq, unsigned code, const char *content_type, mx_buf *b) {
    struct MHD_Response *r = MHD_create_response_from_buffer(b->len, b->data ? b->data : (char *)"", b->data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) { mx_buf_free(b); return MX_ERR; }
    memset(b, 0, sizeof *b);
    MHD_add_response_header(r, "Content-Type", content_type);
    return set_reply(rq, code, r);
}

typedef struct {
    mx_srv_req *rq;
    mx_srv_read_fn read;
    void (*done)(void *);
    void *arg;
} stream;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    for (;;) {
        if (s->rq->t->quit) return MHD_CONTENT_READER_END_WITH_ERROR;
        ssize_t n = s->read(s->arg, buf, max);
        if (n < 0) return MHD_CONTENT_READER_END_OF_STREAM;
        if (n > 0 || mx_srv_suspend(s->rq)) return n;
    }
}

static void stream_free(void *cls) {
    stream *s = cls;
    s->done(s->arg);
    mx_srv_drop(s->rq);
    free(s);
}

int mx_srv_stream(mx_srv_req *rq, mx_srv_read_fn read, void (*done)(void *arg), void *arg) {
    stream *s = malloc(sizeof *s);
    if (!s) { done(arg); return mx_srv_error(rq->sv, rq, 500, "server_error", "out of memory"); }
    *s = (stream){rq, read, done, arg};
    mx_srv_hold(rq); /* the response may outlive the request's record */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, s, stream_free);
    if (!r) { stream_free(s); return MX_ERR; }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return set_reply(rq, 200, r);
}

int mx_srv_defer(mx_srv_req *rq, bool (*poll)(void *arg, mx_srv_req *rq), void (*done)(void *arg), void *arg) {
    rq->poll = poll;
    rq->done = done;
    rq->arg = arg;
    return MX_OK;
}

size_t mx_srv_body_len(const mx_srv_req *rq) { return rq->body.len; }

mx_buf mx_srv_take_body(mx_srv_req *rq) {
    mx_buf b = rq->body;
    memset(&rq->body, 0, sizeof rq->body);
    return b;
}

const char *mx_srv_content_type(const mx_srv_req *rq) { return rq->ctype; }

bool mx_srv_client_gone(mx_srv_req *rq) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {ci->connect_fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char b;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

