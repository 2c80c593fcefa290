/* Distributed runs over MPI (Open MPI): tensor parallelism (--tp T: every
 * attention's heads and every MLP's width split among T processes, one
 * all-reduce after o and after down) and pipeline parallelism (--pp P: the
 * layers in P contiguous ranges, hidden states sent stage to stage), T * P
 * processes started by mpirun. Rank r is part r % T of stage r / T.
 *
 * Rank 0 drives: it runs the command (tokenizing, sampling, output, the
 * vision tower, a draft model) and its every forward pass first tells the
 * others the pass (the sequences' cache ids, lengths and tokens, and their
 * image rows, rope positions and spans); the others serve passes
 * (mx_dist_worker) until it stops them. The model part of each process is planned before its
 * weights are bound (mx_dist_shard: the arch's head counts and widths
 * become the part's, the layers its stage's), so a process reads only its
 * own tensors. Nothing here runs unless --tp / --pp is given or the process
 * was started by mpirun. */
#ifndef MX_DIST_H
#define MX_DIST_H
#include "../nn/model.h"
#include <stdbool.h>

/* Starts MPI when tp * pp > 1 or under mpirun, and checks the world size is
 * tp * pp. MX_OK (distributed or not) or MX_ERR with the message (the
 * caller prints it on rank 0 only: mx_dist_rank). threads: per process. */
int mx_dist_start(int tp, int pp, int threads);
bool mx_dist_active(void);
/* Pipeline micro-batches per forward pass (0, the default: --pp runs, twice
 * as many for a pass of MX_MICRO_LONG tokens or more; 1: none); before
 * mx_dist_start, the same on every process. */
void mx_dist_micro(int n);
int mx_dist_rank(void); /* this process's MPI rank (0 without MPI) */
/* Before binding: plans this process's part of m (m->shard, m->arch's
 * counts); refuses, by family and block, what cannot be split. */
int mx_dist_shard(mx_model *m);
/* After binding, on every process: rc is this one's result; MX_ERR on every
 * process when any failed, rank 0's message naming the first failed rank. */
int mx_dist_loaded(int rc);
/* After mx_dist_loaded, on every process: what rank 0 alone decides (from
 * the parts only it opens: the vision tower) to every process. rc is rank
 * 0's result (the others' is ignored), v[n] (n <= 15) its values, which the
 * others take; MX_ERR on every process when rank 0's rc is (its message
 * stays its own). Nothing without MPI: returns rc. */
int mx_dist_follow(int rc, int *v, int n);
/* Processes other than rank 0: serve rank 0's passes over m until it stops. */
int mx_dist_worker(const mx_model *m);
/* Rank 0, once its caches of the model are freed: the others' mx_dist_worker
 * returns, MPI stays up and the next model may be loaded (a test walking
 * every fixture). */
void mx_dist_release(void);
/* Rank 0: stops the others; every process: finalizes MPI. Idempotent. */
void mx_dist_finish(void);

/* Communication counters of this process (BENCHMARKS.md). */
typedef struct {
    long passes;     /* forward passes served or driven */
    long msgs;       /* messages sent or collectives entered */
    double bytes;    /* bytes sent (a collective: its buffer) */
    double seconds;  /* time inside MPI calls */
} mx_dist_stats;
mx_dist_stats mx_dist_get_stats(void);
/* On every process after the command (rank 0 stops the workers first):
 * rank 0 prints each process's counters to standard error. */
void mx_dist_report(void);
#endif
