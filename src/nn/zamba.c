/* Zamba2 hybrid layer block (arch.shared_block): a shared transformer block
 * (attention + MLP, weights shared by the layers that use it, with per-use
 * LoRA adapters) run on [h | token embeddings], projected by the layer's own
 * linear, added to h and fed through the layer's Mamba2 mixer (nn/mamba.c).
 * Per-sequence state: the Mamba2 state, then this use's K and V
 * [cap][kv_heads * head_dim]. */
#include "ssm.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_normw in_norm, ff_norm;
    mx_weight q, k, v, o, gate_up, down;
    float *gate_up_b, *down_b;
} shared_w;

typedef struct {
    shared_w *sh;
    bool owns;
    mx_weight ad_a[3], ad_b[3]; /* q, k, v adapters: A [r][2H], B [dim][r] */
    mx_weight ma, mb;           /* MLP adapter: A [r][H], B [2F][r] */
    mx_weight linear;
    mx_normw mnorm;
    void *mamba;
} zb_w;

static int use_index(const mx_model *m, int layer) {
    int k = 0;
    for (int l = 0; l < layer; l++) k += m->arch.layers[l].mixer == &mx_block_zamba;
    return k;
}

static void shared_free(shared_w *s) {
    if (!s) return;
    mx_normw_free(&s->in_norm); mx_normw_free(&s->ff_norm);
    mx_weight *ws[] = {&s->q, &s->k, &s->v, &s->o, &s->gate_up, &s->down};
    for (size_t i = 0; i < MX_ARRAY_LEN(ws); i++) mx_weight_free(ws[i]);
    free(s->gate_up_b); free(s->down_b);
    free(s);
}

static void zb_free(void *p) {
    zb_w *w = p;
    if (!w) return;
    if (w->owns) shared_free(w->sh);
    for (int i = 0; i < 3; i++) { mx_weight_free(&w->ad_a[i]); mx_weight_free(&w->ad_b[i]); }
    mx_weight_free(&w->ma); mx_weight_free(&w->mb); mx_weight_free(&w->linear);
    mx_normw_free(&w->mnorm);
    if (w->mamba) mx_ssm_free(w->mamba);
    free(w);
}

/* mx_load_lin on "<spec.shared>.<sub>" with the layer and, for adapters, a second index. */
static int lin(mx_model *m, int layer, int idx, const char *sub, int rows, int cols, bool bias, mx_weight *w, float **b) {
    char *pat = mx_asprintf("%s.%s", m->arch.shared_block.shared, sub), mod[512];
    if (!pat) return MX_ERR;
    snprintf(mod, sizeof mod, pat, layer, idx);
    free(pat);
    return mx_load_lin(m, mod, 0, rows, cols, bias, w, b);
}

static int zb_load(mx_model *m, int l, void **out) {
    mx_arch *a = &m->arch;
    const mx_shared_block_spec *s = &a->shared_block;
    int H = a->hidden, H2 = 2 * H, AD = s->heads * s->head_dim, KD = s->kv_heads * s->head_dim, F = s->ffn, r = s->adapter_rank;
    if (!s->shared || s->n_blocks < 1 || s->heads < 1 || s->kv_heads < 1 || s->heads % s->kv_heads || s->head_dim < 1 ||
        F < 1 || r < 1 || (s->rope && a->rope[0].dim > s->head_dim))
        return mx_set_err("%s: layer %d: inconsistent shared-block dimensions", m->ck.dir, l);
    zb_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    int k = use_index(m, l), b = k % s->n_blocks;
    /* the block's first user: its weights and this use's adapters are stored under that layer */
    int l0 = l;
    for (int q = 0; q < l; q++)
        if (a->layers[q].mixer == &mx_block_zamba && use_index(m, q) % s->n_blocks == b) { l0 = q; break; }
    for (int q = 0; q < l && !w->sh; q++) /* an earlier user of the same block in this process holds it (a pipeline stage may not have it) */
        if (a->layers[q].mixer == &mx_block_zamba && use_index(m, q) % s->n_blocks == b && m->layers[q].mixer_w)
            w->sh = ((zb_w *)m->layers[q].mixer_w)->sh;
    if (!w->sh) {
        shared_w *sh = w->sh = mx_calloc(1, sizeof *sh);
        if (!sh) return MX_ERR;
        w->owns = true;
        char *n1 = mx_asprintf("%s.input_layernorm", s->shared), *n2 = mx_asprintf("%s.pre_ff_layernorm", s->shared);
        int rc = !n1 || !n2 || mx_load_norm(m, &a->norm, n1, l0, H2, &sh->in_norm) || mx_load_norm(m, &a->norm, n2, l0, H, &sh->ff_norm);
        free(n1); free(n2);
        if (rc || lin(m, l0, 0, "self_attn.q_proj", AD, H2, false, &sh->q, NULL) ||
            lin(m, l0, 0, "self_attn.k_proj", KD, H2, false, &sh->k, NULL) ||
            lin(m, l0, 0, "self_attn.v_proj", KD, H2, false, &sh->v, NULL) ||
            lin(m, l0, 0, "self_attn.o_proj", H, AD, false, &sh->o, NULL) ||
            lin(m, l0, 0, "feed_forward.gate_up_proj", 2 * F, H, s->bias, &sh->gate_up, &sh->gate_up_b) ||
            lin(m, l0, 0, "feed_forward.down_proj", H, F, s->bias, &sh->down, &sh->down_b))
            return MX_ERR;
    }
    static const char *const qkv[3] = {"q", "k", "v"};
    if (s->attn_adapters)
        for (int i = 0; i < 3; i++) {
            char sa[128], sb[128];
            snprintf(sa, sizeof sa, "self_attn.linear_%s_adapter_list.%%d.0", qkv[i]);
            snprintf(sb, sizeof sb, "self_attn.linear_%s_adapter_list.%%d.1", qkv[i]);
            if (lin(m, l0, k, sa, r, H2, false, &w->ad_a[i], NULL) || lin(m, l0, k, sb, i ? KD : AD, r, false, &w->ad_b[i], NULL))
                return MX_ERR;
        }
    if (lin(m, l0, k, "feed_forward.gate_up_proj_adapter_list.%d.0", r, H, false, &w->ma, NULL) ||
        lin(m, l0, k, "feed_forward.gate_up_proj_adapter_list.%d.1", 2 * F, r, false, &w->mb, NULL))
        return MX_ERR;
    if (mx_load_lin(m, s->linear, l, H, H, false, &w->linear, NULL) || mx_load_norm(m, &a->norm, s->mamba_norm, l, H, &w->mnorm) ||
        mx_ssm_load_prefix(m, l, s->mamba, &w->mamba))
        return MX_ERR;
    return MX_OK;
}

static size_t zb_state(const mx_model *m, int layer, int cap) {
    const mx_shared_block_spec *s = &m->arch.shared_block;
    return mx_block_mamba2.state_floats(m, layer, cap) + (size_t)2 * cap * s->kv_heads * s->head_dim;
}

/* The Mamba2 scratch comes first (mx_mamba2_run uses f->scratch from 0, for
 * up to max_tokens rows); then x2, xn2 [rows][2H]; q, att [rows][heads *
 * head_dim]; k, v [rows][kv dim]; lt, lo: LoRA [rows][rank], [rows][max(q
 * dim, 2F)]; a, an, t, xm [rows][H]; gu [rows][2F]; per thread a scores row
 * of max_ctx. */
typedef struct { float *x2, *xn2, *q, *k, *v, *lt, *lo, *att, *a, *an, *gu, *t, *xm, *sc; } zb_bufs;
static size_t zb_plan(const mx_model *m, int layer, int rows, int max_tokens, int max_ctx, int nt, float *base, zb_bufs *b) {
    const mx_shared_block_spec *s = &m->arch.shared_block;
    size_t H = (size_t)m->arch.hidden, AD = (size_t)s->heads * s->head_dim, KD = (size_t)s->kv_heads * s->head_dim;
    size_t F2 = 2 * (size_t)s->ffn, n = (size_t)rows;
    mx_plan p = {base, 0};
    mx_plan_take(&p, mx_block_mamba2.scratch_floats(m, layer, max_tokens, max_ctx, nt));
    b->x2 = mx_plan_take(&p, n * 2 * H);
    b->xn2 = mx_plan_take(&p, n * 2 * H);
    b->q = mx_plan_take(&p, n * AD);
    b->k = mx_plan_take(&p, n * KD);
    b->v = mx_plan_take(&p, n * KD);
    b->lt = mx_plan_take(&p, n * (size_t)s->adapter_rank);
    b->lo = mx_plan_take(&p, n * (AD > F2 ? AD : F2));
    b->att = mx_plan_take(&p, n * AD);
    b->a = mx_plan_take(&p, n * H);
    b->an = mx_plan_take(&p, n * H);
    b->gu = mx_plan_take(&p, n * F2);
    b->t = mx_plan_take(&p, n * H);
    b->xm = mx_plan_take(&p, n * H);
    b->sc = mx_plan_take(&p, (size_t)nt * max_ctx);
    return p.n;
}

static size_t zb_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    zb_bufs b;
    return zb_plan(m, layer, max_tokens, max_tokens, max_ctx, nt, NULL, &b);
}

typedef struct {
    mx_fwd *f;
    int layer;
    const float *q;
    float *att, *scores;
} zb_att_job;

static float *kv_base(const mx_fwd *f, int layer, const mx_kv *kv) {
    return mx_kv_block(f->m, kv, layer, &mx_block_zamba) + mx_block_mamba2.state_floats(f->m, layer, kv->cap);
}

static void zb_att_task(void *ctx, int i, int tid) {
    zb_att_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_shared_block_spec *s = &f->m->arch.shared_block;
    int hd = s->head_dim, t = i / s->heads, h = i % s->heads, KD = s->kv_heads * hd, kvh = h / (s->heads / s->kv_heads);
    const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
    const float *K = kv_base(f, j->layer, kv), *V = K + (size_t)kv->cap * KD;
    const float *q = j->q + (size_t)t * s->heads * hd + (size_t)h * hd;
    float *sc = j->scores + (size_t)tid * f->max_ctx;
    int n = f->pos[t] + 1;
    for (int p = 0; p < n; p++) sc[p] = mx_dot(q, K + (size_t)p * KD + (size_t)kvh * hd, hd) * s->attn_scale;
    mx_softmax(sc, n);
    float *o = j->att + (size_t)t * s->heads * hd + (size_t)h * hd;
    memset(o, 0, (size_t)hd * sizeof(float));
    for (int p = 0; p < n; p++) mx_axpy(o, sc[p], V + (size_t)p * KD + (size_t)kvh * hd, hd);
}

/* y[n][ldy] += B(A x): lt [n][r], lo [n][B rows] scratch */
static void lora(const mx_fwd *f, const mx_weight *A, const mx_weight *B, const float *x, int n, int ldx, float *lt, float *lo,
                 float *y, int ldy) {
    if (!A->fmt) return;
    mx_linear(f, A, NULL, x, n, ldx, lt, A->rows);
    mx_linear(f, B, NULL, lt, n, A->rows, lo, B->rows);
    for (int t = 0; t < n; t++) mx_add(y + (size_t)t * ldy, lo + (size_t)t * B->rows, B->rows);
}

static void zb_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    const zb_w *w = wp;
    const shared_w *sh = w->sh;
    const mx_model *m = f->m;
    const mx_arch *a = &m->arch;
    const mx_shared_block_spec *s = &a->shared_block;
    int N = f->N, H = a->hidden, H2 = 2 * H, hd = s->head_dim, AD = s->heads * hd, KD = s->kv_heads * hd, F = s->ffn;
    zb_bufs b;
    zb_plan(m, layer, N, f->max_tokens, f->max_ctx, mx_pool_size(f->pool), f->scratch, &b);
    float *x2 = b.x2, *xn2 = b.xn2, *q = b.q, *k = b.k, *v = b.v, *lt = b.lt, *lo = b.lo, *att = b.att, *ab = b.a, *an = b.an,
          *gu = b.gu, *tb = b.t, *xm = b.xm, *scores = b.sc;
    /* [h | e] */
    for (int t = 0; t < N; t++) {
        const mx_seq_in *sq = &f->seqs[f->seq_of[t]];
        memcpy(x2 + (size_t)t * H2, in + (size_t)t * H, (size_t)H * sizeof(float));
        mx_weight_row(&m->embed, sq->tokens[f->pos[t] - sq->kv->len], x2 + (size_t)t * H2 + H);
        if (a->embed_scale != 1.0f) mx_scale(x2 + (size_t)t * H2 + H, a->embed_scale, H);
    }
    mx_norm_rows(&a->norm, &sh->in_norm, xn2, x2, N, H2, H2);
    mx_linear(f, &sh->q, NULL, xn2, N, H2, q, AD);
    mx_linear(f, &sh->k, NULL, xn2, N, H2, k, KD);
    mx_linear(f, &sh->v, NULL, xn2, N, H2, v, KD);
    lora(f, &w->ad_a[0], &w->ad_b[0], xn2, N, H2, lt, lo, q, AD);
    lora(f, &w->ad_a[1], &w->ad_b[1], xn2, N, H2, lt, lo, k, KD);
    lora(f, &w->ad_a[2], &w->ad_b[2], xn2, N, H2, lt, lo, v, KD);
    for (int t = 0; t < N; t++) {
        float *qt = q + (size_t)t * AD, *kt = k + (size_t)t * KD;
        if (s->rope) {
            const float *cs = f->cs[0] + (size_t)t * a->rope[0].dim;
            mx_rope_apply(&a->rope[0], qt, s->heads, hd, cs);
            mx_rope_apply(&a->rope[0], kt, s->kv_heads, hd, cs);
        }
        const mx_kv *kv = f->seqs[f->seq_of[t]].kv;
        float *K = kv_base(f, layer, kv), *V = K + (size_t)kv->cap * KD;
        memcpy(K + (size_t)f->pos[t] * KD, kt, (size_t)KD * sizeof(float));
        memcpy(V + (size_t)f->pos[t] * KD, v + (size_t)t * KD, (size_t)KD * sizeof(float));
    }
    zb_att_job j = {f, layer, q, att, scores};
    mx_pool_run(f->pool, zb_att_task, &j, N * s->heads);
    mx_linear(f, &sh->o, NULL, att, N, AD, ab, H);
    /* MLP with its adapter */
    mx_norm_rows(&a->norm, &sh->ff_norm, an, ab, N, H, H);
    mx_linear(f, &sh->gate_up, sh->gate_up_b, an, N, H, gu, 2 * F);
    lora(f, &w->ma, &w->mb, an, N, H, lt, lo, gu, 2 * F);
    for (int t = 0; t < N; t++) mx_act_mul(s->act, gu + (size_t)t * 2 * F, gu + (size_t)t * 2 * F + F, F);
    mx_linear(f, &sh->down, sh->down_b, gu, N, 2 * F, tb, H);
    /* the layer's linear, then its Mamba2 on norm(h + t) */
    mx_linear(f, &w->linear, NULL, tb, N, H, xm, H);
    mx_add(xm, in, N * H);
    mx_norm_rows(&a->norm, &w->mnorm, xm, xm, N, H, H);
    mx_mamba2_run(f, layer, w->mamba, &mx_block_zamba, xm, out);
}

const mx_block_ops mx_block_zamba = {
    .name = "zamba", .load = zb_load, .free = zb_free, .state_floats = zb_state, .scratch_floats = zb_scratch,
    .forward = zb_forward, .recurrent = true, .reads_embed = true,
};
