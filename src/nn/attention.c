/* Self-attention block (causal, or bidirectional for encoders), run as the
 * layer's attention spec (arch.h mx_attn_spec) says: q/k/v projections
 * (separate or fused, with biases), optional clip (before or after the q/k
 * norms), q/k norm (before or after rope), rope, a position-dependent q
 * scale, the layer's sliding window, soft-capping, sinks, output gate (from
 * q, or a sigmoid / softplus gate projection of its own, per element or per
 * head), a norm on the output before o, GQA/MQA, a value head size of its own
 * and a value scale. Its per-sequence state is K [cap][kv heads][head_dim] then V
 * [cap][kv heads][v head dim], each row stored as the cache's type for it
 * (kv->type, kernels/kvcache.h: f32, f16, bf16, q8_0, q4_0), written once at
 * append and read in place by the score and mix rows. */
#include "model.h"
#include "ssm.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_normw q_norm, k_norm, out_norm;
    mx_weight q, k, v, qkv, o, gate; /* gate: names.gate's projection */
    float *q_b, *k_b, *v_b, *qkv_b, *o_b;
    float *sinks; /* per-head sink logits (names.sinks, GPT-OSS) */
} att_w;

/* Per-head norm weights [n_heads * d] (MX_QKNORM_HEAD_EACH): one tensor
 * "<pat>.weight" of that many elements (any shape, e.g. [heads, d]), or, when
 * pat has a second "%d", one tensor per head "<pat(layer, h)>.weight". */
static int load_head_vec(mx_model *m, const char *pat, int layer, int n_heads, int d, const char *suffix, float **out) {
    const char *first = strstr(pat, "%d");
    bool split = first && strstr(first + 2, "%d");
    float *v = mx_malloc((size_t)n_heads * d * sizeof(float));
    if (!v) return MX_ERR;
    *out = v;
    for (int h = 0; h < (split ? n_heads : 1); h++) {
        char mod[512];
        snprintf(mod, sizeof mod, pat, layer, h);
        char *nm = mx_asprintf("%s%s", mod, suffix);
        if (!nm) return MX_ERR;
        mx_tensor *t = mx_ckpt_require(&m->ck, nm);
        int64_t want = split ? d : (int64_t)n_heads * d;
        int rc = !t ? MX_ERR
                 : t->numel != want ? mx_set_err("%s: tensor '%s' has %lld elements, expected %lld", m->ck.dir, nm, (long long)t->numel, (long long)want)
                 : mx_tensor_to_f32(t, v + (size_t)h * d) ? mx_err_prefix("%s", m->ck.dir) : MX_OK;
        free(nm);
        if (rc) return rc;
    }
    return MX_OK;
}

static int load_head_norm(mx_model *m, const mx_norm_spec *s, const char *pat, int layer, int n_heads, int d, mx_normw *nw) {
    if (s->weight && load_head_vec(m, pat, layer, n_heads, d, ".weight", &nw->w)) return MX_ERR;
    if (s->bias && load_head_vec(m, pat, layer, n_heads, d, ".bias", &nw->b)) return MX_ERR;
    return MX_OK;
}

/* values per token of names.gate's projection */
static int gate_rows(const mx_attn_spec *a) { return a->gate_per_head ? a->n_heads : a->n_heads * mx_attn_vdim(a); }

static int att_load(mx_model *m, int i, void **out) {
    const mx_layer_spec *ls = &m->arch.layers[i];
    const mx_attn_spec *a = ls->attn;
    const mx_attn_names *N = &a->names;
    bool shared = ls->kv_shared; /* q and o only: K/V come from layer kv_from's cache */
    if (shared && (ls->kv_from < 0 || ls->kv_from >= i || m->arch.layers[ls->kv_from].attn != a ||
                   m->arch.layers[ls->kv_from].kv_shared || m->arch.layers[ls->kv_from].mixer != &mx_block_attention))
        return mx_set_err("%s: layer %d: shares the K/V of layer %d, which is not an earlier attention layer of its kind", m->ck.dir, i,
                          ls->kv_from);
    if ((N->qkv || a->gate) && (shared || a->k_eq_v))
        return mx_set_err("%s: layer %d: shared or k=v attention with a fused qkv or gated q is not supported", m->ck.dir, i);
    int H = m->arch.hidden, hd = a->head_dim, qd = a->n_heads * hd, kvd = a->n_kv_heads * hd;
    att_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    const mx_shard *sh = m->shard;
    if (sh && sh->tp > 1 && a->qk_norm != MX_QKNORM_NONE && a->qk_norm != MX_QKNORM_HEAD) {
        /* tensor parallelism: this part's heads' (or channels') norm weights, out of the whole layer's */
        int T = sh->tp, rep = a->tp_kv_rep > 1 ? a->tp_kv_rep : 1, hq = a->n_heads * T, hk = a->n_kv_heads * T / rep;
        int oq = sh->tp_rank * a->n_heads, ok = sh->tp_rank / rep * a->n_kv_heads;
        mx_normw *nws[2] = {&w->q_norm, &w->k_norm};
        const char *pats[2] = {N->q_norm, N->k_norm};
        int full[2] = {hq, hk}, off[2] = {oq, ok}, mine[2] = {a->n_heads, a->n_kv_heads};
        for (int k = 0; k < (shared ? 1 : 2); k++) {
            int rc = a->qk_norm == MX_QKNORM_HEAD_EACH ? load_head_norm(m, &a->qk_norm_spec, pats[k], i, full[k], hd, nws[k])
                                                       : mx_load_norm(m, &a->qk_norm_spec, pats[k], i, full[k] * hd, nws[k]);
            if (rc) return MX_ERR;
            float *v[2] = {nws[k]->w, nws[k]->b};
            for (int j = 0; j < 2; j++)
                if (v[j]) memmove(v[j], v[j] + (size_t)off[k] * hd, (size_t)mine[k] * hd * sizeof(float));
        }
    } else if (a->qk_norm == MX_QKNORM_HEAD_EACH) {
        if (load_head_norm(m, &a->qk_norm_spec, N->q_norm, i, a->n_heads, hd, &w->q_norm) ||
            (!shared && load_head_norm(m, &a->qk_norm_spec, N->k_norm, i, a->n_kv_heads, hd, &w->k_norm)))
            return MX_ERR;
    } else if (a->qk_norm != MX_QKNORM_NONE) {
        int qn = a->qk_norm == MX_QKNORM_HEAD ? hd : qd, kn = a->qk_norm == MX_QKNORM_HEAD ? hd : kvd;
        if (mx_load_norm(m, &a->qk_norm_spec, N->q_norm, i, qn, &w->q_norm) ||
            (!shared && mx_load_norm(m, &a->qk_norm_spec, N->k_norm, i, kn, &w->k_norm)))
            return MX_ERR;
    }
    if (N->qkv && a->gate) return mx_set_err("%s: gated attention with a fused qkv projection is not supported", m->ck.dir);
    int vd = mx_attn_vdim(a), ovd = a->n_heads * vd;
    if (vd != hd && (N->qkv || a->gate || a->k_eq_v))
        return mx_set_err("%s: layer %d: a value head size of its own with a fused qkv, gated q or k = v is not supported", m->ck.dir, i);
    if (N->qkv) {
        if (mx_load_lin(m, N->qkv, i, qd + 2 * kvd, H, a->q_bias, &w->qkv, &w->qkv_b)) return MX_ERR;
    } else if (mx_load_lin(m, N->q, i, a->gate ? 2 * qd : qd, H, a->q_bias, &w->q, &w->q_b) ||
               (!shared && mx_load_lin(m, N->k, i, kvd, H, a->k_bias, &w->k, &w->k_b)) ||
               (!shared && !a->k_eq_v && mx_load_lin(m, N->v, i, a->n_kv_heads * vd, H, a->v_bias, &w->v, &w->v_b)))
        return MX_ERR;
    if (N->sinks && mx_load_vec(m, N->sinks, i, a->n_heads, true, &w->sinks)) return MX_ERR;
    if (N->gate && a->gate) return mx_set_err("%s: layer %d: an output gate from q and from a projection of its own", m->ck.dir, i);
    if (mx_load_lin(m, N->gate, i, gate_rows(a), H, false, &w->gate, NULL)) return MX_ERR;
    if (mx_load_norm(m, &m->arch.norm, N->out_norm, i, ovd, &w->out_norm)) return MX_ERR;
    return mx_load_lin(m, N->o, i, H, ovd, a->o_bias, &w->o, &w->o_b);
}

static void att_free(void *p) {
    att_w *w = p;
    if (!w) return;
    mx_normw_free(&w->q_norm);
    mx_normw_free(&w->k_norm);
    mx_normw_free(&w->out_norm);
    mx_weight *ws[] = {&w->q, &w->k, &w->v, &w->qkv, &w->o, &w->gate};
    for (size_t k = 0; k < MX_ARRAY_LEN(ws); k++) mx_weight_free(ws[k]);
    free(w->q_b); free(w->k_b); free(w->v_b); free(w->qkv_b); free(w->o_b);
    free(w->sinks);
    free(w);
}

int mx_attn_vdim(const mx_attn_spec *a) { return a->v_head_dim ? a->v_head_dim : a->head_dim; }
static int qkv_dim(const mx_attn_spec *a) { return (a->n_heads + a->n_kv_heads) * a->head_dim + a->n_kv_heads * mx_attn_vdim(a); }

/* bytes of one position's K (or V) rows: kv heads rows of d values */
static size_t kv_ld(const mx_attn_spec *a, mx_kv_type t, int d) { return (size_t)a->n_kv_heads * mx_kv_row_bytes(t, d); }
#define MX_RING_SLICE MX_KV_RING_SLICE
/* bytes of the K region (V starts there, 64-byte aligned) */
static size_t k_region(const mx_attn_spec *a, mx_kv_type t, int cap) { return ((size_t)cap * kv_ld(a, t, a->head_dim) + 63) & ~(size_t)63; }

/* How layer `layer` reads and stores its keys in a cache of cap positions.
 * W: the window a query reads (0: every earlier key); keep: the first
 * positions every query also reads (mlx-lm's --max-kv-size keeps 4); ring:
 * the rows form a ring of period R = W + MX_RING_SLICE - 1 after the keep
 * rows: position p >= keep goes to rows keep + (p - keep) % R and that + R
 * (keep + 2R rows), so the W keys a query reads lie in one run of rows, in
 * their order, and attention computes exactly what a whole cache gives. A
 * pass writes and attends at most MX_RING_SLICE tokens at a time
 * (att_forward), never cutting an image block read both ways, so no row a
 * query still needs is overwritten before it is read; once wrapped, a cache
 * can be cut back by at most MX_RING_SLICE positions (att_keep_min).
 * Causal sliding-window layers whose cache no other layer reads take a ring
 * (the policy's kv_ring); with the policy's kv_max (--max-kv-size N) every
 * such causal layer reads at most keep + (N - keep) keys and takes one. */
typedef struct {
    int W, keep, R, rows;
    bool ring;
} kv_shape;
#define MX_KV_KEEP 4
/* some later layer attends over this layer's cache (Gemma 4's KV-shared layers) */
static bool cache_shared(const mx_model *m, int layer) {
    for (int l = layer + 1; l < m->arch.n_layers; l++)
        if (m->arch.layers[l].kv_shared && m->arch.layers[l].kv_from == layer) return true;
    return false;
}
/* shared: cache_shared(m, layer), which the forward pass finds once per layer */
static kv_shape kv_shape_at(const mx_model *m, int layer, int cap, bool shared) {
    const mx_layer_spec *ls = &m->arch.layers[layer];
    kv_shape k = {.W = ls->window, .rows = cap};
    if (ls->attn->bidirectional || ls->chunk > 0 || ls->kv_shared || shared) return k;
    int wr = m->kp.kv_max - MX_KV_KEEP;
    if (m->kp.kv_max > 0 && (k.W <= 0 || k.W > wr)) { k.W = wr; k.keep = MX_KV_KEEP; }
    if (k.W <= 0 || (!m->kp.kv_ring && !k.keep)) return k;
    k.R = k.W + MX_RING_SLICE - 1;
    if (cap > k.keep + 2 * k.R) { k.ring = true; k.rows = k.keep + 2 * k.R; }
    return k;
}
static kv_shape kv_shape_of(const mx_model *m, int layer, int cap) { return kv_shape_at(m, layer, cap, cache_shared(m, layer)); }
/* the row of position p */
static int kv_row(const kv_shape *k, int p) { return !k->ring || p < k->keep ? p : k->keep + (p - k->keep) % k->R; }

static size_t att_cache(const mx_model *m, int layer, int cap, const mx_kv_type type[2]) {
    const mx_attn_spec *a = m->arch.layers[layer].attn;
    if (m->arch.layers[layer].kv_shared) return 0;
    int S = kv_shape_of(m, layer, cap).rows;
    return (k_region(a, type[0], S) + (size_t)S * kv_ld(a, type[1], mx_attn_vdim(a)) + 3) / 4;
}

/* a ring's positions past `keep` write two rows each (write_rows) */
static size_t att_used(const mx_model *m, int layer, int cap, int n, const mx_kv_type type[2]) {
    const mx_attn_spec *a = m->arch.layers[layer].attn;
    if (m->arch.layers[layer].kv_shared) return 0;
    kv_shape k = kv_shape_of(m, layer, cap);
    size_t rows = MX_MIN(n, k.rows);
    if (k.ring && n > k.keep) rows = (size_t)k.keep + 2 * (size_t)MX_MIN(n - k.keep, k.R);
    return (rows * (kv_ld(a, type[0], a->head_dim) + kv_ld(a, type[1], mx_attn_vdim(a))) + 3) / 4;
}

static int att_keep_min(const mx_model *m, int layer, int cap, int len) {
    kv_shape k = kv_shape_of(m, layer, cap);
    return k.ring && len > k.keep + k.R ? len - MX_RING_SLICE : 0;
}

static void att_copy_prefix(const mx_model *m, int layer, uint8_t *dst, const uint8_t *src, int cap, int n, const mx_kv_type type[2]) {
    const mx_attn_spec *a = m->arch.layers[layer].attn;
    if (m->arch.layers[layer].kv_shared) return;
    kv_shape k = kv_shape_of(m, layer, cap);
    if (k.ring) n = k.rows; /* a ring: all of it (the caller keeps n within what it still holds, att_keep_min) */
    size_t kr = k_region(a, type[0], k.rows);
    memcpy(dst, src, (size_t)n * kv_ld(a, type[0], a->head_dim));
    memcpy(dst + kr, src + kr, (size_t)n * kv_ld(a, type[1], mx_attn_vdim(a)));
}

static int att_prefix_ranges(const mx_model *m, int layer, int cap, int n, const mx_kv_type type[2], size_t r[4][2]) {
    const mx_attn_spec *a = m->arch.layers[layer].attn;
    if (m->arch.layers[layer].kv_shared) return 0;
    kv_shape k = kv_shape_of(m, layer, cap);
    if (k.ring) return -1; /* later positions write over the oldest rows */
    size_t kr = k_region(a, type[0], k.rows);
    r[0][0] = 0;
    r[0][1] = (size_t)n * kv_ld(a, type[0], a->head_dim);
    r[1][0] = kr;
    r[1][1] = kr + (size_t)n * kv_ld(a, type[1], mx_attn_vdim(a));
    return 2;
}

static size_t att_state(const mx_model *m, int layer, int cap) {
    const mx_kv_type f32[2] = {MX_KV_F32, MX_KV_F32};
    return att_cache(m, layer, cap, f32);
}

/* Query heads that share a kv head (GQA) run in one task, over blocks of
 * keys small enough to stay in L1/L2 while every head of the group reads
 * them: the K and V rows then come from memory once per group instead of
 * once per head. A group may be split (sub-groups of `per` heads) so that a
 * one-token step still has work for every thread. */
static int att_group(const mx_attn_spec *a) { return a->n_heads / a->n_kv_heads; }

static _Atomic int g_key_block;
void mx_attention_set_key_block(int keys) { g_key_block = keys > 0 ? keys : 0; }

/* qkv [rows][q|k|v]; att [rows][heads * v head dim]; scores: per thread a group's rows of
 * max_ctx; row: one fused qkv row being regrouped; gate [rows][2 q dim] (q
 * with its gate) or [rows][gate_rows] (names.gate) */
typedef struct { float *qkv, *att, *scores, *rows, *row, *gate, *pack; int *blk; } att_bufs;
/* Query tokens of one sequence attended together (att_task): each block of
 * keys is read by all of their heads while it is in L1/L2, instead of once
 * per token (a prefill at depth reads the cache QB times less: at 32k the
 * whole cache of a layer comes from memory once per block). Their score
 * rows take QB * group * max_ctx floats per thread: at most 4 MB, or a 64 MB
 * share of all threads' when that is more (QB 8 -> 32 at 32k tokens on two
 * threads: prefill 1.2x there). */
#define ATT_QB_MAX 32
static int att_qb(const mx_attn_spec *a, int max_ctx, int nt) {
    size_t budget = MX_MAX((size_t)1 << 20, ((size_t)1 << 24) / (size_t)MX_MAX(nt, 1));
    return (int)MX_MAX(1, MX_MIN(ATT_QB_MAX, budget / ((size_t)att_group(a) * (size_t)MX_MAX(max_ctx, 1))));
}
/* per score row: its running max and its sum of exponentials in 8 lanes (att_task) */
#define ATT_ROW_ST 9
/* A block of one kv head's K or V rows copied together (att_task), per thread: 64 KiB */
#define ATT_PACK (64 * 1024)
static size_t att_plan(const mx_attn_spec *a, int rows, int max_ctx, int nt, float *base, att_bufs *b) {
    mx_plan p = {base, 0};
    size_t qd = (size_t)a->n_heads * a->head_dim;
    b->qkv = mx_plan_take(&p, (size_t)rows * qkv_dim(a));
    b->att = mx_plan_take(&p, (size_t)rows * a->n_heads * mx_attn_vdim(a));
    b->scores = mx_plan_take(&p, (size_t)nt * att_qb(a, max_ctx, nt) * att_group(a) * max_ctx);
    b->rows = mx_plan_take(&p, (size_t)nt * att_qb(a, max_ctx, nt) * att_group(a) * ATT_ROW_ST);
    b->blk = (int *)(void *)mx_plan_take(&p, (size_t)rows + 1); /* the query blocks' first tokens */
    b->pack = mx_plan_take(&p, (size_t)nt * ATT_PACK / sizeof(float));
    b->row = mx_plan_take(&p, a->qkv_layout == MX_QKV_GROUPED ? (size_t)qkv_dim(a) : 0);
    b->gate = mx_plan_take(&p, a->gate ? (size_t)rows * 2 * qd : a->names.gate ? (size_t)rows * gate_rows(a) : 0);
    return p.n;
}

static size_t att_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    att_bufs b;
    return att_plan(m->arch.layers[layer].attn, max_tokens, max_ctx, nt, NULL, &b);
}

typedef struct {
    mx_fwd *f;
    int layer, per, subs; /* heads per task, tasks per kv head */
    int hpt;              /* kv heads per task (per = the group, subs = 1 then) */
    int t0;               /* the first of the stacked tokens this run attends (a ring's slice) */
    const int *blk;       /* query blocks: tokens [blk[b], blk[b + 1]), one sequence each */
    int qb;               /* the longest block */
    bool shared;          /* cache_shared of the layer whose cache this one reads */
    const float *qkv;
    float *att, *scores, *rows, *pack;
    const float *sinks;
} att_job;

/* Whether token t's padded keys are masked: not when all of its keys are padding (HF's finite mask
 * then keeps them all). base: the position of its score row's first key; n: the row's length. */
static bool att_masks(const att_job *j, int t, int base, int p, int n) {
    const mx_fwd *f = j->f;
    const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
    if (!f->key_mask) return false;
    for (int k = 0; k < n; k++)
        if (base + k < kv->len || f->key_mask[t + (base + k - p)]) return true;
    return false;
}

/* Softcap and padding mask of scores k..k+m-1 of token t's row (elementwise, as they are computed);
 * returns their max. */
static float att_prep(const att_job *j, int t, int base, int p, bool masks, float *sc, int k, int m) {
    const mx_fwd *f = j->f;
    const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
    float cap = f->m->arch.layers[j->layer].attn->softcap;
    if (cap > 0)
        for (int i = k; i < k + m; i++) sc[i] = tanhf(sc[i] / cap) * cap;
    if (masks) /* padded keys of this segment (stacked at t + j - p) get no weight */
        for (int i = k; i < k + m; i++)
            if (base + i >= kv->len && !f->key_mask[t + (base + i - p)]) sc[i] = -INFINITY;
    return mx_max(sc + k, m);
}

/* One token's keys: positions j0..j1 (window, chunk, both ways, image span)
 * and the ns kept first keys apart from them (a rotating cache's sinks). */
typedef struct { int p, j0, n, ns; const uint8_t *K, *V; } att_keys;
static att_keys keys_of(const att_job *j, int t, const kv_shape *ks, const mx_kv *kv, const uint8_t *K0, const uint8_t *V0, size_t ldk, size_t ldv) {
    const mx_fwd *f = j->f;
    const mx_layer_spec *ls = &f->m->arch.layers[j->layer];
    const mx_attn_spec *a = ls->attn;
    /* a layer reading another's cache keeps its own window (such caches are never rings) */
    int p = f->pos[t], win = ls->kv_shared ? ls->window : ks->W, keep = ls->kv_shared ? 0 : ks->keep;
    int j0 = win > 0 ? MX_MAX(0, p - win + 1) : 0, j1 = p; /* keys j0..j1 (and 0..keep-1 where j0 > keep) */
    if (j0 <= keep) j0 = 0; /* the kept keys and the window meet: one run */
    if (ls->chunk > 0) j0 = MX_MAX(j0, p / ls->chunk * ls->chunk);
    if (a->bidirectional) { /* the whole sequence; a window is |p - j| < W */
        int last = kv->len + f->seqs[f->seq_of[t]].n - 1;
        j1 = win > 0 ? MX_MIN(last, p + win - 1) : last;
    }
    if (f->span_lo && f->span_hi[t] > f->span_lo[t]) { /* an image block / prefix seen both ways */
        j0 = MX_MIN(j0, f->span_lo[t]);
        j1 = MX_MAX(j1, f->span_hi[t] - 1);
    }
    att_keys k = {p, j0, j1 - j0 + 1, keep > 0 && j0 > keep ? keep : 0, NULL, NULL};
    k.K = K0 + (size_t)kv_row(ks, j0) * ldk;
    k.V = V0 + (size_t)kv_row(ks, j0) * ldv;
    return k;
}

/* nh heads (q and their score rows ldsc apart) against m keys; two heads at
 * a time, each head's scores those of the one-head kernel */
static void scores_heads(mx_kv_type tk, const float *q, int hd, int nh, const uint8_t *K, size_t ldk, int m, float scale, float *sc, size_t ldsc,
                         bool pf) {
    int h = 0;
    if (tk == MX_KV_F32)
        for (; h + 2 <= nh; h += 2)
            mx_attn_scores2(q + (size_t)h * hd, q + (size_t)(h + 1) * hd, (const float *)(const void *)K, ldk / 4, m, hd, scale, sc + (size_t)h * ldsc,
                            sc + (size_t)(h + 1) * ldsc, pf && h == 0);
    else
        for (; h + 2 <= nh; h += 2)
            mx_attn_scores2_kv(tk, q + (size_t)h * hd, q + (size_t)(h + 1) * hd, K, ldk, m, hd, scale, sc + (size_t)h * ldsc, sc + (size_t)(h + 1) * ldsc);
    for (; h < nh; h++) mx_attn_scores_kv(tk, q + (size_t)h * hd, K, ldk, m, hd, scale, sc + (size_t)h * ldsc);
}

/* out (nh heads, vd apart) += probabilities (rows ldsc apart) x m rows of V */
static void mix_heads(mx_kv_type tv, float *out, int vd, int nh, const float *p, size_t ldsc, const uint8_t *V, size_t ldv, int m, bool acc,
                      bool pf) {
    int h = 0;
    if (tv == MX_KV_F32)
        for (; h + 2 <= nh; h += 2)
            mx_attn_mix2(out + (size_t)h * vd, out + (size_t)(h + 1) * vd, p + (size_t)h * ldsc, p + (size_t)(h + 1) * ldsc,
                         (const float *)(const void *)V, ldv / 4, m, vd, acc, pf && h == 0);
    else
        for (; h + 2 <= nh; h += 2)
            mx_attn_mix2_kv(tv, out + (size_t)h * vd, out + (size_t)(h + 1) * vd, p + (size_t)h * ldsc, p + (size_t)(h + 1) * ldsc, V, ldv, m, vd, acc);
    for (; h < nh; h++) mx_attn_mix_kv(tv, out + (size_t)h * vd, p + (size_t)h * ldsc, V, ldv, m, vd, acc);
}

/* Task i: the heads of one sub-group of a kv head, or of hpt whole kv heads, for a block of query
 * tokens of one sequence. Each token's scores, softmax and mix are computed exactly as alone (the same
 * key blocks, the same order: results do not depend on the block or on hpt); only the loops over key
 * blocks run outside the loops over tokens and heads, so a block of K or V rows serves every token, and
 * a task with several kv heads reads a longer run of each cache row (its heads' rows are adjacent). */
static void att_task(void *ctx, int i, int tid) {
    att_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_layer_spec *ls = &f->m->arch.layers[j->layer];
    const mx_attn_spec *a = ls->attn;
    int hd = a->head_dim, vd = mx_attn_vdim(a), qkvd = qkv_dim(a), g = att_group(a), hpt = j->hpt, nkg = a->n_kv_heads / hpt;
    int bi = i / (nkg * j->subs), kvh0 = i / j->subs % nkg * hpt;
    int ta = j->t0 + j->blk[bi], tb = j->t0 + j->blk[bi + 1];
    int hs = i % j->subs * j->per, nh = MX_MIN(j->per, g - hs); /* heads hs.. of each kv head's group */
    const mx_kv *kv = f->seqs[f->seq_of[ta]].kv;
    int cl = ls->kv_shared ? ls->kv_from : j->layer;
    kv_shape ks = kv_shape_at(f->m, cl, kv->cap, j->shared);
    mx_kv_type tk = kv->type[0], tv = kv->type[1];
    size_t ldk = kv_ld(a, tk, hd), ldv = kv_ld(a, tv, vd), ldsc = (size_t)f->max_ctx, rk = mx_kv_row_bytes(tk, hd), rv = mx_kv_row_bytes(tv, vd);
    const uint8_t *K0 = (const uint8_t *)mx_kv_layer(kv, cl), *V0 = K0 + k_region(a, tk, ks.rows);
    K0 += (size_t)kvh0 * rk;
    V0 += (size_t)kvh0 * rv;
    att_keys ky[ATT_QB_MAX];
    bool masks[ATT_QB_MAX];
    int nmax = 0, smax = 0, kb = g_key_block ? g_key_block : MX_MAX(16, 8192 / hd); /* 32 KiB of f32 K at d = 64 */
    for (int t = ta; t < tb; t++) {
        att_keys *y = &ky[t - ta];
        *y = keys_of(j, t, &ks, kv, K0, V0, ldk, ldv);
        nmax = MX_MAX(nmax, y->n);
        smax = MX_MAX(smax, y->ns);
        masks[t - ta] = att_masks(j, t, y->ns ? 0 : y->j0, y->p, y->ns + y->n);
    }
    /* token b's kv head c, head h of its group: score row ((tid * qb + b * hpt + c) * g + h), its state likewise */
#define SC(b, c, h) (j->scores + ((((size_t)tid * j->qb + (size_t)(b) * hpt + (size_t)(c)) * g) + (size_t)(h)) * ldsc)
#define RS(b, c, h) (j->rows + ((((size_t)tid * j->qb + (size_t)(b) * hpt + (size_t)(c)) * g) + (size_t)(h)) * ATT_ROW_ST)
#define Q(t, c, h) (j->qkv + (size_t)(t) * qkvd + (size_t)((kvh0 + (c)) * g + hs + (h)) * hd)
#define OUT(t, c, h) (j->att + (size_t)(t) * a->n_heads * vd + (size_t)((kvh0 + (c)) * g + hs + (h)) * vd)
    for (int t = ta; t < tb; t++)
        for (int c = 0; c < hpt; c++)
            for (int h = 0; h < nh; h++) {
                float *st = RS(t - ta, c, h);
                st[0] = -INFINITY;
                memset(st + 1, 0, 8 * sizeof(float));
            }
    /* Phase 0: scores, block by block of keys, each block softcapped / masked and its max taken while in
     * L1. Phase 1: exponentials and the mix, block by block (the rows normalised at the end: each row's
     * sum is kept in lanes by key index, so neither depends on how the keys or the tokens were blocked).
     * Each phase runs over the kept keys (part 0: ns of them from row 0) and then the window (part 1). */
    for (int ph = 0; ph < 2; ph++) {
        if (ph == 1 && j->sinks) /* a per-head sink logit joins each softmax row (its max and, at the end, its sum) */
            for (int t = ta; t < tb; t++)
                for (int c = 0; c < hpt; c++)
                    for (int h = 0; h < nh; h++) RS(t - ta, c, h)[0] = fmaxf(RS(t - ta, c, h)[0], j->sinks[(kvh0 + c) * g + hs + h]);
        for (int part = 0; part < 2; part++)
            for (int k0 = 0; k0 < (part ? nmax : smax); k0 += kb)
                for (int c = 0; c < hpt; c++) {
                    /* Tokens whose keys start at one row read this block from a copy of its rows, one after
                     * another: a head's rows lie a whole cache row (all heads) apart, which the L1 cache
                     * keeps only a few of (they share its sets), so each token read them from L2 again. */
                    const uint8_t *pk = NULL;
                    size_t rb = ph ? rv : rk, ld = ph ? ldv : ldk;
                    int mp = 0;
                    bool one = tb - ta > 1;
                    for (int t = ta; one && t < tb; t++) {
                        const att_keys *y = &ky[t - ta];
                        int cnt = part ? y->n : y->ns;
                        one = (part ? y->K == ky[0].K : true) && k0 < cnt;
                        mp = MX_MAX(mp, MX_MIN(kb, cnt - k0));
                    }
                    if (one && (size_t)mp * rb <= ATT_PACK) {
                        uint8_t *dst = (uint8_t *)(j->pack + (size_t)tid * (ATT_PACK / sizeof(float)));
                        const uint8_t *src = (part ? (ph ? ky[0].V : ky[0].K) : (ph ? V0 : K0)) + (size_t)c * rb + (size_t)k0 * ld;
                        for (int r = 0; r < mp; r++) { /* the rows ahead asked for: the prefetchers do not follow this stride */
                            if (r + 16 < mp)
                                for (size_t l = 0; l < rb; l += 64) __builtin_prefetch(src + (size_t)(r + 16) * ld + l);
                            memcpy(dst + (size_t)r * rb, src + (size_t)r * ld, rb);
                        }
                        pk = dst;
                    }
                    for (int t = ta; t < tb; t++) {
                        const att_keys *y = &ky[t - ta];
                        int cnt = part ? y->n : y->ns, m = MX_MIN(kb, cnt - k0), o = (part ? y->ns : 0) + k0;
                        if (k0 >= cnt) continue;
                        if (ph == 0) {
                            const uint8_t *Kb = pk ? pk : (part ? y->K : K0) + (size_t)c * rk + (size_t)k0 * ldk;
                            scores_heads(tk, Q(t, c, 0), hd, nh, Kb, pk ? rk : ldk, m, a->scale, SC(t - ta, c, 0) + o, ldsc, !pk && t == ta);
                            for (int h = 0; h < nh; h++) {
                                float *st = RS(t - ta, c, h);
                                float bm = att_prep(j, t, y->ns ? 0 : y->j0, y->p, masks[t - ta], SC(t - ta, c, h), o, m);
                                st[0] = bm > st[0] ? bm : st[0];
                            }
                        } else {
                            for (int h = 0; h < nh; h++) {
                                float *st = RS(t - ta, c, h);
                                mx_exp_acc(SC(t - ta, c, h) + o, m, st[0] == -INFINITY ? 0 : st[0], st + 1, o);
                            }
                            const uint8_t *Vb = pk ? pk : (part ? y->V : V0) + (size_t)c * rv + (size_t)k0 * ldv;
                            mix_heads(tv, OUT(t, c, 0), vd, nh, SC(t - ta, c, 0) + o, ldsc, Vb, pk ? rv : ldv, m, o > 0, !pk && t == ta);
                        }
                    }
                }
    }
    for (int t = ta; t < tb; t++)
        for (int c = 0; c < hpt; c++)
            for (int h = 0; h < nh; h++) {
                const float *st = RS(t - ta, c, h);
                float sum = ((st[1] + st[2]) + (st[3] + st[4])) + ((st[5] + st[6]) + (st[7] + st[8]));
                if (j->sinks) sum += expf(j->sinks[(kvh0 + c) * g + hs + h] - st[0]);
                float *o = OUT(t, c, h);
                if (!(sum > 0)) memset(o, 0, (size_t)vd * sizeof(float)); /* every key masked */
                else
                    for (int d = 0; d < vd; d++) o[d] /= sum;
            }
#undef SC
#undef RS
#undef Q
#undef OUT
}

/* token t's K and V rows into its sequence's cache (a ring: rows pos % R and pos % R + R) */
static void write_rows(const mx_fwd *f, int layer, bool shared, const mx_attn_spec *a, const float *k, int t) {
    int hd = a->head_dim, vd = mx_attn_vdim(a), kvd = a->n_kv_heads * hd;
    const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
    kv_shape ks = kv_shape_at(f->m, layer, kv->cap, shared);
    int R = ks.R, r = kv_row(&ks, f->pos[t]);
    bool ring = ks.ring && f->pos[t] >= ks.keep;
    uint8_t *K = (uint8_t *)mx_kv_layer(kv, layer), *V = K + k_region(a, kv->type[0], ks.rows);
    size_t rk = mx_kv_row_bytes(kv->type[0], hd), rv = mx_kv_row_bytes(kv->type[1], vd), ldk = a->n_kv_heads * rk, ldv = a->n_kv_heads * rv;
    for (int h = 0; h < a->n_kv_heads; h++) { /* quantized once, here */
        uint8_t *kr = K + (size_t)r * ldk + (size_t)h * rk, *vr = V + (size_t)r * ldv + (size_t)h * rv;
        mx_kv_store(kv->type[0], kr, k + (size_t)h * hd, hd);
        mx_kv_store(kv->type[1], vr, k + kvd + (size_t)h * vd, vd);
        if (ring) {
            memcpy(kr + (size_t)R * ldk, kr, rk);
            memcpy(vr + (size_t)R * ldv, vr, rv);
        }
    }
}

static void clip(float *x, size_t n, float cl) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > cl ? cl : x[i] < -cl ? -cl : x[i];
}

/* q/k norms of one token's q (n_heads) and k (n_kv_heads; NULL: none) rows */
static void qk_norm(const mx_attn_spec *a, const att_w *w, float *q, float *k) {
    int hd = a->head_dim, qd = a->n_heads * hd, kvd = a->n_kv_heads * hd;
    if (a->qk_norm == MX_QKNORM_HEAD_EACH) {
        for (int h = 0; h < a->n_heads + (k ? a->n_kv_heads : 0); h++) {
            const mx_normw *nw = h < a->n_heads ? &w->q_norm : &w->k_norm;
            size_t o = (size_t)(h < a->n_heads ? h : h - a->n_heads) * hd;
            mx_normw hw = {nw->w ? nw->w + o : NULL, nw->b ? nw->b + o : NULL};
            mx_norm_rows(&a->qk_norm_spec, &hw, q + (size_t)h * hd, q + (size_t)h * hd, 1, hd, hd);
        }
    } else if (a->qk_norm == MX_QKNORM_HEAD) {
        mx_norm_rows(&a->qk_norm_spec, &w->q_norm, q, q, a->n_heads, hd, hd);
        if (k) mx_norm_rows(&a->qk_norm_spec, &w->k_norm, k, k, a->n_kv_heads, hd, hd);
    } else if (a->qk_norm == MX_QKNORM_FULL) {
        mx_norm_rows(&a->qk_norm_spec, &w->q_norm, q, q, 1, qd, qd);
        if (k) mx_norm_rows(&a->qk_norm_spec, &w->k_norm, k, k, 1, kvd, kvd);
    }
}

/* MX_QKNORM_FULL (an RMSNorm over all heads' q, and over all KV heads' k) under tensor parallelism:
 * each part's sums of squares of every token's q and k in ss [N][2], summed over the parts (a KV head
 * copied in tp_kv_rep parts counted once), then each part's channels scaled. */
static void qk_norm_parts(const mx_fwd *f, const mx_attn_spec *a, const att_w *w, float *qkv, int ld, bool has_k, float *ss) {
    const mx_shard *sh = f->m->shard;
    int N = f->N, hd = a->head_dim, d[2] = {a->n_heads * hd, a->n_kv_heads * hd}, rep = a->tp_kv_rep > 1 ? a->tp_kv_rep : 1;
    float cnt[2] = {(float)d[0] * sh->tp, (float)d[1] * sh->tp / rep};
    for (int t = 0; t < N; t++)
        for (int k = 0, o = 0; k < 2; o += d[k], k++) {
            double acc = 0;
            for (int i = 0; i < d[k] && (k == 0 || has_k); i++) acc += (double)qkv[(size_t)t * ld + o + i] * qkv[(size_t)t * ld + o + i];
            ss[(size_t)t * 2 + k] = (float)(k ? acc / rep : acc);
        }
    sh->ops->reduce(sh->ctx, ss, (size_t)N * 2);
    const mx_normw *nw[2] = {&w->q_norm, &w->k_norm};
    float off = a->qk_norm_spec.offset;
    for (int t = 0; t < N; t++)
        for (int k = 0, o = 0; k < (has_k ? 2 : 1); o += d[k], k++) {
            float inv = 1.0f / sqrtf(ss[(size_t)t * 2 + k] / cnt[k] + a->qk_norm_spec.eps), *x = qkv + (size_t)t * ld + o;
            for (int i = 0; i < d[k]; i++) x[i] *= inv * (nw[k]->w ? nw[k]->w[i] + off : 1.0f);
        }
}

float mx_attn_q_temp(const mx_attn_spec *a, int pos) { /* in f32 as HF: log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1 */
    return log1pf(floorf(((float)pos + (a->temp_pos0 ? 0.0f : 1.0f)) / a->temp_floor)) * a->temp_scale + 1.0f;
}

static void att_forward(mx_fwd *f, int layer, void *wp, const float *xn, float *out) {
    const att_w *w = wp;
    const mx_arch *arch = &f->m->arch;
    const mx_layer_spec *ls = &arch->layers[layer];
    const mx_attn_spec *a = ls->attn;
    int H = arch->hidden, N = f->N, hd = a->head_dim, qd = a->n_heads * hd, kvd = a->n_kv_heads * hd, qkvd = qkv_dim(a);
    int vd = mx_attn_vdim(a), kvvd = a->n_kv_heads * vd, ovd = a->n_heads * vd;
    att_bufs b;
    att_plan(a, f->max_tokens, f->max_ctx, mx_pool_size(f->pool), f->scratch, &b);
    float *qkv = b.qkv, *att = b.att, *gate = b.gate;
    if (w->gate.fmt) mx_linear_as(f, MX_OP_QKV, &w->gate, NULL, xn, N, H, gate, gate_rows(a));
    if (w->qkv.fmt) {
        mx_linear_as(f, MX_OP_QKV, &w->qkv, w->qkv_b, xn, N, H, qkv, qkvd);
        if (a->qkv_layout == MX_QKV_GROUPED) { /* reorder each row to [q | k | v] */
            float *row = b.row;
            int g = a->n_heads / a->n_kv_heads, gs = (g + 2) * hd;
            for (int t = 0; t < N; t++) {
                float *r = qkv + (size_t)t * qkvd;
                memcpy(row, r, (size_t)qkvd * 4);
                for (int kh = 0; kh < a->n_kv_heads; kh++) {
                    const float *src = row + (size_t)kh * gs;
                    memcpy(r + (size_t)kh * g * hd, src, (size_t)g * hd * 4);
                    memcpy(r + qd + (size_t)kh * hd, src + (size_t)g * hd, (size_t)hd * 4);
                    memcpy(r + qd + kvd + (size_t)kh * hd, src + (size_t)(g + 1) * hd, (size_t)hd * 4);
                }
            }
        }
    } else {
        if (a->gate) { /* per head [q | gate]: q into qkv, the gate stays in gate */
            mx_linear_as(f, MX_OP_QKV, &w->q, w->q_b, xn, N, H, gate, 2 * qd);
            for (int t = 0; t < N; t++)
                for (int h = 0; h < a->n_heads; h++)
                    memcpy(qkv + (size_t)t * qkvd + (size_t)h * hd, gate + (size_t)t * 2 * qd + (size_t)h * 2 * hd, (size_t)hd * 4);
            const mx_weight *kv[2] = {&w->k, &w->v};
            float *kvb[2] = {w->k_b, w->v_b}, *kvy[2] = {qkv + qd, qkv + qd + kvd};
            mx_linear_multi_as(f, MX_OP_QKV, 2, kv, kvb, xn, N, H, kvy, qkvd);
        } else {
            /* a shared layer projects q alone; k = v projects q and k, and v is k's copy */
            const mx_weight *ws[3] = {&w->q, &w->k, &w->v};
            float *bs[3] = {w->q_b, w->k_b, w->v_b}, *ys[3] = {qkv, qkv + qd, qkv + qd + kvd};
            mx_linear_multi_as(f, MX_OP_QKV, ls->kv_shared ? 1 : a->k_eq_v ? 2 : 3, ws, bs, xn, N, H, ys, qkvd);
            if (a->k_eq_v && !ls->kv_shared)
                for (int t = 0; t < N; t++) memcpy(qkv + (size_t)t * qkvd + qd + kvd, qkv + (size_t)t * qkvd + qd, (size_t)kvd * 4);
        }
    }
    if (a->clip_qkv > 0 && !a->clip_after_qk_norm) clip(qkv, (size_t)N * qkvd, a->clip_qkv);
    const mx_rope *rope = &arch->rope[ls->rope_idx];
    double t_op = f->prof ? mx_now() : 0;
    /* a ring (kv_shape_of) has a period of W + MX_RING_SLICE - 1 rows: a longer pass goes by slices (below) */
    bool shared = !ls->kv_shared && cache_shared(f->m, layer), sliced = false;
    for (int s = 0; !ls->kv_shared && N > MX_RING_SLICE && s < f->n_seqs; s++) sliced |= kv_shape_at(f->m, layer, f->seqs[s].kv->cap, shared).ring;
    const mx_shard *sh = f->m->shard;
    bool tp_full = sh && sh->tp > 1 && a->qk_norm == MX_QKNORM_FULL;
    if (tp_full) qk_norm_parts(f, a, w, qkv, qkvd, !ls->kv_shared, att);
    for (int t = 0; t < N; t++) {
        float *q = qkv + (size_t)t * qkvd, *k = ls->kv_shared ? NULL : q + qd;
        if (!a->qk_norm_after_rope && !tp_full) qk_norm(a, w, q, k);
        if (a->clip_qkv > 0 && a->clip_after_qk_norm) clip(q, (size_t)(k ? qkvd : qd), a->clip_qkv);
        if (arch->pos == MX_POS_ROPE && ls->rope) {
            const float *cs = f->cs[ls->rope_idx] + (size_t)t * rope->dim;
            mx_rope_apply(rope, q, a->n_heads, hd, cs);
            if (k) mx_rope_apply(rope, k, a->n_kv_heads, hd, cs);
        }
        if (a->qk_norm_after_rope) qk_norm(a, w, q, k);
        if (a->temp_scale) mx_scale(q, mx_attn_q_temp(a, f->pos[t]), qd);
        if (!k) continue;
        if (a->v_norm) mx_rmsnorm(k + kvd, k + kvd, NULL, 0, a->n_kv_heads, vd, vd, a->qk_norm_spec.eps);
        if (a->v_scale && a->v_scale != 1.0f) mx_scale(k + kvd, a->v_scale, kvvd);
        if (!sliced) write_rows(f, layer, shared, a, k, t);
    }
    if (f->prof) { mx_prof_add(f->prof, MX_OP_ROPE, t_op); t_op = mx_now(); }
    /* a ring layer's pass of more than MX_RING_SLICE tokens: rows written and attended a slice at a time,
     * a slice ending before an image block it would cut (the block's rows are read both ways; the engine
     * keeps rings for blocks of at most MX_RING_SLICE tokens) */
    for (int t0 = 0, tn; t0 < N; t0 += tn) {
        tn = sliced ? MX_MIN(MX_RING_SLICE, N - t0) : N;
        int t1 = t0 + tn;
        if (sliced && t1 < N && f->span_lo && f->span_hi[t1] > f->span_lo[t1] && f->seq_of[t1] == f->seq_of[t1 - 1]) {
            int back = f->pos[t1] - f->span_lo[t1]; /* the block's tokens before t1 in this slice */
            if (back > 0 && back < tn) tn -= back;
        }
        for (int t = t0; sliced && t < t0 + tn; t++) write_rows(f, layer, shared, a, qkv + (size_t)t * qkvd + qd, t);
        /* query blocks: runs of at most qb tokens of one sequence */
        int qb = att_qb(a, f->max_ctx, mx_pool_size(f->pool)), nblk = 0;
        for (int t = 0; t < tn; t++)
            if (!nblk || t - b.blk[nblk - 1] == qb || f->seq_of[t0 + t] != f->seq_of[t0 + t - 1]) b.blk[nblk++] = t;
        b.blk[nblk] = tn;
        int g = att_group(a), want = 2 * mx_pool_size(f->pool), units = nblk * a->n_kv_heads;
        int per = units >= want ? g : MX_MAX(1, g / ((want + units - 1) / units)), subs = (g + per - 1) / per;
        /* more kv heads than threads need: a task takes several (as many as its blocks' score rows allow) */
        int longest = 0, hpt = 1;
        for (int k = 0; k < nblk; k++) longest = MX_MAX(longest, b.blk[k + 1] - b.blk[k]);
        for (int c = 2; c <= a->n_kv_heads; c++)
            if (a->n_kv_heads % c == 0 && units / c >= mx_pool_size(f->pool) && c * longest <= qb) hpt = c;
        att_job j = {f, layer, per, subs, hpt, t0, b.blk, qb, ls->kv_shared || shared, qkv, att, b.scores, b.rows, b.pack, w->sinks};
        mx_pool_run(f->pool, att_task, &j, units / hpt * subs);
    }
    if (f->prof) mx_prof_add(f->prof, MX_OP_ATTN, t_op);
    if (a->gate)
        for (int t = 0; t < N; t++)
            for (int h = 0; h < a->n_heads; h++) {
                float *o = att + (size_t)t * qd + (size_t)h * hd;
                const float *g = gate + (size_t)t * 2 * qd + (size_t)h * 2 * hd + hd;
                for (int d = 0; d < hd; d++) o[d] *= 1.0f / (1.0f + expf(-g[d]));
            }
    if (w->gate.fmt) { /* in f32 as HF: out * sigmoid(g) or out * softplus(g) */
        int gr = gate_rows(a);
        for (int t = 0; t < N; t++)
            for (int h = 0; h < a->n_heads; h++) {
                float *o = att + (size_t)t * ovd + (size_t)h * vd;
                const float *g = gate + (size_t)t * gr + (size_t)h * (a->gate_per_head ? 1 : vd);
                for (int d = 0; d < vd; d++) {
                    float gv = g[a->gate_per_head ? 0 : d];
                    o[d] *= a->gate_softplus ? mx_softplus(gv) : 1.0f / (1.0f + expf(-gv));
                }
            }
    }
    if (w->out_norm.w || w->out_norm.b) mx_norm_rows(&arch->norm, &w->out_norm, att, att, N, ovd, ovd);
    mx_linear_as(f, MX_OP_O, &w->o, w->o_b, att, N, ovd, out, H);
}

const mx_block_ops mx_block_attention = {
    .name = "attention", .load = att_load, .free = att_free, .state_floats = att_state, .cache_floats = att_cache,
    .scratch_floats = att_scratch, .copy_prefix = att_copy_prefix, .prefix_ranges = att_prefix_ranges, .keep_min = att_keep_min, .used_floats = att_used, .forward = att_forward,
};
