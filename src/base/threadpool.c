#define _GNU_SOURCE
#include "threadpool.h"
#include "base.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mx_pool {
    int n;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;      /* bumped for every job */
    atomic_int next;      /* next task index */
    atomic_int active;    /* workers inside the current job */
    atomic_bool quit;
    bool open;            /* a job accepts participants (under mu) */
    mx_task_fn fn;
    void *ctx;
    int n_tasks;
    bool ahead;
};

/* The running task's successor on this thread (mx_pool_next_task). */
typedef struct { mx_task_fn fn; void *ctx; int next; } next_task;
static _Thread_local next_task tl_next = {NULL, NULL, -1};

typedef struct { mx_pool *p; int tid; } worker_arg;

static void run_tasks(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks, bool ahead, int tid) {
    if (!ahead) {
        for (;;) {
            int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
            if (i >= n_tasks) break;
            fn(ctx, i, tid);
        }
        return;
    }
    next_task saved = tl_next;
    tl_next.fn = fn;
    tl_next.ctx = ctx;
    int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    while (i < n_tasks) {
        int j = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        tl_next.next = j < n_tasks ? j : -1;
        fn(ctx, i, tid);
        i = j;
    }
    tl_next = saved;
}

/* A worker joins a job under the mutex and only while it is open, so the
 * caller never waits for a worker that is descheduled or asleep (on a loaded
 * machine that wait would cost a scheduler time slice per matmul). */
static void *worker(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    mx_pool *p = wa.p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !atomic_load(&p->quit)) {
            if (++spins < 20000) {
#if defined(__x86_64__)
                __builtin_ia32_pause();
#endif
                continue;
            }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = g;
        pthread_mutex_lock(&p->mu);
        bool join = p->open && atomic_load(&p->gen) == g;
        mx_task_fn fn = p->fn;
        void *ctx = p->ctx;
        int n = p->n_tasks;
        bool ahead = p->ahead;
        if (join) atomic_fetch_add(&p->active, 1);
        pthread_mutex_unlock(&p->mu);
        if (!join) continue;
        run_tasks(p, fn, ctx, n, ahead, wa.tid);
        atomic_fetch_sub_explicit(&p->active, 1, memory_order_acq_rel);
    }
    return NULL;
}

mx_pool *mx_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 512) n_threads = 512;
    mx_pool *p = mx_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = mx_calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->th) { free(p); return NULL; }
    for (int t = 1; t < n_threads; t++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) { p->n = t; break; }
        wa->p = p;
        wa->tid = t;
        if (pthread_create(&p->th[t], NULL, worker, wa) != 0) { free(wa); p->n = t; break; }
    }
    return p;
}

void mx_pool_free(mx_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n; t++) pthread_join(p->th[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p);
}

int mx_pool_size(const mx_pool *p) { return p ? p->n : 1; }

static void pool_run(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks, bool ahead) {
    if (n_tasks <= 0) return;
    if (!p || p->n == 1 || n_tasks == 1) {
        next_task saved = tl_next;
        for (int i = 0; i < n_tasks; i++) {
            if (ahead) tl_next = (next_task){fn, ctx, i + 1 < n_tasks ? i + 1 : -1};
            fn(ctx, i, 0);
        }
        tl_next = saved;
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    p->ahead = ahead;
    atomic_store(&p->next, 0);
    p->open = true;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, fn, ctx, n_tasks, ahead, 0);
    /* close the job once no worker is inside it; late workers then skip it */
    for (;;) {
        if (atomic_load_explicit(&p->active, memory_order_acquire) == 0) {
            pthread_mutex_lock(&p->mu);
            if (atomic_load(&p->active) == 0) {
                p->open = false;
                pthread_mutex_unlock(&p->mu);
                break;
            }
            pthread_mutex_unlock(&p->mu);
        }
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
}

void mx_pool_run(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks) { pool_run(p, fn, ctx, n_tasks, false); }
void mx_pool_run_ahead(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks) { pool_run(p, fn, ctx, n_tasks, true); }

typedef struct { const mx_task_set *s; int first[MX_POOL_SETS + 1], count; } pool_sets;

static int set_of(const pool_sets *m, int i) {
    int k = 0;
    while (k + 1 < m->count && i >= m->first[k + 1]) k++;
    return k;
}

static void sets_task(void *ctx, int i, int tid) {
    const pool_sets *m = ctx;
    int k = set_of(m, i);
    m->s[k].fn(m->s[k].ctx, i - m->first[k], tid);
}

int mx_pool_next_task(mx_task_fn *fn, void **ctx) {
    int i = tl_next.next;
    if (i < 0 || !tl_next.fn) return -1;
    *fn = tl_next.fn;
    *ctx = tl_next.ctx;
    if (tl_next.fn == sets_task) {
        const pool_sets *m = tl_next.ctx;
        int k = set_of(m, i);
        *fn = m->s[k].fn;
        *ctx = m->s[k].ctx;
        i -= m->first[k];
    }
    return i;
}

void mx_pool_run_sets(mx_pool *p, const mx_task_set *sets, int count, bool ahead) {
    for (int b = 0; b < count; b += MX_POOL_SETS) {
        pool_sets m = {sets + b, {0}, MX_MIN(MX_POOL_SETS, count - b)};
        for (int k = 0; k < m.count; k++) m.first[k + 1] = m.first[k] + MX_MAX(0, sets[b + k].n);
        pool_run(p, sets_task, &m, m.first[m.count], ahead);
    }
}

int mx_default_threads(void) {
    long logical = sysconf(_SC_NPROCESSORS_ONLN);
    if (logical < 1) logical = 1;
    /* Count distinct (package, core) pairs; fall back to logical count. */
    int cores = 0;
    char seen[4096];
    memset(seen, 0, sizeof seen);
    for (long c = 0; c < logical && c < 4096; c++) {
        char path[128];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/thread_siblings_list", c);
        FILE *f = fopen(path, "r");
        if (!f) return (int)logical;
        int first = -1;
        if (fscanf(f, "%d", &first) != 1) first = (int)c;
        fclose(f);
        if (first >= 0 && first < 4096 && !seen[first]) { seen[first] = 1; cores++; }
    }
    return cores > 0 ? cores : (int)logical;
}
