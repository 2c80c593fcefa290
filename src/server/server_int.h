/* Internal to server/: the server state, the transport's request/reply API
 * that routes use, and the route table.
 *
 * Layers: transport.c owns HTTP (libmicrohttpd, body collection, auth,
 * limits, replies, SSE); routes.c maps method + path to a handler; each
 * handler lives in its own file (route_*.c, embed_routes.c) and never sees
 * libmicrohttpd. Generation routes build an mx_gen_params and hand it to
 * gen.c with the reply format of their API family (gen.h). */
#ifndef MX_SERVER_INT_H
#define MX_SERVER_INT_H
#include "server.h"
#include "../runtime/embed.h"
#include "../runtime/scheduler.h"
#include "../runtime/textmodel.h"
#include <jansson.h>
#include <stdatomic.h>
#include <sys/types.h>

typedef struct mx_embed_batcher mx_embed_batcher;
typedef struct mx_srv_grammars mx_srv_grammars;
typedef struct mx_speech_runner mx_speech_runner;
typedef struct mx_resp_store mx_resp_store;

typedef struct server {
    mx_serve_opts o;
    mx_textmodel tm;          /* generation mode */
    mx_textmodel dtm;         /* the draft model (--draft-model; dtm_open) */
    bool dtm_open;
    mx_sched *sched;
    mx_pool *vpool;           /* encodes request images (vision-language models) */
    mx_embed_batcher *emb;    /* embedding / rerank mode */
    mx_speech_runner *speech; /* speech-to-text mode (the /v1/audio routes) */
    char name[256];           /* model id */
    const mx_tokenizer *tok;  /* for /tokenize and /detokenize; may be NULL */
    mx_srv_grammars *grammars; /* structured output: the vocabulary and recent grammars (structured.c) */
    mx_resp_store *responses;  /* stored Responses (resp_store.c); NULL until the first */
    mx_sampling samp;         /* what a request's absent sampling fields take: the options', then
                                 generation_config.json's for those no option gave */
    atomic_bool ready;
    atomic_bool draining;     /* SIGTERM: new requests get 503, those in flight go on */
    atomic_bool stopping;     /* the grace is over: what still runs ends with an error */
    atomic_ullong n_http, n_errors, n_completions;
} server;

/* ---- one HTTP request, as a route sees it (transport.c) ----
 * GET handlers run on the connection's I/O thread and must be quick; POST
 * handlers run on a worker thread. A handler answers with one reply below,
 * or hands the request to something that will (a stream, mx_srv_defer). */
typedef struct mx_srv_req mx_srv_req;

/* Replies. Each returns MX_OK, or MX_ERR when the connection must close.
 * They may be called from any thread; the transport sends the reply from
 * the connection's I/O thread. mx_srv_json takes j. */
int mx_srv_json(mx_srv_req *rq, unsigned code, json_t *j);
int mx_srv_error(server *sv, mx_srv_req *rq, unsigned code, const char *type, const char *msg);
int mx_srv_bad_request(server *sv, mx_srv_req *rq, const char *fmt, ...) MX_PRINTF(3, 4);
/* A text body (takes b's memory). */
int mx_srv_text(mx_srv_req *rq, unsigned code, const char *content_type, mx_buf *b);
/* 503 (the server is busy or shutting down) with a Retry-After. */
int mx_srv_unavailable(server *sv, mx_srv_req *rq, const char *msg);
/* A server-sent-event stream: read fills buf with up to max bytes and
 * returns their count, 0 when it has nothing now (it is called again after
 * mx_srv_wake), or -1 at the end; done frees arg when the stream is over
 * (finished or the client left). read and done run on the I/O thread. */
typedef ssize_t (*mx_srv_read_fn)(void *arg, char *buf, size_t max);
int mx_srv_stream(mx_srv_req *rq, mx_srv_read_fn read, void (*done)(void *arg), void *arg);
/* A reply that comes later: poll runs on the I/O thread after each
 * mx_srv_wake (and about once a second) and returns true once it has
 * replied; done frees arg afterwards, or when the connection ends first. */
int mx_srv_defer(mx_srv_req *rq, bool (*poll)(void *arg, mx_srv_req *rq), void (*done)(void *arg), void *arg);
/* Any thread: the stream or the deferred reply has news. A holder keeps rq
 * valid for mx_srv_wake after the connection has ended. */
void mx_srv_wake(mx_srv_req *rq);
void mx_srv_hold(mx_srv_req *rq);
void mx_srv_drop(mx_srv_req *rq);
/* Bytes of the request body. */
size_t mx_srv_body_len(const mx_srv_req *rq);
/* For MX_RT_RAW_BODY handlers: the body's bytes, moved to the caller (who
 * frees them; the request no longer has them), and its Content-Type (NULL
 * when absent; valid as long as rq). */
mx_buf mx_srv_take_body(mx_srv_req *rq);
const char *mx_srv_content_type(const mx_srv_req *rq);
/* The client closed its side of the connection. */
bool mx_srv_client_gone(mx_srv_req *rq);
/* The request's path, and its method (MX_HTTP_*); for handlers of prefix
 * routes ("/v1/responses/{id}"). */
const char *mx_srv_path(const mx_srv_req *rq);
unsigned mx_srv_method(const mx_srv_req *rq);
/* Tokens the request's log line reports (a generation sets them as it goes). */
void mx_srv_note_tokens(mx_srv_req *rq, int prompt, int completion);

/* ---- routes (routes.c) ---- */
/* A handler; body is the request's JSON object for POST routes, NULL for GET
 * and MX_RT_RAW_BODY routes. */
typedef int mx_route_fn(server *sv, mx_srv_req *rq, json_t *body);
enum { MX_HTTP_GET = 1, MX_HTTP_POST = 2, MX_HTTP_DELETE = 4 };
enum {
    MX_RT_OPEN = 1,       /* answered without the API key and while loading (/health) */
    /* the kind of model the route needs; a server of another kind answers
     * 400 naming its own routes (none of these: any kind) */
    MX_RT_GENERATES = 2,  /* text generation (sv->sched) */
    MX_RT_EMBEDS = 4,     /* embedding / rerank (sv->emb) */
    MX_RT_SPEECH = 8,     /* speech-to-text (sv->speech) */
    MX_RT_RAW_BODY = 16,  /* the body is not JSON: the handler reads it (mx_srv_take_body) */
};
typedef struct {
    const char *paths[4];    /* the path and its aliases; "/a/b/" then a star: every path one segment under /a/b/ */
    unsigned methods;        /* MX_HTTP_GET / MX_HTTP_POST / MX_HTTP_DELETE (GET and DELETE run
                                like GET: on the I/O thread, no body) */
    unsigned flags;
    mx_route_fn *fn;
} mx_http_route;
/* The route whose paths hold url; NULL when none. */
const mx_http_route *mx_route_find(const char *url);

/* ---- a route's own worker thread (jobs.c) ----
 * For work that takes long and is not a generation: the handler fills a
 * job (a struct that starts with mx_srv_job) and submits it; the thread runs
 * queued jobs and wakes their requests, which reply with ops->reply on
 * their I/O thread. On stop, what waits gets 503; a job whose request
 * ended first is freed without reply (and not run when still queued). */
typedef struct mx_srv_job mx_srv_job;
typedef struct {
    void (*reply)(mx_srv_job *j, server *sv, mx_srv_req *rq); /* one reply from the finished job */
    void (*free)(mx_srv_job *j);
} mx_srv_job_ops;
struct mx_srv_job {
    const mx_srv_job_ops *ops;
    /* the queue's */
    mx_srv_req *rq;
    atomic_bool done;
    bool orphaned, stopped;
    mx_srv_job *next;
};
typedef struct mx_srv_jobs mx_srv_jobs;
/* Runs the jobs of list (linked by next) and leaves their results in them. */
typedef void mx_srv_jobs_run_fn(void *ctx, mx_srv_job *list);
/* batch: jobs per run (0: all queued). */
int mx_srv_jobs_new(mx_srv_jobs_run_fn *run, void *ctx, int batch, mx_srv_jobs **out);
/* What is queued gets 503; waits for the run in progress. */
void mx_srv_jobs_stop(mx_srv_jobs *q);
void mx_srv_jobs_free(mx_srv_jobs *q);
/* Queues j (taking it) and defers rq's reply to it. */
int mx_srv_jobs_submit(mx_srv_jobs *q, server *sv, mx_srv_req *rq, mx_srv_job *j);

/* ---- embedding mode (embed_routes.c) ---- */
/* A worker that runs the queued inputs of all waiting requests as one batch. */
int mx_embed_batcher_new(const char *dir, int threads, mx_embed_batcher **out);
/* Stops the worker: what is queued fails ("shutting down"), later
 * submissions get 503; the batcher stays valid until freed. */
void mx_embed_batcher_stop(mx_embed_batcher *b);
void mx_embed_batcher_free(mx_embed_batcher *b);
bool mx_embed_batcher_reranks(const mx_embed_batcher *b);
const mx_tokenizer *mx_embed_batcher_tokenizer(const mx_embed_batcher *b);

/* ---- speech-to-text mode (route_audio.c) ---- */
/* Opens a Whisper folder and starts the thread that runs its transcriptions
 * one at a time. */
int mx_speech_runner_new(const char *dir, int threads, mx_speech_runner **out);
/* What is queued fails ("shutting down"); the transcription running
 * finishes; later submissions get 503. */
void mx_speech_runner_stop(mx_speech_runner *r);
void mx_speech_runner_free(mx_speech_runner *r);
const char *mx_speech_runner_name(const mx_speech_runner *r);
const mx_tokenizer *mx_speech_runner_tokenizer(const mx_speech_runner *r);

/* ---- lifetime (serve.c, transport.c) ---- */
/* Loads sv->o.model_dir: a text-generation model (tm, sched), an
 * embedding / rerank model (emb) or a speech-to-text model (speech); *task
 * says which of the first two. */
int mx_srv_load(server *sv, mx_task *task);
typedef struct mx_srv_transport mx_srv_transport;
/* Listens on o->host:o->port; else prints why and returns the exit code
 * (2: a bad --host, 1: cannot listen). */
int mx_srv_transport_start(server *sv, mx_srv_transport **out);
/* The port it listens on (o->port 0: the one the system chose). */
int mx_srv_transport_port(mx_srv_transport *t);
/* Stops accepting connections (SIGTERM). */
void mx_srv_transport_quiesce(mx_srv_transport *t);
/* Requests accepted and not yet fully answered. */
int mx_srv_transport_inflight(mx_srv_transport *t);
/* Wakes every waiting request (they re-check the server's state). */
void mx_srv_transport_wake_all(mx_srv_transport *t);
/* Closes every connection and waits for the handlers to return. */
void mx_srv_transport_stop(mx_srv_transport *t);
/* Frees structured output's vocabulary and cached grammars (structured.c). */
void mx_srv_grammars_free(server *sv);
#endif
