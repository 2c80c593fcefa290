/* Row-wise elementwise ops. These are a small share of the time next to the
 * matrix products, so they are plain C that the compiler vectorizes. */
#include "kernels.h"
#include <math.h>
#include <string.h>

void mx_rmsnorm(float *y, const float *x, const float *w, float w_offset, int n, int d, int ld, float eps) {
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * ld;
        float *yr = y + (size_t)t * ld;
        double ss = 0;
        for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        float inv = 1.0f / sqrtf((float)(ss / d) + eps);
        for (int i = 0; i < d; i++) yr[i] = xr[i] * inv * (w ? (w[i] + w_offset) : 1.0f);
    }
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

void mx_softmax(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    if (m == -INFINITY) { for (int i = 0; i < n; i++) x[i] = 0; return; }
    float s = 0;
    for (int i = 0; i < n; i++) { x[i] = expf(x[i] - m); s += x[i]; }
    float inv = 1.0f / s;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

float mx_dot(const float *a, const float *b, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    float r = 0;
    for (; i < n; i++) r += a[i] * b[i];
    return r + ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void mx_axpy(float *y, float a, const float *x, int n) { for (int i = 0; i < n; i++) y[i] += a * x[i]; }
void mx_add(float *y, const float *x, int n) { for (int i = 0; i < n; i++) y[i] += x[i]; }
void mx_scale(float *y, float a, int n) { for (int i = 0; i < n; i++) y[i] *= a; }

int mx_act_parse(const char *s, mx_act *out) {
    static const struct { const char *n; mx_act a; } tab[] = {
        {"silu", MX_ACT_SILU}, {"swish", MX_ACT_SILU}, {"gelu", MX_ACT_GELU}, {"gelu_pytorch_tanh", MX_ACT_GELU_TANH},
        {"gelu_new", MX_ACT_GELU_TANH}, {"gelu_fast", MX_ACT_GELU_TANH}, {"gelu_tanh", MX_ACT_GELU_TANH},
        {"relu", MX_ACT_RELU}, {"relu2", MX_ACT_RELU2}, {"identity", MX_ACT_IDENTITY}, {"linear", MX_ACT_IDENTITY},
        {"sigmoid", MX_ACT_SIGMOID}, {"tanh", MX_ACT_TANH},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(s, tab[i].n)) { *out = tab[i].a; return 0; }
    return -1;
}

static inline float act1(mx_act a, float x) {
    switch (a) {
    case MX_ACT_SILU: return x / (1.0f + expf(-x));
    case MX_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case MX_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case MX_ACT_RELU: return x > 0 ? x : 0;
    case MX_ACT_RELU2: return x > 0 ? x * x : 0;
    case MX_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case MX_ACT_TANH: return tanhf(x);
    default: return x;
    }
}

void mx_act_apply(mx_act a, float *x, int n) {
    if (a == MX_ACT_IDENTITY) return;
    for (int i = 0; i < n; i++) x[i] = act1(a, x[i]);
}

void mx_act_mul(mx_act a, float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) gate[i] = act1(a, gate[i]) * up[i];
}
