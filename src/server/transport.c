/* The HTTP transport: libmicrohttpd set-up, request body collection, auth,
 * limits, dispatch through the route table (the replies routes use are in
 * reply.c).
 *
 * Connections are event-driven (epoll, a few I/O threads): an idle or slow
 * connection costs a socket, never a thread. A request's headers and body
 * each have a deadline, a client address has a connection limit and an
 * optional request rate, and requests accepted but not yet answered are
 * bounded (503 + Retry-After past it). POST handlers run on worker
 * threads; while a reply is not ready the connection is suspended and
 * resumed by mx_srv_wake (a token from the scheduler, a finished batch). */
#define _GNU_SOURCE
#include "transport_int.h"
#include "../base/base.h"
#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---------- references and wake-ups ---------- */

static void rq_free(mx_srv_req *rq) {
    mx_buf_free(&rq->body);
    free(rq->ctype);
    if (rq->resp) MHD_destroy_response(rq->resp);
    free(rq);
}

void mx_srv_hold(mx_srv_req *rq) {
    pthread_mutex_lock(&rq->t->mu);
    rq->refs++;
    pthread_mutex_unlock(&rq->t->mu);
}

void mx_srv_drop(mx_srv_req *rq) {
    pthread_mutex_lock(&rq->t->mu);
    bool last = --rq->refs == 0;
    pthread_mutex_unlock(&rq->t->mu);
    if (last) rq_free(rq);
}

void mx_srv_wake(mx_srv_req *rq) {
    pthread_mutex_lock(&rq->t->mu);
    if (!rq->dead && !rq->at_worker) { /* at a worker: its own wake-up follows */
        if (rq->suspended) {
            rq->suspended = false;
            MHD_resume_connection(rq->c);
        } else rq->wake_pending = true;
    }
    pthread_mutex_unlock(&rq->t->mu);
}

/* From an MHD callback: suspends unless a wake-up came first (then the
 * caller looks again). */
bool mx_srv_suspend(mx_srv_req *rq) {
    pthread_mutex_lock(&rq->t->mu);
    bool ok = !rq->wake_pending && !rq->t->quit;
    if (ok) {
        MHD_suspend_connection(rq->c);
        rq->suspended = true;
    }
    rq->wake_pending = false;
    pthread_mutex_unlock(&rq->t->mu);
    return ok;
}

/* ---------- limits ---------- */

static bool keys_equal(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0;
}

/* The client address's token bucket: true when it may send a request now,
 * else *wait gets the seconds until it may. */
static bool rate_ok(mx_srv_transport *t, struct MHD_Connection *c, unsigned *wait) {
    double rate = t->sv->o.rate_limit;
    if (rate <= 0) return true;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return true;
    uint8_t key[16] = {0};
    if (ci->client_addr->sa_family == AF_INET) memcpy(key, &((struct sockaddr_in *)(void *)ci->client_addr)->sin_addr, 4);
    else if (ci->client_addr->sa_family == AF_INET6) memcpy(key, &((struct sockaddr_in6 *)(void *)ci->client_addr)->sin6_addr, 16);
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++) h = (h ^ key[i]) * 16777619u;
    double now = mx_now(), burst = MX_MAX(1.0, rate);
    bool ok = true;
    pthread_mutex_lock(&t->mu);
    bucket **pb = &t->buckets[h % N_BUCKETS], *b = *pb;
    while (b && memcmp(b->addr, key, 16)) b = b->next;
    if (!b && (b = calloc(1, sizeof *b))) {
        memcpy(b->addr, key, 16);
        b->tokens = burst;
        b->last = now;
        b->next = *pb;
        *pb = b;
    }
    if (b) {
        b->tokens = MX_MIN(burst, b->tokens + (now - b->last) * rate);
        b->last = now;
        if (b->tokens >= 1) b->tokens -= 1;
        else {
            ok = false;
            *wait = (unsigned)ceil((1 - b->tokens) / rate);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return ok;
}

/* ---------- workers ---------- */

/* Whether the server runs the kind of model the route needs (MX_RT_GENERATES, ...). */
static bool kind_ok(const server *sv, unsigned flags) {
    unsigned need = flags & (MX_RT_GENERATES | MX_RT_EMBEDS | MX_RT_SPEECH);
    return !need || (sv->sched && (need & MX_RT_GENERATES)) || (sv->emb && (need & MX_RT_EMBEDS)) || (sv->speech && (need & MX_RT_SPEECH));
}

static void wrong_kind(server *sv, mx_srv_req *rq) {
    if (sv->sched) mx_srv_bad_request(sv, rq, "this server runs a text-generation model: use /v1/chat/completions or /v1/completions");
    else if (sv->emb)
        mx_srv_bad_request(sv, rq, "this server runs an embedding model: use /v1/embeddings%s", mx_embed_batcher_reranks(sv->emb) ? " or /v1/rerank" : "");
    else mx_srv_bad_request(sv, rq, "this server runs a speech-to-text model: use /v1/audio/transcriptions or /v1/audio/translations");
}

static void run_handler(mx_srv_req *rq) {
    server *sv = rq->sv;
    json_error_t je;
    json_t *req = NULL;
    bool raw = rq->rt->flags & MX_RT_RAW_BODY;
    if (!kind_ok(sv, rq->rt->flags)) wrong_kind(sv, rq);
    else if (!raw && !(req = json_loadb(rq->body.data ? rq->body.data : "", rq->body.len, 0, &je)))
        mx_srv_bad_request(sv, rq, "request body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    else if (!raw && !json_is_object(req)) mx_srv_bad_request(sv, rq, "request body must be a JSON object");
    else if (atomic_load(&sv->stopping)) mx_srv_unavailable(sv, rq, "the server is shutting down");
    else rq->rt->fn(sv, rq, req);
    json_decref(req);
    mx_buf_free(&rq->body);
    if (!rq->resp && !rq->poll) mx_srv_error(sv, rq, 500, "server_error", "the handler gave no reply");
}

static void *worker_main(void *arg) {
    mx_srv_transport *t = arg;
    pthread_mutex_lock(&t->wq_mu);
    for (;;) {
        while (!t->wq_head && !t->quit) pthread_cond_wait(&t->wq_cv, &t->wq_mu);
        if (!t->wq_head) break;
        mx_srv_req *rq = t->wq_head;
        t->wq_head = rq->next;
        if (!t->wq_head) t->wq_tail = NULL;
        pthread_mutex_unlock(&t->wq_mu);
        run_handler(rq);
        pthread_mutex_lock(&t->mu);
        rq->at_worker = false;
        pthread_mutex_unlock(&t->mu);
        mx_srv_wake(rq); /* publishes the reply to the I/O thread */
        mx_srv_drop(rq);
        pthread_mutex_lock(&t->wq_mu);
    }
    pthread_mutex_unlock(&t->wq_mu);
    return NULL;
}

/* ---------- the deadline sweeper ---------- */

static void *sweeper_main(void *arg) {
    mx_srv_transport *t = arg;
    const mx_serve_opts *o = &t->sv->o;
    pthread_mutex_lock(&t->mu);
    while (!t->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&t->quit_cv, &t->mu, &ts);
        double now = mx_now();
        /* a connection past its deadline is shut down; MHD then closes it on its own thread */
        for (conn *k = t->conns; k; k = k->next)
            if ((k->phase == C_HEADERS && now - k->since > o->header_timeout) || (k->phase == C_BODY && now - k->since > o->body_timeout)) {
                shutdown(k->fd, SHUT_RDWR);
                k->phase = C_CUT;
            }
        /* waiting replies look again about once a second (keep-alives, gone clients) */
        static double last_tick;
        if (now - last_tick >= 1.0) {
            last_tick = now;
            for (mx_srv_req *r = t->live; r; r = r->lnext)
                if (r->suspended && !r->dead && !r->at_worker) {
                    r->suspended = false;
                    MHD_resume_connection(r->c);
                }
        }
        /* idle rate-limit buckets (full again) are forgotten */
        for (int i = 0; o->rate_limit > 0 && i < N_BUCKETS; i++)
            for (bucket **pb = &t->buckets[i]; *pb;) {
                if (now - (*pb)->last > MX_MAX(1.0, o->rate_limit) / o->rate_limit + 1) {
                    bucket *b = *pb;
                    *pb = b->next;
                    free(b);
                } else pb = &(*pb)->next;
            }
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* ---------- MHD callbacks ---------- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe) {
    mx_srv_transport *t = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn *k = calloc(1, sizeof *k);
        if (!k || !ci) { free(k); return; }
        k->fd = ci->connect_fd;
        k->phase = C_HEADERS;
        k->since = mx_now();
        pthread_mutex_lock(&t->mu);
        k->next = t->conns;
        if (t->conns) t->conns->prev = k;
        t->conns = k;
        pthread_mutex_unlock(&t->mu);
        *socket_context = k;
    } else if (*socket_context) {
        conn *k = *socket_context;
        pthread_mutex_lock(&t->mu); /* before MHD closes the socket: the sweeper never shuts down a reused fd */
        if (k->prev) k->prev->next = k->next;
        else t->conns = k->next;
        if (k->next) k->next->prev = k->prev;
        pthread_mutex_unlock(&t->mu);
        free(k);
        *socket_context = NULL;
    }
}

static void set_phase(mx_srv_req *rq, conn_phase ph) {
    if (!rq->cn) return;
    pthread_mutex_lock(&rq->t->mu);
    if (rq->cn->phase != C_CUT) {
        rq->cn->phase = ph;
        rq->cn->since = mx_now();
    }
    pthread_mutex_unlock(&rq->t->mu);
}

/* ---------- CORS (--cors) and the request log ---------- */

/* An OPTIONS preflight: 204 with what a browser may send. */
static void cors_preflight(mx_srv_req *rq) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return;
    const char *hdrs = MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", hdrs && *hdrs ? hdrs : "Authorization, Content-Type, x-api-key");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    if (rq->resp) MHD_destroy_response(rq->resp);
    rq->resp = r;
    rq->code = 204;
}

const char *mx_srv_path(const mx_srv_req *rq) { return rq->path; }

unsigned mx_srv_method(const mx_srv_req *rq) {
    return !strcmp(rq->method, "GET") ? MX_HTTP_GET : !strcmp(rq->method, "POST") ? MX_HTTP_POST : !strcmp(rq->method, "DELETE") ? MX_HTTP_DELETE : 0;
}

void mx_srv_note_tokens(mx_srv_req *rq, int prompt, int completion) {
    rq->log_prompt = prompt;
    rq->log_completion = completion;
}

/* A printable copy of untrusted text for the log (control bytes -> '?'). */
static void log_copy(char *dst, size_t n, const char *src) {
    size_t i = 0;
    for (; src && src[i] && i + 1 < n; i++) dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
    dst[i] = 0;
}

/* One line per request, when it ends: method, path, status, tokens, time. */
static void log_request(const mx_srv_req *rq, enum MHD_RequestTerminationCode toe) {
    char code[16] = "-";
    if (rq->sent_code) snprintf(code, sizeof code, "%u", rq->sent_code);
    fprintf(stderr, "mlxcel serve: %s %s %s prompt_tokens=%d completion_tokens=%d %.0f ms%s\n", rq->method, rq->path, code, rq->log_prompt,
            rq->log_completion, (mx_now() - rq->t_start) * 1e3, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
}

/* Auth, limits, method: what is answered on the I/O thread. true when a
 * reply is set; false when the request goes to a worker. */
static bool screen(server *sv, mx_srv_req *rq, const char *url, const char *method) {
    const mx_http_route *rt = mx_route_find(url);
    unsigned m = mx_srv_method(rq);
    const char *use = rt && (rt->methods & MX_HTTP_POST) ? "use POST" : rt && (rt->methods & MX_HTTP_DELETE) ? "use GET or DELETE" : "use GET";
    if (sv->o.cors && !strcmp(method, "OPTIONS")) return cors_preflight(rq), true; /* before auth: browsers send no key here */
    if (rt && (rt->flags & MX_RT_OPEN)) {
        if (!(rt->methods & m)) mx_srv_error(sv, rq, 405, "invalid_request_error", use);
        else rt->fn(sv, rq, NULL);
        return true;
    }
    if (sv->o.api_key) {
        /* Bearer (OpenAI) or x-api-key (Anthropic) */
        const char *auth = MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, "Authorization");
        const char *xkey = MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, "x-api-key");
        bool ok = (auth && !strncmp(auth, "Bearer ", 7) && keys_equal(auth + 7, sv->o.api_key)) || (xkey && keys_equal(xkey, sv->o.api_key));
        if (!ok) return mx_srv_error(sv, rq, 401, "authentication_error", "invalid or missing API key"), true;
    }
    if (rq->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is larger than %zu bytes", sv->o.max_body);
        return mx_srv_error(sv, rq, 413, "invalid_request_error", msg), true;
    }
    if (atomic_load(&sv->draining)) return mx_srv_unavailable(sv, rq, "the server is shutting down"), true;
    if (!atomic_load(&sv->ready)) return mx_srv_error(sv, rq, 503, "unavailable_error", "the model is still loading"), true;
    if (!rt) return mx_srv_error(sv, rq, 404, "not_found_error", "no such route"), true;
    if (!(rt->methods & m)) return mx_srv_error(sv, rq, 405, "invalid_request_error", use), true;
    if (m != MX_HTTP_POST) return rt->fn(sv, rq, NULL), true; /* GET, DELETE: quick, on this thread */
    const char *ct = MHD_lookup_connection_value(rq->c, MHD_HEADER_KIND, "Content-Type");
    if (ct && !(rq->ctype = strdup(ct))) return mx_srv_error(sv, rq, 500, "server_error", "out of memory"), true;
    rq->rt = rt;
    return false;
}

/* Hands rq to a worker; false (503 set) when too many are in flight. */
static bool enqueue(mx_srv_transport *t, mx_srv_req *rq) {
    int cap = t->sv->o.parallel + t->sv->o.max_queue;
    pthread_mutex_lock(&t->mu);
    bool ok = t->inflight < cap;
    if (ok) {
        t->inflight++;
        rq->counted = true;
        rq->at_worker = true;
        rq->refs++; /* the worker's */
    }
    pthread_mutex_unlock(&t->mu);
    if (!ok) { mx_srv_unavailable(t->sv, rq, "too many requests are waiting; retry later"); return false; }
    pthread_mutex_lock(&t->wq_mu);
    if (t->wq_tail) t->wq_tail->next = rq;
    else t->wq_head = rq;
    t->wq_tail = rq;
    pthread_cond_signal(&t->wq_cv);
    pthread_mutex_unlock(&t->wq_mu);
    return true;
}

static enum MHD_Result send_reply(mx_srv_req *rq) {
    struct MHD_Response *r = rq->resp;
    rq->resp = NULL;
    const char *origin = rq->sv->o.cors;
    if (origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        if (strcmp(origin, "*")) MHD_add_response_header(r, "Vary", "Origin");
    }
    rq->sent_code = rq->code;
    enum MHD_Result rc = MHD_queue_response(rq->c, rq->code, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    mx_srv_transport *t = cls;
    server *sv = t->sv;
    mx_srv_req *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        rq->sv = sv;
        rq->t = t;
        rq->c = c;
        rq->refs = 1;
        rq->t_start = mx_now();
        log_copy(rq->method, sizeof rq->method, method);
        log_copy(rq->path, sizeof rq->path, url);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        rq->cn = ci ? ci->socket_context : NULL;
        pthread_mutex_lock(&t->mu);
        rq->lnext = t->live;
        if (t->live) t->live->lprev = rq;
        t->live = rq;
        pthread_mutex_unlock(&t->mu);
        *con_cls = rq;
        atomic_fetch_add(&sv->n_http, 1);
        set_phase(rq, C_BODY);
        unsigned wait = 0;
        if (!rate_ok(t, c, &wait)) { /* answered before the body is read */
            mx_srv_retry_after(rq, mx_srv_error(sv, rq, 429, "rate_limit_error", "too many requests from this address"), wait, true);
            return send_reply(rq);
        }
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
    if (!rq->started) {
        rq->started = true;
        set_phase(rq, C_BUSY);
        if (screen(sv, rq, url, method) || !enqueue(t, rq)) return rq->resp ? send_reply(rq) : MHD_NO;
        /* the worker has it: what it sets is read after its wake-up */
        if (mx_srv_suspend(rq)) return MHD_YES;
    }
    for (;;) {
        if (t->quit) return MHD_NO;
        if (rq->resp) return send_reply(rq);
        if (rq->poll && rq->poll(rq->arg, rq)) {
            rq->poll = NULL;
            rq->done(rq->arg);
            rq->done = NULL;
            continue;
        }
        if (mx_srv_suspend(rq)) return MHD_YES;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c;
    mx_srv_transport *t = cls;
    mx_srv_req *rq = *con_cls;
    if (!rq) return;
    *con_cls = NULL;
    set_phase(rq, C_HEADERS); /* a kept-alive connection waits for its next request's headers */
    if (!t->sv->o.no_request_log) log_request(rq, toe);
    if (rq->done) rq->done(rq->arg); /* a deferred reply whose client left */
    rq->done = NULL;
    /* a reply the connection ended before it was sent (a stream's frees its
     * generation, which holds rq: this holds it too until below) */
    struct MHD_Response *unsent = rq->resp;
    rq->resp = NULL;
    if (unsent) MHD_destroy_response(unsent);
    pthread_mutex_lock(&t->mu);
    rq->dead = true;
    if (rq->counted) t->inflight--;
    if (rq->lprev) rq->lprev->lnext = rq->lnext;
    else t->live = rq->lnext;
    if (rq->lnext) rq->lnext->lprev = rq->lprev;
    bool last = --rq->refs == 0;
    pthread_mutex_unlock(&t->mu);
    if (last) rq_free(rq);
}

/* ---------- lifetime ---------- */

/* Raises the descriptor limit to the hard limit: each connection is one. */
static rlim_t fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
        if (!setrlimit(RLIMIT_NOFILE, &want)) rl = want;
    }
    return rl.rlim_cur;
}

int mx_srv_transport_start(server *sv, mx_srv_transport **out) {
    const mx_serve_opts *o = &sv->o;
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *addr;
    /* no MHD_USE_ERROR_LOG: it writes a line per misbehaving client */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
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
    t->sv = sv;
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->wq_mu, NULL);
    pthread_cond_init(&t->wq_cv, NULL);
    pthread_cond_init(&t->quit_cv, NULL);
    /* descriptors beyond the connections: model shards, threads' pipes, epoll */
    rlim_t fds = fd_limit();
    unsigned limit = fds > 512 ? (unsigned)MX_MIN(fds - 256, (rlim_t)1 << 20) : 256;
    for (int i = 0; i < WORKERS; i++)
        if (!pthread_create(&t->workers[i], NULL, worker_main, t)) t->n_workers++;
    t->sweeper_on = !pthread_create(&t->sweeper, NULL, sweeper_main, t);
    t->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, t, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_THREAD_POOL_SIZE,
                            (unsigned)IO_THREADS, MHD_OPTION_NOTIFY_COMPLETED, on_completed, t, MHD_OPTION_NOTIFY_CONNECTION, on_connection, t,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)MX_MAX(30, (int)ceil(MX_MAX(o->header_timeout, o->body_timeout))),
                            MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_conns_per_ip, MHD_OPTION_END);
    if (!t->d || t->n_workers != WORKERS || !t->sweeper_on) {
        fprintf(stderr, "mlxcel serve: cannot listen on %s:%d\n", o->host, o->port);
        mx_srv_transport_stop(t);
        return 1;
    }
    *out = t;
    return 0;
}

int mx_srv_transport_port(mx_srv_transport *t) {
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(t->d, MHD_DAEMON_INFO_BIND_PORT);
    return di ? di->port : -1;
}

void mx_srv_transport_quiesce(mx_srv_transport *t) {
    if (!t || !t->d) return;
    MHD_socket s = MHD_quiesce_daemon(t->d);
    if (s != MHD_INVALID_SOCKET) close(s);
}

int mx_srv_transport_inflight(mx_srv_transport *t) {
    pthread_mutex_lock(&t->mu);
    int n = t->inflight;
    pthread_mutex_unlock(&t->mu);
    return n;
}

void mx_srv_transport_wake_all(mx_srv_transport *t) {
    pthread_mutex_lock(&t->mu);
    for (mx_srv_req *r = t->live; r; r = r->lnext)
        if (!r->dead && r->suspended && (!r->at_worker || t->quit)) {
            r->suspended = false;
            MHD_resume_connection(r->c);
        }
    pthread_mutex_unlock(&t->mu);
}

void mx_srv_transport_stop(mx_srv_transport *t) {
    if (!t) return;
    pthread_mutex_lock(&t->wq_mu);
    t->quit = true; /* workers finish what they hold; callbacks stop suspending */
    pthread_cond_broadcast(&t->wq_cv);
    pthread_mutex_unlock(&t->wq_mu);
    for (int i = 0; i < t->n_workers; i++) pthread_join(t->workers[i], NULL);
    while (t->wq_head) { /* never handled: the connection closes below */
        mx_srv_req *rq = t->wq_head;
        t->wq_head = rq->next;
        mx_srv_drop(rq);
    }
    pthread_mutex_lock(&t->mu);
    pthread_cond_broadcast(&t->quit_cv);
    pthread_mutex_unlock(&t->mu);
    if (t->sweeper_on) pthread_join(t->sweeper, NULL);
    /* MHD may not stop with suspended connections */
    mx_srv_transport_wake_all(t);
    if (t->d) MHD_stop_daemon(t->d);
    for (int i = 0; i < N_BUCKETS; i++)
        while (t->buckets[i]) {
            bucket *b = t->buckets[i];
            t->buckets[i] = b->next;
            free(b);
        }
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->wq_mu);
    pthread_cond_destroy(&t->wq_cv);
    pthread_cond_destroy(&t->quit_cv);
    free(t);
}
