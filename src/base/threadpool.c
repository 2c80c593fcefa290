#define _GNU_SOURCE
#include "threadpool.h"
#include "base.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A job: task sets, each claimed in order through one counter per lane. */
typedef struct {
    _Alignas(64) atomic_int next;
} lane_ctr;
typedef struct {
    const mx_task_set *sets;
    int count;
    lane_ctr ctr[MX_POOL_SETS][MX_POOL_LANES];
} pool_job;

struct mx_pool {
    int n;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Alignas(64) atomic_uint gen; /* bumped for every job */
    atomic_bool quit;
    bool open;                    /* a job accepts participants (under mu) */
    pool_job *job;
    _Alignas(64) atomic_int active; /* workers inside the current job */
};

typedef struct { mx_pool *p; int tid; } worker_arg;

static inline int set_lanes(const mx_task_set *s) { return s->lanes < 1 ? 1 : MX_MIN(s->lanes, MX_POOL_LANES); }

/* Runs what is left of lane u of set k. */
static void drain(pool_job *j, int k, int u, int tid) {
    const mx_task_set *s = &j->sets[k];
    int L = set_lanes(s), lo = (int)((long)s->n * u / L), hi = (int)((long)s->n * (u + 1) / L);
    for (;;) {
        int i = lo + atomic_fetch_add_explicit(&j->ctr[k][u].next, 1, memory_order_relaxed);
        if (i >= hi) break;
        s->fn(s->ctx, i, tid);
    }
}

/* A thread first takes its own lane of every set, then helps with the
 * others' (where a thread is late or slow). */
static void run_tasks(pool_job *j, int tid) {
    for (int k = 0; k < j->count; k++) drain(j, k, tid % set_lanes(&j->sets[k]), tid);
    for (int k = 0; k < j->count; k++) {
        int L = set_lanes(&j->sets[k]);
        for (int d = 1; d < L; d++) drain(j, k, (tid + d) % L, tid);
    }
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
        pool_job *job = p->job;
        if (join) atomic_fetch_add(&p->active, 1);
        pthread_mutex_unlock(&p->mu);
        if (!join) continue;
        run_tasks(job, wa.tid);
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

/* One job of up to MX_POOL_SETS sets. */
static void run_job(mx_pool *p, const mx_task_set *sets, int count) {
    pool_job j;
    j.sets = sets;
    j.count = count;
    int total = 0;
    for (int k = 0; k < count; k++) {
        total += MX_MAX(0, sets[k].n);
        for (int u = 0; u < set_lanes(&sets[k]); u++) atomic_init(&j.ctr[k][u].next, 0);
    }
    if (total <= 0) return;
    if (!p || p->n == 1 || total == 1) {
        run_tasks(&j, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->job = &j;
    p->open = true;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    run_tasks(&j, 0);
    /* close the job once no worker is inside it; late workers then skip it */
    for (;;) {
        if (atomic_load_explicit(&p->active, memory_order_acquire) == 0) {
            pthread_mutex_lock(&p->mu);
            if (atomic_load(&p->active) == 0) {
                p->open = false;
                p->job = NULL;
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

void mx_pool_run(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks) {
    mx_task_set s = {fn, ctx, n_tasks, 1};
    run_job(p, &s, 1);
}

void mx_pool_run_lanes(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks, int lanes) {
    mx_task_set s = {fn, ctx, n_tasks, lanes};
    run_job(p, &s, 1);
}

void mx_pool_run_sets(mx_pool *p, const mx_task_set *sets, int count) {
    for (int b = 0; b < count; b += MX_POOL_SETS) run_job(p, sets + b, MX_MIN(MX_POOL_SETS, count - b));
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
