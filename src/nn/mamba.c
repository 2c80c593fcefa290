/* Mamba mixer blocks (arch.ssm): Mamba-1 selective scan (Mamba, FalconMamba
 * with its weightless B/C/dt RMSNorm, Jamba with weighted ones) and Mamba-2
 * SSD (scalar A per head, grouped B/C, gated RMSNorm).
 *
 * A forward of any number of tokens runs the recurrence token by token per
 * sequence, so a chunked prefill is exactly the step-by-step decode. The
 * per-sequence cache holds, per conv channel, the last d_conv-1 conv inputs,
 * then the SSM state [d_inner][d_state]; a sequence whose first token here
 * is at position 0 starts from zeros. Channels (mamba1) or heads (mamba2)
 * run in parallel. */
#include "ssm.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int mx_ssm_load_arr(mx_model *m, const char *prefix, int layer, const char *sub, size_t n, bool required, float **out) {
    char mod[512];
    *out = NULL;
    snprintf(mod, sizeof mod, prefix, layer);
    char *nm = mx_asprintf("%s.%s", mod, sub);
    if (!nm) return MX_ERR;
    mx_tensor *t = required ? mx_ckpt_require(&m->ck, nm) : mx_ckpt_take(&m->ck, nm);
    int rc = MX_OK;
    if (!t) rc = required ? MX_ERR : MX_OK;
    else if (t->numel != (int64_t)n)
        rc = mx_set_err("%s: tensor '%s' has %lld elements, expected %zu", m->ck.dir, nm, (long long)t->numel, n);
    else if (!(*out = mx_malloc(n * sizeof(float)))) rc = MX_ERR;
    else if (mx_tensor_to_f32(t, *out)) rc = mx_err_prefix("%s", m->ck.dir);
    free(nm);
    return rc;
}

int mx_ssm_load_lin(mx_model *m, const char *prefix, int layer, const char *sub, int rows, int cols, bool bias,
                    mx_weight *w, float **b) {
    char *pat = mx_asprintf("%s.%s", prefix, sub);
    if (!pat) return MX_ERR;
    int rc = mx_load_lin(m, pat, layer, rows, cols, bias, w, b);
    free(pat);
    return rc;
}

static char *ssm_mod(const char *prefix, int layer, const char *sub) {
    char mod[512];
    snprintf(mod, sizeof mod, prefix, layer);
    return mx_asprintf("%s.%s", mod, sub);
}

int mx_ssm_load_lin_rows(mx_model *m, const char *prefix, int layer, const char *sub, int full_rows, int cols, const int (*ranges)[2], int nr,
                         bool bias, mx_weight *w, float **b) {
    char *mod = ssm_mod(prefix, layer, sub);
    int rc = mod ? mx_load_lin_rows(m, mod, full_rows, cols, ranges, nr, bias, w, b) : MX_ERR;
    free(mod);
    return rc;
}

int mx_ssm_load_lin_cols(mx_model *m, const char *prefix, int layer, const char *sub, int rows, int full_cols, int c0, int nc, bool bias,
                         mx_weight *w, float **b) {
    char *mod = ssm_mod(prefix, layer, sub);
    int rc = mod ? mx_load_lin_cols(m, mod, rows, full_cols, c0, nc, bias, w, b) : MX_ERR;
    free(mod);
    return rc;
}

int mx_ssm_load_arr_parts(mx_model *m, const char *prefix, int layer, const char *sub, size_t full_n, const int (*ranges)[2], int nr,
                          size_t unit, float **out) {
    float *full = NULL;
    *out = NULL;
    if (mx_ssm_load_arr(m, prefix, layer, sub, full_n, true, &full)) return MX_ERR;
    size_t n = 0;
    for (int i = 0; i < nr; i++) n += (size_t)(ranges[i][1] - ranges[i][0]) * unit;
    if ((*out = mx_malloc(n * sizeof(float))))
        for (int i = 0, o = 0; i < nr; o += (ranges[i][1] - ranges[i][0]) * (int)unit, i++)
            memcpy(*out + o, full + (size_t)ranges[i][0] * unit, (size_t)(ranges[i][1] - ranges[i][0]) * unit * sizeof(float));
    free(full);
    return *out ? MX_OK : MX_ERR;
}

typedef struct {
    mx_weight in, x_proj, dt_proj, out;
    float *in_b, *out_b, *dt_b;
    float *conv_w, *conv_b; /* [conv_dim][K], [conv_dim] */
    float *A;               /* -exp(A_log): [d_inner][d_state] (mamba1) or [n_heads] */
    float *D, *dt_bias, *norm_w;
    float *dt_norm, *b_norm, *c_norm; /* mamba1 bcdt norm weights (NULL: weightless) */
} ssm_w;

static int conv_dim(const mx_ssm_spec *s) {
    return s->kind == MX_SSM_MAMBA1 ? s->d_inner : s->d_inner + 2 * s->n_groups * s->d_state;
}
static int in_rows(const mx_ssm_spec *s) {
    return s->kind == MX_SSM_MAMBA1 ? 2 * s->d_inner : s->d_inner + conv_dim(s) + s->n_heads;
}

static void ssm_free(void *p) {
    ssm_w *w = p;
    if (!w) return;
    mx_weight_free(&w->in); mx_weight_free(&w->x_proj); mx_weight_free(&w->dt_proj); mx_weight_free(&w->out);
    float *v[] = {w->in_b, w->out_b, w->dt_b, w->conv_w, w->conv_b, w->A, w->D, w->dt_bias, w->norm_w,
                  w->dt_norm, w->b_norm, w->c_norm};
    for (size_t i = 0; i < MX_ARRAY_LEN(v); i++) free(v[i]);
    free(w);
}

/* Mamba2 under tensor parallelism, by heads: part p holds heads [p nh, (p + 1) nh), their channels of z,
 * x, the conv, the norm and out_proj's columns (the output summed over the parts), and the B / C rows of
 * the groups those heads read (a copy where several parts share a group). */
static int m2_load_part(mx_model *m, int l, const char *P, ssm_w *w) {
    const mx_ssm_spec *s = &m->arch.ssm;
    int T = m->shard->tp, p = m->shard->tp_rank, H = m->arch.hidden, K = s->d_conv, S = s->d_state;
    int D = s->d_inner, nh = s->n_heads, G = s->n_groups, GF = s->tp_n_groups, DF = D * T, NH = nh * T, CF = DF + 2 * GF * S;
    int g0 = GF >= T ? p * G : p / (T / GF); /* the part's first group */
    const int in[5][2] = {{p * D, (p + 1) * D},
                          {DF + p * D, DF + (p + 1) * D},
                          {2 * DF + g0 * S, 2 * DF + (g0 + G) * S},
                          {2 * DF + (GF + g0) * S, 2 * DF + (GF + g0 + G) * S},
                          {DF + CF + p * nh, DF + CF + (p + 1) * nh}};
    const int ch[3][2] = {{p * D, (p + 1) * D}, {DF + g0 * S, DF + (g0 + G) * S}, {DF + (GF + g0) * S, DF + (GF + g0 + G) * S}};
    const int hd[1][2] = {{p * nh, (p + 1) * nh}}, dd[1][2] = {{p * D, (p + 1) * D}};
    return mx_ssm_load_lin_rows(m, P, l, "in_proj", DF + CF + NH, H, in, 5, s->in_bias, &w->in, &w->in_b) ||
                   mx_ssm_load_lin_cols(m, P, l, "out_proj", H, DF, p * D, D, s->out_bias, &w->out, &w->out_b) ||
                   mx_ssm_load_arr_parts(m, P, l, "conv1d.weight", (size_t)CF * K, ch, 3, (size_t)K, &w->conv_w) ||
                   (s->conv_bias && mx_ssm_load_arr_parts(m, P, l, "conv1d.bias", (size_t)CF, ch, 3, 1, &w->conv_b)) ||
                   mx_ssm_load_arr_parts(m, P, l, "A_log", (size_t)NH, hd, 1, 1, &w->A) ||
                   mx_ssm_load_arr_parts(m, P, l, "D", (size_t)NH, hd, 1, 1, &w->D) ||
                   mx_ssm_load_arr_parts(m, P, l, "dt_bias", (size_t)NH, hd, 1, 1, &w->dt_bias) ||
                   (s->gated_norm && mx_ssm_load_arr_parts(m, P, l, "norm.weight", (size_t)DF, dd, 1, 1, &w->norm_w))
               ? MX_ERR
               : MX_OK;
}

/* Mamba1 under tensor parallelism, by channels: part p holds channels [p D, (p + 1) D) of x and z, the
 * conv, A, D, dt_proj's rows, and x_proj's and out_proj's columns (both outputs summed over the parts:
 * x_proj's [dt | B | C] in the block, out_proj's after it). */
static int m1_load_part(mx_model *m, int l, const char *P, ssm_w *w) {
    const mx_ssm_spec *s = &m->arch.ssm;
    int T = m->shard->tp, p = m->shard->tp_rank, H = m->arch.hidden, K = s->d_conv, S = s->d_state, R = s->dt_rank;
    int D = s->d_inner, DF = D * T;
    const int in[2][2] = {{p * D, (p + 1) * D}, {DF + p * D, DF + (p + 1) * D}}, dd[1][2] = {{p * D, (p + 1) * D}};
    return mx_ssm_load_lin_rows(m, P, l, "in_proj", 2 * DF, H, in, 2, s->in_bias, &w->in, &w->in_b) ||
                   mx_ssm_load_lin_cols(m, P, l, "out_proj", H, DF, p * D, D, s->out_bias, &w->out, &w->out_b) ||
                   mx_ssm_load_lin_cols(m, P, l, "x_proj", R + 2 * S, DF, p * D, D, false, &w->x_proj, NULL) ||
                   mx_ssm_load_lin_rows(m, P, l, "dt_proj", DF, R, dd, 1, true, &w->dt_proj, &w->dt_b) ||
                   mx_ssm_load_arr_parts(m, P, l, "conv1d.weight", (size_t)DF * K, dd, 1, (size_t)K, &w->conv_w) ||
                   (s->conv_bias && mx_ssm_load_arr_parts(m, P, l, "conv1d.bias", (size_t)DF, dd, 1, 1, &w->conv_b)) ||
                   mx_ssm_load_arr_parts(m, P, l, "A_log", (size_t)DF * S, dd, 1, (size_t)S, &w->A) ||
                   mx_ssm_load_arr_parts(m, P, l, "D", (size_t)DF, dd, 1, 1, &w->D)
               ? MX_ERR
               : MX_OK;
}

static int ssm_load_at(mx_model *m, int l, const char *P, void **out) {
    const mx_arch *a = &m->arch;
    const mx_ssm_spec *s = &a->ssm;
    int D = s->d_inner, S = s->d_state, K = s->d_conv, CD = conv_dim(s), R = s->dt_rank;
    bool m1 = s->kind == MX_SSM_MAMBA1;
    if (!P || D < 1 || S < 1 || K < 1 || K > 64 || (m1 && R < 1) ||
        (!m1 && (s->n_heads < 1 || s->n_groups < 1 || s->n_heads * s->head_dim != D || s->n_heads % s->n_groups ||
                 (s->gated_norm && (s->norm_groups < 1 || D % s->norm_groups)))))
        return mx_set_err("%s: layer %d: inconsistent state-space dimensions", m->ck.dir, l);
    ssm_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    bool tp = m->shard && m->shard->tp > 1;
    if (tp) {
        if (m1 ? m1_load_part(m, l, P, w) : m2_load_part(m, l, P, w)) return MX_ERR;
    } else if (mx_ssm_load_lin(m, P, l, "in_proj", in_rows(s), a->hidden, s->in_bias, &w->in, &w->in_b) ||
        mx_ssm_load_lin(m, P, l, "out_proj", a->hidden, D, s->out_bias, &w->out, &w->out_b) ||
        mx_ssm_load_arr(m, P, l, "conv1d.weight", (size_t)CD * K, true, &w->conv_w) ||
        (s->conv_bias && mx_ssm_load_arr(m, P, l, "conv1d.bias", (size_t)CD, true, &w->conv_b)) ||
        mx_ssm_load_arr(m, P, l, "A_log", m1 ? (size_t)D * S : (size_t)s->n_heads, true, &w->A) ||
        mx_ssm_load_arr(m, P, l, "D", m1 ? (size_t)D : (size_t)s->n_heads, true, &w->D))
        return MX_ERR;
    if (m1) {
        if (!tp && (mx_ssm_load_lin(m, P, l, "x_proj", R + 2 * S, D, false, &w->x_proj, NULL) ||
                    mx_ssm_load_lin(m, P, l, "dt_proj", D, R, true, &w->dt_proj, &w->dt_b)))
            return MX_ERR;
        if (s->bcdt_norm && s->bcdt_weight &&
            (mx_ssm_load_arr(m, P, l, "dt_layernorm.weight", (size_t)R, true, &w->dt_norm) ||
             mx_ssm_load_arr(m, P, l, "b_layernorm.weight", (size_t)S, true, &w->b_norm) ||
             mx_ssm_load_arr(m, P, l, "c_layernorm.weight", (size_t)S, true, &w->c_norm)))
            return MX_ERR;
    } else if (!tp) {
        if (mx_ssm_load_arr(m, P, l, "dt_bias", (size_t)s->n_heads, true, &w->dt_bias) ||
            (s->gated_norm && mx_ssm_load_arr(m, P, l, "norm.weight", (size_t)D, true, &w->norm_w)))
            return MX_ERR;
    }
    size_t na = m1 ? (size_t)D * S : (size_t)s->n_heads;
    for (size_t i = 0; i < na; i++) w->A[i] = -expf(w->A[i]);
    return MX_OK;
}

static int ssm_load(mx_model *m, int l, void **out) { return ssm_load_at(m, l, m->arch.ssm.prefix, out); }

int mx_ssm_load_prefix(mx_model *m, int layer, const char *prefix, void **w) { return ssm_load_at(m, layer, prefix, w); }
void mx_ssm_free(void *w) { ssm_free(w); }

static size_t ssm_state(const mx_model *m, int layer, int cap) {
    (void)layer; (void)cap;
    const mx_ssm_spec *s = &m->arch.ssm;
    return (size_t)conv_dim(s) * (s->d_conv - 1) + (size_t)s->d_inner * s->d_state;
}

/* Mamba1: xz [rows][2D], xc [rows][D], dbc [rows][dt_rank + 2S], dt [rows][D],
 * y [rows][D]. Mamba2: proj [rows][in_proj rows] (as xz), xc [rows][conv
 * channels], y [rows][D]. */
typedef struct { float *xz, *xc, *dbc, *dt, *y; } ssm_bufs;
static size_t ssm_plan(const mx_ssm_spec *s, int rows, float *base, ssm_bufs *b) {
    size_t N = (size_t)rows, D = (size_t)s->d_inner;
    bool m1 = s->kind == MX_SSM_MAMBA1;
    mx_plan p = {base, 0};
    b->xz = mx_plan_take(&p, N * (m1 ? 2 * D : (size_t)in_rows(s)));
    b->xc = mx_plan_take(&p, N * (m1 ? D : (size_t)conv_dim(s)));
    b->dbc = mx_plan_take(&p, m1 ? N * ((size_t)s->dt_rank + 2 * (size_t)s->d_state) : 0);
    b->dt = mx_plan_take(&p, m1 ? N * D : 0);
    b->y = mx_plan_take(&p, N * D);
    return p.n;
}

static size_t ssm_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer; (void)max_ctx; (void)nt;
    ssm_bufs b;
    return ssm_plan(&m->arch.ssm, max_tokens, NULL, &b);
}

#define CH_BLOCK 16

typedef struct {
    mx_fwd *f;
    int layer;
    const ssm_w *w;
    const mx_block_ops *self; /* for the state's place in the layer's cache */
    const float *x; /* conv input rows (stride ldx) */
    int ldx;
    float *xc;      /* conv output [N][conv_dim] */
    float *dbc;     /* mamba1: [N][R + 2S] */
    float *dt;      /* mamba1: dt_proj output [N][D]; mamba2: in_proj rows (dt at column dt_col) */
    int lddt, dt_col;
    float *y;       /* [N][D] */
} ssm_job;

static void conv_task(void *ctx, int i, int tid) {
    (void)tid;
    ssm_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_ssm_spec *s = &f->m->arch.ssm;
    int K = s->d_conv, CD = conv_dim(s);
    for (int c = i * CH_BLOCK; c < MX_MIN(CD, (i + 1) * CH_BLOCK); c++) {
        const float *wc = j->w->conv_w + (size_t)c * K;
        float b = j->w->conv_b ? j->w->conv_b[c] : 0.0f, *win = NULL;
        for (int t = 0; t < f->N; t++) {
            if (mx_seq_first(f, t)) {
                win = mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, j->self) + (size_t)c * (K - 1);
                if (f->pos[t] == 0) memset(win, 0, (size_t)(K - 1) * sizeof(float));
            }
            j->xc[(size_t)t * CD + c] = mx_conv_step(wc, b, K, win, j->x[(size_t)t * j->ldx + c]);
        }
    }
}

static float *ssm_state_of(const mx_fwd *f, const ssm_job *j, int t) {
    const mx_ssm_spec *s = &f->m->arch.ssm;
    return mx_kv_block(f->m, f->seqs[f->seq_of[t]].kv, j->layer, j->self) + (size_t)conv_dim(s) * (s->d_conv - 1);
}

static void scan1_task(void *ctx, int i, int tid) {
    (void)tid;
    ssm_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_ssm_spec *s = &f->m->arch.ssm;
    int D = s->d_inner, S = s->d_state, R = s->dt_rank, W = R + 2 * S;
    for (int c = i * CH_BLOCK; c < MX_MIN(D, (i + 1) * CH_BLOCK); c++) {
        const float *A = j->w->A + (size_t)c * S;
        float Dc = j->w->D[c], *h = NULL;
        for (int t = 0; t < f->N; t++) {
            if (mx_seq_first(f, t)) {
                h = ssm_state_of(f, j, t) + (size_t)c * S;
                if (f->pos[t] == 0) memset(h, 0, (size_t)S * sizeof(float));
            }
            const float *B = j->dbc + (size_t)t * W + R, *C = B + S;
            float d = mx_softplus(j->dt[(size_t)t * D + c]), x = j->xc[(size_t)t * D + c], acc = 0;
            for (int n = 0; n < S; n++) {
                h[n] = expf(A[n] * d) * h[n] + d * B[n] * x;
                acc += h[n] * C[n];
            }
            j->y[(size_t)t * D + c] = acc + x * Dc;
        }
    }
}

static void m1_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    const ssm_w *w = wp;
    const mx_ssm_spec *s = &f->m->arch.ssm;
    int N = f->N, H = f->m->arch.hidden, D = s->d_inner, S = s->d_state, R = s->dt_rank, W = R + 2 * S;
    ssm_bufs b;
    ssm_plan(s, N, f->scratch, &b);
    float *xz = b.xz, *xc = b.xc, *dbc = b.dbc, *dt = b.dt, *y = b.y;
    mx_linear(f, &w->in, w->in_b, in, N, H, xz, 2 * D);
    ssm_job j = {.f = f, .layer = layer, .w = w, .self = &mx_block_mamba, .x = xz, .ldx = 2 * D, .xc = xc, .dbc = dbc, .dt = dt, .y = y};
    int nb = (D + CH_BLOCK - 1) / CH_BLOCK;
    mx_pool_run(f->pool, conv_task, &j, nb);
    mx_act_apply(s->act, xc, N * D);
    mx_linear(f, &w->x_proj, NULL, xc, N, D, dbc, W);
    const mx_shard *sh = f->m->shard;
    if (sh && sh->tp > 1) sh->ops->reduce(sh->ctx, dbc, (size_t)N * W); /* this part's channels' share of each */
    if (s->bcdt_norm)
        for (int t = 0; t < N; t++) {
            float *r = dbc + (size_t)t * W;
            mx_rmsnorm(r, r, w->dt_norm, 0, 1, R, R, s->bcdt_eps);
            mx_rmsnorm(r + R, r + R, w->b_norm, 0, 1, S, S, s->bcdt_eps);
            mx_rmsnorm(r + R + S, r + R + S, w->c_norm, 0, 1, S, S, s->bcdt_eps);
        }
    mx_linear(f, &w->dt_proj, w->dt_b, dbc, N, W, dt, D);
    mx_pool_run(f->pool, scan1_task, &j, nb);
    /* y * act(z), into the z half of xz */
    for (int t = 0; t < N; t++) mx_act_mul(s->act, xz + (size_t)t * 2 * D + D, y + (size_t)t * D, D);
    mx_linear(f, &w->out, w->out_b, xz + D, N, 2 * D, out, H);
}

static void scan2_task(void *ctx, int hh, int tid) {
    (void)tid;
    ssm_job *j = ctx;
    mx_fwd *f = j->f;
    const mx_ssm_spec *s = &f->m->arch.ssm;
    int D = s->d_inner, S = s->d_state, P = s->head_dim, G = s->n_groups, CD = conv_dim(s);
    int g = hh / (s->n_heads / G);
    float A = j->w->A[hh], Dh = j->w->D[hh], db = j->w->dt_bias[hh], *hs = NULL;
    for (int t = 0; t < f->N; t++) {
        if (mx_seq_first(f, t)) {
            hs = ssm_state_of(f, j, t) + (size_t)hh * P * S;
            if (f->pos[t] == 0) memset(hs, 0, (size_t)P * S * sizeof(float));
        }
        float d = mx_softplus(j->dt[(size_t)t * j->lddt + j->dt_col + hh] + db);
        d = fminf(fmaxf(d, s->dt_min), s->dt_max);
        float dA = expf(d * A);
        const float *row = j->xc + (size_t)t * CD, *B = row + D + (size_t)g * S, *C = row + D + (size_t)(G + g) * S;
        for (int p = 0; p < P; p++) {
            float x = row[hh * P + p], *h = hs + (size_t)p * S, acc = 0;
            for (int n = 0; n < S; n++) {
                h[n] = h[n] * dA + d * B[n] * x;
                acc += h[n] * C[n];
            }
            j->y[(size_t)t * D + hh * P + p] = acc + Dh * x;
        }
    }
}

/* The gated RMSNorm when a norm group spans several tensor-parallel parts: each part's sums of squares
 * per token and (checkpoint) group in ss [N][tp_norm_groups], summed over the parts, then each channel
 * scaled by its group's. z [N] rows ldz apart, y [N][D]; the result in z. */
static void m2_norm_split(mx_fwd *f, const ssm_w *w, float *z, int ldz, float *y, bool before, float *ss) {
    const mx_ssm_spec *s = &f->m->arch.ssm;
    const mx_shard *sh = f->m->shard;
    int N = f->N, D = s->d_inner, NG = s->tp_norm_groups, gs = D * sh->tp / NG, c0 = sh->tp_rank * D;
    memset(ss, 0, sizeof(float) * (size_t)N * NG);
    for (int t = 0; t < N; t++) {
        float *zt = z + (size_t)t * ldz, *yt = y + (size_t)t * D, *nt = before ? yt : zt;
        if (!before) mx_act_mul(MX_ACT_SILU, zt, yt, D);
        for (int c = 0; c < D; c++) ss[(size_t)t * NG + (c0 + c) / gs] += nt[c] * nt[c];
    }
    sh->ops->reduce(sh->ctx, ss, (size_t)N * NG);
    for (int t = 0; t < N; t++) {
        float *zt = z + (size_t)t * ldz, *yt = y + (size_t)t * D, *nt = before ? yt : zt;
        for (int c = 0; c < D; c++) nt[c] = nt[c] / sqrtf(ss[(size_t)t * NG + (c0 + c) / gs] / (float)gs + s->norm_eps) * w->norm_w[c];
        if (before) mx_act_mul(MX_ACT_SILU, zt, yt, D);
    }
}

void mx_mamba2_run(mx_fwd *f, int layer, const void *wp, const mx_block_ops *self, const float *in, float *out) {
    const ssm_w *w = wp;
    const mx_ssm_spec *s = &f->m->arch.ssm;
    int N = f->N, H = f->m->arch.hidden, D = s->d_inner, CD = conv_dim(s), PR = in_rows(s);
    ssm_bufs b;
    ssm_plan(s, N, f->scratch, &b);
    float *proj = b.xz, *xc = b.xc, *y = b.y;
    bool scaled = s->in_scale != 0 && s->in_scale != 1.0f;
    for (int k = 0; k < 5; k++) scaled |= s->seg_scale[k] != 0 && s->seg_scale[k] != 1.0f;
    if (!scaled) mx_linear(f, &w->in, w->in_b, in, N, H, proj, PR);
    else { /* (W (x s) + b) * seg: the input scale applies before the bias */
        mx_linear(f, &w->in, NULL, in, N, H, proj, PR);
        int GS = s->n_groups * s->d_state, seg_end[5] = {D, 2 * D, 2 * D + GS, 2 * D + 2 * GS, PR};
        float is = s->in_scale ? s->in_scale : 1;
        for (int t = 0; t < N; t++) {
            float *r = proj + (size_t)t * PR;
            for (int k = 0, i = 0; k < 5; k++) {
                float m = s->seg_scale[k] ? s->seg_scale[k] : 1;
                for (; i < seg_end[k]; i++) r[i] = (r[i] * is + (w->in_b ? w->in_b[i] : 0.0f)) * m;
            }
        }
    }
    ssm_job j = {.f = f, .layer = layer, .w = w, .self = self, .x = proj + D, .ldx = PR, .xc = xc, .dt = proj, .lddt = PR,
                 .dt_col = D + CD, .y = y};
    mx_pool_run(f->pool, conv_task, &j, (CD + CH_BLOCK - 1) / CH_BLOCK);
    mx_act_apply(s->act, xc, N * CD);
    mx_pool_run(f->pool, scan2_task, &j, s->n_heads);
    /* y * silu(z) into z, then the grouped RMSNorm (or the norm first) */
    int gs = s->gated_norm ? D / s->norm_groups : D;
    bool before = s->gated_norm && s->norm_before_gate;
    if (s->gated_norm && s->tp_norm_split) { /* norm groups across parts: xc (free now) sums their squares */
        m2_norm_split(f, w, proj, PR, y, before, xc);
        mx_linear(f, &w->out, w->out_b, proj, N, PR, out, H);
        return;
    }
    for (int t = 0; t < N; t++) {
        float *z = proj + (size_t)t * PR, *yt = y + (size_t)t * D;
        float *nt = before ? yt : z;
        if (!before) mx_act_mul(MX_ACT_SILU, z, yt, D);
        if (s->gated_norm)
            for (int g = 0; g < s->norm_groups; g++)
                mx_rmsnorm(nt + (size_t)g * gs, nt + (size_t)g * gs, w->norm_w + (size_t)g * gs, 0, 1, gs, gs, s->norm_eps);
        if (before) mx_act_mul(MX_ACT_SILU, z, yt, D);
    }
    mx_linear(f, &w->out, w->out_b, proj, N, PR, out, H);
}

static void m2_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    mx_mamba2_run(f, layer, wp, &mx_block_mamba2, in, out);
}

const mx_block_ops mx_block_mamba = {
    .name = "mamba", .load = ssm_load, .free = ssm_free, .state_floats = ssm_state, .scratch_floats = ssm_scratch,
    .forward = m1_forward, .recurrent = true,
};

const mx_block_ops mx_block_mamba2 = {
    .name = "mamba2", .load = ssm_load, .free = ssm_free, .state_floats = ssm_state, .scratch_floats = ssm_scratch,
    .forward = m2_forward, .recurrent = true,
};
