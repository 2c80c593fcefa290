/* RecurrentGemma (Griffin) recurrent block (arch.rglru): a gelu-gated
 * branch y = act(linear_y x) times the RG-LRU of a causal conv of linear_x x,
 * then linear_out. The RG-LRU gates are block-diagonal (n_heads blocks of
 * width/n_heads, stored [block, in, out]):
 *   i = sigmoid(u W_i + b_i), r = sigmoid(u W_r + b_r),
 *   log a = -8 r softplus(param), h = a h + sqrt(1 - a^2) (i u),
 * with h = i u at position 0. The cache holds the conv window [width][K-1]
 * then h [width]; a sequence starting at position 0 starts from zeros.
 * Heads (gate blocks) run in parallel; tokens run in order. */
#include "ssm.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_weight x, y, out;
    float *x_b, *y_b, *out_b, *conv_w, *conv_b;
    float *ig_w, *ig_b, *rg_w, *rg_b; /* [heads][bw][bw], [heads][bw] */
    float *c;                         /* -8 softplus(recurrent_param) */
} rg_w;

static void rg_free(void *p) {
    rg_w *w = p;
    if (!w) return;
    mx_weight_free(&w->x); mx_weight_free(&w->y); mx_weight_free(&w->out);
    float *v[] = {w->x_b, w->y_b, w->out_b, w->conv_w, w->conv_b, w->ig_w, w->ig_b, w->rg_w, w->rg_b, w->c};
    for (size_t i = 0; i < MX_ARRAY_LEN(v); i++) free(v[i]);
    free(w);
}

static int rg_load(mx_model *m, int l, void **out) {
    const mx_arch *a = &m->arch;
    const mx_rglru_spec *s = &a->rglru;
    const char *P = s->prefix;
    int W = s->width, K = s->d_conv, nh = s->n_heads;
    if (!P || W < 1 || K < 1 || K > 64 || nh < 1 || W % nh)
        return mx_set_err("%s: layer %d: inconsistent RG-LRU dimensions", m->ck.dir, l);
    size_t bw = (size_t)(W / nh);
    rg_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    if (m->shard && m->shard->tp > 1) { /* part p: heads (gate blocks) [p nh, (p + 1) nh), their channels */
        int T = m->shard->tp, p = m->shard->tp_rank, H = a->hidden, WF = W * T;
        const int ch[1][2] = {{p * W, (p + 1) * W}}, hd[1][2] = {{p * nh, (p + 1) * nh}};
        if (mx_ssm_load_lin_rows(m, P, l, "linear_x", WF, H, ch, 1, true, &w->x, &w->x_b) ||
            mx_ssm_load_lin_rows(m, P, l, "linear_y", WF, H, ch, 1, true, &w->y, &w->y_b) ||
            mx_ssm_load_lin_cols(m, P, l, "linear_out", H, WF, p * W, W, true, &w->out, &w->out_b) ||
            mx_ssm_load_arr_parts(m, P, l, "conv_1d.weight", (size_t)WF * K, ch, 1, (size_t)K, &w->conv_w) ||
            mx_ssm_load_arr_parts(m, P, l, "conv_1d.bias", (size_t)WF, ch, 1, 1, &w->conv_b) ||
            mx_ssm_load_arr_parts(m, P, l, "rg_lru.input_gate_weight", (size_t)nh * T * bw * bw, hd, 1, bw * bw, &w->ig_w) ||
            mx_ssm_load_arr_parts(m, P, l, "rg_lru.input_gate_bias", (size_t)WF, ch, 1, 1, &w->ig_b) ||
            mx_ssm_load_arr_parts(m, P, l, "rg_lru.recurrent_gate_weight", (size_t)nh * T * bw * bw, hd, 1, bw * bw, &w->rg_w) ||
            mx_ssm_load_arr_parts(m, P, l, "rg_lru.recurrent_gate_bias", (size_t)WF, ch, 1, 1, &w->rg_b) ||
            mx_ssm_load_arr_parts(m, P, l, "rg_lru.recurrent_param", (size_t)WF, ch, 1, 1, &w->c))
            return MX_ERR;
    } else if (mx_ssm_load_lin(m, P, l, "linear_x", W, a->hidden, true, &w->x, &w->x_b) ||
        mx_ssm_load_lin(m, P, l, "linear_y", W, a->hidden, true, &w->y, &w->y_b) ||
        mx_ssm_load_lin(m, P, l, "linear_out", a->hidden, W, true, &w->out, &w->out_b) ||
        mx_ssm_load_arr(m, P, l, "conv_1d.weight", (size_t)W * K, true, &w->conv_w) ||
        mx_ssm_load_arr(m, P, l, "conv_1d.bias", (size_t)W, true, &w->conv_b) ||
        mx_ssm_load_arr(m, P, l, "rg_lru.input_gate_weight", (size_t)nh * bw * bw, true, &w->ig_w) ||
        mx_ssm_load_arr(m, P, l, "rg_lru.input_gate_bias", (size_t)W, true, &w->ig_b) ||
        mx_ssm_load_arr(m, P, l, "rg_lru.recurrent_gate_weight", (size_t)nh * bw * bw, true, &w->rg_w) ||
        mx_ssm_load_arr(m, P, l, "rg_lru.recurrent_gate_bias", (size_t)W, true, &w->rg_b) ||
        mx_ssm_load_arr(m, P, l, "rg_lru.recurrent_param", (size_t)W, true, &w->c))
        return MX_ERR;
    for (int i = 0; i < W; i++) w->c[i] = -8.0f * mx_softplus(w->c[i]);
    return MX_OK;
}

static size_t rg_state(const mx_model *m, int layer, int cap) {
    (void)layer; (void)cap;
    const mx_rglru_spec *s = &m->arch.rglru;
    return (size_t)s->width * s->d_conv;
}

/* xb, u, yb [rows][width]; gates: per thread [2 * block width] */
typedef struct { float *xb, *u, *yb, *gates; } rg_bufs;
static size_t rg_plan(const mx_rglru_spec *s, int rows, int nt, float *base, rg_bufs *b) {
    size_t NW = (size_t)rows * s->width;
    mx_plan p = {base, 0};
    b->xb = mx_plan_take(&p, NW);
    b->u = mx_plan_take(&p, NW);
    b->yb = mx_plan_take(&p, NW);
    b->gates = mx_plan_take(&p, (size_t)nt * 2 * (s->width / s->n_heads));
    return p.n;
}

static size_t rg_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer; (void)max_ctx;
    rg_bufs b;
    return rg_plan(&m->arch.rglru, max_tokens, nt, NULL, &b);
}

typedef struct {
    mx_fwd *f;
    int layer;
    const rg_w *w;
    const float *xb; /* linear_x output [N][W] */
    float *u;        /* conv output [N][W] */
    float *yb;       /* act(linear_y) [N][W], multiplied by h in place */
    float *gates;    /* per thread 2 * bw */
} rg_job;

static void rg_task(void *ctx, int hh, int tid) {
    rg_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_rglru_spec *s = &f->m->arch.rglru;
    const rg_w *w = j->w;
    int W = s->width, K = s->d_conv, bw = W / s->n_heads, c0 = hh * bw;
    /* conv of this block's channels */
    for (int c = c0; c < c0 + bw; c++) {
        float *win = NULL;
        for (int t = 0; t < f->N; t++) {
            if (mx_seq_first(f, t)) {
                win = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, &mx_block_rglru) + (size_t)c * (K - 1);
                if (f->pos[t] == 0) memset(win, 0, (size_t)(K - 1) * sizeof(float));
            }
            j->u[(size_t)t * W + c] = mx_conv_step(w->conv_w + (size_t)c * K, w->conv_b[c], K, win, j->xb[(size_t)t * W + c]);
        }
    }
    /* gates and recurrence, token by token */
    float *ig = j->gates + (size_t)tid * 2 * bw, *rg = ig + bw, *h = NULL;
    const float *Wi = w->ig_w + (size_t)hh * bw * bw, *Wr = w->rg_w + (size_t)hh * bw * bw;
    for (int t = 0; t < f->N; t++) {
        if (mx_seq_first(f, t)) h = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, &mx_block_rglru) + (size_t)W * (K - 1) + c0;
        const float *u = j->u + (size_t)t * W + c0;
        memcpy(ig, w->ig_b + c0, (size_t)bw * sizeof(float));
        memcpy(rg, w->rg_b + c0, (size_t)bw * sizeof(float));
        for (int i = 0; i < bw; i++) {
            mx_axpy(ig, u[i], Wi + (size_t)i * bw, bw);
            mx_axpy(rg, u[i], Wr + (size_t)i * bw, bw);
        }
        bool reset = f->pos[t] == 0;
        float *y = j->yb + (size_t)t * W + c0;
        for (int k = 0; k < bw; k++) {
            float gi = 1.0f / (1.0f + expf(-ig[k])), gr = 1.0f / (1.0f + expf(-rg[k]));
            float la = w->c[c0 + k] * gr, x = u[k] * gi;
            if (reset) h[k] = x;
            else h[k] = expf(la) * h[k] + x * sqrtf(1.0f - expf(2.0f * la));
            y[k] *= h[k];
        }
    }
}

static void rg_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    const rg_w *w = wp;
    const mx_rglru_spec *s = &f->m->arch.rglru;
    int N = f->N, H = f->m->arch.hidden, W = s->width;
    rg_bufs b;
    rg_plan(s, N, mx_pool_size(f->pool), f->scratch, &b);
    float *xb = b.xb, *u = b.u, *yb = b.yb, *gates = b.gates;
    mx_linear(f, &w->y, w->y_b, in, N, H, yb, W);
    mx_act_apply(s->act, yb, N * W);
    mx_linear(f, &w->x, w->x_b, in, N, H, xb, W);
    rg_job j = {f, layer, w, xb, u, yb, gates};
    mx_pool_run(f->pool, rg_task, &j, s->n_heads);
    mx_linear(f, &w->out, w->out_b, yb, N, W, out, H);
}

const mx_block_ops mx_block_rglru = {
    .name = "rglru", .load = rg_load, .free = rg_free, .state_floats = rg_state, .scratch_floats = rg_scratch,
    .forward = rg_forward, .recurrent = true,
};
