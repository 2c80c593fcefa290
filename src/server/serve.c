/* mx_serve: the server's lifetime — start listening (so /health answers
 * while the model loads), load the model, serve until SIGINT/SIGTERM, then
 * drain: stop accepting, let requests in flight finish for
 * --shutdown-grace seconds, end the rest with an explicit error, exit.
 * A signal while the model loads exits at once; a second signal during
 * the grace ends it. */
#define _GNU_SOURCE
#include "server_int.h"
#include "resp_store.h"
#include "../base/base.h"
#include "../base/threadpool.h"
#include "../runtime/sampling_opts.h"
#include "../runtime/spec.h"
#include "../runtime/speech.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void mx_serve_opts_defaults(mx_serve_opts *o) {
    *o = (mx_serve_opts){.host = "127.0.0.1", .port = 8080, .parallel = 4, .ctx_size = 4096, .step_tokens = 256, .threads = mx_default_threads(),
                         .draft_max = 4, .max_body = 8u << 20, .max_conns_per_ip = 64, .max_queue = 64, .header_timeout = 10, .body_timeout = 60,
                         .shutdown_grace = 10, .max_messages = 2048, .prompt_budget = 2, .state_snapshots = 3, .snapshot_every = 256,
                         .cache_ram = (int64_t)8192 << 20};
}

/* Signals: a thread of their own (they are blocked everywhere else). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool serving;   /* the model is loaded */
    int signals;    /* received while serving */
    sigset_t set;
} g_sig = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, {{0}}};

static void *signal_main(void *arg) {
    (void)arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&g_sig.set, &sig)) continue;
        pthread_mutex_lock(&g_sig.mu);
        if (!g_sig.serving) {
            fprintf(stderr, "mlxcel serve: signal %d while loading the model, exiting\n", sig);
            _exit(0);
        }
        g_sig.signals++;
        pthread_cond_broadcast(&g_sig.cv);
        pthread_mutex_unlock(&g_sig.mu);
    }
    return NULL;
}

/* Waits until n signals have come or until deadline (mx_now(); 0 = none). */
static bool wait_signals(int n, double deadline) {
    pthread_mutex_lock(&g_sig.mu);
    while (g_sig.signals < n) {
        if (!deadline) { pthread_cond_wait(&g_sig.cv, &g_sig.mu); continue; }
        double left = deadline - mx_now();
        if (left <= 0) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        left = MX_MIN(left, 0.02);
        ts.tv_nsec += (long)(left * 1e9);
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&g_sig.cv, &g_sig.mu, &ts);
        break; /* callers poll */
    }
    bool got = g_sig.signals >= n;
    pthread_mutex_unlock(&g_sig.mu);
    return got;
}

int mx_srv_load(server *sv, mx_task *task) {
    const mx_serve_opts *o = &sv->o;
    *task = MX_TASK_CAUSAL_LM;
    if (mx_speech_folder(o->model_dir)) {
        if (mx_speech_runner_new(o->model_dir, o->threads, &sv->speech)) return MX_ERR;
        snprintf(sv->name, sizeof sv->name, "%s", o->model_name ? o->model_name : mx_speech_runner_name(sv->speech));
        sv->tok = mx_speech_runner_tokenizer(sv->speech);
        return MX_OK;
    }
    mx_ckpt probe;
    if (mx_ckpt_open(o->model_dir, false, &probe)) return MX_ERR;
    json_t *archs = mx_cfg_get(&probe.cfg, "architectures");
    if (json_is_string(json_array_get(archs, 0))) *task = mx_task_from_arch(json_string_value(json_array_get(archs, 0)));
    mx_ckpt_close(&probe);
    if (*task != MX_TASK_CAUSAL_LM) {
        if (mx_embed_batcher_new(o->model_dir, o->threads, &sv->emb)) return MX_ERR;
        if (o->model_name) snprintf(sv->name, sizeof sv->name, "%s", o->model_name);
        else mx_model_dir_name(o->model_dir, sv->name, sizeof sv->name);
        sv->tok = mx_embed_batcher_tokenizer(sv->emb);
        return MX_OK;
    }
    if (mx_textmodel_open(o->model_dir, &sv->tm)) return MX_ERR;
    if (sv->tm.e.model.arch.mtp.on)
        return mx_set_err("%s is a next-n module (split-mtp): it drafts for its target (--draft-model), it does not generate alone", o->model_dir);
    if (((o->chat_template || o->chat_template_file) && mx_textmodel_set_template(&sv->tm, o->chat_template, o->chat_template_file)) ||
        !(sv->sched = mx_sched_new(&sv->tm.e, o->parallel, o->ctx_size, o->step_tokens, o->threads)) ||
        (o->lookup_ngram && mx_sched_set_spec(sv->sched, o->draft_max, o->lookup_ngram)))
        return MX_ERR;
    if (o->draft_dir) {
        if (mx_textmodel_open_local(o->draft_dir, &sv->dtm)) { /* whole, on rank 0 alone in a distributed run */
            char e[512];
            snprintf(e, sizeof e, "%s", mx_errmsg());
            return mx_set_err("draft model: %s", e);
        }
        sv->dtm_open = true;
        if (mx_spec_check_vocab(&sv->tm, &sv->dtm) || mx_sched_set_draft(sv->sched, &sv->dtm.e, o->draft_max)) return MX_ERR;
    }
    if (o->kv_memory) mx_sched_set_kv_budget(sv->sched, o->kv_memory);
    if (mx_sched_set_snapshots(sv->sched, o->state_snapshots, o->snapshot_every) || mx_sched_set_prompt_cache(sv->sched, o->cache_ram)) return MX_ERR;
    snprintf(sv->name, sizeof sv->name, "%s", o->model_name ? o->model_name : sv->tm.name);
    sv->tok = sv->tm.tok;
    /* request defaults: the options (OpenAI's temperature 1 when none), then the model's generation_config.json */
    if (o->sampling) sv->samp = *o->sampling;
    else {
        mx_sampling_defaults(&sv->samp);
        sv->samp.temperature = 1.0f;
        sv->samp.seed = MX_SEED_RANDOM;
    }
    char what[256];
    if (mx_sampling_gencfg(&sv->samp, o->model_dir, what, sizeof what)) return MX_ERR;
    if (*what) fprintf(stderr, "mlxcel serve: sampling defaults from generation_config.json: %s\n", what);
    if (sv->tm.e.vision && !(sv->vpool = mx_pool_new(o->threads))) return MX_ERR;
    if (sv->tok) mx_textmodel_warn_plain(&sv->tm, "mlxcel serve");
    return MX_OK;
}

/* Waits until no request is in flight, or deadline, or another signal. */
static bool drained(mx_srv_transport *tr, double deadline, int signals) {
    while (mx_srv_transport_inflight(tr) > 0) {
        if (mx_now() >= deadline || wait_signals(signals, deadline)) return false;
    }
    return true;
}

int mx_serve(const mx_serve_opts *o) {
    static server sv;
    memset(&sv, 0, sizeof sv);
    sv.o = *o;
    srand((unsigned)time(NULL));
    sigemptyset(&g_sig.set);
    sigaddset(&g_sig.set, SIGINT);
    sigaddset(&g_sig.set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &g_sig.set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t sig_th;
    if (pthread_create(&sig_th, NULL, signal_main, NULL)) { fprintf(stderr, "mlxcel serve: cannot start the signal thread\n"); return 1; }
    pthread_detach(sig_th);
    mx_srv_transport *tr = NULL;
    int rc = mx_srv_transport_start(&sv, &tr);
    if (rc) return rc;
    /* the bound port: --port 0 lets the system choose one */
    fprintf(stderr, "mlxcel serve: listening on http://%s:%d, loading %s\n", o->host, mx_srv_transport_port(tr), o->model_dir);
    mx_task task;
    if (mx_srv_load(&sv, &task)) {
        fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
        mx_srv_transport_stop(tr);
        mx_embed_batcher_free(sv.emb);
        mx_speech_runner_free(sv.speech);
        mx_sched_free(sv.sched);
        mx_pool_free(sv.vpool);
        mx_textmodel_close(&sv.tm);
        if (sv.dtm_open) mx_textmodel_close(&sv.dtm);
        return 1;
    }
    pthread_mutex_lock(&g_sig.mu);
    g_sig.serving = true;
    pthread_mutex_unlock(&g_sig.mu);
    atomic_store(&sv.ready, true);
    if (sv.speech) fprintf(stderr, "mlxcel serve: ready (speech-to-text model '%s')\n", sv.name);
    else if (sv.sched) {
        const mx_model *m = &sv.tm.e.model;
        bool unused = (m->kp.kv_type[0] != MX_KV_F32 || m->kp.kv_type[1] != MX_KV_F32) && !mx_model_has_kv_rows(m);
        char spec[320] = "";
        if (o->lookup_ngram) snprintf(spec, sizeof spec, "; speculation: prompt lookup of %d..1 tokens, up to %d drafts", o->lookup_ngram, o->draft_max);
        if (sv.dtm_open)
            snprintf(spec, sizeof spec, "; speculation: %s '%s', up to %d drafts", sv.dtm.e.model.arch.mtp.on ? "next-n module" : "draft model", sv.dtm.name,
                     o->draft_max);
        char bound[320] = "";
        size_t snap = mx_sched_snapshot_bytes(sv.sched);
        if (o->kv_memory) snprintf(bound, sizeof bound, ", at most %.1f MiB in use (--kv-memory)", o->kv_memory / 1048576.0);
        if (snap)
            snprintf(bound + strlen(bound), sizeof bound - strlen(bound), "; up to %d state snapshots of %.1f MiB per slot, every %d prompt tokens",
                     o->state_snapshots, snap / 1048576.0, o->snapshot_every);
        if (o->cache_ram && !m->shard)
            snprintf(bound + strlen(bound), sizeof bound - strlen(bound), o->cache_ram > 0 ? "; prompt cache up to %.0f MiB" : "; prompt cache unbounded",
                     o->cache_ram / 1048576.0);
        fprintf(stderr, "mlxcel serve: ready (model '%s', %d slots of %d tokens; KV cache %.1f MiB reserved, taken as written%s: %s keys, %s values%s%s)\n",
                sv.name, o->parallel, o->ctx_size, mx_sched_kv_bytes(sv.sched) / 1048576.0, bound, mx_kv_type_name(m->kp.kv_type[0]),
                mx_kv_type_name(m->kp.kv_type[1]), unused ? "; no layer keeps a cache these types apply to: ignored" : "", spec);
        /* the caches take memory as they fill: full slots past the machine's memory are a later OOM, not a start error */
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (!o->kv_memory && ram > 0 && (double)mx_sched_kv_bytes(sv.sched) > ram)
            fprintf(stderr, "mlxcel serve: warning: full slots would take %.1f GiB of KV cache, more than this machine's %.1f GiB of memory; "
                            "--kv-memory SIZE bounds it (requests then wait for room)\n",
                    mx_sched_kv_bytes(sv.sched) / 1073741824.0, ram / 1073741824.0);
    }
    else {
        mx_kpolicy kp = mx_kpolicy_default();
        fprintf(stderr, "mlxcel serve: ready (embedding model '%s'%s)\n", sv.name,
                kp.kv_type[0] != MX_KV_F32 || kp.kv_type[1] != MX_KV_F32 ? "; an encoder's per-pass state stays f32: the cache types are ignored" : "");
    }
    wait_signals(1, 0);
    /* drain: no new connections, new requests on open ones get 503 */
    atomic_store(&sv.draining, true);
    atomic_store(&sv.ready, false);
    mx_srv_transport_quiesce(tr);
    int n = mx_srv_transport_inflight(tr);
    fprintf(stderr, "mlxcel serve: shutting down (%d request%s in flight, %.0f s grace)\n", n, n == 1 ? "" : "s", o->shutdown_grace);
    if (!drained(tr, mx_now() + o->shutdown_grace, 2)) {
        /* the rest end with an explicit error: cancelled generations, failed batches */
        fprintf(stderr, "mlxcel serve: ending %d request%s\n", mx_srv_transport_inflight(tr), mx_srv_transport_inflight(tr) == 1 ? "" : "s");
        atomic_store(&sv.stopping, true);
        if (sv.sched) mx_sched_stop(sv.sched);
        mx_embed_batcher_stop(sv.emb);
        mx_speech_runner_stop(sv.speech); /* after the transcription running now */
        mx_srv_transport_wake_all(tr);
        drained(tr, mx_now() + 2.0, 1 << 30); /* their replies go out */
    }
    mx_srv_transport_stop(tr);
    mx_sched_free(sv.sched);
    sv.sched = NULL;
    mx_srv_grammars_free(&sv);
    mx_resp_store_free(&sv);
    mx_embed_batcher_free(sv.emb);
    sv.emb = NULL;
    mx_speech_runner_free(sv.speech);
    sv.speech = NULL;
    mx_pool_free(sv.vpool);
    sv.vpool = NULL;
    if (task == MX_TASK_CAUSAL_LM) mx_textmodel_close(&sv.tm);
    if (sv.dtm_open) mx_textmodel_close(&sv.dtm);
    return 0;
}
