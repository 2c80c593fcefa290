/* The generic decoder forward pass: executes an arch description over a
 * stack of sequences. Matrix products see all stacked tokens at once;
 * attention runs per (token, head) against each sequence's own cache. */
#include "model.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mx_ctx {
    const mx_model *m;
    mx_pool *pool;
    int max_tokens, max_ctx, qkv_dim, ffn2;
    float *x, *xn, *qkv, *att, *tmp, *tmp2, *gu, *cs, *scores;
    int *pos, *seq_of, *max_len;
};

mx_kv *mx_kv_new(const mx_model *m, int cap) {
    const mx_arch *a = &m->arch;
    size_t kvd = (size_t)a->n_kv_heads * a->head_dim, n;
    if (cap < 1 || !mx_mul_ok(kvd * 2 * (size_t)a->n_layers, (size_t)cap, &n) || !mx_mul_ok(n, sizeof(float), &n)) {
        mx_set_err("KV cache of %d positions is too large", cap);
        return NULL;
    }
    mx_kv *kv = mx_calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->data = mx_aligned_alloc(n);
    if (!kv->data) { free(kv); return NULL; }
    kv->cap = cap;
    kv->n_layers = a->n_layers;
    kv->kv_dim = (int)kvd;
    return kv;
}

void mx_kv_free(mx_kv *kv) {
    if (!kv) return;
    mx_aligned_free(kv->data);
    free(kv);
}

mx_ctx *mx_ctx_new(const mx_model *m, int max_tokens, int max_ctx, mx_pool *pool) {
    const mx_arch *a = &m->arch;
    mx_ctx *c = mx_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->m = m;
    c->pool = pool;
    c->max_tokens = max_tokens;
    c->max_ctx = max_ctx;
    c->qkv_dim = (a->n_heads + 2 * a->n_kv_heads) * a->head_dim;
    c->ffn2 = 2 * a->ffn;
    size_t N = (size_t)max_tokens, H = (size_t)a->hidden, nt = (size_t)mx_pool_size(pool);
    size_t rd = 0;
    for (int r = 0; r < a->n_rope; r++) rd += (size_t)a->rope[r].dim;
    size_t qd = (size_t)a->n_heads * a->head_dim;
    c->x = mx_aligned_alloc(N * H * 4);
    c->xn = mx_aligned_alloc(N * H * 4);
    c->tmp = mx_aligned_alloc(N * H * 4);
    c->tmp2 = mx_aligned_alloc(N * H * 4);
    c->qkv = mx_aligned_alloc(N * (size_t)c->qkv_dim * 4);
    c->att = mx_aligned_alloc(N * qd * 4);
    c->gu = mx_aligned_alloc(N * (size_t)c->ffn2 * 4);
    c->cs = mx_aligned_alloc(N * (rd ? rd : 1) * 4);
    c->scores = mx_aligned_alloc(nt * (size_t)max_ctx * 4);
    c->pos = mx_calloc(N, sizeof(int));
    c->seq_of = mx_calloc(N, sizeof(int));
    c->max_len = mx_calloc(N, sizeof(int));
    if (!c->x || !c->xn || !c->tmp || !c->tmp2 || !c->qkv || !c->att || !c->gu || !c->cs || !c->scores || !c->pos || !c->seq_of || !c->max_len) {
        mx_ctx_free(c);
        return NULL;
    }
    return c;
}

void mx_ctx_free(mx_ctx *c) {
    if (!c) return;
    float *bufs[] = {c->x, c->xn, c->qkv, c->att, c->tmp, c->tmp2, c->gu, c->cs, c->scores};
    for (size_t i = 0; i < MX_ARRAY_LEN(bufs); i++) mx_aligned_free(bufs[i]);
    free(c->pos);
    free(c->seq_of);
    free(c->max_len);
    free(c);
}

int mx_ctx_max_tokens(const mx_ctx *c) { return c->max_tokens; }

static void norm_rows(const mx_norm_spec *s, const mx_normw *w, float *y, const float *x, int n, int d, int ld) {
    if (s->kind == MX_NORM_RMS) mx_rmsnorm(y, x, w->w, s->offset, n, d, ld, s->eps);
    else mx_layernorm(y, x, w->w, s->bias ? w->b : NULL, s->offset, n, d, ld, s->eps);
}

static void add_bias(float *y, const float *b, int n, int d, int ld) {
    if (!b) return;
    for (int t = 0; t < n; t++) mx_add(y + (size_t)t * ld, b, d);
}

static void linear(mx_ctx *c, const mx_weight *w, const float *b, const float *x, int n, int ldx, float *y, int ldy) {
    mx_matmul(w, x, n, ldx, y, ldy, c->pool);
    add_bias(y, b, n, w->rows, ldy);
}

/* ---- attention ---- */
typedef struct {
    mx_ctx *c;
    const mx_seq_in *seqs;
    int layer, N;
    int *tok_start; /* first stacked token of each sequence */
} att_job;

static void att_task(void *ctx, int i, int tid) {
    att_job *j = ctx;
    mx_ctx *c = j->c;
    const mx_arch *a = &c->m->arch;
    int hd = a->head_dim, t = i / a->n_heads, h = i % a->n_heads;
    int kvh = h / (a->n_heads / a->n_kv_heads);
    const mx_seq_in *s = &j->seqs[c->seq_of[t]];
    int p = c->pos[t], win = a->layers[j->layer].window;
    int j0 = win > 0 ? MX_MAX(0, p - win + 1) : 0;
    const float *q = c->qkv + (size_t)t * c->qkv_dim + (size_t)h * hd;
    const float *K = mx_kv_k(s->kv, j->layer) + (size_t)kvh * hd, *V = mx_kv_v(s->kv, j->layer) + (size_t)kvh * hd;
    int kvd = s->kv->kv_dim;
    float *sc = c->scores + (size_t)tid * c->max_ctx;
    int n = p - j0 + 1;
    float cap = a->attn_softcap;
    for (int k = 0; k < n; k++) {
        float v = mx_dot(q, K + (size_t)(j0 + k) * kvd, hd) * a->attn_scale;
        if (cap > 0) v = tanhf(v / cap) * cap;
        sc[k] = v;
    }
    mx_softmax(sc, n);
    float *out = c->att + (size_t)t * a->n_heads * hd + (size_t)h * hd;
    memset(out, 0, (size_t)hd * sizeof(float));
    for (int k = 0; k < n; k++) mx_axpy(out, sc[k], V + (size_t)(j0 + k) * kvd, hd);
}

static void attention(mx_ctx *c, const mx_seq_in *seqs, int n_seqs, int layer, int N) {
    const mx_arch *a = &c->m->arch;
    const mx_layer_w *L = &c->m->layers[layer];
    int hd = a->head_dim, qd = a->n_heads * hd, kvd = a->n_kv_heads * hd;
    float *xn = c->xn;
    if (L->qkv.fmt) linear(c, &L->qkv, L->qkv_b, xn, N, a->hidden, c->qkv, c->qkv_dim);
    else {
        linear(c, &L->q, L->q_b, xn, N, a->hidden, c->qkv, c->qkv_dim);
        linear(c, &L->k, L->k_b, xn, N, a->hidden, c->qkv + qd, c->qkv_dim);
        linear(c, &L->v, L->v_b, xn, N, a->hidden, c->qkv + qd + kvd, c->qkv_dim);
    }
    if (a->clip_qkv > 0) {
        float cl = a->clip_qkv;
        for (int t = 0; t < N; t++) {
            float *r = c->qkv + (size_t)t * c->qkv_dim;
            for (int i = 0; i < c->qkv_dim; i++) r[i] = r[i] > cl ? cl : r[i] < -cl ? -cl : r[i];
        }
    }
    const mx_layer_spec *ls = &a->layers[layer];
    const mx_rope *rope = &a->rope[ls->rope_idx];
    size_t cs_off = 0;
    for (int r = 0; r < ls->rope_idx; r++) cs_off += (size_t)N * a->rope[r].dim;
    for (int t = 0; t < N; t++) {
        float *q = c->qkv + (size_t)t * c->qkv_dim, *k = q + qd;
        if (a->qk_norm == MX_QKNORM_HEAD) {
            norm_rows(&a->qk_norm_spec, &L->q_norm, q, q, a->n_heads, hd, hd);
            norm_rows(&a->qk_norm_spec, &L->k_norm, k, k, a->n_kv_heads, hd, hd);
        } else if (a->qk_norm == MX_QKNORM_FULL) {
            norm_rows(&a->qk_norm_spec, &L->q_norm, q, q, 1, qd, qd);
            norm_rows(&a->qk_norm_spec, &L->k_norm, k, k, 1, kvd, kvd);
        }
        if (a->pos == MX_POS_ROPE && ls->rope) {
            const float *cs = c->cs + cs_off + (size_t)t * rope->dim;
            mx_rope_apply(rope, q, a->n_heads, hd, cs);
            mx_rope_apply(rope, k, a->n_kv_heads, hd, cs);
        }
        const mx_seq_in *s = &seqs[c->seq_of[t]];
        memcpy(mx_kv_k(s->kv, layer) + (size_t)c->pos[t] * kvd, k, (size_t)kvd * 4);
        memcpy(mx_kv_v(s->kv, layer) + (size_t)c->pos[t] * kvd, k + kvd, (size_t)kvd * 4);
    }
    att_job j = {c, seqs, layer, N, NULL};
    (void)n_seqs;
    mx_pool_run(c->pool, att_task, &j, N * a->n_heads);
    linear(c, &L->o, L->o_b, c->att, N, qd, c->tmp, a->hidden);
}

static void mlp(mx_ctx *c, int layer, const float *in, float *out, int N) {
    const mx_arch *a = &c->m->arch;
    const mx_layer_w *L = &c->m->layers[layer];
    int F = a->ffn, H = a->hidden;
    if (a->mlp == MX_MLP_GATED) {
        if (L->gate_up.fmt) linear(c, &L->gate_up, L->gate_up_b, in, N, H, c->gu, c->ffn2);
        else {
            linear(c, &L->gate, L->gate_b, in, N, H, c->gu, c->ffn2);
            linear(c, &L->up, L->up_b, in, N, H, c->gu + F, c->ffn2);
        }
        for (int t = 0; t < N; t++) {
            float *r = c->gu + (size_t)t * c->ffn2;
            mx_act_mul(a->act, r, r + F, F);
        }
        linear(c, &L->down, L->down_b, c->gu, N, c->ffn2, out, H);
    } else {
        linear(c, &L->up, L->up_b, in, N, H, c->gu, c->ffn2);
        for (int t = 0; t < N; t++) mx_act_apply(a->act, c->gu + (size_t)t * c->ffn2, F);
        linear(c, &L->down, L->down_b, c->gu, N, c->ffn2, out, H);
    }
}

static void add_scaled(float *x, const float *y, float s, size_t n) {
    if (s == 1.0f) for (size_t i = 0; i < n; i++) x[i] += y[i];
    else for (size_t i = 0; i < n; i++) x[i] += y[i] * s;
}

int mx_forward(mx_ctx *c, const mx_seq_in *seqs, int n_seqs, float *logits, bool all) {
    const mx_model *m = c->m;
    const mx_arch *a = &m->arch;
    int N = 0, H = a->hidden;
    for (int s = 0; s < n_seqs; s++) {
        const mx_kv *kv = seqs[s].kv;
        if (seqs[s].n < 1) return mx_set_err("empty sequence in forward pass");
        if (kv->len + seqs[s].n > kv->cap || kv->len + seqs[s].n > c->max_ctx)
            return mx_set_err("context is full: %d + %d tokens exceed the context size %d", kv->len, seqs[s].n, MX_MIN(kv->cap, c->max_ctx));
        if (N + seqs[s].n > c->max_tokens) return mx_set_err("batch of %d tokens exceeds the forward capacity %d", N + seqs[s].n, c->max_tokens);
        for (int i = 0; i < seqs[s].n; i++) {
            int32_t tok = seqs[s].tokens[i];
            if (tok < 0 || tok >= a->vocab) return mx_set_err("token id %d is outside the vocabulary (size %d)", tok, a->vocab);
            c->pos[N] = kv->len + i;
            c->seq_of[N] = s;
            c->max_len[N] = MX_MAX(kv->len + seqs[s].n, seqs[s].seg_end);
            N++;
        }
    }
    if (a->pos == MX_POS_LEARNED) {
        for (int t = 0; t < N; t++)
            if (c->pos[t] + a->pos_offset >= a->max_pos + a->pos_offset)
                return mx_set_err("position %d exceeds max_position_embeddings %d", c->pos[t], a->max_pos);
    }
    /* embeddings */
    for (int t = 0; t < N; t++) {
        const mx_seq_in *s = &seqs[c->seq_of[t]];
        int32_t tok = s->tokens[c->pos[t] - s->kv->len];
        float *row = c->x + (size_t)t * H;
        mx_weight_row(&m->embed, tok, row);
        if (a->embed_scale != 1.0f) mx_scale(row, a->embed_scale, H);
        if (a->pos == MX_POS_LEARNED) {
            mx_weight_row(&m->pos_embed, c->pos[t] + a->pos_offset, c->tmp);
            mx_add(row, c->tmp, H);
        }
    }
    /* rope tables per spec, per sequence (dynamic variants depend on length) */
    if (a->pos == MX_POS_ROPE) {
        size_t off = 0;
        for (int r = 0; r < a->n_rope; r++) {
            int t = 0;
            for (int s = 0; s < n_seqs; s++) {
                mx_rope_table(&a->rope[r], c->pos + t, seqs[s].n, c->max_len[t], c->cs + off + (size_t)t * a->rope[r].dim);
                t += seqs[s].n;
            }
            off += (size_t)N * a->rope[r].dim;
        }
    }
    for (int l = 0; l < a->n_layers; l++) {
        const mx_layer_w *L = &m->layers[l];
        if (a->names.attn_norm) norm_rows(&a->norm, &L->attn_norm, c->xn, c->x, N, H, H);
        else memcpy(c->xn, c->x, (size_t)N * H * 4);
        attention(c, seqs, n_seqs, l, N);
        if (a->names.post_attn_norm)
            norm_rows(&a->norm, &L->post_attn_norm, c->tmp, c->tmp, N, H, H);
        if (a->residual == MX_RES_PARALLEL) {
            const float *in = c->xn;
            if (a->parallel_two_norms) {
                norm_rows(&a->norm, &L->ffn_norm, c->tmp2, c->x, N, H, H);
                memcpy(c->xn, c->tmp2, (size_t)N * H * 4);
                in = c->xn;
            }
            mlp(c, l, in, c->tmp2, N);
            add_scaled(c->x, c->tmp, a->residual_scale, (size_t)N * H);
            add_scaled(c->x, c->tmp2, a->residual_scale, (size_t)N * H);
        } else {
            add_scaled(c->x, c->tmp, a->residual_scale, (size_t)N * H);
            if (a->names.ffn_norm) norm_rows(&a->norm, &L->ffn_norm, c->xn, c->x, N, H, H);
            else memcpy(c->xn, c->x, (size_t)N * H * 4);
            mlp(c, l, c->xn, c->tmp2, N);
            if (a->names.post_ffn_norm)
                norm_rows(&a->norm, &L->post_ffn_norm, c->tmp2, c->tmp2, N, H, H);
            add_scaled(c->x, c->tmp2, a->residual_scale, (size_t)N * H);
        }
    }
    for (int s = 0; s < n_seqs; s++) seqs[s].kv->len += seqs[s].n;
    /* final norm and head on the rows that need logits */
    int nrows = 0;
    if (all) {
        nrows = N;
        if (a->names.final_norm) norm_rows(&a->norm, &m->final_norm, c->xn, c->x, N, H, H);
        else memcpy(c->xn, c->x, (size_t)N * H * 4);
    } else {
        int t = 0;
        for (int s = 0; s < n_seqs; s++) {
            t += seqs[s].n;
            memcpy(c->xn + (size_t)s * H, c->x + (size_t)(t - 1) * H, (size_t)H * 4);
        }
        nrows = n_seqs;
        if (a->names.final_norm) norm_rows(&a->norm, &m->final_norm, c->xn, c->xn, nrows, H, H);
    }
    const mx_weight *head = a->tied ? &m->embed : &m->lm_head;
    linear(c, head, m->lm_head_b, c->xn, nrows, H, logits, a->vocab);
    size_t nl = (size_t)nrows * a->vocab;
    if (a->logit_scale != 1.0f) mx_scale(logits, a->logit_scale, (int)nl);
    if (a->final_softcap > 0) {
        float cap = a->final_softcap;
        for (size_t i = 0; i < nl; i++) logits[i] = tanhf(logits[i] / cap) * cap;
    }
    return MX_OK;
}
