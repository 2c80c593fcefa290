/* Gated short-convolution block (arch.shortconv, LFM2):
 * [B | C | x] = in_proj(h), y = C * conv(B * x), out_proj(y), where conv is
 * a causal depthwise convolution over time (or, for bidirectional encoders,
 * a centered one over whole sequences, without state). The cache holds the last
 * d_conv-1 values of B * x per channel (reset at position 0); tokens run in
 * order per sequence, so chunked prefill equals step-by-step decoding. */
#include "ssm.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_weight in, out;
    float *in_b, *out_b, *conv_w, *conv_b;
} sc_w;

/* the block's channels: the hidden size, or under tensor parallelism this part's share of it */
static int sc_ch(const mx_model *m) { return m->arch.shortconv.tp_width ? m->arch.shortconv.tp_width : m->arch.hidden; }

static void sc_free(void *p) {
    sc_w *w = p;
    if (!w) return;
    mx_weight_free(&w->in); mx_weight_free(&w->out);
    free(w->in_b); free(w->out_b); free(w->conv_w); free(w->conv_b);
    free(w);
}

static int sc_load(mx_model *m, int l, void **out) {
    const mx_arch *a = &m->arch;
    const mx_shortconv_spec *s = &a->shortconv;
    int H = a->hidden, K = s->d_conv;
    if (!s->prefix || K < 1 || K > 64) return mx_set_err("%s: layer %d: inconsistent short-conv dimensions", m->ck.dir, l);
    sc_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    if (s->tp_width) { /* part p: its channels of B, C and x, the conv, and out_proj's columns (summed over the parts) */
        int C = s->tp_width, p = m->shard->tp_rank;
        const int in[3][2] = {{p * C, (p + 1) * C}, {H + p * C, H + (p + 1) * C}, {2 * H + p * C, 2 * H + (p + 1) * C}}, cc[1][2] = {{p * C, (p + 1) * C}};
        return mx_ssm_load_lin_rows(m, s->prefix, l, "in_proj", 3 * H, H, in, 3, s->bias, &w->in, &w->in_b) ||
                       mx_ssm_load_lin_cols(m, s->prefix, l, "out_proj", H, H, p * C, C, s->bias, &w->out, &w->out_b) ||
                       mx_ssm_load_arr_parts(m, s->prefix, l, "conv.weight", (size_t)H * K, cc, 1, (size_t)K, &w->conv_w) ||
                       (s->bias && mx_ssm_load_arr_parts(m, s->prefix, l, "conv.bias", (size_t)H, cc, 1, 1, &w->conv_b))
                   ? MX_ERR
                   : MX_OK;
    }
    if (mx_ssm_load_lin(m, s->prefix, l, "in_proj", 3 * H, H, s->bias, &w->in, &w->in_b) ||
        mx_ssm_load_lin(m, s->prefix, l, "out_proj", H, H, s->bias, &w->out, &w->out_b) ||
        mx_ssm_load_arr(m, s->prefix, l, "conv.weight", (size_t)H * K, true, &w->conv_w) ||
        (s->bias && mx_ssm_load_arr(m, s->prefix, l, "conv.bias", (size_t)H, true, &w->conv_b)))
        return MX_ERR;
    return MX_OK;
}

static size_t sc_state(const mx_model *m, int layer, int cap) {
    (void)layer; (void)cap;
    if (m->arch.shortconv.centered) return 0;
    return (size_t)sc_ch(m) * (m->arch.shortconv.d_conv - 1);
}

static size_t sc_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer;
    (void)max_ctx; (void)nt;
    return (size_t)max_tokens * 3 * sc_ch(m);
}

#define SC_BLOCK 16

typedef struct {
    mx_fwd *f;
    int layer;
    const sc_w *w;
    float *bcx; /* [N][3H]: B*x is formed in the x slot, C * conv written to the B slot */
} sc_job;

static void sc_task(void *ctx, int i, int tid) {
    (void)tid;
    sc_job *j = ctx;
    mx_fwd *f = j->f;
    int H = sc_ch(f->m), K = f->m->arch.shortconv.d_conv;
    for (int c = i * SC_BLOCK; c < MX_MIN(H, (i + 1) * SC_BLOCK); c++) {
        float *win = NULL, b = j->w->conv_b ? j->w->conv_b[c] : 0.0f;
        for (int t = 0; t < f->N; t++) {
            if (mx_seq_first(f, t)) {
                win = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, &mx_block_shortconv) + (size_t)c * (K - 1);
                if (f->pos[t] == 0) memset(win, 0, (size_t)(K - 1) * sizeof(float));
            }
            float *r = j->bcx + (size_t)t * 3 * H;
            float bx = r[c] * r[2 * H + c];
            r[c] = r[H + c] * mx_conv_step(j->w->conv_w + (size_t)c * K, b, K, win, bx);
        }
    }
}

/* centered: B*x of every token first (into the x slot), then each token's
 * conv over its neighbours of the same sequence on both sides */
static void sc_centered_task(void *ctx, int i, int tid) {
    (void)tid;
    sc_job *j = ctx;
    mx_fwd *f = j->f;
    int H = sc_ch(f->m), K = f->m->arch.shortconv.d_conv, pad = K / 2, N = f->N;
    for (int c = i * SC_BLOCK; c < MX_MIN(H, (i + 1) * SC_BLOCK); c++) {
        const float *w = j->w->conv_w + (size_t)c * K;
        float b = j->w->conv_b ? j->w->conv_b[c] : 0.0f;
        for (int t = 0; t < N; t++) {
            float *r = j->bcx + (size_t)t * 3 * H;
            r[2 * H + c] *= r[c];
        }
        for (int t = 0; t < N; t++) {
            float acc = b;
            for (int k = 0; k < K; k++) {
                int u = t - pad + k;
                if (u >= 0 && u < N && f->seq_of[u] == f->seq_of[t]) acc += w[k] * j->bcx[(size_t)u * 3 * H + 2 * H + c];
            }
            float *r = j->bcx + (size_t)t * 3 * H;
            r[c] = r[H + c] * acc;
        }
    }
}

static void sc_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    const sc_w *w = wp;
    int N = f->N, H = f->m->arch.hidden, C = sc_ch(f->m);
    float *bcx = f->scratch;
    mx_linear(f, &w->in, w->in_b, in, N, H, bcx, 3 * C);
    sc_job j = {f, layer, w, bcx};
    mx_pool_run(f->pool, f->m->arch.shortconv.centered ? sc_centered_task : sc_task, &j, (C + SC_BLOCK - 1) / SC_BLOCK);
    mx_linear(f, &w->out, w->out_b, bcx, N, 3 * C, out, H);
}

const mx_block_ops mx_block_shortconv = {
    .name = "shortconv", .load = sc_load, .free = sc_free, .state_floats = sc_state, .scratch_floats = sc_scratch,
    .forward = sc_forward, .recurrent = true,
};
