/* AltUp (alternating updates, Gemma 3n; arch.altup): the residual is n
 * streams of [N, hidden]; a layer runs on one of them (the active one) and a
 * learned predict / correct step per layer spreads its update to the others.
 * The decoder calls mx_altup_embed once, mx_altup_predict / mx_altup_correct
 * around every layer and mx_altup_unembed after the last; the streams and
 * the per-token coefficients live in mx_fwd_bufs.altup. */
#include "model.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mx_altup_w {
    mx_weight *proj, *unembed; /* n - 1 each */
    struct altup_layer {
        mx_normw router_norm;
        mx_weight router;      /* [n, hidden] */
        float *predict;        /* [n * n, n] */
        float *correct;        /* [n, n], clamped to +-coef_clip */
        float *out_scale;      /* [hidden] */
    } *layers;
};

/* a small matrix as floats (any stored format); its bytes leave the per-token count */
static int load_small(mx_model *m, const char *pat, int layer, int rows, int cols, float **out) {
    mx_weight w = {0};
    if (mx_load_lin(m, pat, layer, rows, cols, false, &w, NULL)) return MX_ERR;
    m->weight_bytes -= mx_weight_bytes(&w);
    *out = mx_malloc((size_t)rows * cols * sizeof(float));
    if (*out)
        for (int r = 0; r < rows; r++) mx_weight_row(&w, r, *out + (size_t)r * cols);
    mx_weight_free(&w);
    return *out ? MX_OK : MX_ERR;
}

int mx_altup_bind(mx_model *m) {
    const mx_arch *a = &m->arch;
    const mx_altup_spec *s = &a->altup;
    int n = s->n, H = a->hidden;
    if (!n) return MX_OK;
    if (n < 2 || n > MX_ALTUP_MAX || s->active < 0 || s->active >= n)
        return mx_set_err("%s: altup: %d streams, active %d (2 to %d streams)", m->ck.dir, n, s->active, MX_ALTUP_MAX);
    struct mx_altup_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    m->altup = w;
    w->proj = mx_calloc((size_t)(n - 1), sizeof(mx_weight));
    w->unembed = mx_calloc((size_t)(n - 1), sizeof(mx_weight));
    w->layers = mx_calloc((size_t)a->n_layers, sizeof *w->layers);
    if (!w->proj || !w->unembed || !w->layers) return MX_ERR;
    for (int j = 0; j < n - 1; j++)
        if (mx_load_lin(m, s->proj, j, H, H, false, &w->proj[j], NULL) || mx_load_lin(m, s->unembed, j, H, H, false, &w->unembed[j], NULL))
            return MX_ERR;
    for (int l = 0; l < a->n_layers; l++) {
        struct altup_layer *L = &w->layers[l];
        if (mx_load_norm(m, &a->norm, s->router_norm, l, H, &L->router_norm) ||
            mx_load_lin(m, s->router, l, n, H, false, &L->router, NULL) || load_small(m, s->predict, l, n * n, n, &L->predict) ||
            load_small(m, s->correct, l, n, n, &L->correct) || mx_load_vec(m, s->out_scale, l, H, s->correct_scale, &L->out_scale))
            return MX_ERR;
        if (s->coef_clip > 0)
            for (int i = 0; i < n * n; i++) L->correct[i] = fminf(fmaxf(L->correct[i], -s->coef_clip), s->coef_clip);
    }
    return MX_OK;
}

void mx_altup_free(mx_model *m) {
    struct mx_altup_w *w = m->altup;
    if (!w) return;
    for (int j = 0; w->proj && w->unembed && j < m->arch.altup.n - 1; j++) {
        mx_weight_free(&w->proj[j]);
        mx_weight_free(&w->unembed[j]);
    }
    for (int l = 0; w->layers && l < m->arch.n_layers; l++) {
        struct altup_layer *L = &w->layers[l];
        mx_normw_free(&L->router_norm);
        mx_weight_free(&L->router);
        free(L->predict);
        free(L->correct);
        free(L->out_scale);
    }
    free(w->proj);
    free(w->unembed);
    free(w->layers);
    free(w);
    m->altup = NULL;
}

size_t mx_altup_floats(const mx_arch *a, int max_tokens) {
    size_t n = (size_t)a->altup.n;
    return n ? (size_t)max_tokens * (n * a->hidden + n + n * n) : 0;
}

static float *stream(const mx_fwd *f, float *buf, int i) { return buf + (size_t)i * f->N * f->m->arch.hidden; }
static float *coefs(const mx_fwd *f, float *buf) { return buf + (size_t)f->m->arch.altup.n * f->N * f->m->arch.hidden; }

static float rms(const float *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i] * x[i];
    return (float)(s / n);
}

/* y = y * rms(target) / sqrt(max(mean(y^2), 1e-5)) per row, as HF */
static void match_magnitude(float *y, const float *target, int N, int H) {
    for (int t = 0; t < N; t++) {
        float *r = y + (size_t)t * H, want = sqrtf(rms(target + (size_t)t * H, H)), have = sqrtf(fmaxf(rms(r, H), 1e-5f));
        for (int i = 0; i < H; i++) r[i] = r[i] * want / have;
    }
}

void mx_altup_embed(mx_fwd *f, const float *x, float *buf) {
    const struct mx_altup_w *w = f->m->altup;
    int N = f->N, H = f->m->arch.hidden;
    memcpy(stream(f, buf, 0), x, (size_t)N * H * sizeof(float));
    for (int j = 1; j < f->m->arch.altup.n; j++) {
        mx_linear(f, &w->proj[j - 1], NULL, x, N, H, stream(f, buf, j), H);
        match_magnitude(stream(f, buf, j), x, N, H);
    }
}

void mx_altup_unembed(mx_fwd *f, float *buf, float *x, float *tmp) {
    const struct mx_altup_w *w = f->m->altup;
    int N = f->N, H = f->m->arch.hidden, n = f->m->arch.altup.n;
    const float *s0 = stream(f, buf, 0);
    memcpy(x, s0, (size_t)N * H * sizeof(float));
    for (int j = 1; j < n; j++) {
        mx_linear(f, &w->unembed[j - 1], NULL, stream(f, buf, j), N, H, tmp, H);
        match_magnitude(tmp, s0, N, H);
        mx_add(x, tmp, N * H);
    }
    mx_scale(x, 1.0f / (float)n, N * H);
}

/* per token: tanh(router(router_norm(h) / hidden)) into mod [N, n] */
static void modalities(mx_fwd *f, const struct altup_layer *L, const float *h, float *tmp, float *mod) {
    const mx_arch *a = &f->m->arch;
    int N = f->N, H = a->hidden, n = a->altup.n;
    mx_norm_rows(&a->norm, &L->router_norm, tmp, h, N, H, H);
    mx_scale(tmp, 1.0f / (float)H, N * H);
    mx_linear(f, &L->router, NULL, tmp, N, H, mod, n);
    for (int i = 0; i < N * n; i++) mod[i] = tanhf(mod[i]);
}

void mx_altup_predict(mx_fwd *f, int layer, float *buf, float *x) {
    const struct altup_layer *L = &f->m->altup->layers[layer];
    int N = f->N, H = f->m->arch.hidden, n = f->m->arch.altup.n, act = f->m->arch.altup.active;
    float *mod = coefs(f, buf), *P = mod + (size_t)N * n;
    modalities(f, L, stream(f, buf, act), x, mod);
    for (int t = 0; t < N; t++) { /* P[t] = predict @ mod[t], [n * n] row-major: P_ij at i * n + j */
        float *p = P + (size_t)t * n * n;
        const float *m = mod + (size_t)t * n;
        for (int r = 0; r < n * n; r++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += L->predict[(size_t)r * n + k] * m[k];
            p[r] = acc;
        }
    }
    for (int t = 0; t < N; t++) {
        const float *p = P + (size_t)t * n * n;
        for (int h = 0; h < H; h++) {
            float old[MX_ALTUP_MAX];
            size_t at = (size_t)t * H + h;
            for (int j = 0; j < n; j++) old[j] = stream(f, buf, j)[at];
            for (int i = 0; i < n; i++) {
                float acc = 0;
                for (int j = 0; j < n; j++) acc += old[j] * p[i * n + j];
                stream(f, buf, i)[at] = acc + old[i];
            }
        }
    }
    memcpy(x, stream(f, buf, act), (size_t)N * H * sizeof(float));
}

void mx_altup_correct(mx_fwd *f, int layer, float *buf, float *y, float *tmp) {
    const mx_model *m = f->m;
    const mx_arch *a = &m->arch;
    const struct altup_layer *L = &m->altup->layers[layer];
    const mx_layer_spec *ls = &a->layers[layer];
    int N = f->N, H = a->hidden, n = a->altup.n, act = a->altup.active;
    float *mod = coefs(f, buf), *c = mod + (size_t)N * n;
    modalities(f, L, y, tmp, mod);
    for (int t = 0; t < N; t++)
        for (int i = 0; i < n; i++) {
            float acc = 0;
            for (int k = 0; k < n; k++) acc += L->correct[i * n + k] * mod[(size_t)t * n + k];
            c[(size_t)t * n + i] = acc + 1.0f;
        }
    float *sa = stream(f, buf, act);
    for (size_t r = 0; r < (size_t)N * H; r++) y[r] -= sa[r]; /* the innovation */
    for (int i = 0; i < n; i++) {
        float *s = stream(f, buf, i);
        for (int t = 0; t < N; t++) {
            float ci = c[(size_t)t * n + i];
            for (int h = 0; h < H; h++) s[(size_t)t * H + h] += y[(size_t)t * H + h] * ci;
        }
    }
    if (!ls->post) return;
    memcpy(tmp, sa, (size_t)N * H * sizeof(float));
    if (a->altup.correct_scale)
        for (int t = 0; t < N; t++)
            for (int h = 0; h < H; h++) tmp[(size_t)t * H + h] *= L->out_scale[h];
    ls->post->forward(f, layer, m->layers[layer].post_w, tmp, y);
    for (int i = 1; i < n; i++) mx_add(stream(f, buf, i), y, N * H);
}
