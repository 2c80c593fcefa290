/* Row-wise elementwise ops: portable C, and AVX2 versions (ops_avx2.c) for
 * the ones on hot paths (attention's dot/axpy, norms, softmax, the gated
 * MLP activation). The ISA is picked on first use (a table of function
 * pointers, one atomic load per call); mx_kernels_redispatch() re-picks
 * after mx_cpu_force. */
#include "kernels.h"
#include "ops_impl.h"
#include "../base/cpu.h"
#include <math.h>
#include <stdatomic.h>
#include <string.h>

static float dot_c(const float *a, const float *b, int n);
static void axpy_c(float *y, float a, const float *x, int n);
static void add_c(float *y, const float *x, int n);
static void scale_c(float *y, float a, int n);
static void rmsnorm_row_c(float *y, const float *x, const float *w, float w_offset, int d, float eps);
static void softmax_c(float *x, int n);
static void exp_acc_c(float *x, int n, float sub, float acc[8], int lane0);
static float max_c(const float *x, int n);
static void attn_scores_c(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out);
static void attn_mix_c(float *y, const float *p, const float *V, size_t ldv, int n, int d, bool acc);

typedef struct {
    float (*dot)(const float *, const float *, int);
    void (*axpy)(float *, float, const float *, int);
    void (*add)(float *, const float *, int);
    void (*scale)(float *, float, int);
    void (*rmsnorm_row)(float *, const float *, const float *, float, int, float);
    void (*softmax)(float *, int);
    void (*exp_acc)(float *, int, float, float *, int);
    float (*max)(const float *, int);
    void (*silu_mul)(float *, const float *, int);     /* NULL: portable */
    void (*gelu_tanh_mul)(float *, const float *, int); /* NULL: portable */
    void (*attn_scores)(const float *, const float *, size_t, int, int, float, float *);
    void (*attn_mix)(float *, const float *, const float *, size_t, int, int, bool);
    int32_t (*argmax)(const float *, int);
} ops_tab;

static int32_t argmax_c(const float *x, int n);
static const ops_tab tab_c = {dot_c, axpy_c, add_c, scale_c, rmsnorm_row_c, softmax_c, exp_acc_c, max_c, NULL, NULL, attn_scores_c, attn_mix_c, argmax_c};
static const ops_tab tab_avx2 = {mx_dot_avx2,      mx_axpy_avx2,     mx_add_avx2,           mx_scale_avx2,
                                 mx_rmsnorm_row_avx2, mx_softmax_avx2, mx_exp_acc_avx2, mx_max_avx2, mx_silu_mul_avx2, mx_gelu_tanh_mul_avx2,
                                 mx_attn_scores_avx2, mx_attn_mix_avx2, mx_argmax_avx2};
static _Atomic(const ops_tab *) g_tab;

static const ops_tab *ops(void) {
    const ops_tab *t = atomic_load_explicit(&g_tab, memory_order_relaxed);
    if (!t) {
        t = mx_cpu()->level >= MX_CPU_AVX2 ? &tab_avx2 : &tab_c;
        atomic_store_explicit(&g_tab, t, memory_order_relaxed);
    }
    return t;
}

void mx_kernels_redispatch(void) { atomic_store(&g_tab, NULL); }

static void rmsnorm_row_c(float *yr, const float *xr, const float *w, float w_offset, int d, float eps) {
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
    float inv = 1.0f / sqrtf((float)(ss / d) + eps);
    for (int i = 0; i < d; i++) yr[i] = xr[i] * inv * (w ? (w[i] + w_offset) : 1.0f);
}

void mx_rmsnorm(float *y, const float *x, const float *w, float w_offset, int n, int d, int ld, float eps) {
    const ops_tab *o = ops();
    for (int t = 0; t < n; t++) o->rmsnorm_row(y + (size_t)t * ld, x + (size_t)t * ld, w, w_offset, d, eps);
}

void mx_layernorm(float *y, const float *x, const float *w, const float *b, float w_offset, int n, int d, int ld, float eps) {
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * ld;
        float *yr = y + (size_t)t * ld;
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += xr[i];
        mean /= d;
        for (int i = 0; i < d; i++) { double e = xr[i] - mean; var += e * e; }
        var /= d;
        float inv = 1.0f / sqrtf((float)var + eps), m = (float)mean;
        for (int i = 0; i < d; i++) {
            float v = (xr[i] - m) * inv;
            if (w) v *= w[i] + w_offset;
            if (b) v += b[i];
            yr[i] = v;
        }
    }
}

static float max_c(const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}
static void exp_acc_c(float *x, int n, float sub, float acc[8], int lane0) {
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - sub);
        acc[(lane0 + i) & 7] += x[i];
    }
}
static void softmax_c(float *x, int n) {
    float m = max_c(x, n);
    if (m == -INFINITY) { for (int i = 0; i < n; i++) x[i] = 0; return; }
    float s = 0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - m); s += x[i]; }
    float inv = 1.0f / s;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static float dot_c(const float *a, const float *b, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    float r = 0;
    for (; i < n; i++) r += a[i] * b[i];
    return r + ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void axpy_c(float *y, float a, const float *x, int n) { for (int i = 0; i < n; i++) y[i] += a * x[i]; }
static void add_c(float *y, const float *x, int n) { for (int i = 0; i < n; i++) y[i] += x[i]; }
static void scale_c(float *y, float a, int n) { for (int i = 0; i < n; i++) y[i] *= a; }

static void attn_scores_c(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out) {
    for (int k = 0; k < n; k++) out[k] = dot_c(q, K + (size_t)k * ldk, d) * scale;
}

static void attn_mix_c(float *y, const float *p, const float *V, size_t ldv, int n, int d, bool acc) {
    if (!acc) memset(y, 0, (size_t)d * sizeof(float));
    for (int k = 0; k < n; k++) axpy_c(y, p[k], V + (size_t)k * ldv, d);
}

void mx_softmax(float *x, int n) { ops()->softmax(x, n); }
void mx_exp_acc(float *x, int n, float sub, float acc[8], int lane0) { ops()->exp_acc(x, n, sub, acc, lane0); }
float mx_max(const float *x, int n) { return ops()->max(x, n); }
/* the two-row kernels share the one-row kernels' arithmetic: used where those are (the AVX2 table on
 * an AVX-512 machine, whose one-row scores then run on 512-bit registers too) */
static bool two_rows(void) { return ops() == &tab_avx2 && mx_cpu()->level >= MX_CPU_AVX512; }
void mx_attn_scores(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out) {
    if (two_rows()) { mx_attn_scores_avx512(q, K, ldk, n, d, scale, out); return; }
    ops()->attn_scores(q, K, ldk, n, d, scale, out);
}
void mx_attn_mix(float *y, const float *p, const float *V, size_t ldv, int n, int d, bool acc) { ops()->attn_mix(y, p, V, ldv, n, d, acc); }
void mx_attn_scores2(const float *q0, const float *q1, const float *K, size_t ldk, int n, int d, float scale, float *o0, float *o1, bool pf) {
    if (two_rows()) { mx_attn_scores2_avx512(q0, q1, K, ldk, n, d, scale, o0, o1, pf); return; }
    mx_attn_scores(q0, K, ldk, n, d, scale, o0);
    mx_attn_scores(q1, K, ldk, n, d, scale, o1);
}
void mx_attn_mix2(float *y0, float *y1, const float *p0, const float *p1, const float *V, size_t ldv, int n, int d, bool acc, bool pf) {
    if (two_rows()) { mx_attn_mix2_avx512(y0, y1, p0, p1, V, ldv, n, d, acc, pf); return; }
    mx_attn_mix(y0, p0, V, ldv, n, d, acc);
    mx_attn_mix(y1, p1, V, ldv, n, d, acc);
}
float mx_dot(const float *a, const float *b, int n) { return ops()->dot(a, b, n); }
void mx_axpy(float *y, float a, const float *x, int n) { ops()->axpy(y, a, x, n); }
void mx_add(float *y, const float *x, int n) { ops()->add(y, x, n); }
void mx_scale(float *y, float a, int n) { ops()->scale(y, a, n); }

int mx_act_parse(const char *s, mx_act *out) {
    static const struct { const char *n; mx_act a; } tab[] = {
        {"silu", MX_ACT_SILU}, {"swish", MX_ACT_SILU}, {"gelu", MX_ACT_GELU}, {"gelu_pytorch_tanh", MX_ACT_GELU_TANH},
        {"gelu_new", MX_ACT_GELU_TANH}, {"gelu_fast", MX_ACT_GELU_TANH}, {"gelu_tanh", MX_ACT_GELU_TANH},
        {"relu", MX_ACT_RELU}, {"relu2", MX_ACT_RELU2}, {"identity", MX_ACT_IDENTITY}, {"linear", MX_ACT_IDENTITY},
        {"sigmoid", MX_ACT_SIGMOID}, {"tanh", MX_ACT_TANH}, {"quick_gelu", MX_ACT_QUICK_GELU},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(s, tab[i].n)) { *out = tab[i].a; return 0; }
    return -1;
}

static inline float act1(mx_act a, float x) {
    switch (a) {
    case MX_ACT_SILU: return x / (1.0f + expf(-x));
    case MX_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case MX_ACT_GELU_TANH: /* 0.5 x (1 + tanh z) = x sigmoid(2z): no cancellation for x < 0 */
        return x / (1.0f + expf(-1.5957691216057308f * (x + 0.044715f * x * x * x)));
    case MX_ACT_RELU: return x > 0 ? x : 0;
    case MX_ACT_RELU2: return x > 0 ? x * x : 0;
    case MX_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case MX_ACT_TANH: return tanhf(x);
    case MX_ACT_QUICK_GELU: return x / (1.0f + expf(-1.702f * x));
    default: return x;
    }
}

void mx_act_apply(mx_act a, float *x, int n) {
    if (a == MX_ACT_IDENTITY) return;
    const ops_tab *o = ops();
    if (a == MX_ACT_SILU && o->silu_mul) { o->silu_mul(x, NULL, n); return; }
    if (a == MX_ACT_GELU_TANH && o->gelu_tanh_mul) { o->gelu_tanh_mul(x, NULL, n); return; }
    for (int i = 0; i < n; i++) x[i] = act1(a, x[i]);
}

void mx_act_mul(mx_act a, float *gate, const float *up, int n) {
    const ops_tab *o = ops();
    if (a == MX_ACT_SILU && o->silu_mul) { o->silu_mul(gate, up, n); return; }
    if (a == MX_ACT_GELU_TANH && o->gelu_tanh_mul) { o->gelu_tanh_mul(gate, up, n); return; }
    for (int i = 0; i < n; i++) gate[i] = act1(a, gate[i]) * up[i];
}

static int32_t argmax_c(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int32_t mx_argmax(const float *x, int n) { return ops()->argmax(x, n); }
