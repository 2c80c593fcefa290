/* server: the OpenAI-compatible HTTP server (libmicrohttpd, one thread per
 * connection) in front of the continuous-batching scheduler. Routes:
 * POST /v1/chat/completions (image_url parts for vision-language models),
 * /v1/completions, /tokenize, /detokenize;
 * GET /v1/models, /health, /metrics. Stops cleanly on SIGINT/SIGTERM. */
#ifndef MX_SERVER_H
#define MX_SERVER_H
#include "../runtime/sampler.h"
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
    const mx_sampling *sampling; /* what a request's absent sampling fields take; NULL: temperature 1,
                                    the rest off, a new seed per request */
    const char *model_name;      /* the model id the API reports; NULL: the folder's name */
    const char *image_dir;       /* chat image parts may name local files only under this folder;
                                    NULL: data URLs only */
} mx_serve_opts;

/* Serves until SIGINT or SIGTERM; returns the process exit code. */
int mx_serve(const mx_serve_opts *o);
#endif
