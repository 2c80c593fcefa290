/* threadpool: a fixed set of workers running parallel-for jobs.
 * mx_pool_run(pool, fn, ctx, n) calls fn(ctx, i, tid) for i in [0, n), spread
 * over the workers and the calling thread, and returns when all are done.
 * Workers spin briefly between jobs (decode issues many small jobs per token)
 * and then sleep. A NULL pool runs everything on the caller. */
#ifndef MX_THREADPOOL_H
#define MX_THREADPOOL_H
typedef struct mx_pool mx_pool;
typedef void (*mx_task_fn)(void *ctx, int i, int tid);

mx_pool *mx_pool_new(int n_threads); /* n_threads includes the caller */
void mx_pool_free(mx_pool *p);
int mx_pool_size(const mx_pool *p);
void mx_pool_run(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks);
/* Lanes: tasks [0, n) cut into `lanes` equal contiguous lanes (lane u:
 * [u*n/lanes, (u+1)*n/lanes)); the thread with index t runs lane t % lanes
 * in order, then helps finish the other lanes. Decode uses one lane per
 * thread over a matrix's rows, so that each thread streams one contiguous
 * range (restarting a memory stream at every task costs read rate). At
 * most MX_POOL_LANES lanes. */
#define MX_POOL_LANES 16
void mx_pool_run_lanes(mx_pool *p, mx_task_fn fn, void *ctx, int n_tasks, int lanes);
/* Several task sets as one job (one wait for the slowest task instead of one
 * per set): set k runs fn(ctx[k], i, tid) for i in [0, n[k]), in `lanes`
 * lanes as above (0 or 1: one shared order); a thread takes its lane of
 * every set before helping with others. At most MX_POOL_SETS sets; more run
 * as separate jobs. */
#define MX_POOL_SETS 8
typedef struct { mx_task_fn fn; void *ctx; int n, lanes; } mx_task_set;
void mx_pool_run_sets(mx_pool *p, const mx_task_set *sets, int count);
int mx_default_threads(void); /* physical cores (logical / SMT siblings) */
#endif
