/* Gated DeltaNet block (arch.deltanet, Qwen3-Next linear attention): a
 * causal conv over [q | k | v], then per value head the gated delta rule
 * on a [dk][dv] state, run token by token (a chunked prefill is the
 * step-by-step decode), a gated RMSNorm and out_proj. The cache holds the
 * conv window [conv channels][d_conv-1] then the states; a sequence whose
 * first token here is at position 0 starts from zeros. Value heads run in
 * parallel. */
#include "ssm.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_weight qkvz, ba, out;
    mx_weight qkv, z, b, a; /* split_proj */
    float *conv_w, *A, *dt_bias, *norm_w; /* A = -exp(A_log) */
} dn_w;

static int conv_ch(const mx_deltanet_spec *s) { return 2 * s->n_k_heads * s->dk + s->n_v_heads * s->dv; }
static int qkvz_rows(const mx_deltanet_spec *s) { return 2 * s->n_k_heads * s->dk + 2 * s->n_v_heads * s->dv; }

static void dn_free(void *p) {
    dn_w *w = p;
    if (!w) return;
    mx_weight *ws[] = {&w->qkvz, &w->ba, &w->out, &w->qkv, &w->z, &w->b, &w->a};
    for (size_t i = 0; i < MX_ARRAY_LEN(ws); i++) mx_weight_free(ws[i]);
    free(w->conv_w); free(w->A); free(w->dt_bias); free(w->norm_w);
    free(w);
}

/* Tensor parallelism by key heads (the spec's counts are this part's, the checkpoint's tp times larger):
 * part p holds key heads [p nk, (p + 1) nk) and their value heads, so each projection gives its rows of
 * those heads (the grouped [q | k | v | z] per key head one run, [q | k | v] three), the conv its
 * channels of q, k and v, out_proj its columns (the output summed over the parts). */
static int dn_load_part(mx_model *m, int l, dn_w *w) {
    const mx_deltanet_spec *s = &m->arch.deltanet;
    const char *P = s->prefix;
    int T = m->shard->tp, p = m->shard->tp_rank, H = m->arch.hidden, K = s->d_conv;
    int nk = s->n_k_heads, nv = s->n_v_heads, dk = s->dk, dv = s->dv, NK = nk * T, NV = nv * T, CF = 2 * NK * dk + NV * dv;
    const int ch[3][2] = {{p * nk * dk, (p + 1) * nk * dk}, {NK * dk + p * nk * dk, NK * dk + (p + 1) * nk * dk},
                          {2 * NK * dk + p * nv * dv, 2 * NK * dk + (p + 1) * nv * dv}};
    const int vh[1][2] = {{p * nv, (p + 1) * nv}}, vd[1][2] = {{p * nv * dv, (p + 1) * nv * dv}};
    if (s->split_proj) {
        if (mx_ssm_load_lin_rows(m, P, l, "in_proj_qkv", CF, H, ch, 3, false, &w->qkv, NULL) ||
            mx_ssm_load_lin_rows(m, P, l, "in_proj_z", NV * dv, H, vd, 1, false, &w->z, NULL) ||
            mx_ssm_load_lin_rows(m, P, l, "in_proj_b", NV, H, vh, 1, false, &w->b, NULL) ||
            mx_ssm_load_lin_rows(m, P, l, "in_proj_a", NV, H, vh, 1, false, &w->a, NULL))
            return MX_ERR;
    } else {
        int G = qkvz_rows(s) / nk, R = 2 * nv / nk; /* per key head: [q | k | v | z] rows, [b | a] rows */
        const int g[1][2] = {{p * nk * G, (p + 1) * nk * G}}, ba[1][2] = {{p * nk * R, (p + 1) * nk * R}};
        if (mx_ssm_load_lin_rows(m, P, l, "in_proj_qkvz", NK * G, H, g, 1, false, &w->qkvz, NULL) ||
            mx_ssm_load_lin_rows(m, P, l, "in_proj_ba", 2 * NV, H, ba, 1, false, &w->ba, NULL))
            return MX_ERR;
    }
    return mx_ssm_load_lin_cols(m, P, l, "out_proj", H, NV * dv, p * nv * dv, nv * dv, false, &w->out, NULL) ||
                   mx_ssm_load_arr_parts(m, P, l, "conv1d.weight", (size_t)CF * K, ch, 3, (size_t)K, &w->conv_w) ||
                   mx_ssm_load_arr_parts(m, P, l, "A_log", (size_t)NV, vh, 1, 1, &w->A) ||
                   mx_ssm_load_arr_parts(m, P, l, "dt_bias", (size_t)NV, vh, 1, 1, &w->dt_bias)
               ? MX_ERR
               : MX_OK;
}

static int dn_load(mx_model *m, int l, void **out) {
    const mx_arch *a = &m->arch;
    const mx_deltanet_spec *s = &a->deltanet;
    const char *P = s->prefix;
    int H = a->hidden, K = s->d_conv, nv = s->n_v_heads;
    if (!P || s->n_k_heads < 1 || nv < 1 || nv % s->n_k_heads || s->dk < 1 || s->dv < 1 || K < 1 || K > 64)
        return mx_set_err("%s: layer %d: inconsistent DeltaNet dimensions", m->ck.dir, l);
    dn_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    if (m->shard && m->shard->tp > 1) {
        if (dn_load_part(m, l, w)) return MX_ERR;
    } else {
        if (s->split_proj) {
            if (mx_ssm_load_lin(m, P, l, "in_proj_qkv", conv_ch(s), H, false, &w->qkv, NULL) ||
                mx_ssm_load_lin(m, P, l, "in_proj_z", nv * s->dv, H, false, &w->z, NULL) ||
                mx_ssm_load_lin(m, P, l, "in_proj_b", nv, H, false, &w->b, NULL) ||
                mx_ssm_load_lin(m, P, l, "in_proj_a", nv, H, false, &w->a, NULL))
                return MX_ERR;
        } else if (mx_ssm_load_lin(m, P, l, "in_proj_qkvz", qkvz_rows(s), H, false, &w->qkvz, NULL) ||
                   mx_ssm_load_lin(m, P, l, "in_proj_ba", 2 * nv, H, false, &w->ba, NULL))
            return MX_ERR;
        if (mx_ssm_load_lin(m, P, l, "out_proj", H, nv * s->dv, false, &w->out, NULL) ||
            mx_ssm_load_arr(m, P, l, "conv1d.weight", (size_t)conv_ch(s) * K, true, &w->conv_w) ||
            mx_ssm_load_arr(m, P, l, "A_log", (size_t)nv, true, &w->A) ||
            mx_ssm_load_arr(m, P, l, "dt_bias", (size_t)nv, true, &w->dt_bias))
            return MX_ERR;
    }
    if (mx_ssm_load_arr(m, P, l, "norm.weight", (size_t)s->dv, true, &w->norm_w)) return MX_ERR;
    for (int i = 0; i < nv; i++) w->A[i] = -expf(w->A[i]);
    return MX_OK;
}

static size_t dn_state(const mx_model *m, int layer, int cap) {
    (void)layer; (void)cap;
    const mx_deltanet_spec *s = &m->arch.deltanet;
    return (size_t)conv_ch(s) * (s->d_conv - 1) + (size_t)s->n_v_heads * s->dk * s->dv;
}

/* qkvz [rows][qkvz rows]; ba [rows][b | a: 2 v heads]; mixed, conv [rows][conv
 * channels]; o, z [rows][v heads * dv]; tmp: per thread [2 dk + 2 dv], and
 * [2 v heads] to regroup ba */
typedef struct { float *qkvz, *ba, *mixed, *conv, *o, *z, *tmp; } dn_bufs;
static size_t dn_plan(const mx_deltanet_spec *s, int rows, int nt, float *base, dn_bufs *b) {
    size_t N = (size_t)rows;
    mx_plan p = {base, 0};
    b->qkvz = mx_plan_take(&p, N * qkvz_rows(s));
    b->ba = mx_plan_take(&p, N * 2 * s->n_v_heads);
    b->mixed = mx_plan_take(&p, N * conv_ch(s));
    b->conv = mx_plan_take(&p, N * conv_ch(s));
    b->o = mx_plan_take(&p, N * s->n_v_heads * s->dv);
    b->z = mx_plan_take(&p, N * s->n_v_heads * s->dv);
    b->tmp = mx_plan_take(&p, (size_t)nt * (2 * (size_t)s->dk + 2 * (size_t)s->dv) + 2 * (size_t)s->n_v_heads);
    return p.n;
}

static size_t dn_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer; (void)max_ctx;
    dn_bufs b;
    return dn_plan(&m->arch.deltanet, max_tokens, nt, NULL, &b);
}

#define DN_BLOCK 16

typedef struct {
    mx_fwd *f;
    int layer;
    const dn_w *w;
    const float *z, *ba; /* per token z [n_v_heads][dv], [b | a] [2][n_v_heads] */
    float *mixed, *conv, *o, *tmp;
} dn_job;

static void dn_conv_task(void *ctx, int i, int tid) {
    (void)tid;
    dn_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_deltanet_spec *s = &f->m->arch.deltanet;
    int C = conv_ch(s), K = s->d_conv;
    for (int c = i * DN_BLOCK; c < MX_MIN(C, (i + 1) * DN_BLOCK); c++) {
        float *win = NULL;
        for (int t = 0; t < f->N; t++) {
            if (mx_seq_first(f, t)) {
                win = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, &mx_block_deltanet) + (size_t)c * (K - 1);
                if (f->pos[t] == 0) memset(win, 0, (size_t)(K - 1) * sizeof(float));
            }
            float v = mx_conv_step(j->w->conv_w + (size_t)c * K, 0.0f, K, win, j->mixed[(size_t)t * C + c]);
            j->conv[(size_t)t * C + c] = v / (1.0f + expf(-v)); /* silu */
        }
    }
}

static void l2norm(float *x, int n, float scale) {
    float ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = scale / sqrtf(ss + 1e-6f);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static void dn_head_task(void *ctx, int h, int tid) {
    dn_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_deltanet_spec *s = &f->m->arch.deltanet;
    int C = conv_ch(s), dk = s->dk, dv = s->dv, nk = s->n_k_heads, nv = s->n_v_heads, r = nv / nk, kh = h / r;
    float *q = j->tmp + (size_t)tid * (2 * dk + 2 * dv), *k = q + dk, *kv = k + dk, *delta = kv + dv, *S = NULL;
    float A = j->w->A[h], db = j->w->dt_bias[h], qs = 1.0f / sqrtf((float)dk);
    for (int t = 0; t < f->N; t++) {
        if (mx_seq_first(f, t)) {
            S = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, &mx_block_deltanet) + (size_t)C * (s->d_conv - 1) +
                (size_t)h * dk * dv;
            if (f->pos[t] == 0) memset(S, 0, (size_t)dk * dv * sizeof(float));
        }
        const float *row = j->conv + (size_t)t * C, *v = row + 2 * nk * dk + (size_t)h * dv;
        memcpy(q, row + (size_t)kh * dk, (size_t)dk * sizeof(float));
        memcpy(k, row + (size_t)(nk + kh) * dk, (size_t)dk * sizeof(float));
        l2norm(q, dk, qs);
        l2norm(k, dk, 1.0f);
        const float *ba = j->ba + (size_t)t * 2 * nv;
        float beta = 1.0f / (1.0f + expf(-ba[h])), g = expf(A * mx_softplus(ba[nv + h] + db));
        for (int i = 0; i < dk * dv; i++) S[i] *= g;
        memset(kv, 0, (size_t)dv * sizeof(float));
        for (int i = 0; i < dk; i++) mx_axpy(kv, k[i], S + (size_t)i * dv, dv);
        for (int e = 0; e < dv; e++) delta[e] = (v[e] - kv[e]) * beta;
        for (int i = 0; i < dk; i++) mx_axpy(S + (size_t)i * dv, k[i], delta, dv);
        float *o = j->o + (size_t)t * nv * dv + (size_t)h * dv;
        memset(o, 0, (size_t)dv * sizeof(float));
        for (int i = 0; i < dk; i++) mx_axpy(o, q[i], S + (size_t)i * dv, dv);
        /* gated RMSNorm: rmsnorm(o) * w * silu(z) */
        const float *z = j->z + (size_t)t * nv * dv + (size_t)h * dv;
        mx_rmsnorm(o, o, j->w->norm_w, 0, 1, dv, dv, s->norm_eps);
        for (int e = 0; e < dv; e++) o[e] *= z[e] / (1.0f + expf(-z[e]));
    }
}

static void dn_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    const dn_w *w = wp;
    const mx_deltanet_spec *s = &f->m->arch.deltanet;
    int N = f->N, H = f->m->arch.hidden, C = conv_ch(s), Q = qkvz_rows(s), nk = s->n_k_heads, nv = s->n_v_heads;
    int dk = s->dk, dv = s->dv, r = nv / nk, G = 2 * dk + 2 * r * dv;
    dn_bufs b;
    dn_plan(s, N, mx_pool_size(f->pool), f->scratch, &b);
    float *qkvz = b.qkvz, *ba = b.ba, *mixed = b.mixed, *conv = b.conv, *o = b.o, *z = b.z, *tmp = b.tmp;
    if (s->split_proj) {
        mx_linear(f, &w->qkv, NULL, in, N, H, mixed, C);
        mx_linear(f, &w->z, NULL, in, N, H, z, nv * dv);
        const mx_weight *bw[2] = {&w->b, &w->a};
        float *bb[2] = {NULL, NULL}, *by[2] = {ba, ba + nv};
        mx_linear_multi(f, 2, bw, bb, in, N, H, by, 2 * nv);
    } else {
        mx_linear(f, &w->qkvz, NULL, in, N, H, qkvz, Q);
        mx_linear(f, &w->ba, NULL, in, N, H, ba, 2 * nv);
        float *bt = tmp; /* tmp is free until the head tasks */
        for (int t = 0; t < N; t++) { /* grouped per key head -> [q | k | v], z, [b | a] */
            const float *src = qkvz + (size_t)t * Q;
            float *dst = mixed + (size_t)t * C, *zt = z + (size_t)t * nv * dv, *bat = ba + (size_t)t * 2 * nv;
            for (int kh = 0; kh < nk; kh++) {
                const float *g = src + (size_t)kh * G;
                memcpy(dst + (size_t)kh * dk, g, (size_t)dk * sizeof(float));
                memcpy(dst + (size_t)(nk + kh) * dk, g + dk, (size_t)dk * sizeof(float));
                memcpy(dst + 2 * nk * dk + (size_t)kh * r * dv, g + 2 * dk, (size_t)r * dv * sizeof(float));
                memcpy(zt + (size_t)kh * r * dv, g + 2 * dk + (size_t)r * dv, (size_t)r * dv * sizeof(float));
                memcpy(bt + (size_t)kh * r, bat + (size_t)kh * 2 * r, (size_t)r * sizeof(float));
                memcpy(bt + nv + (size_t)kh * r, bat + (size_t)kh * 2 * r + r, (size_t)r * sizeof(float));
            }
            memcpy(bat, bt, (size_t)2 * nv * sizeof(float));
        }
    }
    dn_job j = {f, layer, w, z, ba, mixed, conv, o, tmp};
    mx_pool_run(f->pool, dn_conv_task, &j, (C + DN_BLOCK - 1) / DN_BLOCK);
    mx_pool_run(f->pool, dn_head_task, &j, nv);
    mx_linear(f, &w->out, NULL, o, N, nv * dv, out, H);
}

const mx_block_ops mx_block_deltanet = {
    .name = "deltanet", .load = dn_load, .free = dn_free, .state_floats = dn_state, .scratch_floats = dn_scratch,
    .forward = dn_forward, .recurrent = true,
};
