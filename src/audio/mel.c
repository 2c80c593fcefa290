/* mel: mixed-radix FFT, the Slaney mel bank and the log-mel features. See mel.h. */
#include "mel.h"
#include <math.h>

#define PI 3.14159265358979323846
#include <stdlib.h>
#include <string.h>

typedef struct { double re, im; } cpx;

struct mx_mel {
    int rate, n_fft, hop, n_mels, bins;
    int fac[64]; /* radix, remaining length, ... */
    cpx *tw;     /* exp(-2 pi i k / n_fft) */
    double *win; /* periodic Hann */
    float *filt; /* [bins][n_mels] */
    int *lo, *hi; /* nonzero bins of filter j: [lo[j], hi[j]) */
};

/* ---- FFT (decimation in time, recursive over the factors) ---- */
static void fft_rec(const mx_mel *m, cpx *out, const cpx *in, size_t fstride, const int *fac, cpx *scratch) {
    int p = fac[0], len = fac[1]; /* out has p * len points */
    if (len == 1)
        for (int k = 0; k < p; k++) out[k] = in[(size_t)k * fstride];
    else
        for (int k = 0; k < p; k++) fft_rec(m, out + (size_t)k * len, in + (size_t)k * fstride, fstride * (size_t)p, fac + 2, scratch);
    /* radix-p butterflies: out[u + q*len], q < p, from the p sub-transforms */
    size_t root = (size_t)len * fstride; /* tw[r * root] = exp(-2 pi i r / p) */
    for (int u = 0; u < len; u++) {
        for (int q = 0; q < p; q++) {
            cpx a = out[u + q * len];
            size_t t = (size_t)q * (size_t)u * fstride; /* twiddle of sub-transform q at u (< n) */
            scratch[q] = (cpx){a.re * m->tw[t].re - a.im * m->tw[t].im, a.re * m->tw[t].im + a.im * m->tw[t].re};
        }
        for (int k = 0; k < p; k++) {
            cpx s = scratch[0];
            for (int q = 1, r = k; q < p; q++, r = r + k >= p ? r + k - p : r + k) { /* r = q * k mod p */
                cpx w = m->tw[(size_t)r * root];
                s.re += scratch[q].re * w.re - scratch[q].im * w.im;
                s.im += scratch[q].re * w.im + scratch[q].im * w.re;
            }
            out[u + k * len] = s;
        }
    }
}

/* ---- the Slaney mel scale (transformers' hertz_to_mel / mel_to_hertz, mel_scale="slaney") ---- */
static double hz2mel(double f) {
    double m = 3.0 * f / 200.0;
    if (f >= 1000.0) m = 15.0 + log(f / 1000.0) * (27.0 / log(6.4));
    return m;
}
static double mel2hz(double m) {
    double f = 200.0 * m / 3.0;
    if (m >= 15.0) f = 1000.0 * exp(log(6.4) / 27.0 * (m - 15.0));
    return f;
}

mx_mel *mx_mel_new(int rate, int n_fft, int hop, int n_mels, double f_lo, double f_hi) {
    if (rate < 1000 || rate > 768000 || n_fft < 16 || n_fft > 8192 || hop < 1 || hop > n_fft || n_mels < 1 || n_mels > 512 ||
        !(f_lo >= 0) || !(f_hi > f_lo) || f_hi > rate / 2.0) {
        mx_set_err("mel: unsupported parameters (rate %d, n_fft %d, hop %d, n_mels %d, %g-%g Hz)", rate, n_fft, hop, n_mels, f_lo, f_hi);
        return NULL;
    }
    mx_mel *m = mx_calloc(1, sizeof *m);
    if (!m) return NULL;
    m->rate = rate;
    m->n_fft = n_fft;
    m->hop = hop;
    m->n_mels = n_mels;
    m->bins = n_fft / 2 + 1;
    /* factors: 4 first, then 2, 3, 5, ... (each entry: radix, remaining length) */
    int rem = n_fft, nf = 0;
    for (int r = 4; rem > 1;) {
        while (rem % r) r = r == 4 ? 2 : r == 2 ? 3 : r + 2;
        rem /= r;
        m->fac[nf++] = r;
        m->fac[nf++] = rem;
    }
    m->tw = mx_malloc(sizeof(cpx) * (size_t)n_fft);
    m->win = mx_malloc(sizeof(double) * (size_t)n_fft);
    m->filt = mx_calloc((size_t)m->bins * (size_t)n_mels, sizeof(float));
    double *ff = mx_malloc(sizeof(double) * (size_t)(n_mels + 2));
    if (!m->tw || !m->win || !m->filt || !ff) { free(ff); mx_mel_free(m); return NULL; }
    for (int k = 0; k < n_fft; k++) {
        double a = -2.0 * PI * k / n_fft;
        m->tw[k] = (cpx){cos(a), sin(a)};
        m->win[k] = 0.5 - 0.5 * cos(2.0 * PI * k / n_fft); /* torch.hann_window: periodic */
    }
    /* filter edges: n_mels + 2 points evenly spaced in mel (np.linspace) */
    double lo = hz2mel(f_lo), hi = hz2mel(f_hi);
    double step = (hi - lo) / (n_mels + 1), fstep = (double)(rate / 2) / (m->bins - 1); /* as np.linspace: i * step + start */
    for (int i = 0; i < n_mels + 2; i++) ff[i] = mel2hz(i == n_mels + 1 ? hi : i * step + lo);
    for (int b = 0; b < m->bins; b++) {
        double f = b == m->bins - 1 ? (double)(rate / 2) : b * fstep; /* np.linspace(0, sr // 2, bins) */
        for (int j = 0; j < n_mels; j++) {
            double down = -(ff[j] - f) / (ff[j + 1] - ff[j]), up = (ff[j + 2] - f) / (ff[j + 2] - ff[j + 1]);
            double v = fmax(0.0, fmin(down, up)) * (2.0 / (ff[j + 2] - ff[j])); /* Slaney norm */
            m->filt[(size_t)b * (size_t)n_mels + (size_t)j] = (float)v;
        }
    }
    free(ff);
    m->lo = mx_malloc(sizeof(int) * (size_t)n_mels);
    m->hi = mx_malloc(sizeof(int) * (size_t)n_mels);
    if (!m->lo || !m->hi) { mx_mel_free(m); return NULL; }
    for (int j = 0; j < n_mels; j++) {
        m->lo[j] = m->bins;
        m->hi[j] = 0;
        for (int b = 0; b < m->bins; b++)
            if (m->filt[(size_t)b * (size_t)n_mels + (size_t)j] != 0) {
                if (b < m->lo[j]) m->lo[j] = b;
                m->hi[j] = b + 1;
            }
    }
    return m;
}

void mx_mel_free(mx_mel *m) {
    if (!m) return;
    free(m->tw);
    free(m->win);
    free(m->filt);
    free(m->lo);
    free(m->hi);
    free(m);
}

int mx_mel_bins(const mx_mel *m) { return m->bins; }
const float *mx_mel_filters(const mx_mel *m) { return m->filt; }

void mx_mel_power(const mx_mel *m, const float *frame, double *work, double *pw) {
    int n = m->n_fft;
    cpx *in = (cpx *)work, *out = in + n, *scratch = out + n;
    for (int k = 0; k < n; k++) in[k] = (cpx){m->win[k] * frame[k], 0};
    fft_rec(m, out, in, 1, m->fac, scratch);
    for (int b = 0; b < m->bins; b++) pw[b] = out[b].re * out[b].re + out[b].im * out[b].im;
}

/* ---- features ---- */
#define FRAMES_PER_TASK 32
typedef struct {
    const mx_mel *m;
    const float *x; /* padded signal, n_fft/2 reflected samples each side */
    size_t frames;
    float *logmel;  /* [n_mels][frames], log10 before the clamp */
    float *tmax;    /* per task */
} job_t;

static void frames_task(void *ctx, int task, int tid) {
    (void)tid;
    job_t *j = ctx;
    const mx_mel *m = j->m;
    int bins = m->bins, nm = m->n_mels;
    cpx *in = malloc(sizeof(cpx) * 3 * (size_t)m->n_fft);
    double *pw = malloc(sizeof(double) * (size_t)(bins + nm)), *acc = pw + bins;
    float mx = -INFINITY;
    if (!in || !pw) { free(in); free(pw); j->tmax[task] = NAN; return; } /* reported by the caller */
    size_t f0 = (size_t)task * FRAMES_PER_TASK, f1 = MX_MIN(j->frames, f0 + FRAMES_PER_TASK);
    for (size_t f = f0; f < f1; f++) {
        mx_mel_power(m, j->x + f * (size_t)m->hop, (double *)in, pw);
        for (int i = 0; i < nm; i++) { /* a triangle spans a few bins */
            double a = 0;
            for (int b = m->lo[i]; b < m->hi[i]; b++) a += (double)m->filt[(size_t)b * (size_t)nm + (size_t)i] * pw[b];
            acc[i] = a;
        }
        for (int i = 0; i < nm; i++) {
            float l = (float)log10(acc[i] > 1e-10 ? acc[i] : 1e-10);
            j->logmel[(size_t)i * j->frames + f] = l;
            if (l > mx) mx = l;
        }
    }
    j->tmax[task] = mx;
    free(in);
    free(pw);
}

int mx_mel_features(const mx_mel *m, const float *pcm, size_t n, size_t samples, mx_pool *pool, float **out, size_t *frames_out) {
    *out = NULL;
    *frames_out = 0;
    size_t frames = samples / (size_t)m->hop, half = (size_t)m->n_fft / 2;
    if (samples == 0 || frames == 0) return mx_set_err("mel: no frames (%zu samples)", samples);
    if (samples <= half) return mx_set_err("mel: %zu samples is too short for n_fft %d", samples, m->n_fft);
    size_t nm = (size_t)m->n_mels, cells;
    if (samples > (SIZE_MAX >> 4) || !mx_mul_ok(nm, frames, &cells)) return mx_set_err("mel: too many frames");
    /* the padded signal: reflect | samples (zero-padded or cut) | reflect */
    size_t len = samples + 2 * half;
    float *x = mx_malloc(sizeof(float) * len);
    float *lm = mx_malloc(sizeof(float) * cells);
    int ntask = (int)((frames + FRAMES_PER_TASK - 1) / FRAMES_PER_TASK);
    float *tmax = mx_malloc(sizeof(float) * (size_t)ntask);
    if (!x || !lm || !tmax || (frames + FRAMES_PER_TASK) / FRAMES_PER_TASK > (size_t)INT32_MAX) {
        free(x); free(lm); free(tmax);
        return MX_ERR;
    }
    float *body = x + half;
    size_t keep = MX_MIN(n, samples);
    memcpy(body, pcm, keep * sizeof(float));
    memset(body + keep, 0, (samples - keep) * sizeof(float));
    for (size_t i = 1; i <= half; i++) {
        body[-(ptrdiff_t)i] = body[i];
        body[samples - 1 + i] = body[samples - 1 - i];
    }
    job_t j = {m, x, frames, lm, tmax};
    mx_pool_run(pool, frames_task, &j, ntask);
    float mx = -INFINITY;
    for (int t = 0; t < ntask; t++) {
        if (isnan(tmax[t])) { free(x); free(lm); free(tmax); return mx_set_err("mel: out of memory"); }
        if (tmax[t] > mx) mx = tmax[t];
    }
    float floor_ = mx - 8.0f;
    for (size_t i = 0; i < cells; i++) lm[i] = ((lm[i] > floor_ ? lm[i] : floor_) + 4.0f) / 4.0f;
    free(x);
    free(tmax);
    *out = lm;
    *frames_out = frames;
    return MX_OK;
}
