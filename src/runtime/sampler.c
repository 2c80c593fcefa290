#include "sampler.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mx_sampler {
    mx_sampling p;
    int vocab;
    uint64_t rng;
    int32_t *idx;
    uint16_t *count;
    float *prob;
};

void mx_sampling_defaults(mx_sampling *s) {
    memset(s, 0, sizeof *s);
    s->top_p = 1;
    s->repetition_penalty = 1;
    s->penalty_last_n = -1;
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

mx_sampler *mx_sampler_new(const mx_sampling *p, int vocab) {
    mx_sampler *s = mx_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->vocab = vocab;
    s->rng = p->seed;
    s->idx = mx_malloc((size_t)vocab * sizeof(int32_t));
    s->count = mx_calloc((size_t)vocab, sizeof(uint16_t));
    s->prob = mx_malloc((size_t)vocab * sizeof(float));
    if (!s->idx || !s->count || !s->prob) { mx_sampler_free(s); return NULL; }
    return s;
}

void mx_sampler_free(mx_sampler *s) {
    if (!s) return;
    free(s->idx);
    free(s->count);
    free(s->prob);
    free(s);
}

int32_t mx_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static const float *g_sort_logits; /* qsort has no context argument */
static int cmp_desc(const void *a, const void *b) {
    float x = g_sort_logits[*(const int32_t *)a], y = g_sort_logits[*(const int32_t *)b];
    if (x != y) return x < y ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* Partial selection of the k largest into idx[0..k) sorted descending. */
static int select_top(mx_sampler *s, const float *l, int k) {
    int V = s->vocab;
    for (int i = 0; i < V; i++) s->idx[i] = i;
    if (k <= 0 || k > V) k = V;
    g_sort_logits = l;
    if (k < V && k <= 256) {
        /* insertion into a small sorted prefix: O(V k) worst, fast for small k */
        int n = 0;
        for (int i = 0; i < V; i++) {
            if (n == k && l[i] <= l[s->idx[k - 1]]) continue;
            int j = n < k ? n++ : k - 1;
            while (j > 0 && l[s->idx[j - 1]] < l[i]) { s->idx[j] = s->idx[j - 1]; j--; }
            s->idx[j] = i;
        }
        return k;
    }
    qsort(s->idx, (size_t)V, sizeof(int32_t), cmp_desc);
    return k;
}

/* Penalties, temperature and the truncations: the kept candidates are
 * s->idx[0..n) with probabilities s->prob[0..n) (summing to *sum, not yet
 * normalized). Returns n; 0 means greedy (temperature 0: take the argmax). */
static int candidates(mx_sampler *s, float *l, const int32_t *hist, int nh, float *sum_out) {
    const mx_sampling *p = &s->p;
    int V = s->vocab;
    if (p->repetition_penalty != 1 || p->presence_penalty != 0 || p->frequency_penalty != 0) {
        int start = (p->penalty_last_n >= 0 && nh > p->penalty_last_n) ? nh - p->penalty_last_n : 0;
        for (int i = start; i < nh; i++)
            if (hist[i] >= 0 && hist[i] < V && s->count[hist[i]] < 65535) s->count[hist[i]]++;
        for (int i = start; i < nh; i++) {
            int32_t t = hist[i];
            if (t < 0 || t >= V || !s->count[t]) continue;
            float x = l[t];
            if (p->repetition_penalty != 1) x = x < 0 ? x * p->repetition_penalty : x / p->repetition_penalty;
            x -= p->presence_penalty + p->frequency_penalty * (float)s->count[t];
            l[t] = x;
            s->count[t] = 0; /* each distinct token once */
        }
    }
    if (p->temperature <= 0) return 0;
    for (int i = 0; i < V; i++) l[i] /= p->temperature;
    int n = select_top(s, l, p->top_k);
    /* softmax over the kept candidates */
    float mx = l[s->idx[0]], sum = 0;
    for (int i = 0; i < n; i++) { s->prob[i] = expf(l[s->idx[i]] - mx); sum += s->prob[i]; }
    for (int i = 0; i < n; i++) s->prob[i] /= sum;
    if (p->top_p < 1) {
        float c = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            c += s->prob[i];
            if (c >= p->top_p) { keep = i + 1; break; }
        }
        n = keep;
    }
    if (p->min_p > 0) {
        float thr = p->min_p * s->prob[0];
        int keep = 1;
        while (keep < n && s->prob[keep] >= thr) keep++;
        n = keep;
    }
    sum = 0;
    for (int i = 0; i < n; i++) sum += s->prob[i];
    *sum_out = sum;
    return n;
}

double mx_sampler_uniform(mx_sampler *s) { return (double)(splitmix(&s->rng) >> 11) / 9007199254740992.0; }

int32_t mx_sampler_sample(mx_sampler *s, float *l, const int32_t *hist, int nh) {
    float sum = 0;
    int n = candidates(s, l, hist, nh, &sum);
    if (!n) return mx_argmax(l, s->vocab);
    double r = mx_sampler_uniform(s) * sum, c = 0;
    for (int i = 0; i < n; i++) {
        c += s->prob[i];
        if (r < c) return s->idx[i];
    }
    return s->idx[n - 1];
}

void mx_sampler_dist(mx_sampler *s, float *l, const int32_t *hist, int nh, float *dist) {
    float sum = 0;
    int n = candidates(s, l, hist, nh, &sum);
    memset(dist, 0, (size_t)s->vocab * sizeof(float));
    if (!n) { dist[mx_argmax(l, s->vocab)] = 1; return; }
    for (int i = 0; i < n; i++) dist[s->idx[i]] = s->prob[i] / sum;
}
