/* Multi-head latent attention (DeepSeek V2/V3; arch.mla).
 *
 *   q      = q_b(norm(q_a x))  (or q_proj x), per head [q_nope | q_rope]
 *   kv_a x = [c | k_rope]      c: latent (kv_lora_rank), k_rope: one rope key
 *                              shared by all heads
 *   kv_b(norm(c))              per head [k_nope | v]
 *
 * The cache keeps, per position, only norm(c) and the roped k_rope
 * (kv_lora_rank + qk_rope_dim values per layer, not 2 * heads * head_dim),
 * one row stored as the cache's key type (kernels/kvcache.h).
 * Attention works in the latent space with kv_b absorbed, which is exact:
 *   q_nope . (W_k c) = (W_k^T q_nope) . c,   sum_j p_j (W_v c_j) = W_v sum_j p_j c_j
 * so a step costs O(heads * (kv_lora_rank + qk_rope_dim)) per cached position
 * and never rebuilds K/V. In the latent space every head shares one key and
 * value row per position ([c | k_rope], of which c is the value): a task
 * takes one token and a group of heads and reads each cached row once for
 * all of them, scoring with q' = [W_k^T q_nope | q_rope] in one dot. With
 * DeepSeek sparse attention (nn/dsa.c) a token attends only the keys its
 * indexer selected, gathered into the task's buffer first; the indexer keys
 * follow the latents in the cache. With rope_interleave DeepSeek de-interleaves the
 * rope slice of q and k before a rotate-half rope; rotating the pairs
 * (2i, 2i+1) in place instead (rope.interleaved) permutes q and k alike and
 * leaves every q.k unchanged. LongCat scales q and the normed latent by
 * constants (mla.q_scale, kv_scale) before rope and caching. */
#include "model.h"
#include "dsa.h"
#include "../base/base.h"
#include "../quant/quant.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_weight q_a, q_b, q, kv_a, kv_b, o;
    float *q_a_b, *q_b_b, *q_bias, *kv_a_b, *kv_b_b, *o_b;
    mx_normw q_a_norm, kv_a_norm;
    mx_weight *kb, *vb; /* per head views of kv_b: k_nope rows, v rows */
    mx_weight *eq;      /* MLX layout: per head W_k^T [kv_lora, qk_nope] (then kb is unused) */
    mx_weight eq_whole, vb_whole;
    int n_heads;
    mx_dsa_w dsa; /* the sparse attention indexer (mla.index_topk > 0) */
} mla_w;

static int qk_dim(const mx_mla_spec *s) { return s->qk_nope_dim + s->qk_rope_dim; }

static int mla_load(mx_model *m, int layer, void **out) {
    const mx_arch *a = &m->arch;
    const mx_mla_spec *s = &a->mla;
    const mx_attn_spec *at = a->layers[layer].attn;
    int H = a->hidden, Hn = at->n_heads, qk = qk_dim(s), kvr = s->kv_lora_rank, dr = s->qk_rope_dim;
    if (kvr < 1 || s->qk_nope_dim < 0 || dr < 2 || dr % 2 || s->v_head_dim < 1 || s->q_lora_rank < 0)
        return mx_set_err("%s: MLA dimensions (kv_lora_rank %d, qk_nope %d, qk_rope %d, v_head %d) are invalid", m->ck.dir, kvr,
                          s->qk_nope_dim, dr, s->v_head_dim);
    if (a->pos == MX_POS_ROPE && a->rope[0].dim != dr)
        return mx_set_err("%s: MLA rope dimension %d differs from qk_rope_head_dim %d", m->ck.dir, a->rope[0].dim, dr);
    mla_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    w->n_heads = Hn;
    if (s->index_topk > 0 && mx_dsa_load(m, layer, &w->dsa)) return MX_ERR;
    if (s->q_lora_rank > 0) {
        if (mx_load_lin(m, s->q_a, layer, s->q_lora_rank, H, at->q_bias, &w->q_a, &w->q_a_b) ||
            mx_load_norm(m, &s->norm, s->q_a_norm, layer, s->q_lora_rank, &w->q_a_norm) ||
            mx_load_lin(m, s->q_b, layer, Hn * qk, s->q_lora_rank, false, &w->q_b, &w->q_b_b))
            return MX_ERR;
    } else if (mx_load_lin(m, at->names.q, layer, Hn * qk, H, false, &w->q, &w->q_bias)) return MX_ERR; /* q_proj never has a bias */
    if (mx_load_lin(m, s->kv_a, layer, kvr + dr, H, at->k_bias, &w->kv_a, &w->kv_a_b) ||
        mx_load_norm(m, &s->norm, s->kv_a_norm, layer, kvr, &w->kv_a_norm) ||
        mx_load_lin(m, at->names.o, layer, H, Hn * s->v_head_dim, at->o_bias, &w->o, &w->o_b))
        return MX_ERR;
    w->kb = mx_calloc((size_t)Hn, sizeof(mx_weight));
    w->vb = mx_calloc((size_t)Hn, sizeof(mx_weight));
    if (!w->kb || !w->vb) return MX_ERR;
    char mod[512], nm[540];
    snprintf(mod, sizeof mod, s->kv_b ? s->kv_b : "", layer);
    snprintf(nm, sizeof nm, "%s.weight", mod);
    if (s->embed_q && s->unembed_out && !mx_ckpt_find(&m->ck, nm)) { /* MLX: kv_b pre-split per head */
        if (m->shard && m->shard->tp > 1) return mx_set_err("%s: --tp: MLX's per-head kv_b layout cannot be split yet (use --pp)", m->ck.dir);
        w->eq = mx_calloc((size_t)Hn, sizeof(mx_weight));
        if (!w->eq) return MX_ERR;
        snprintf(mod, sizeof mod, s->embed_q, layer);
        if (mx_load_weight_stacked(&m->ck, mod, Hn, kvr, s->qk_nope_dim, 0, &m->kp, &w->eq_whole, w->eq)) return MX_ERR;
        snprintf(mod, sizeof mod, s->unembed_out, layer);
        if (mx_load_weight_stacked(&m->ck, mod, Hn, s->v_head_dim, kvr, 0, &m->kp, &w->vb_whole, w->vb)) return MX_ERR;
        m->weight_bytes += mx_weight_bytes(&w->eq_whole) + mx_weight_bytes(&w->vb_whole);
        return MX_OK;
    }
    if (mx_load_lin(m, s->kv_b, layer, Hn * (s->qk_nope_dim + s->v_head_dim), kvr, false, &w->kv_b, &w->kv_b_b)) return MX_ERR;
    int per = s->qk_nope_dim + s->v_head_dim;
    for (int h = 0; h < Hn; h++) {
        if ((s->qk_nope_dim && mx_weight_slice_rows(&w->kv_b, h * per, s->qk_nope_dim, &w->kb[h])) ||
            mx_weight_slice_rows(&w->kv_b, h * per + s->qk_nope_dim, s->v_head_dim, &w->vb[h]))
            return mx_err_prefix("%s: kv_b_proj of layer %d", m->ck.dir, layer);
    }
    return MX_OK;
}

static void mla_free(void *p) {
    mla_w *w = p;
    if (!w) return;
    for (int h = 0; h < w->n_heads; h++) {
        if (w->kb) mx_weight_free(&w->kb[h]);
        if (w->vb) mx_weight_free(&w->vb[h]);
        if (w->eq) mx_weight_free(&w->eq[h]);
    }
    free(w->kb);
    free(w->vb);
    free(w->eq);
    mx_weight_free(&w->eq_whole);
    mx_weight_free(&w->vb_whole);
    mx_weight *ws[] = {&w->q_a, &w->q_b, &w->q, &w->kv_a, &w->kv_b, &w->o};
    for (size_t k = 0; k < MX_ARRAY_LEN(ws); k++) mx_weight_free(ws[k]);
    free(w->q_a_b); free(w->q_b_b); free(w->q_bias); free(w->kv_a_b); free(w->kv_b_b); free(w->o_b);
    mx_normw_free(&w->q_a_norm);
    mx_normw_free(&w->kv_a_norm);
    mx_dsa_free(&w->dsa);
    free(w);
}

static int row_dim(const mx_mla_spec *s) { return s->kv_lora_rank + s->qk_rope_dim; }

size_t mx_mla_rows_floats(const mx_mla_spec *s, mx_kv_type t, int cap) {
    return ((size_t)cap * mx_kv_row_bytes(t, row_dim(s)) + 63) / 64 * 16;
}

/* the cached rows [latent | rope key] are stored as the cache's key type
 * (type[0]; the latent is the value too, type[1] is not used); the indexer
 * keys that follow stay f32 */
static size_t mla_cache(const mx_model *m, int layer, int cap, const mx_kv_type type[2]) {
    (void)layer;
    return mx_mla_rows_floats(&m->arch.mla, type[0], cap) + mx_dsa_state(&m->arch.mla, cap);
}

/* the first n latent rows and indexer keys (mx_kv_copy_prefix) */
static void mla_copy_prefix(const mx_model *m, int layer, uint8_t *dst, const uint8_t *src, int cap, int n, const mx_kv_type type[2]) {
    (void)layer;
    const mx_mla_spec *s = &m->arch.mla;
    size_t rb = mx_mla_rows_floats(s, type[0], cap) * sizeof(float);
    memcpy(dst, src, (size_t)n * mx_kv_row_bytes(type[0], row_dim(s)));
    memcpy(dst + rb, src + rb, mx_dsa_state(s, n) * sizeof(float));
}

static int mla_prefix_ranges(const mx_model *m, int layer, int cap, int n, const mx_kv_type type[2], size_t r[4][2]) {
    (void)layer;
    const mx_mla_spec *s = &m->arch.mla;
    size_t rb = mx_mla_rows_floats(s, type[0], cap) * sizeof(float);
    r[0][0] = 0;
    r[0][1] = (size_t)n * mx_kv_row_bytes(type[0], row_dim(s));
    r[1][0] = rb;
    r[1][1] = rb + mx_dsa_state(s, n) * sizeof(float);
    return 2;
}

static size_t mla_used(const mx_model *m, int layer, int cap, int n, const mx_kv_type type[2]) {
    (void)layer;
    const mx_mla_spec *s = &m->arch.mla;
    n = MX_MIN(n, cap);
    return ((size_t)n * mx_kv_row_bytes(type[0], row_dim(s)) + 3) / 4 + mx_dsa_state(s, n);
}

static size_t mla_state(const mx_model *m, int layer, int cap) {
    const mx_kv_type f32[2] = {MX_KV_F32, MX_KV_F32};
    return mla_cache(m, layer, cap, f32);
}

/* q [rows][heads][qk]; qa [rows][q_lora]; kvx [rows][latent | rope key];
 * qc [rows][heads][latent | rope] (the query in the latent space); olat
 * [rows][heads][latent]; vout [rows][heads][v]; per thread: a group's rows
 * of scores [heads][max_ctx], a latent row, and (sparse attention) the
 * selected cache rows [topk][latent | rope] */
typedef struct { float *q, *qa, *kvx, *qc, *olat, *vout, *scores, *rows, *gather; mx_dsa_bufs dsa; } mla_bufs;
static size_t mla_plan(const mx_model *m, int layer, int rows, int max_ctx, int nt, float *base, mla_bufs *b) {
    const mx_mla_spec *s = &m->arch.mla;
    size_t M = (size_t)rows, Hn = (size_t)m->arch.layers[layer].attn->n_heads, kvr = (size_t)s->kv_lora_rank, ld = (size_t)row_dim(s);
    mx_plan p = {base, 0};
    b->q = mx_plan_take(&p, M * Hn * qk_dim(s));
    b->qa = mx_plan_take(&p, M * s->q_lora_rank);
    b->kvx = mx_plan_take(&p, M * ld);
    b->qc = mx_plan_take(&p, M * Hn * ld);
    b->olat = mx_plan_take(&p, M * Hn * kvr);
    b->vout = mx_plan_take(&p, M * Hn * s->v_head_dim);
    b->scores = mx_plan_take(&p, (size_t)nt * Hn * max_ctx);
    b->rows = mx_plan_take(&p, (size_t)nt * kvr);
    b->gather = mx_plan_take(&p, s->index_topk > 0 ? (size_t)nt * MX_MIN(s->index_topk, max_ctx) * ld : 0);
    mx_dsa_plan(s, rows, max_ctx, nt, &p, &b->dsa);
    return p.n;
}

static size_t mla_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    mla_bufs b;
    return mla_plan(m, layer, max_tokens, max_ctx, nt, NULL, &b);
}

typedef struct {
    mx_fwd *f;
    const mla_w *w;
    int layer, per, subs; /* heads per task, tasks per token */
    const float *q;
    const mla_bufs *b;
} mla_job;

/* qc[t, h, :latent] = W_k(h)^T q_nope[t, h], one head per task (each row of
 * W_k dequantized once for all tokens). */
static void absorb_task(void *ctx, int h, int tid) {
    mla_job *j = ctx;
    const mx_arch *a = &j->f->m->arch;
    const mx_mla_spec *s = &a->mla;
    int N = j->f->N, Hn = a->layers[j->layer].attn->n_heads, kvr = s->kv_lora_rank, qk = qk_dim(s), ld = row_dim(s);
    float *row = j->b->rows + (size_t)tid * kvr, *qc = j->b->qc;
    for (int t = 0; t < N; t++) memset(qc + ((size_t)t * Hn + h) * ld, 0, (size_t)kvr * sizeof(float));
    for (int i = 0; i < s->qk_nope_dim; i++) {
        mx_weight_row(&j->w->kb[h], i, row);
        for (int t = 0; t < N; t++) mx_axpy(qc + ((size_t)t * Hn + h) * ld, j->q[(size_t)t * Hn * qk + (size_t)h * qk + i], row, kvr);
    }
}

/* token t, heads h0 .. h0 + nh: softmax(q' . rows) over its keys, olat = the
 * weighted sum of the keys' latents; keys in blocks that stay in cache while
 * every head of the group reads them */
static void attend_task(void *ctx, int i, int tid) {
    mla_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_arch *a = &f->m->arch;
    const mx_mla_spec *s = &a->mla;
    int Hn = a->layers[j->layer].attn->n_heads, kvr = s->kv_lora_rank, ld = row_dim(s);
    int t = i / j->subs, h0 = i % j->subs * j->per, nh = MX_MIN(j->per, Hn - h0);
    const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
    mx_kv_type tc = kv->type[0];
    size_t rb = mx_kv_row_bytes(tc, ld); /* a stored row's bytes (<= ld floats) */
    const uint8_t *C = (const uint8_t *)mx_kv_layer(kv, j->layer);
    int n = f->pos[t] + 1;
    const int *sel = NULL;
    if (j->b->dsa.n_sel && j->b->dsa.n_sel[t] >= 0) { /* sparse: gather the selected rows, as stored */
        int K = MX_MIN(s->index_topk, f->max_ctx);
        uint8_t *g = (uint8_t *)(j->b->gather + (size_t)tid * K * ld);
        sel = j->b->dsa.sel + (size_t)t * K;
        n = j->b->dsa.n_sel[t];
        for (int k = 0; k < n; k++) memcpy(g + (size_t)k * rb, C + (size_t)sel[k] * rb, rb);
        C = g;
    }
    float *sc = j->b->scores + (size_t)tid * Hn * f->max_ctx, scale = a->layers[j->layer].attn->scale;
    const float *qc = j->b->qc + ((size_t)t * Hn + h0) * ld;
    float *o = j->b->olat + ((size_t)t * Hn + h0) * kvr;
    int kb = MX_MAX(16, 8192 / ld);
    for (int k0 = 0; k0 < n; k0 += kb)
        for (int h = 0; h < nh; h++)
            mx_attn_scores_kv(tc, qc + (size_t)h * ld, C + (size_t)k0 * rb, rb, MX_MIN(kb, n - k0), ld, scale, sc + (size_t)h * f->max_ctx + k0);
    for (int h = 0; h < nh; h++) mx_softmax(sc + (size_t)h * f->max_ctx, n);
    for (int k0 = 0; k0 < n; k0 += kb)
        for (int h = 0; h < nh; h++)
            mx_attn_mix_kv(tc, o + (size_t)h * kvr, sc + (size_t)h * f->max_ctx + k0, C + (size_t)k0 * rb, rb, MX_MIN(kb, n - k0), kvr, k0 > 0);
}

static void mla_forward(mx_fwd *f, int layer, void *wp, const float *xn, float *out) {
    const mla_w *w = wp;
    const mx_arch *a = &f->m->arch;
    const mx_mla_spec *s = &a->mla;
    const mx_attn_spec *at = a->layers[layer].attn;
    int N = f->N, H = a->hidden, Hn = at->n_heads, qk = qk_dim(s), kvr = s->kv_lora_rank, dr = s->qk_rope_dim, dv = s->v_head_dim;
    int ld = row_dim(s);
    mla_bufs b;
    mla_plan(f->m, layer, f->max_tokens, f->max_ctx, mx_pool_size(f->pool), f->scratch, &b);
    float *q = b.q, *qa = b.qa, *kvx = b.kvx, *qc = b.qc, *olat = b.olat, *vout = b.vout;
    if (s->q_lora_rank > 0) {
        mx_linear(f, &w->q_a, w->q_a_b, xn, N, H, qa, s->q_lora_rank);
        mx_norm_rows(&s->norm, &w->q_a_norm, qa, qa, N, s->q_lora_rank, s->q_lora_rank);
        mx_linear(f, &w->q_b, w->q_b_b, qa, N, s->q_lora_rank, q, Hn * qk);
    } else mx_linear(f, &w->q, w->q_bias, xn, N, H, q, Hn * qk);
    mx_linear(f, &w->kv_a, w->kv_a_b, xn, N, H, kvx, ld);
    mx_norm_rows(&s->norm, &w->kv_a_norm, kvx, kvx, N, kvr, ld);
    if (s->q_scale && s->q_scale != 1.0f) mx_scale(q, s->q_scale, N * Hn * qk);
    if (at->temp_scale) /* Llama-4 position scale of q, both slices (Mistral 4) */
        for (int t = 0; t < N; t++) mx_scale(q + (size_t)t * Hn * qk, mx_attn_q_temp(at, f->pos[t]), Hn * qk);
    if (s->kv_scale && s->kv_scale != 1.0f) /* the latent only: k_nope and v scale with it, the rope key does not */
        for (int t = 0; t < N; t++) mx_scale(kvx + (size_t)t * ld, s->kv_scale, kvr);
    const mx_rope *rope = &a->rope[a->layers[layer].rope_idx];
    for (int t = 0; t < N; t++) {
        float *kr = kvx + (size_t)t * ld;
        if (a->pos == MX_POS_ROPE && a->layers[layer].rope) {
            const float *cs = f->cs[a->layers[layer].rope_idx] + (size_t)t * rope->dim;
            mx_rope_apply(rope, q + (size_t)t * Hn * qk + s->qk_nope_dim, Hn, qk, cs);
            mx_rope_apply(rope, kr + kvr, 1, dr, cs);
        }
        const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
        size_t rb = mx_kv_row_bytes(kv->type[0], ld);
        mx_kv_store(kv->type[0], (uint8_t *)mx_kv_layer(kv, layer) + (size_t)f->pos[t] * rb, kr, ld); /* quantized once, here */
        for (int h = 0; h < Hn; h++) /* the rope part of the latent-space query */
            memcpy(qc + ((size_t)t * Hn + h) * ld + kvr, q + (size_t)t * Hn * qk + (size_t)h * qk + s->qk_nope_dim, (size_t)dr * sizeof(float));
    }
    if (s->index_topk > 0) mx_dsa_select(f, layer, &w->dsa, xn, qa, ld, &b.dsa);
    int want = 2 * mx_pool_size(f->pool), per = N >= want ? Hn : MX_MAX(1, Hn / ((want + N - 1) / N)), subs = (Hn + per - 1) / per;
    mla_job j = {f, w, layer, per, subs, q, &b};
    if (w->eq)
        for (int h = 0; h < Hn; h++)
            mx_linear(f, &w->eq[h], NULL, q + (size_t)h * qk, N, Hn * qk, qc + (size_t)h * ld, Hn * ld);
    else mx_pool_run(f->pool, absorb_task, &j, Hn);
    mx_pool_run(f->pool, attend_task, &j, N * subs);
    for (int h = 0; h < Hn; h++)
        mx_linear(f, &w->vb[h], NULL, olat + (size_t)h * kvr, N, Hn * kvr, vout + (size_t)h * dv, Hn * dv);
    mx_linear(f, &w->o, w->o_b, vout, N, Hn * dv, out, H);
}

const mx_block_ops mx_block_mla = {
    .name = "mla", .load = mla_load, .free = mla_free, .state_floats = mla_state, .cache_floats = mla_cache, .copy_prefix = mla_copy_prefix, .prefix_ranges = mla_prefix_ranges, .used_floats = mla_used,
    .scratch_floats = mla_scratch, .forward = mla_forward,
};
