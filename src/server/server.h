/* server: the OpenAI-compatible HTTP server (libmicrohttpd, one thread per
 * connection) in front of the continuous-batching scheduler. Routes:
 * POST /v1/chat/completions, /v1/completions, /tokenize, /detokenize;
 * GET /v1/models, /health, /metrics. Stops cleanly on SIGINT/SIGTERM. */
#ifndef MX_SERVER_H
#define MX_SERVER_H
#include <stddef.h>

typedef struct {
    const char *model_dir;
    const char *host;
    int port;
    int parallel;      /* concurrent sequences */
    int ctx_size;      /* positions per sequence */
    int step_tokens;   /* tokens per forward step (prefill chunk budget) */
    int threads;
    const char *api_key;
    size_t max_body;   /* bytes */
    const char *chat_template, *chat_template_file; /* override the model's (built-in name / Jinja file) */
} mx_serve_opts;

/* Serves until SIGINT or SIGTERM; returns the process exit code. */
int mx_serve(const mx_serve_opts *o);
#endif
