/* DeepSeek sparse attention (V3.2): the lightning indexer. For each query
 * token it scores every causal key with a few small heads,
 *   value(t) = sum_h w_h * relu(q_h . k_t / sqrt(dim)),  w = index_w(x) / sqrt(heads)
 * (q_h from the normed q LoRA latent, k_t one LayerNormed key per position,
 * both roped rotate-half on their first qk_rope_dim dims), and keeps the
 * index_topk keys of highest value; the latent attention then runs over
 * those keys only. A query with no more than index_topk causal keys keeps
 * them all (nothing is scored). Keys of equal value at the cut are taken
 * in position order.
 *
 * Scoring costs heads * dim per cached key (vs heads * (kv_lora + rope)
 * * 2 for dense latent attention). Tokens are scored a group at a time,
 * each token's keys split into chunks so that one decode token still keeps
 * every thread busy; the top-k is a quickselect on a copy of the values. */
#include "dsa.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { KEY_BLOCK = 64 };

int mx_dsa_load(mx_model *m, int layer, mx_dsa_w *w) {
    const mx_mla_spec *s = &m->arch.mla;
    int Hi = s->index_heads, D = s->index_dim;
    if (Hi < 1 || D < s->qk_rope_dim || s->index_topk < 1 || s->q_lora_rank < 1)
        return mx_set_err("%s: sparse attention indexer (%d heads of %d, top %d, q_lora_rank %d) is invalid", m->ck.dir, Hi, D,
                          s->index_topk, s->q_lora_rank);
    if (mx_load_lin(m, s->index_q, layer, Hi * D, s->q_lora_rank, false, &w->q, NULL) ||
        mx_load_lin(m, s->index_k, layer, D, m->arch.hidden, false, &w->k, NULL) ||
        mx_load_norm(m, &s->index_norm, s->index_k_norm, layer, D, &w->k_norm) ||
        mx_load_lin(m, s->index_w, layer, Hi, m->arch.hidden, false, &w->w, NULL))
        return MX_ERR;
    return MX_OK;
}

void mx_dsa_free(mx_dsa_w *w) {
    mx_weight_free(&w->q);
    mx_weight_free(&w->k);
    mx_weight_free(&w->w);
    mx_normw_free(&w->k_norm);
}

size_t mx_dsa_state(const mx_mla_spec *s, int cap) { return s->index_topk > 0 ? (size_t)cap * s->index_dim : 0; }

void mx_dsa_plan(const mx_mla_spec *s, int rows, int max_ctx, int nt, mx_plan *p, mx_dsa_bufs *b) {
    memset(b, 0, sizeof *b);
    if (s->index_topk < 1) return;
    size_t M = (size_t)rows, Hi = (size_t)s->index_heads, D = (size_t)s->index_dim;
    b->group = MX_MAX(1, MX_MIN(rows, 2 * nt));
    b->tmp_ld = MX_MAX(Hi * KEY_BLOCK, (size_t)max_ctx);
    b->q = mx_plan_take(p, M * Hi * D);
    b->k = mx_plan_take(p, M * D);
    b->w = mx_plan_take(p, M * Hi);
    b->vals = mx_plan_take(p, (size_t)b->group * max_ctx);
    b->tmp = mx_plan_take(p, (size_t)nt * b->tmp_ld);
    b->sel = (int *)mx_plan_take(p, M * (size_t)MX_MIN(s->index_topk, max_ctx));
    b->n_sel = (int *)mx_plan_take(p, M);
}

_Static_assert(sizeof(int) == sizeof(float), "int buffers live in float scratch");

/* token t's sequence's indexer keys (f32): after that cache's cap latent rows */
static float *key_cache(const mx_fwd *f, int layer, int t, int row) {
    (void)row;
    const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
    return mx_kv_layer(kv, layer) + mx_mla_rows_floats(&f->m->arch.mla, kv->type[0], kv->cap);
}

typedef struct {
    mx_fwd *f;
    int layer, gt, chunks, row;
    const int *tok; /* the group's tokens */
    const mx_dsa_bufs *b;
} dsa_job;

/* index values of keys [k0, k1) of one token of the group */
static void score_task(void *ctx, int i, int tid) {
    dsa_job *j = ctx;
    const mx_mla_spec *s = &j->f->m->arch.mla;
    int g = i / j->chunks, c = i % j->chunks, t = j->tok[g], n = j->f->pos[t] + 1, Hi = s->index_heads, D = s->index_dim;
    int k0 = (int)((long)n * c / j->chunks), k1 = (int)((long)n * (c + 1) / j->chunks);
    const float *K = key_cache(j->f, j->layer, t, j->row), *q = j->b->q + (size_t)t * Hi * D, *w = j->b->w + (size_t)t * Hi;
    float *val = j->b->vals + (size_t)g * j->f->max_ctx, *sc = j->b->tmp + (size_t)tid * j->b->tmp_ld, scale = 1.0f / sqrtf((float)D);
    for (int kb = k0; kb < k1; kb += KEY_BLOCK) {
        int nb = MX_MIN(KEY_BLOCK, k1 - kb);
        for (int h = 0; h < Hi; h++) mx_attn_scores(q + (size_t)h * D, K + (size_t)kb * D, (size_t)D, nb, D, scale, sc + (size_t)h * KEY_BLOCK);
        for (int k = 0; k < nb; k++) {
            float v = 0;
            for (int h = 0; h < Hi; h++) v += w[h] * fmaxf(sc[(size_t)h * KEY_BLOCK + k], 0.0f);
            val[kb + k] = v == v ? v : -INFINITY;
        }
    }
}

/* The k-th largest of a[0..n) (1 <= k <= n), reordering a: Hoare quickselect. */
static float kth_largest(float *a, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                float x = a[i];
                a[i++] = a[j];
                a[j--] = x;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want]; /* between the two runs: equal to the pivot */
    }
    return a[want];
}

static void select_task(void *ctx, int g, int tid) {
    dsa_job *j = ctx;
    int t = j->tok[g], n = j->f->pos[t] + 1, K = MX_MIN(j->f->m->arch.mla.index_topk, j->f->max_ctx);
    const float *val = j->b->vals + (size_t)g * j->f->max_ctx;
    float *tmp = j->b->tmp + (size_t)tid * j->b->tmp_ld;
    memcpy(tmp, val, (size_t)n * sizeof(float));
    float thr = kth_largest(tmp, n, K);
    int above = 0;
    for (int k = 0; k < n; k++) above += val[k] > thr;
    int *sel = j->b->sel + (size_t)t * K, m = 0, ties = K - above;
    for (int k = 0; k < n && m < K; k++)
        if (val[k] > thr || (val[k] == thr && ties-- > 0)) sel[m++] = k;
    j->b->n_sel[t] = m;
}

void mx_dsa_select(mx_fwd *f, int layer, const mx_dsa_w *w, const float *x, const float *qa, int row, const mx_dsa_bufs *b) {
    const mx_arch *a = &f->m->arch;
    const mx_mla_spec *s = &a->mla;
    const mx_layer_spec *ls = &a->layers[layer];
    int N = f->N, H = a->hidden, Hi = s->index_heads, D = s->index_dim, K = MX_MIN(s->index_topk, f->max_ctx);
    mx_linear(f, &w->q, NULL, qa, N, s->q_lora_rank, b->q, Hi * D);
    mx_linear(f, &w->k, NULL, x, N, H, b->k, D);
    mx_linear(f, &w->w, NULL, x, N, H, b->w, Hi);
    mx_norm_rows(&s->index_norm, &w->k_norm, b->k, b->k, N, D, D);
    mx_scale(b->w, 1.0f / sqrtf((float)Hi), N * Hi);
    mx_rope rope = a->rope[ls->rope_idx];
    rope.interleaved = false; /* the indexer rotates halves even where the attention interleaves */
    for (int t = 0; t < N; t++) {
        if (a->pos == MX_POS_ROPE && ls->rope) {
            const float *cs = f->cs[ls->rope_idx] + (size_t)t * rope.dim;
            mx_rope_apply(&rope, b->q + (size_t)t * Hi * D, Hi, D, cs);
            mx_rope_apply(&rope, b->k + (size_t)t * D, 1, D, cs);
        }
        memcpy(key_cache(f, layer, t, row) + (size_t)f->pos[t] * D, b->k + (size_t)t * D, (size_t)D * sizeof(float));
    }
    /* tokens with more causal keys than K are scored and cut, a group at a time */
    int tok[64], gt = 0, want = 2 * mx_pool_size(f->pool);
    for (int t = 0; t <= N; t++) {
        if (t < N) {
            b->n_sel[t] = -1;
            if (f->pos[t] + 1 <= K) continue;
            tok[gt++] = t;
        }
        if (gt && (gt == b->group || gt == (int)MX_ARRAY_LEN(tok) || t == N)) {
            dsa_job j = {f, layer, gt, MX_MAX(1, (want + gt - 1) / gt), row, tok, b};
            mx_pool_run(f->pool, score_task, &j, gt * j.chunks);
            mx_pool_run(f->pool, select_task, &j, gt);
            gt = 0;
        }
    }
}
