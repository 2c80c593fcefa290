/* Where a forward pass spends its time (mlxcel bench --profile): the
 * forward's call sites of kernels (a projection, a norm, the attention core,
 * rope, an activation) add their wall time, measured on the calling thread
 * around the whole (possibly parallel) call, to an mx_prof under an op tag.
 * Off (mx_fwd.prof == NULL, the default) every hook is one branch; on, two
 * clock reads per call. A context's counters are its thread's own: several
 * contexts merge theirs with mx_prof_merge at the end. */
#ifndef MX_PROF_H
#define MX_PROF_H
#include <stdint.h>

typedef enum {
    MX_OP_EMBED,   /* token (and position) embedding rows */
    MX_OP_QKV,     /* attention q/k/v projections (fused or not), its output gate */
    MX_OP_O,       /* attention output projection */
    MX_OP_GATE_UP, /* dense MLP gate and up projections */
    MX_OP_DOWN,    /* dense MLP down projection */
    MX_OP_ROUTER,  /* MoE router (and shared-expert gate) */
    MX_OP_EXPERT,  /* MoE experts' projections (shared expert included) */
    MX_OP_HEAD,    /* output head (logits) */
    MX_OP_MATMUL,  /* any other block's projections (MLA, Mamba, ...) */
    MX_OP_ATTN,    /* attention core: scores + softmax + mix over the cache */
    MX_OP_ROPE,    /* per token: q/k norm, rope, K/V rows written to the cache */
    MX_OP_NORM,    /* the layer's norms and the final norm */
    MX_OP_ACT,     /* MLP / expert activations (gate * act(up)) */
    MX_OP_SAMPLE,  /* choosing the next token from the logits */
    MX_OP_COUNT
} mx_op;

typedef struct mx_prof {
    double sec[MX_OP_COUNT];   /* wall seconds */
    double bytes[MX_OP_COUNT]; /* weight bytes read (projections) */
    double flops[MX_OP_COUNT]; /* 2 * rows * cols * tokens (projections) */
    long calls[MX_OP_COUNT];
} mx_prof;

const char *mx_op_name(mx_op op);
/* whether op is a matrix product (its bytes and flops are counted) */
int mx_op_is_matmul(mx_op op);
void mx_prof_reset(mx_prof *p);
void mx_prof_merge(mx_prof *dst, const mx_prof *src);
double mx_prof_total(const mx_prof *p); /* the sum of the measured ops' seconds */
/* adds the time since t0 (mx_now()) to op */
void mx_prof_add(mx_prof *p, mx_op op, double t0);
#endif
