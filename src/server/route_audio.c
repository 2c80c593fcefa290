/* Speech-to-text routes: POST /v1/audio/transcriptions and
 * /v1/audio/translations (OpenAI's multipart/form-data, read and run by
 * audio_api.c). A transcription takes seconds and the model runs one at a
 * time, so requests queue for one runner thread instead of holding the
 * transport's workers; the connection waits suspended and is woken when its
 * transcription is done. On shutdown what still waits fails with 503; the
 * one running finishes (Whisper decoding has no cancellation point). */
#define _GNU_SOURCE /* strdup */
#include "server_int.h"
#include "audio_api.h"
#include "../base/base.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    bool translate;
    char *ctype;
    mx_buf body;
    mx_audio_reply rep;
    atomic_bool done;
    bool orphaned;  /* its request ended first: the runner frees it (under mu) */
    mx_srv_req *rq; /* woken when done (held for that) */
    struct job *next;
} job;

struct mx_speech_runner {
    mx_speech *sp;
    pthread_t th;
    bool started, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
};

static void job_free(job *j) {
    free(j->ctype);
    mx_buf_free(&j->body);
    mx_buf_free(&j->rep.body);
    free(j);
}

/* Under mu: the job is over; its request replies (and frees it), or it is
 * freed here when the request has ended. */
static void job_done(job *j) {
    mx_srv_req *rq = j->rq;
    if (j->orphaned) job_free(j);
    else {
        atomic_store(&j->done, true);
        mx_srv_wake(rq);
    }
    mx_srv_drop(rq);
}

static void *runner_main(void *arg) {
    mx_speech_runner *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->quit) { /* shutting down: what still waits fails */
            while (r->head) {
                job *j = r->head;
                r->head = j->next;
                j->rep = (mx_audio_reply){.code = 503};
                snprintf(j->rep.err, sizeof j->rep.err, "the server is shutting down");
                job_done(j);
            }
            break;
        }
        if (!r->head) { pthread_cond_wait(&r->cv, &r->mu); continue; }
        job *j = r->head;
        r->head = j->next;
        if (!r->head) r->tail = NULL;
        bool gone = j->orphaned;
        pthread_mutex_unlock(&r->mu);
        if (!gone) mx_audio_api(r->sp, j->translate, j->ctype, j->body.data ? j->body.data : "", j->body.len, &j->rep);
        pthread_mutex_lock(&r->mu);
        job_done(j);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int mx_speech_runner_new(const char *dir, int threads, mx_speech_runner **out) {
    mx_speech_runner *r = mx_calloc(1, sizeof *r);
    if (!r) return MX_ERR;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (mx_speech_open(dir, threads, &r->sp)) { mx_speech_runner_free(r); return MX_ERR; }
    if (pthread_create(&r->th, NULL, runner_main, r)) { mx_set_err("cannot start the speech-to-text runner"); mx_speech_runner_free(r); return MX_ERR; }
    r->started = true;
    *out = r;
    return MX_OK;
}

void mx_speech_runner_stop(mx_speech_runner *r) {
    if (!r || !r->started) return;
    pthread_mutex_lock(&r->mu);
    r->quit = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    r->started = false;
}

void mx_speech_runner_free(mx_speech_runner *r) {
    if (!r) return;
    mx_speech_runner_stop(r);
    mx_speech_close(r->sp);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

const char *mx_speech_runner_name(const mx_speech_runner *r) { return mx_speech_name(r->sp); }
const mx_tokenizer *mx_speech_runner_tokenizer(const mx_speech_runner *r) { return mx_speech_tokenizer(r->sp); }

typedef struct {
    server *sv;
    job *j;
} pending;

static bool pending_poll(void *arg, mx_srv_req *rq) {
    pending *p = arg;
    job *j = p->j;
    if (!atomic_load(&j->done)) return false;
    if (j->rep.code == 200) mx_srv_text(rq, 200, j->rep.content_type, &j->rep.body);
    else if (j->rep.code == 400) mx_srv_bad_request(p->sv, rq, "%s", j->rep.err);
    else if (j->rep.code == 503) mx_srv_unavailable(p->sv, rq, j->rep.err);
    else mx_srv_error(p->sv, rq, j->rep.code, "server_error", j->rep.err);
    return true;
}

static void pending_free(void *arg) {
    pending *p = arg;
    mx_speech_runner *r = p->sv->speech;
    pthread_mutex_lock(&r->mu);
    if (atomic_load(&p->j->done)) job_free(p->j);
    else p->j->orphaned = true; /* queued or running: the runner frees it */
    pthread_mutex_unlock(&r->mu);
    free(p);
}

static int audio_route(server *sv, mx_srv_req *rq, bool translate) {
    mx_speech_runner *r = sv->speech; /* the route table's MX_RT_SPEECH */
    job *j = calloc(1, sizeof *j);
    pending *p = calloc(1, sizeof *p);
    const char *ct = mx_srv_content_type(rq);
    if (!j || !p || (ct && !(j->ctype = strdup(ct)))) {
        free(p);
        if (j) job_free(j);
        return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    }
    j->translate = translate;
    j->body = mx_srv_take_body(rq);
    j->rq = rq;
    *p = (pending){sv, j};
    mx_srv_hold(rq);
    pthread_mutex_lock(&r->mu);
    bool quit = r->quit;
    if (!quit) {
        if (r->tail) r->tail->next = j;
        else r->head = j;
        r->tail = j;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    if (quit) {
        mx_srv_drop(rq);
        job_free(j);
        free(p);
        return mx_srv_unavailable(sv, rq, "the server is shutting down");
    }
    return mx_srv_defer(rq, pending_poll, pending_free, p);
}

int mx_route_transcriptions(server *sv, mx_srv_req *rq, json_t *body) {
    (void)body;
    return audio_route(sv, rq, false);
}

int mx_route_translations(server *sv, mx_srv_req *rq, json_t *body) {
    (void)body;
    return audio_route(sv, rq, true);
}
