/* Dense MLP block: gated (down(act(gate x) * up x), gate and up separate or
 * fused) or plain (down(act(up x))), with optional biases, an optional norm
 * on the activation before down (BitNet's ffn_sub_norm), xIELU, whose
 * scalars are learned per layer (Apertus), and a gaussian top-k on the gate
 * (Gemma 3n's activation sparsity). */
#include "model.h"
#include "../base/base.h"
#include "../base/half.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* this layer's width: arch.ffn unless the layer says otherwise */
static int width(const mx_arch *a, int layer) { return a->layers[layer].ffn_width ? a->layers[layer].ffn_width : a->ffn; }

typedef struct {
    mx_weight gate, up, gate_up, down;
    float *gate_b, *up_b, *gate_up_b, *down_b;
    mx_normw act_norm;
    float xielu[4]; /* alpha_p, alpha_n (softplus applied), beta, eps */
    float sparsity_z; /* Phi^-1(layer's gate_sparsity) when that is > 0 */
} mlp_w;

static float bf16_round(float x) { return mx_bf16_to_f32(mx_f32_to_bf16(x)); }
static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); } /* torch's threshold 20 */

/* xIELU's scalars: alpha_p, alpha_n [1] and beta, eps [] under `mod`. Stored
 * in BF16 (as the reference creates them), softplus evaluated and rounded in
 * BF16 as there, and alpha_n = beta + softplus(alpha_n) rounded again; then
 * used in float. A float checkpoint's values are used as they are. */
static int load_xielu(mx_model *m, const char *pat, int layer, float out[4]) {
    static const char *nm[4] = {"alpha_p", "alpha_n", "beta", "eps"};
    char mod[512];
    snprintf(mod, sizeof mod, pat, layer);
    bool bf16 = false;
    for (int i = 0; i < 4; i++) {
        char *name = mx_asprintf("%s.%s", mod, nm[i]);
        mx_tensor *t = name ? mx_ckpt_require(&m->ck, name) : NULL;
        int rc = !t ? MX_ERR
                 : t->numel != 1 ? mx_set_err("%s: tensor '%s' has %lld elements, expected 1", m->ck.dir, name, (long long)t->numel)
                 : mx_tensor_to_f32(t, &out[i]) ? mx_err_prefix("%s", m->ck.dir) : MX_OK;
        if (t && i < 2) bf16 |= t->dtype == MX_DT_BF16;
        free(name);
        if (rc) return rc;
    }
    float ap = softplusf(out[0]), an = softplusf(out[1]);
    if (bf16) { ap = bf16_round(ap); an = bf16_round(out[2] + bf16_round(an)); }
    else an = out[2] + an;
    out[0] = ap;
    out[1] = an;
    return MX_OK;
}

/* xIELU: alpha_p x^2 + beta x (x > 0), else (expm1(min(x, eps)) - x) alpha_n + beta x */
static void xielu(const float p[4], float *x, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i];
        x[i] = v > 0 ? p[0] * v * v + p[2] * v : (expm1f(fminf(v, p[3])) - v) * p[1] + p[2] * v;
    }
}

/* Phi^-1(p), the standard normal quantile: sqrt(2) erfinv(2p - 1) by
 * bisection on erf in double (torch's Normal.icdf, then used in float) */
static float normal_quantile(double p) {
    double lo = -10, hi = 10, y = 2 * p - 1;
    for (int k = 0; k < 200; k++) {
        double mid = 0.5 * (lo + hi);
        if (erf(mid) < y) lo = mid;
        else hi = mid;
    }
    return (float)(sqrt(2.0) * 0.5 * (lo + hi));
}

/* g = relu(g - (mean(g) + std(g) * z)), population std over the row */
static void gaussian_topk(float *g, int n, float z) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) s += g[i];
    float mean = (float)(s / n);
    for (int i = 0; i < n; i++) s2 += (double)(g[i] - mean) * (g[i] - mean);
    float cut = mean + sqrtf((float)(s2 / n)) * z;
    for (int i = 0; i < n; i++) g[i] = g[i] > cut ? g[i] - cut : 0.0f;
}

static int mlp_load(mx_model *m, int i, void **out) {
    const mx_arch *a = &m->arch;
    const mx_names *N = &a->names;
    int H = a->hidden, F = width(a, i);
    mlp_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    if (a->act == MX_ACT_XIELU) {
        if (!N->act_params) return mx_set_err("%s: the xielu activation needs per-layer parameters this family does not bind", m->ck.dir);
        if (a->mlp == MX_MLP_GATED) return mx_set_err("%s: xielu is supported in a plain (non-gated) MLP only", m->ck.dir);
        if (load_xielu(m, N->act_params, i, w->xielu)) return MX_ERR;
    }
    if (mx_load_norm(m, &a->norm, N->ffn_act_norm, i, F, &w->act_norm)) return MX_ERR;
    float p = a->layers[i].gate_sparsity;
    if (p > 0) {
        if (p >= 1 || a->mlp != MX_MLP_GATED) return mx_set_err("%s: layer %d: gate sparsity %g needs a gated MLP and p < 1", m->ck.dir, i, p);
        w->sparsity_z = normal_quantile(p);
    }
    if (a->mlp == MX_MLP_GATED) {
        if (N->gate_up) {
            if (mx_load_lin(m, N->gate_up, i, 2 * F, H, a->mlp_bias, &w->gate_up, &w->gate_up_b)) return MX_ERR;
        } else if (mx_load_lin(m, N->gate, i, F, H, a->mlp_bias, &w->gate, &w->gate_b) ||
                   mx_load_lin(m, N->up, i, F, H, a->mlp_bias, &w->up, &w->up_b))
            return MX_ERR;
    } else if (mx_load_lin(m, N->up, i, F, H, a->mlp_bias, &w->up, &w->up_b)) return MX_ERR;
    return mx_load_lin(m, N->down, i, H, F, a->mlp_bias, &w->down, &w->down_b);
}

static void mlp_free(void *p) {
    mlp_w *w = p;
    if (!w) return;
    mx_weight_free(&w->gate); mx_weight_free(&w->up); mx_weight_free(&w->gate_up); mx_weight_free(&w->down);
    free(w->gate_b); free(w->up_b); free(w->gate_up_b); free(w->down_b);
    mx_normw_free(&w->act_norm);
    free(w);
}

/* Long prompts go through the MLP in slices of tokens: the [tokens, 2F]
 * intermediate is the largest prefill buffer (32 MB for 512 tokens of a 1B
 * model), and every kernel computes a token the same way whatever else
 * shares its matmul, so slicing changes no result. */
#define MLP_SLICE 128

static size_t mlp_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)max_ctx; (void)nt;
    return (size_t)MX_MIN(max_tokens, MLP_SLICE) * 2 * width(&m->arch, layer);
}

/* The gated activation of tokens [i * per, (i + 1) * per): elementwise, so
 * threads take token chunks (a 512-token 1B prefill spent 1.6 % of its time
 * here on one thread). */
#define ACT_TOKS 8
typedef struct { int act; float *gu; int F, N, per; } act_job;
static void act_task(void *ctx, int i, int tid) {
    (void)tid;
    const act_job *j = ctx;
    size_t F2 = 2 * (size_t)j->F;
    for (int t = i * j->per; t < MX_MIN(j->N, (i + 1) * j->per); t++) mx_act_mul(j->act, j->gu + t * F2, j->gu + t * F2 + j->F, j->F);
}

static void mlp_slice(mx_fwd *f, int layer, const mlp_w *w, const float *in, int N, float *out) {
    const mx_arch *a = &f->m->arch;
    int F = width(a, layer), H = a->hidden, F2 = 2 * F;
    float *gu = f->scratch;
    if (a->mlp == MX_MLP_GATED) {
        if (w->gate_up.fmt) mx_linear_as(f, MX_OP_GATE_UP, &w->gate_up, w->gate_up_b, in, N, H, gu, F2);
        else {
            const mx_weight *ws[2] = {&w->gate, &w->up};
            float *bs[2] = {w->gate_b, w->up_b}, *ys[2] = {gu, gu + F};
            mx_linear_multi_as(f, MX_OP_GATE_UP, 2, ws, bs, in, N, H, ys, F2);
        }
        if (a->mlp_gate_scale && a->mlp_gate_scale != 1.0f)
            for (int t = 0; t < N; t++) mx_scale(gu + (size_t)t * F2, a->mlp_gate_scale, F);
        if (a->layers[layer].gate_sparsity > 0)
            for (int t = 0; t < N; t++) gaussian_topk(gu + (size_t)t * F2, F, w->sparsity_z);
        double t_op = f->prof ? mx_now() : 0;
        act_job aj = {a->act, gu, F, N, ACT_TOKS};
        if (N >= 2 * ACT_TOKS && mx_pool_size(f->pool) > 1) mx_pool_run(f->pool, act_task, &aj, (N + ACT_TOKS - 1) / ACT_TOKS);
        else {
            aj.per = N;
            act_task(&aj, 0, 0);
        }
        if (f->prof) mx_prof_add(f->prof, MX_OP_ACT, t_op);
    } else {
        mx_linear_as(f, MX_OP_GATE_UP, &w->up, w->up_b, in, N, H, gu, F2);
        double t_op = f->prof ? mx_now() : 0;
        for (int t = 0; t < N; t++) {
            if (a->act == MX_ACT_XIELU) xielu(w->xielu, gu + (size_t)t * F2, F);
            else mx_act_apply(a->act, gu + (size_t)t * F2, F);
        }
        if (f->prof) mx_prof_add(f->prof, MX_OP_ACT, t_op);
    }
    if (w->act_norm.w || w->act_norm.b) mx_norm_rows(&a->norm, &w->act_norm, gu, gu, N, F, F2);
    mx_linear_as(f, MX_OP_DOWN, &w->down, w->down_b, gu, N, F2, out, H);
    if (a->mlp_out_scale && a->mlp_out_scale != 1.0f) mx_scale(out, a->mlp_out_scale, N * H);
}

static void mlp_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    size_t H = (size_t)f->m->arch.hidden;
    for (int t0 = 0; t0 < f->N; t0 += MLP_SLICE)
        mlp_slice(f, layer, wp, in + (size_t)t0 * H, MX_MIN(MLP_SLICE, f->N - t0), out + (size_t)t0 * H);
}

const mx_block_ops mx_block_mlp = {
    .name = "mlp", .load = mlp_load, .free = mlp_free, .scratch_floats = mlp_scratch, .forward = mlp_forward,
};
