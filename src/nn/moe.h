/* moe: the mixture-of-experts ffn block's routing, exposed for tests, and
 * counters of the expert weight bytes a forward actually touched. */
#ifndef MX_MOE_H
#define MX_MOE_H
#include "model.h"

/* Routes one token: router logits[E] -> the chosen experts idx[top_k] and
 * their weights w[top_k], per the spec's router kind, renormalisation and
 * scaling. score_bias: the per-expert selection bias (SOFTMAX, SIGMOID), may be NULL.
 * tmp: scratch of 2*E floats. */
void mx_moe_route(const mx_moe_spec *s, const float *logits, const float *score_bias, int *idx, float *w, float *tmp);

/* Summed over the model's MoE layers since load (or the last reset): expert
 * weight bytes read (each routed expert counted once per forward that used
 * it, whatever its token count), expert matmul groups run, and routed
 * (token, expert) pairs. Dense layers and shared experts are not counted. */
typedef struct {
    uint64_t expert_bytes, expert_groups, routed_pairs;
    uint64_t all_expert_bytes; /* bytes of every routed expert of those layers (for comparison) */
} mx_moe_stats;
void mx_moe_stats_get(const mx_model *m, mx_moe_stats *out, bool reset);
#endif
