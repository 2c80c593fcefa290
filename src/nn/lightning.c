/* Lightning attention block (arch.lightning, MiniMax): decayed causal linear
 * attention. Per head h with slope s_h, o_t = sum_{j<=t} e^(-s_h (t-j))
 * (q_t . k_j) v_j, kept as the state KV = e^(-s_h) KV + k_t^T v_t,
 * o_t = q_t KV; HF's blockwise prefill computes the same sums, and here a
 * prompt runs through the recurrence token by token, so a chunked prefill
 * is the step-by-step decode. Then RMSNorm over the heads' outputs, a
 * sigmoid output gate from the block input, and out_proj. The cache holds KV
 * [H][d][d]; a sequence whose first token here is at position 0 starts from
 * zeros. Heads run in parallel. */
#include "ssm.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_weight qkv, gate, out;
    float *norm_w, *decay; /* decay[h] = e^(-s_h) */
} lt_w;

static void lt_free(void *p) {
    lt_w *w = p;
    if (!w) return;
    mx_weight_free(&w->qkv); mx_weight_free(&w->gate); mx_weight_free(&w->out);
    free(w->norm_w); free(w->decay);
    free(w);
}

static int lt_load(mx_model *m, int l, void **out) {
    const mx_arch *a = &m->arch;
    const mx_lightning_spec *s = &a->lightning;
    const char *P = s->prefix;
    int H = a->hidden, nh = s->n_heads, D = s->n_heads * s->head_dim;
    if (!P || nh < 1 || s->head_dim < 1) return mx_set_err("%s: layer %d: inconsistent lightning attention dimensions", m->ck.dir, l);
    lt_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    float *slope = NULL;
    /* tensor parallelism: part p holds heads [p nh, (p + 1) nh) ([q | k | v] per head, their gate and
     * norm channels, out_proj's columns); h0 is its first head's index in the whole layer */
    int T = m->shard && m->shard->tp > 1 ? m->shard->tp : 1, p = T > 1 ? m->shard->tp_rank : 0, h0 = p * nh, NH = nh * T;
    if (T > 1) {
        const int qkv[1][2] = {{3 * p * D, 3 * (p + 1) * D}}, ch[1][2] = {{p * D, (p + 1) * D}}, hd[1][2] = {{h0, h0 + nh}};
        float *all = NULL;
        if (mx_ssm_load_lin_rows(m, P, l, "qkv_proj", 3 * D * T, H, qkv, 1, false, &w->qkv, NULL) ||
            mx_ssm_load_lin_rows(m, P, l, "output_gate", D * T, H, ch, 1, false, &w->gate, NULL) ||
            mx_ssm_load_lin_cols(m, P, l, "out_proj", H, D * T, p * D, D, false, &w->out, NULL) ||
            mx_ssm_load_arr_parts(m, P, l, "norm.weight", (size_t)D * T, ch, 1, 1, &w->norm_w) ||
            mx_ssm_load_arr(m, P, l, "slope_rate", (size_t)NH, false, &all) ||
            (all && mx_ssm_load_arr_parts(m, P, l, "slope_rate", (size_t)NH, hd, 1, 1, &slope))) {
            free(all);
            return MX_ERR;
        }
        free(all);
    } else if (mx_ssm_load_lin(m, P, l, "qkv_proj", 3 * D, H, false, &w->qkv, NULL) ||
        mx_ssm_load_lin(m, P, l, "output_gate", D, H, false, &w->gate, NULL) ||
        mx_ssm_load_lin(m, P, l, "out_proj", H, D, false, &w->out, NULL) ||
        mx_ssm_load_arr(m, P, l, "norm.weight", (size_t)D, true, &w->norm_w) ||
        mx_ssm_load_arr(m, P, l, "slope_rate", (size_t)nh, false, &slope))
        return MX_ERR;
    w->decay = mx_malloc((size_t)nh * sizeof(float));
    if (!w->decay) { free(slope); return MX_ERR; }
    /* the stored slopes when the checkpoint has them (HF saves the buffer), else HF's formula in f32 */
    float base = (float)(1.0 / pow(2.0, 8.0 / NH)), factor = (float)(1.0 - l / (a->n_layers - 1 + 1e-5) + 1e-5);
    for (int h = 0; h < nh; h++) {
        float sl = slope ? slope[h] : powf(base, (float)(h0 + h + 1)) * factor;
        w->decay[h] = expf(-sl);
    }
    free(slope);
    return MX_OK;
}

static size_t lt_state(const mx_model *m, int layer, int cap) {
    (void)layer; (void)cap;
    const mx_lightning_spec *s = &m->arch.lightning;
    return (size_t)s->n_heads * s->head_dim * s->head_dim;
}

/* qkv [rows][3 H d]; o, gate [rows][H d] */
typedef struct { float *qkv, *o, *gate; } lt_bufs;
static size_t lt_plan(const mx_lightning_spec *s, int rows, float *base, lt_bufs *b) {
    size_t D = (size_t)s->n_heads * s->head_dim;
    mx_plan p = {base, 0};
    b->qkv = mx_plan_take(&p, (size_t)rows * 3 * D);
    b->o = mx_plan_take(&p, (size_t)rows * D);
    b->gate = mx_plan_take(&p, (size_t)rows * D);
    return p.n;
}

static size_t lt_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer; (void)max_ctx; (void)nt;
    lt_bufs b;
    return lt_plan(&m->arch.lightning, max_tokens, NULL, &b);
}

typedef struct {
    mx_fwd *f;
    int layer;
    const lt_w *w;
    const float *qkv;
    float *o;
} lt_job;

static void lt_head_task(void *ctx, int h, int tid) {
    (void)tid;
    lt_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_lightning_spec *s = &f->m->arch.lightning;
    int d = s->head_dim, D = s->n_heads * d;
    float r = j->w->decay[h], *S = NULL;
    for (int t = 0; t < f->N; t++) {
        if (mx_seq_first(f, t)) {
            S = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, &mx_block_lightning) + (size_t)h * d * d;
            if (f->pos[t] == 0) memset(S, 0, (size_t)d * d * sizeof(float));
        }
        const float *q = j->qkv + (size_t)t * 3 * D + (size_t)h * 3 * d, *k = q + d, *v = k + d;
        float *o = j->o + (size_t)t * D + (size_t)h * d;
        memset(o, 0, (size_t)d * sizeof(float));
        for (int i = 0; i < d; i++) {
            float *row = S + (size_t)i * d;
            for (int e = 0; e < d; e++) row[e] = r * row[e] + k[i] * v[e];
            mx_axpy(o, q[i], row, d);
        }
    }
}

static void lt_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    const lt_w *w = wp;
    const mx_arch *a = &f->m->arch;
    const mx_lightning_spec *s = &a->lightning;
    int N = f->N, H = a->hidden, D = s->n_heads * s->head_dim;
    lt_bufs b;
    lt_plan(s, N, f->scratch, &b);
    float *qkv = b.qkv, *o = b.o, *g = b.gate;
    mx_linear(f, &w->qkv, NULL, in, N, H, qkv, 3 * D);
    mx_linear(f, &w->gate, NULL, in, N, H, g, D);
    mx_act_apply(s->act, qkv, N * 3 * D);
    lt_job j = {f, layer, w, qkv, o};
    mx_pool_run(f->pool, lt_head_task, &j, s->n_heads);
    const mx_shard *sh = f->m->shard;
    if (sh && sh->tp > 1) { /* the norm spans every head: each part's sums of squares, summed over the parts */
        float *ss = qkv; /* free now */
        for (int t = 0; t < N; t++) {
            double acc = 0;
            for (int i = 0; i < D; i++) acc += (double)o[(size_t)t * D + i] * o[(size_t)t * D + i];
            ss[t] = (float)acc;
        }
        sh->ops->reduce(sh->ctx, ss, (size_t)N);
        for (int t = 0; t < N; t++) {
            float inv = 1.0f / sqrtf(ss[t] / (float)(D * sh->tp) + s->norm_eps);
            for (int i = 0; i < D; i++) o[(size_t)t * D + i] *= inv * w->norm_w[i];
        }
    } else mx_rmsnorm(o, o, w->norm_w, 0, N, D, D, s->norm_eps);
    for (size_t i = 0; i < (size_t)N * D; i++) o[i] *= 1.0f / (1.0f + expf(-g[i]));
    mx_linear(f, &w->out, NULL, o, N, D, out, H);
}

const mx_block_ops mx_block_lightning = {
    .name = "lightning", .load = lt_load, .free = lt_free, .state_floats = lt_state, .scratch_floats = lt_scratch,
    .forward = lt_forward, .recurrent = true,
};
