/* mlxcel serve (also run as mlxcel-server): the OpenAI-compatible server. */
#include "cli.h"
#include "../server/server.h"
#include "../dist/dist.h"
#include "../runtime/textmodel.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_serve_opts s;
    int body_mb;
    int tp, pp; /* a distributed model (src/dist/) */
    mx_sampling samp; /* request defaults */
} serve_opts;

static void serve_init(void *p) {
    serve_opts *o = p;
    mx_serve_opts_defaults(&o->s);
    o->body_mb = 8;
    o->tp = o->pp = 1;
    mx_sampling_defaults(&o->samp); /* OpenAI's defaults: temperature 1, a new seed per request */
    o->samp.temperature = 1.0f;
    o->samp.seed = MX_SEED_RANDOM;
}

#define S(f) offsetof(serve_opts, s.f)
static const mx_opt serve_tab[] = {
    OPT_MODEL(serve_opts, s.model_dir),
    {NULL, "--host", NULL, OPT_STR, "ADDR", 0, 0, S(host), "address to listen on", NULL, 0},
    {NULL, "--port", NULL, OPT_INT, "PORT", 0, 65535, S(port), "port to listen on", NULL, 0},
    {"-np", "--parallel", NULL, OPT_INT, "N", 1, 256, S(parallel), "requests generated at once (slots)", NULL, 0},
    {"-c", "--ctx-size", NULL, OPT_INT, "N", 16, 1 << 22, S(ctx_size), "context size of each slot", NULL, 0},
    {NULL, "--step-tokens", NULL, OPT_INT, "N", 1, 1 << 16, S(step_tokens), "at most N tokens in one forward pass (decode + prompt chunks)", NULL, 0},
    OPT_THREADS(serve_opts, s.threads),
    {NULL, "--tp", NULL, OPT_INT, "T", 1, 4096, offsetof(serve_opts, tp),
     "tensor parallelism over T processes (under mpirun; rank 0 serves HTTP; see Distributed runs)", NULL, 0},
    {NULL, "--pp", NULL, OPT_INT, "P", 1, 4096, offsetof(serve_opts, pp), "pipeline parallelism over P stages (under mpirun)", NULL, 0},
    {NULL, "--api-key", NULL, OPT_STR, "KEY", 0, 0, S(api_key), "require 'Authorization: Bearer KEY'", NULL, 0},
    {NULL, "--max-body-mb", NULL, OPT_INT, "M", 1, 4096, offsetof(serve_opts, body_mb), "refuse request bodies over M MB (413)", NULL, 0},
    OPT_TEMPLATES(serve_opts, s.chat_template, s.chat_template_file),
    {NULL, "--allowed-image-dir", NULL, OPT_STR, "DIR", 0, 0, S(image_dir),
     "chat image parts may name local files (file:// or absolute paths) under DIR; otherwise only data: URLs", NULL, 0},
    /* limits against hostile clients (docs/security.md) */
    {NULL, "--max-conns-per-ip", NULL, OPT_INT, "N", 0, 1 << 20, S(max_conns_per_ip), "open connections per client address (0: no limit)", NULL, 0},
    {NULL, "--rate-limit", NULL, OPT_FLOAT, "R", 0, 1e6, S(rate_limit), "requests per second per client address, in bursts of R (429); 0: off", NULL, 0},
    {NULL, "--max-queue", NULL, OPT_INT, "N", 0, 1 << 20, S(max_queue), "requests waiting beyond the --parallel running ones (503 past it)", NULL, 0},
    {NULL, "--header-timeout", NULL, OPT_FLOAT, "S", 0.1, 3600, S(header_timeout), "seconds for a request's headers to arrive", NULL, 0},
    {NULL, "--body-timeout", NULL, OPT_FLOAT, "S", 0.1, 3600, S(body_timeout), "seconds for a request's body to arrive", NULL, 0},
    {NULL, "--max-messages", NULL, OPT_INT, "N", 1, 1 << 24, S(max_messages), "messages per chat request", NULL, 0},
    {NULL, "--prompt-budget", NULL, OPT_FLOAT, "S", 0.01, 3600, S(prompt_budget), "seconds of template rendering and tokenizing per request", NULL, 0},
    {NULL, "--shutdown-grace", NULL, OPT_FLOAT, "S", 0, 3600, S(shutdown_grace), "seconds requests in flight get after SIGTERM before they are ended", NULL, 0},
    {NULL, "--allow-special-in-content", NULL, OPT_FLAG, NULL, 0, 0, S(allow_special_in_content),
     "read special tokens in message content (unsafe with untrusted clients)", NULL, 0},
    {0},
};
#undef S

static int serve_run(void *p) {
    serve_opts *o = p;
    if (!o->s.model_dir) { fprintf(stderr, "mlxcel serve: -m MODEL is required\n"); return 2; }
    if (o->s.chat_template && o->s.chat_template_file) { fprintf(stderr, "mlxcel serve: give --chat-template or --chat-template-file, not both\n"); return 2; }
    o->s.max_body = (size_t)o->body_mb << 20;
    char *dir = cli_model_dir("serve", o->s.model_dir);
    if (!dir) return 1;
    o->s.model_name = strcmp(dir, o->s.model_dir) ? o->s.model_dir : NULL; /* a hub id is the model's id */
    o->s.model_dir = dir;
    o->s.sampling = &o->samp;
    if (mx_dist_start(o->tp, o->pp, o->s.threads)) {
        if (mx_dist_rank() == 0) fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
        mx_dist_finish();
        free(dir);
        return 2;
    }
    int rc;
    if (mx_dist_rank() != 0) { /* a distributed run: rank 0 serves HTTP and drives, this process serves its part of each pass */
        mx_textmodel tm;
        rc = mx_textmodel_open(dir, &tm) ? 1 : mx_dist_worker(&tm.e.model) ? 1 : 0;
        if (!rc) mx_textmodel_close(&tm);
    } else rc = mx_serve(&o->s);
    mx_dist_finish();
    free(dir);
    return rc;
}

const mx_cmd mx_cmd_serve = {
    .name = "serve",
    .summary = "OpenAI-compatible HTTP server (also: mlxcel-server)",
    .usage = "-m MODEL [options]",
    .details = "Routes and request fields are listed under \"Server API\" below; the sampling options set what a request's "
               "absent sampling fields take (a field the request gives wins). A hub id given to -m is the model's id.",
    .opts = serve_tab,
    .size = sizeof(serve_opts),
    .init = serve_init,
    .samp_off = offsetof(serve_opts, samp),
    .run = serve_run,
    .loads_model = true,
};
