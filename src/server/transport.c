/* The HTTP transport: libmicrohttpd set-up, request body collection, auth,
 * size limits, dispatch through the route table, and the reply helpers the
 * routes use (JSON bodies, OpenAI-style errors, text, SSE streams). */
#define _GNU_SOURCE
#include "server_int.h"
#include "../base/base.h"
#include <arpa/inet.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct mx_srv_req {
    server *sv;
    struct MHD_Connection *c;
    mx_buf body;
    bool too_big;
    bool replied;     /* a response was queued */
};

struct mx_srv_transport {
    struct MHD_Daemon *d;
};

/* ---------- replies ---------- */

static int queue(mx_srv_req *rq, unsigned code, struct MHD_Response *r) {
    if (!r) return MX_ERR;
    enum MHD_Result rc = MHD_queue_response(rq->c, code, r);
    MHD_destroy_response(r);
    rq->replied = true;
    return rc == MHD_YES ? MX_OK : MX_ERR;
}

int mx_srv_json(mx_srv_req *rq, unsigned code, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) s = strdup("{}");
    if (!s) return MX_ERR;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (r) MHD_add_response_header(r, "Content-Type", "application/json");
    else free(s);
    return queue(rq, code, r);
}

int mx_srv_error(server *sv, mx_srv_req *rq, unsigned code, const char *type, const char *msg) {
    atomic_fetch_add(&sv->n_errors, 1);
    return mx_srv_json(rq, code, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", msg, "type", type, "param", "code"));
}

int mx_srv_bad_request(server *sv, mx_srv_req *rq, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mx_srv_error(sv, rq, 400, "invalid_request_error", msg);
}

int mx_srv_text(mx_srv_req *rq, unsigned code, const char *content_type, mx_buf *b) {
    struct MHD_Response *r = MHD_create_response_from_buffer(b->len, b->data ? b->data : (char *)"", b->data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) { mx_buf_free(b); return MX_ERR; }
    memset(b, 0, sizeof *b);
    MHD_add_response_header(r, "Content-Type", content_type);
    return queue(rq, code, r);
}

typedef struct {
    mx_srv_read_fn read;
    void (*done)(void *);
    void *arg;
} stream;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    ssize_t n = s->read(s->arg, buf, max);
    return n < 0 ? (ssize_t)MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void stream_free(void *cls) {
    stream *s = cls;
    s->done(s->arg);
    free(s);
}

int mx_srv_stream(mx_srv_req *rq, mx_srv_read_fn read, void (*done)(void *arg), void *arg) {
    stream *s = malloc(sizeof *s);
    if (!s) { done(arg); return mx_srv_error(rq->sv, rq, 500, "server_error", "out of memory"); }
    *s = (stream){read, done, arg};
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, s, stream_free);
    if (!r) { stream_free(s); return MX_ERR; }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return queue(rq, 200, r);
}

size_t mx_srv_body_len(const mx_srv_req *rq) { return rq->body.len; }

bool mx_srv_client_gone(mx_srv_req *rq) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {ci->connect_fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char b;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---------- dispatch ---------- */

static bool keys_equal(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0;
}

/* Auth, limits, method and body checks in the order clients see them, then the handler. */
static int dispatch(server *sv, mx_srv_req *rq, const char *url, const char *method) {
    const mx_http_route *rt = mx_route_find(url);
    unsigned m = !strcmp(method, "GET") ? MX_HTTP_GET : !strcmp(method, "POST") ? MX_HTTP_POST : 0;
    const char *use = rt && (rt->methods & MX_HTTP_POST) ? "use POST" : "use GET";
    if (rt && (rt->flags & MX_RT_OPEN)) {
        if (!(rt->methods & m)) return mx_srv_error(sv, rq, 405, "invalid_request_error", use);
        return rt->fn(sv, rq, NULL);
    }
    if (sv->o.api_key) {
        const char *auth = MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, "Authorization");
        bool ok = auth && !strncmp(auth, "Bearer ", 7) && keys_equal(auth + 7, sv->o.api_key);
        if (!ok) return mx_srv_error(sv, rq, 401, "authentication_error", "invalid or missing API key");
    }
    if (rq->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is larger than %zu bytes", sv->o.max_body);
        return mx_srv_error(sv, rq, 413, "invalid_request_error", msg);
    }
    if (!atomic_load(&sv->ready)) return mx_srv_error(sv, rq, 503, "unavailable_error", "the model is still loading");
    if (!rt) return mx_srv_error(sv, rq, 404, "not_found_error", "no such route");
    if (!(rt->methods & m)) return mx_srv_error(sv, rq, 405, "invalid_request_error", use);
    if (!(rt->methods & MX_HTTP_POST)) return rt->fn(sv, rq, NULL);
    json_error_t je;
    json_t *req = json_loadb(rq->body.data ? rq->body.data : "", rq->body.len, 0, &je);
    if (!req) return mx_srv_bad_request(sv, rq, "request body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    if (!json_is_object(req)) { json_decref(req); return mx_srv_bad_request(sv, rq, "request body must be a JSON object"); }
    int rc;
    if ((rt->flags & MX_RT_GENERATES) && !sv->sched)
        rc = mx_srv_bad_request(sv, rq, "this server runs an embedding model: use /v1/embeddings%s",
                                sv->emb && mx_embed_batcher_reranks(sv->emb) ? " or /v1/rerank" : "");
    else rc = rt->fn(sv, rq, req);
    json_decref(req);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *sv = cls;
    mx_srv_req *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        rq->sv = sv;
        rq->c = c;
        *con_cls = rq;
        atomic_fetch_add(&sv->n_http, 1);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > sv->o.max_body) rq->too_big = true;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rq->too_big && rq->body.len + *upload_size <= sv->o.max_body) mx_buf_append(&rq->body, upload, *upload_size);
        else rq->too_big = true;
        *upload_size = 0;
        return MHD_YES;
    }
    return dispatch(sv, rq, url, method) == MX_OK ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)c; (void)toe;
    mx_srv_req *rq = *con_cls;
    if (!rq) return;
    mx_buf_free(&rq->body);
    free(rq);
    *con_cls = NULL;
}

int mx_srv_transport_start(server *sv, mx_srv_transport **out) {
    const mx_serve_opts *o = &sv->o;
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
    mx_srv_transport *t = calloc(1, sizeof *t);
    if (!t) return 1;
    t->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, sv, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, sv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)512, MHD_OPTION_END);
    if (!t->d) {
        fprintf(stderr, "mlxcel serve: cannot listen on %s:%d\n", o->host, o->port);
        free(t);
        return 1;
    }
    *out = t;
    return 0;
}

void mx_srv_transport_stop(mx_srv_transport *t) {
    if (!t) return;
    MHD_stop_daemon(t->d);
    free(t);
}
