/* The forward pass's op timer (prof.h). */
#include "prof.h"
#include "../base/base.h"
#include <string.h>

static const char *const names[MX_OP_COUNT] = {
    [MX_OP_EMBED] = "embedding",        [MX_OP_QKV] = "attn q/k/v proj",   [MX_OP_O] = "attn o proj",
    [MX_OP_GATE_UP] = "mlp gate/up",    [MX_OP_DOWN] = "mlp down",         [MX_OP_ROUTER] = "moe router",
    [MX_OP_EXPERT] = "moe experts",     [MX_OP_HEAD] = "lm head",          [MX_OP_MATMUL] = "other matmuls",
    [MX_OP_ATTN] = "attention core",    [MX_OP_ROPE] = "rope+qk-norm+kv",  [MX_OP_NORM] = "norms",
    [MX_OP_ACT] = "activations",        [MX_OP_SAMPLE] = "sampling",
};

const char *mx_op_name(mx_op op) { return op >= 0 && op < MX_OP_COUNT ? names[op] : "?"; }

int mx_op_is_matmul(mx_op op) { return op >= MX_OP_QKV && op <= MX_OP_MATMUL; }

void mx_prof_reset(mx_prof *p) { memset(p, 0, sizeof *p); }

void mx_prof_merge(mx_prof *dst, const mx_prof *src) {
    for (int i = 0; i < MX_OP_COUNT; i++) {
        dst->sec[i] += src->sec[i];
        dst->bytes[i] += src->bytes[i];
        dst->flops[i] += src->flops[i];
        dst->calls[i] += src->calls[i];
    }
}

double mx_prof_total(const mx_prof *p) {
    double s = 0;
    for (int i = 0; i < MX_OP_COUNT; i++) s += p->sec[i];
    return s;
}

void mx_prof_add(mx_prof *p, mx_op op, double t0) {
    p->sec[op] += mx_now() - t0;
    p->calls[op]++;
}
