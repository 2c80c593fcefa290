/* threadpool: a fixed set of workers running parallel-for jobs.
 * mx_pool_run(pool, fn, ctx, n) calls fn(ctx, i, tid) for i in [0, n), spread
 * over the workers and the calling thread, and returns when all are done.
 * Workers spin briefly between jobs (decode issues many small jobs per token)
 * and then sleep. A NULL pool runs everything on the caller. */
#ifndef MX_THREADPOOL_H
#define MX_THREADPOOL_H
#include <stdbool.h>
typedef struct mx_pool mx_pool;
typedef void (*mx_task_fn)(void *ctx, int i, int tid);

mx_pool *mx_pool_new(int n_threads); /* n_threads includes the caller */
void mx_pool_free(mx_pool *p);
int mx_pool_size(const mx_pool *p);
void mx_pool_run(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks);
/* The same, but each thread claims its next task before it runs the current
 * one, and mx_pool_next_task tells the running task which that is: a task
 * that streams memory can prefetch where its thread reads next instead of
 * past its own end (where the next task usually belongs to another thread).
 * The claim ahead can leave the last claimed task waiting behind a running
 * one, so use it where the tasks are small (decode). */
void mx_pool_run_ahead(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks);
/* In a task of an mx_pool_run_ahead job: the index of the task this thread
 * runs next, with that task's fn and ctx (a job of several sets may move on
 * to another set), or -1 when it runs none. -1 in other jobs. */
int mx_pool_next_task(mx_task_fn *fn, void **ctx);
/* Several task sets as one job (one wait for the slowest task instead of one
 * per set): set k runs fn(ctx[k], i, tid) for i in [0, n[k]). At most
 * MX_POOL_SETS sets; more run as separate jobs. */
#define MX_POOL_SETS 8
typedef struct { mx_task_fn fn; void *ctx; int n; } mx_task_set;
void mx_pool_run_sets(mx_pool *p, const mx_task_set *sets, int count, bool ahead);
int mx_default_threads(void); /* physical cores (logical / SMT siblings) */
#endif
