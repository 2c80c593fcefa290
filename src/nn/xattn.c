/* Cross-attention block (encoder-decoders): the decoder's normed rows give
 * q (names.q of the layer's xattn_attn spec, with its bias), every query
 * attends to all arch.mem_len rows of the encoder memory without a mask, and
 * names.o maps back. Its per-sequence state is the memory's K then V,
 * [mem_len][kv_dim] each, written once per encoder pass by
 * mx_xattn_remember (K/V projections of the memory rows, which have the
 * decoder's width). */
#include "model.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_weight q, k, v, o;
    float *q_b, *k_b, *v_b, *o_b;
} xattn_w;

static const mx_attn_spec *spec_of(const mx_model *m, int layer) { return m->arch.layers[layer].xattn_attn; }

static int xa_load(mx_model *m, int i, void **out) {
    const mx_attn_spec *s = spec_of(m, i);
    const mx_attn_names *N = &s->names;
    int H = m->arch.hidden, qd = s->n_heads * s->head_dim, kvd = s->n_kv_heads * s->head_dim;
    if (m->arch.mem_len < 1) return mx_set_err("%s: cross-attention without an encoder memory length", m->ck.dir);
    xattn_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    return mx_load_lin(m, N->q, i, qd, H, s->q_bias, &w->q, &w->q_b) || mx_load_lin(m, N->k, i, kvd, H, s->k_bias, &w->k, &w->k_b) ||
                   mx_load_lin(m, N->v, i, kvd, H, s->v_bias, &w->v, &w->v_b) || mx_load_lin(m, N->o, i, H, qd, s->o_bias, &w->o, &w->o_b)
               ? MX_ERR
               : MX_OK;
}

static void xa_free(void *p) {
    xattn_w *w = p;
    if (!w) return;
    mx_weight_free(&w->q); mx_weight_free(&w->k); mx_weight_free(&w->v); mx_weight_free(&w->o);
    free(w->q_b); free(w->k_b); free(w->v_b); free(w->o_b);
    free(w);
}

static size_t xa_state(const mx_model *m, int layer, int cap) {
    (void)cap; /* the memory, whatever the decoder's length */
    const mx_attn_spec *s = spec_of(m, layer);
    return (size_t)2 * m->arch.mem_len * s->n_kv_heads * s->head_dim;
}

typedef struct { float *q, *att, *scores; } xa_bufs;
static size_t xa_plan(const mx_model *m, int layer, int rows, int nt, float *base, xa_bufs *b) {
    const mx_attn_spec *s = spec_of(m, layer);
    mx_plan p = {base, 0};
    size_t qd = (size_t)s->n_heads * s->head_dim;
    b->q = mx_plan_take(&p, (size_t)rows * qd);
    b->att = mx_plan_take(&p, (size_t)rows * qd);
    b->scores = mx_plan_take(&p, (size_t)nt * m->arch.mem_len);
    return p.n;
}
static size_t xa_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)max_ctx;
    xa_bufs b;
    return xa_plan(m, layer, max_tokens, nt, NULL, &b);
}

typedef struct {
    mx_fwd *f;
    int layer;
    xa_bufs b;
} xa_job;

/* token t, head h: softmax(q K^T * scale) V over the memory rows */
static void xa_task(void *ctx, int i, int tid) {
    xa_job *j = ctx;
    const mx_fwd *f = j->f;
    const mx_attn_spec *s = spec_of(f->m, j->layer);
    int hd = s->head_dim, qd = s->n_heads * hd, kvd = s->n_kv_heads * hd, T = f->m->arch.mem_len;
    int t = i / s->n_heads, h = i % s->n_heads, g = h / (s->n_heads / s->n_kv_heads);
    const float *K = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, &mx_block_xattn) + (size_t)g * hd, *V = K + (size_t)T * kvd;
    float *sc = j->b.scores + (size_t)tid * T;
    mx_attn_scores(j->b.q + (size_t)t * qd + (size_t)h * hd, K, (size_t)kvd, T, hd, s->scale, sc);
    mx_softmax(sc, T);
    mx_attn_mix(j->b.att + (size_t)t * qd + (size_t)h * hd, sc, V, (size_t)kvd, T, hd, false);
}

static void xa_forward(mx_fwd *f, int layer, void *wp, const float *xn, float *out) {
    const xattn_w *w = wp;
    const mx_attn_spec *s = spec_of(f->m, layer);
    int H = f->m->arch.hidden, qd = s->n_heads * s->head_dim;
    xa_job j = {f, layer, {0}};
    xa_plan(f->m, layer, f->N, mx_pool_size(f->pool), f->scratch, &j.b);
    mx_linear(f, &w->q, w->q_b, xn, f->N, H, j.b.q, qd);
    mx_pool_run(f->pool, xa_task, &j, f->N * s->n_heads);
    mx_linear(f, &w->o, w->o_b, j.b.att, f->N, qd, out, H);
}

const mx_block_ops mx_block_xattn = {
    .name = "cross-attention", .load = xa_load, .free = xa_free, .state_floats = xa_state,
    .scratch_floats = xa_scratch, .forward = xa_forward,
};

int mx_xattn_remember(const mx_model *m, mx_kv *kv, const float *mem, int n, mx_pool *pool) {
    const mx_arch *a = &m->arch;
    if (n != a->mem_len) return mx_set_err("encoder memory of %d rows; the cross-attention reads %d", n, a->mem_len);
    mx_fwd f = {.m = m, .pool = pool};
    for (int l = 0; l < a->n_layers; l++) {
        const mx_layer_spec *ls = &a->layers[l];
        if (ls->xattn != &mx_block_xattn) continue;
        const xattn_w *w = m->layers[l].xattn_w;
        int kvd = ls->xattn_attn->n_kv_heads * ls->xattn_attn->head_dim;
        float *K = mx_kv_block(m, kv, l, &mx_block_xattn), *V = K + (size_t)n * kvd;
        mx_linear(&f, &w->k, w->k_b, mem, n, a->hidden, K, kvd);
        mx_linear(&f, &w->v, w->v_b, mem, n, a->hidden, V, kvd);
    }
    return MX_OK;
}
