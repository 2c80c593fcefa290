/* A route's own worker thread for work that takes long and is not a
 * generation (embedding batches, transcriptions): handlers queue a job and
 * defer their reply; the thread runs what is queued and wakes each request,
 * whose I/O thread then replies from the job. A job whose request ended
 * first is freed here instead (and not run, when still queued). */
#include "server_int.h"
#include "../base/base.h"
#include <pthread.h>
#include <stdlib.h>

struct mx_srv_jobs {
    mx_srv_jobs_run_fn *run;
    void *ctx;
    int batch;          /* jobs per run; 0: all queued */
    pthread_t th;
    bool started, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mx_srv_job *head, *tail;
};

/* Under mu: the job is over; its request replies (then frees it), or it is
 * freed here when the request has ended. */
static void job_done(mx_srv_job *j) {
    mx_srv_req *rq = j->rq;
    if (j->orphaned) j->ops->free(j);
    else {
        atomic_store(&j->done, true);
        mx_srv_wake(rq);
    }
    mx_srv_drop(rq);
}

static void *jobs_main(void *arg) {
    mx_srv_jobs *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->quit) { /* shutting down: what still waits fails */
            while (q->head) {
                mx_srv_job *j = q->head;
                q->head = j->next;
                j->stopped = true;
                job_done(j);
            }
            break;
        }
        if (!q->head) { pthread_cond_wait(&q->cv, &q->mu); continue; }
        /* take up to batch jobs; those whose request has gone are dropped */
        mx_srv_job *list = NULL, **tail = &list;
        for (int n = 0; q->head && (!q->batch || n < q->batch);) {
            mx_srv_job *j = q->head;
            q->head = j->next;
            j->next = NULL;
            if (j->orphaned) { job_done(j); continue; }
            *tail = j;
            tail = &j->next;
            n++;
        }
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        if (list) q->run(q->ctx, list);
        pthread_mutex_lock(&q->mu);
        for (mx_srv_job *j = list, *nx; j; j = nx) {
            nx = j->next;
            job_done(j);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int mx_srv_jobs_new(mx_srv_jobs_run_fn *run, void *ctx, int batch, mx_srv_jobs **out) {
    mx_srv_jobs *q = mx_calloc(1, sizeof *q);
    if (!q) return MX_ERR;
    *q = (mx_srv_jobs){.run = run, .ctx = ctx, .batch = batch};
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (pthread_create(&q->th, NULL, jobs_main, q)) {
        mx_srv_jobs_free(q);
        return mx_set_err("cannot start a worker thread");
    }
    q->started = true;
    *out = q;
    return MX_OK;
}

void mx_srv_jobs_stop(mx_srv_jobs *q) {
    if (!q || !q->started) return;
    pthread_mutex_lock(&q->mu);
    q->quit = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    q->started = false;
}

void mx_srv_jobs_free(mx_srv_jobs *q) {
    if (!q) return;
    mx_srv_jobs_stop(q);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

typedef struct {
    server *sv;
    mx_srv_jobs *q;
    mx_srv_job *j;
} pending;

static bool pending_poll(void *arg, mx_srv_req *rq) {
    pending *p = arg;
    if (!atomic_load(&p->j->done)) return false;
    if (p->j->stopped) mx_srv_unavailable(p->sv, rq, "the server is shutting down");
    else p->j->ops->reply(p->j, p->sv, rq);
    return true;
}

static void pending_free(void *arg) {
    pending *p = arg;
    pthread_mutex_lock(&p->q->mu);
    if (atomic_load(&p->j->done)) p->j->ops->free(p->j);
    else p->j->orphaned = true; /* queued or running: the thread frees it */
    pthread_mutex_unlock(&p->q->mu);
    free(p);
}

int mx_srv_jobs_submit(mx_srv_jobs *q, server *sv, mx_srv_req *rq, mx_srv_job *j) {
    pending *p = malloc(sizeof *p);
    if (!p) {
        j->ops->free(j);
        return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    }
    *p = (pending){sv, q, j};
    j->rq = rq;
    mx_srv_hold(rq); /* for the wake-up */
    pthread_mutex_lock(&q->mu);
    bool quit = q->quit;
    if (!quit) {
        if (q->tail) q->tail->next = j;
        else q->head = j;
        q->tail = j;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    if (quit) {
        mx_srv_drop(rq);
        j->ops->free(j);
        free(p);
        return mx_srv_unavailable(sv, rq, "the server is shutting down");
    }
    return mx_srv_defer(rq, pending_poll, pending_free, p);
}
