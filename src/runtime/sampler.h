/* sampler: turns a logits row into the next token. Greedy at temperature 0;
 * otherwise penalties, temperature, top-k, top-p, min-p (Hugging Face's
 * order), then a draw from a seeded generator (same seed, same output).
 * All buffers are allocated once per sampler. */
#ifndef MX_SAMPLER_H
#define MX_SAMPLER_H
#include <stdint.h>
#include <stdbool.h>
#include "../kernels/kernels.h" /* mx_argmax */

typedef struct {
    float temperature;   /* 0 = greedy */
    int top_k;           /* 0 = off */
    float top_p;         /* 1 = off */
    float min_p;         /* 0 = off */
    float repetition_penalty; /* 1 = off (HF: divide positive, multiply negative logits) */
    float presence_penalty, frequency_penalty; /* OpenAI semantics, 0 = off */
    int penalty_last_n;  /* how many recent tokens penalties look at; -1 = all */
    uint64_t seed;       /* MX_SEED_RANDOM: a front end draws one per request */
    uint32_t set;        /* bit i: mx_samp_fields[i] was given (a CLI option, a request field);
                            generation_config.json fills only the others */
} mx_sampling;
#define MX_SEED_RANDOM UINT64_MAX

void mx_sampling_defaults(mx_sampling *s);

typedef struct mx_sampler mx_sampler;
mx_sampler *mx_sampler_new(const mx_sampling *p, int vocab);
void mx_sampler_free(mx_sampler *s);
/* history: tokens seen so far (prompt + generated) for the penalties.
 * logits is modified in place. */
int32_t mx_sampler_sample(mx_sampler *s, float *logits, const int32_t *history, int n_history);
/* The distribution mx_sampler_sample draws from, as a dense [vocab] row
 * (greedy: all mass on the argmax); logits modified in place. */
void mx_sampler_dist(mx_sampler *s, float *logits, const int32_t *history, int n_history, float *dist);
/* A uniform draw in [0, 1) from the sampler's seeded generator. */
double mx_sampler_uniform(mx_sampler *s);
#endif
