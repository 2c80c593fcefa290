/* mx_serve: the server's lifetime — start listening (so /health answers
 * while the model loads), load the model, serve until SIGINT/SIGTERM, then
 * shut down. */
#define _GNU_SOURCE
#include "server_int.h"
#include "../base/base.h"
#include "../base/threadpool.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mx_serve_opts_defaults(mx_serve_opts *o) {
    *o = (mx_serve_opts){.host = "127.0.0.1", .port = 8080, .parallel = 4, .ctx_size = 4096, .step_tokens = 256, .threads = mx_default_threads(),
                         .max_body = 8u << 20, .max_conns_per_ip = 64, .max_queue = 64, .header_timeout = 10, .body_timeout = 60,
                         .shutdown_grace = 10, .max_messages = 2048, .prompt_budget = 2};
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
    mx_srv_transport *tr = NULL;
    int rc = mx_srv_transport_start(&sv, &tr);
    if (rc) return rc;
    fprintf(stderr, "mlxcel serve: listening on http://%s:%d, loading %s\n", o->host, o->port, o->model_dir);
    mx_task task = MX_TASK_CAUSAL_LM;
    {
        mx_ckpt probe;
        if (mx_ckpt_open(o->model_dir, false, &probe)) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            mx_srv_transport_stop(tr);
            return 1;
        }
        json_t *archs = mx_cfg_get(&probe.cfg, "architectures");
        if (json_is_string(json_array_get(archs, 0))) task = mx_task_from_arch(json_string_value(json_array_get(archs, 0)));
        mx_ckpt_close(&probe);
    }
    if (task == MX_TASK_CAUSAL_LM) {
        if (mx_textmodel_open(o->model_dir, &sv.tm) ||
            ((o->chat_template || o->chat_template_file) && mx_textmodel_set_template(&sv.tm, o->chat_template, o->chat_template_file)) ||
            !(sv.sched = mx_sched_new(&sv.tm.e, o->parallel, o->ctx_size, o->step_tokens, o->threads))) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            mx_srv_transport_stop(tr);
            mx_textmodel_close(&sv.tm);
            return 1;
        }
        snprintf(sv.name, sizeof sv.name, "%s", o->model_name ? o->model_name : sv.tm.name);
        sv.tok = sv.tm.tok;
        if (sv.tok) mx_textmodel_warn_plain(&sv.tm, "mlxcel serve");
    } else {
        if (mx_embed_batcher_new(o->model_dir, o->threads, &sv.emb)) {
            fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
            mx_srv_transport_stop(tr);
            return 1;
        }
        if (o->model_name) snprintf(sv.name, sizeof sv.name, "%s", o->model_name);
        else mx_model_dir_name(o->model_dir, sv.name, sizeof sv.name);
        sv.tok = mx_embed_batcher_tokenizer(sv.emb);
    }
    atomic_store(&sv.ready, true);
    if (sv.sched) fprintf(stderr, "mlxcel serve: ready (model '%s', %d slots of %d tokens)\n", sv.name, o->parallel, o->ctx_size);
    else fprintf(stderr, "mlxcel serve: ready (embedding model '%s')\n", sv.name);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "mlxcel serve: signal %d, shutting down\n", sig);
    atomic_store(&sv.ready, false);
    /* finish what is running as cancelled so blocked handlers return, stop
     * listening (waits for the handlers), then free the engine */
    if (sv.sched) mx_sched_stop(sv.sched);
    mx_srv_transport_stop(tr);
    mx_sched_free(sv.sched);
    sv.sched = NULL;
    mx_embed_batcher_free(sv.emb);
    sv.emb = NULL;
    if (task == MX_TASK_CAUSAL_LM) mx_textmodel_close(&sv.tm);
    return 0;
}
