/* server: the OpenAI-compatible HTTP server (libmicrohttpd) in front of the
 * continuous-batching scheduler or the embedding batcher. The routes are
 * listed in routes.c. Stops cleanly on SIGINT/SIGTERM. */
#ifndef MX_SERVER_H
#define MX_SERVER_H
#include "../runtime/sampler.h"
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *model_dir;
    const char *host;
    int port;
    int parallel;      /* concurrent sequences */
    int ctx_size;      /* positions per sequence */
    int step_tokens;   /* tokens per forward step (prefill chunk budget) */
    int threads;
    int lookup_ngram, draft_max; /* speculation by prompt lookup (mx_sched_set_spec; lookup_ngram 0: off) */
    const char *draft_dir;       /* or by a draft model (mx_sched_set_draft; NULL: none) */
    size_t kv_memory;            /* bytes the slots' caches may take (mx_sched_set_kv_budget; 0: no bound) */
    int state_snapshots, snapshot_every; /* recurrent-state snapshots per slot and their stride (mx_sched_set_snapshots) */
    int64_t cache_ram;           /* bytes of the prompt cache (mx_sched_set_prompt_cache; -1: no bound, 0: off) */
    const char *api_key;
    size_t max_body;   /* bytes */
    const char *chat_template, *chat_template_file; /* override the model's (built-in name / Jinja file) */
    const mx_sampling *sampling; /* what a request's absent sampling fields take; NULL: temperature 1,
                                    the rest off, a new seed per request */
    const char *model_name;      /* the model id the API reports; NULL: the folder's name */
    const char *const *aliases;  /* --alias: the first is the id the API reports (over model_name); all are listed */
    int n_aliases;
    const char *image_dir;       /* chat image parts may name local files only under this folder;
                                    NULL: data URLs only */
    /* limits against hostile clients (docs/security.md) */
    int max_conns_per_ip;      /* open connections per client address; 0: no limit */
    float rate_limit;          /* requests per second per client address (burst of as many); 0: none */
    int max_queue;             /* requests waiting beyond the busy slots before 503 + Retry-After */
    float header_timeout;      /* seconds for a request's headers to arrive */
    float body_timeout;        /* seconds for its body */
    float shutdown_grace;      /* seconds requests in flight get after SIGTERM */
    int max_messages;          /* chat messages per request */
    float prompt_budget;       /* seconds of rendering and tokenizing per request */
    const char *cors;          /* Access-Control-Allow-Origin on every reply and OPTIONS preflights; NULL: off */
    bool no_request_log;       /* no line per request on stderr */
    bool allow_special_in_content; /* read special tokens in message content (the old, unsafe way) */
} mx_serve_opts;

/* The defaults of the fields above (cmd_serve starts from them). */
void mx_serve_opts_defaults(mx_serve_opts *o);

/* Serves until SIGINT or SIGTERM; returns the process exit code. */
int mx_serve(const mx_serve_opts *o);
#endif
