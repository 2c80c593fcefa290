/* Float matmul kernels (every format x dispatch level x odd shape, with and
 * without a pool) against mx_matmul_ref, and the row-wise ops against plain
 * references. Small shapes: this also runs under ASan+UBSan. */
#include "test.h"
#include "kernels/kernels.h"
#include "kernels/matmul_impl.h"
#include "base/base.h"
#include "base/cpu.h"
#include "base/half.h"
#include "base/threadpool.h"
#include <stdint.h>

typedef struct {
    mx_weight w;
    uint8_t *mem;
} tw;

/* Random [rows, cols] weight in format f, rows starting at an odd byte offset
 * (MLX checkpoints are not aligned) with padding between rows. */
static tw make_weight(mx_wfmt f, int rows, int cols, unsigned *seed) {
    tw t;
    memset(&t, 0, sizeof t);
    size_t es = f == MX_W_F32 ? 4 : 2;
    size_t rb = (size_t)cols * es + 6;
    t.mem = malloc(rb * (size_t)rows + 16);
    t.w.fmt = f;
    t.w.rows = rows;
    t.w.cols = cols;
    t.w.row_bytes = rb;
    t.w.data = t.mem + 2;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float v = t_randf(seed);
            if (t_rng(seed) % 50 == 0) v *= 1e-6f; /* f16 subnormals */
            uint8_t *p = t.mem + 2 + (size_t)r * rb + (size_t)c * es;
            if (f == MX_W_F32) memcpy(p, &v, 4);
            else {
                uint16_t h = f == MX_W_F16 ? mx_f32_to_f16(v) : mx_f32_to_bf16(v);
                memcpy(p, &h, 2);
            }
        }
    return t;
}

/* |y - ref| <= tol * sum_c |w x| + 1e-30 for every output; padding intact. */
static int check_mm(const mx_weight *w, const float *x, int n, int ldx, const float *y, const float *ref, int ldy,
                    float tol, char *why, size_t whylen) {
    float *row = malloc(sizeof(float) * (size_t)(w->cols ? w->cols : 1));
    int bad = 0;
    for (int r = 0; r < w->rows && !bad; r++) {
        mx_weight_row(w, r, row);
        for (int t = 0; t < n; t++) {
            double scale = 0;
            for (int c = 0; c < w->cols; c++) scale += fabs((double)row[c] * x[(size_t)t * ldx + c]);
            double d = fabs((double)y[(size_t)t * ldy + r] - ref[(size_t)t * ldy + r]);
            if (!(d <= tol * scale + 1e-30)) {
                snprintf(why, whylen, "t=%d r=%d got %g want %g (scale %g)", t, r, y[(size_t)t * ldy + r],
                         ref[(size_t)t * ldy + r], scale);
                bad = 1;
                break;
            }
        }
    }
    for (int t = 0; t < n && !bad; t++)
        for (int r = w->rows; r < ldy; r++)
            if (y[(size_t)t * ldy + r] != 1234.5f) {
                snprintf(why, whylen, "wrote padding t=%d r=%d", t, r);
                bad = 1;
                break;
            }
    free(row);
    return !bad;
}

static const int shapes[][2] = {{1, 1}, {5, 7}, {17, 33}, {16, 256}, {33, 100}, {70, 300}, {129, 520}, {40, 1100}};
static const int ns[] = {1, 2, 3, 4, 5, 7, 33, 48, 130};

/* prep: BF16 weights prepared (repacked into rows in lanes on AVX-512 BF16
 * CPUs), and row slices of them (on a block and off one) computing the
 * same bits as the whole. */
static void test_matmul_level(const char *lvl, mx_pool *pool, int bf16dot, bool prep) {
    unsigned seed = 12345;
    mx_kpolicy kp = mx_kpolicy_on(pool);
    kp.bf16_dot = bf16dot;
    const mx_wfmt fmts[] = {MX_W_F32, MX_W_F16, MX_W_BF16};
    const char *fnames[] = {"f32", "f16", "bf16"};
    for (int fi = 0; fi < 3; fi++) {
        if ((bf16dot || prep) && fmts[fi] != MX_W_BF16) continue;
        int fails = 0;
        char why[256] = "";
        for (size_t si = 0; si < MX_ARRAY_LEN(shapes); si++) {
            int rows = shapes[si][0], cols = shapes[si][1];
            tw t = make_weight(fmts[fi], rows, cols, &seed);
            if (prep && (mx_weight_prepare(&t.w, &kp) || !t.w.prep)) {
                snprintf(why, sizeof why, "not repacked [rows=%d cols=%d]", rows, cols);
                fails++;
            }
            for (size_t ni = 0; ni < MX_ARRAY_LEN(ns); ni++) {
                int n = ns[ni];
                if ((size_t)rows * cols * n > 3000000) continue; /* keep ASan fast */
                int ldx = cols + 3, ldy = rows + 5;
                float *x = malloc(sizeof(float) * (size_t)n * ldx);
                float *y = malloc(sizeof(float) * (size_t)n * ldy);
                float *ref = malloc(sizeof(float) * (size_t)n * ldy);
                for (size_t i = 0; i < (size_t)n * ldx; i++) x[i] = t_randf(&seed);
                for (size_t i = 0; i < (size_t)n * ldy; i++) y[i] = ref[i] = 1234.5f;
                mx_matmul_ref(&t.w, x, n, ldx, ref, ldy);
                mx_matmul(&t.w, x, n, ldx, y, ldy, &kp);
                /* bf16 dot rounds x to bf16: relative 2^-9 per product; the
                 * bf2 kernels (BF16 weights, AVX-512 BF16) take x as bf16
                 * hi + lo, at most 2^-17 |x| off */
                bool bf2 = fmts[fi] == MX_W_BF16 && mx_cpu()->level >= MX_CPU_AVX512 && mx_cpu()->avx512_bf16;
                float tol = bf16dot && n > 3 ? 8e-3f : bf2 ? 2e-6f + 0x1p-17f : 2e-6f;
                if (!fails && !check_mm(&t.w, x, n, ldx, y, ref, ldy, tol, why, sizeof why)) {
                    char *e = why + strlen(why);
                    snprintf(e, sizeof why - (size_t)(e - why), " [rows=%d cols=%d n=%d]", rows, cols, n);
                    fails++;
                }
                /* batch invariance: every token alone gives the same bits as in the batch */
                for (int tok = 0; tok < n && !fails && !bf16dot; tok++) {
                    float *y1 = malloc(sizeof(float) * (size_t)rows);
                    mx_matmul(&t.w, x + (size_t)tok * ldx, 1, ldx, y1, rows, &kp);
                    if (memcmp(y1, y + (size_t)tok * ldy, sizeof(float) * (size_t)rows) != 0) {
                        snprintf(why, sizeof why, "token %d alone differs from the batch [rows=%d cols=%d n=%d]", tok,
                                 rows, cols, n);
                        fails++;
                    }
                    free(y1);
                }
                /* slices: rows [r0, rows) of the prepared weight, r0 on a block (its copy's
                 * lines shared) and off one (a copy of its own), give the whole's bits */
                for (int r0 = 1; prep && r0 < rows && !fails; r0 = r0 == 1 ? 16 : rows) {
                    mx_weight v;
                    float *yv = malloc(sizeof(float) * (size_t)n * rows);
                    if (mx_weight_slice_rows(&t.w, r0, rows - r0, &v) || !v.prep) {
                        snprintf(why, sizeof why, "slice at %d not prepared [rows=%d cols=%d]", r0, rows, cols);
                        fails++;
                    } else {
                        mx_matmul(&v, x, n, ldx, yv, rows, &kp);
                        for (int tok = 0; tok < n && !fails; tok++)
                            if (memcmp(yv + (size_t)tok * rows, y + (size_t)tok * ldy + r0, sizeof(float) * (size_t)(rows - r0))) {
                                snprintf(why, sizeof why, "slice at %d differs, token %d [rows=%d cols=%d n=%d]", r0, tok, rows, cols, n);
                                fails++;
                            }
                    }
                    mx_weight_free(&v);
                    free(yv);
                }
                free(x);
                free(y);
                free(ref);
            }
            if (prep) {
                mx_weight w = t.w;
                mx_weight_free(&w); /* its prepared copy (the storage is t.mem's) */
            }
            free(t.mem);
        }
        char name[128];
        snprintf(name, sizeof name, "matmul_%s_%s%s%s_%s", fnames[fi], lvl, bf16dot ? "_bf16dot" : "", prep ? "_repacked" : "",
                 pool ? "pool3" : "nopool");
        CHECK(name, fails == 0, "%s", why);
    }
}

/* ---- ops ---- */

static void ref_softmax(double *x, int n) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int i = 0; i < n; i++) { x[i] = exp(x[i] - m); s += x[i]; }
    for (int i = 0; i < n; i++) x[i] /= s;
}

/* mx_bf16_split: hi + lo within 2^-17 |x| of x, lo in its place, the same
 * words at every level (first: the reference); odd K and a row stride. */
static uint16_t *g_split_ref; /* freed at exit */
static void test_bf16_split(const char *lvl, bool first) {
    enum { N = 3, K = 37, LDX = 41 };
    float x[N * LDX];
    unsigned seed = 7;
    for (int i = 0; i < N * LDX; i++) x[i] = t_randf(&seed) * (i % 5 == 0 ? 1e-3f : 3.0f);
    size_t ld = mx_split_ld(K), q2 = mx_split_q2(K);
    uint16_t *xb = calloc((size_t)N * ld, sizeof *xb);
    int bad = q2 < (size_t)K || ld < q2 + (size_t)K ? 4 : 0;
    for (int t = 0; t < N && !bad; t++) mx_bf16_split(x + t * LDX, 1, LDX, K, xb + (size_t)t * ld);
    for (int t = 0; t < N && !bad; t++)
        for (int k = 0; k < K; k++) {
            float v = x[t * LDX + k], r = mx_bf16_to_f32(xb[(size_t)t * ld + k]) + mx_bf16_to_f32(xb[(size_t)t * ld + q2 + k]);
            if (!(fabsf(r - v) <= 0x1p-17f * fabsf(v))) bad = 1;
        }
    uint16_t *all = calloc((size_t)N * ld, sizeof *all); /* all tokens at once: the same words */
    if (!bad) {
        mx_bf16_split(x, N, LDX, K, all);
        for (int t = 0; t < N; t++)
            if (memcmp(all + (size_t)t * ld, xb + (size_t)t * ld, sizeof *xb * K) ||
                memcmp(all + (size_t)t * ld + q2, xb + (size_t)t * ld + q2, sizeof *xb * K)) bad = 2;
    }
    if (!bad && first) {
        free(g_split_ref);
        g_split_ref = malloc(sizeof *xb * N * ld);
        memcpy(g_split_ref, xb, sizeof *xb * N * ld);
    }
    if (!bad && !first)
        for (int t = 0; t < N; t++)
            if (memcmp(g_split_ref + (size_t)t * ld, xb + (size_t)t * ld, sizeof *xb * K) ||
                memcmp(g_split_ref + (size_t)t * ld + q2, xb + (size_t)t * ld + q2, sizeof *xb * K)) bad = 3;
    char name[64];
    snprintf(name, sizeof name, "bf16_split_%s", lvl);
    CHECK(name, !bad, "%s", bad == 1 ? "hi + lo off x" : bad == 2 ? "n tokens differ from one at a time" : bad == 3 ? "differs from the first level" : "parts overlap");
    free(xb);
    free(all);
}

/* mx_argmax: the first index of the maximum, as the plain scan finds it,
 * with ties, NaNs (x[0] NaN: 0), infinities and signed zeros */
static int32_t scan_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
static void test_argmax_level(const char *lvl) {
    static const int lens[] = {1, 2, 7, 8, 9, 31, 32, 33, 64, 100, 1000, 128256};
    unsigned seed = 4242;
    char why[160] = "";
    int bad = 0;
    for (size_t li = 0; li < MX_ARRAY_LEN(lens) && !bad; li++) {
        int n = lens[li];
        float *x = malloc((size_t)n * 4);
        for (int kind = 0; kind < 7 && !bad; kind++) {
            for (int i = 0; i < n; i++) x[i] = t_randf(&seed) * 10;
            int a = (int)(t_rng(&seed) % (unsigned)n), b = (int)(t_rng(&seed) % (unsigned)n);
            if (kind == 1) x[a] = x[b] = 100; /* a tie */
            if (kind == 2) x[a] = NAN;
            if (kind == 3) x[0] = NAN;
            if (kind == 4) for (int i = 0; i < n; i++) x[i] = -INFINITY;
            if (kind == 5) { for (int i = 0; i < n; i++) x[i] = -1; x[a] = -0.0f; x[b] = 0.0f; }
            if (kind == 6) { x[a] = INFINITY; x[b] = NAN; }
            int32_t got = mx_argmax(x, n), want = scan_argmax(x, n);
            if (got != want) {
                snprintf(why, sizeof why, "n=%d kind=%d: %d, the scan %d", n, kind, got, want);
                bad++;
            }
        }
        free(x);
    }
    char name[64];
    snprintf(name, sizeof name, "argmax_%s", lvl);
    CHECK(name, !bad, "%s", why);
}

static void test_ops_level(const char *lvl) {
    static const int lens[] = {0, 1, 7, 8, 9, 31, 33, 64, 100, 1000};
    unsigned seed = 777;
    char name[96], why[160], why2[160];
    int bad_dot = 0, bad_axpy = 0, bad_rms = 0, bad_sm = 0, bad_act = 0, bad_add = 0;
    why[0] = why2[0] = 0;
    for (size_t li = 0; li < MX_ARRAY_LEN(lens); li++) {
        int n = lens[li];
        size_t cap = (size_t)n + 1;
        float *a = malloc(cap * 4), *b = malloc(cap * 4), *y = malloc(cap * 4), *y2 = malloc(cap * 4);
        double *d = malloc(cap * 8);
        for (int i = 0; i < n; i++) { a[i] = t_randf(&seed) * 4; b[i] = t_randf(&seed) * 4; }
        /* dot */
        double s = 0, sa = 0;
        for (int i = 0; i < n; i++) { s += (double)a[i] * b[i]; sa += fabs((double)a[i] * b[i]); }
        if (!(fabs(mx_dot(a, b, n) - s) <= 1e-6 * sa + 1e-30)) bad_dot++;
        /* axpy, add, scale */
        memcpy(y, b, (size_t)n * 4);
        mx_axpy(y, 0.37f, a, n);
        for (int i = 0; i < n; i++) if (!(fabsf(y[i] - (b[i] + 0.37f * a[i])) <= 1e-6f * (fabsf(b[i]) + fabsf(a[i])))) bad_axpy++;
        memcpy(y, b, (size_t)n * 4);
        mx_add(y, a, n);
        mx_scale(y, -1.5f, n);
        for (int i = 0; i < n; i++) if (y[i] != (b[i] + a[i]) * -1.5f) bad_add++;
        /* rmsnorm, two rows with stride, weight + offset and no weight */
        if (n > 0) {
            float *x2 = malloc(sizeof(float) * (size_t)(2 * n + 3)), *o2 = malloc(sizeof(float) * (size_t)(2 * n + 3));
            for (int i = 0; i < 2 * n + 3; i++) x2[i] = t_randf(&seed) * 3;
            for (int wi = 0; wi < 2; wi++) {
                mx_rmsnorm(o2, x2, wi ? b : NULL, wi ? 1.0f : 0.0f, 2, n, n + 3, 1e-5f);
                for (int t = 0; t < 2; t++) {
                    const float *xr = x2 + t * (n + 3);
                    double ss = 0;
                    for (int i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
                    double inv = 1.0 / sqrt(ss / n + 1e-5);
                    for (int i = 0; i < n; i++) {
                        double want = xr[i] * inv * (wi ? b[i] + 1.0 : 1.0);
                        if (!(fabs(o2[t * (n + 3) + i] - want) <= 2e-6 * (fabs(want) + 1e-3))) bad_rms++;
                    }
                }
            }
            free(x2);
            free(o2);
        }
        /* softmax, with a -inf entry and a large spread */
        for (int i = 0; i < n; i++) { y[i] = a[i] * 10; d[i] = y[i]; }
        if (n > 3) { y[2] = -INFINITY; d[2] = -INFINITY; y[3] = -200; d[3] = -200; }
        double mx = -INFINITY;
        for (int i = 0; i < n; i++) mx = d[i] > mx ? d[i] : mx;
        /* exp(x - m) inherits the rounding of x - m: relative |x - m| * 2^-24 */
        double *rel = malloc(cap * 8);
        for (int i = 0; i < n; i++) rel[i] = 2e-6 + (isinf(d[i]) ? 0 : 1.2e-7 * fabs(d[i] - mx));
        ref_softmax(d, n);
        mx_softmax(y, n);
        for (int i = 0; i < n; i++) if (!(fabs(y[i] - d[i]) <= rel[i] * d[i] + 1e-30)) {
            if (!bad_sm) snprintf(why, sizeof why, "softmax n=%d i=%d got %g want %g", n, i, y[i], d[i]);
            bad_sm++;
        }
        free(rel);
        /* gated activations */
        mx_act acts[] = {MX_ACT_SILU, MX_ACT_GELU_TANH};
        for (int ai = 0; ai < 2; ai++) {
            for (int i = 0; i < n; i++) y[i] = a[i] * (i % 5 == 0 ? 30 : 2);
            memcpy(y2, y, (size_t)n * 4);
            mx_act_mul(acts[ai], y, b, n);
            mx_act_apply(acts[ai], y2, n);
            for (int i = 0; i < n; i++) {
                double g = a[i] * (i % 5 == 0 ? 30 : 2), act;
                if (ai == 0) act = g / (1 + exp(-g));
                else act = g / (1 + exp(-2 * 0.7978845608028654 * (g + 0.044715 * g * g * g))); /* = 0.5 g (1 + tanh z) without cancellation */
                double arg = ai == 0 ? fabs(g) : 1.6 * fabs(g + 0.044715 * g * g * g);
                double tol = 2e-6 + 1.2e-7 * arg;
                if (!(fabs(y[i] - act * b[i]) <= tol * fabs(act * b[i]) + 1e-30) ||
                    !(fabs(y2[i] - act) <= tol * fabs(act) + 1e-30)) {
                    if (!bad_act) snprintf(why2, sizeof why2, "act %d n=%d i=%d x=%g got %g want %g", ai, n, i, g, y2[i], act);
                    bad_act++;
                }
            }
        }
        free(a); free(b); free(y); free(y2); free(d);
    }
    /* attention rows against double sums; the mix taken in blocks of keys
     * gives the same bits as in one call */
    int bad_att = 0;
    char why3[160] = "";
    static const int dims[] = {8, 40, 64, 128}, keys[] = {1, 7, 8, 45, 300};
    for (size_t di = 0; di < MX_ARRAY_LEN(dims); di++)
        for (size_t ki = 0; ki < MX_ARRAY_LEN(keys) && !bad_att; ki++) {
            int d = dims[di], n = keys[ki];
            size_t ld = (size_t)d + 5;
            float *q = malloc(sizeof(float) * d), *K = malloc(sizeof(float) * ld * n), *V = malloc(sizeof(float) * ld * n);
            float *sc = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * d), *y2 = malloc(sizeof(float) * d);
            for (int i = 0; i < d; i++) q[i] = t_randf(&seed) * 2;
            for (size_t i = 0; i < ld * n; i++) { K[i] = t_randf(&seed) * 2; V[i] = t_randf(&seed) * 2; }
            mx_attn_scores(q, K, ld, n, d, 0.125f, sc);
            for (int k = 0; k < n && !bad_att; k++) {
                double s = 0, a = 0;
                for (int i = 0; i < d; i++) { s += (double)q[i] * K[k * ld + i]; a += fabs((double)q[i] * K[k * ld + i]); }
                if (!(fabs(sc[k] - 0.125 * s) <= 2e-6 * 0.125 * a + 1e-30)) {
                    snprintf(why3, sizeof why3, "scores d=%d n=%d k=%d got %g want %g", d, n, k, sc[k], 0.125 * s);
                    bad_att++;
                }
            }
            for (int k = 0; k < n; k++) sc[k] = t_randf(&seed) + 0.5f;
            mx_attn_mix(y1, sc, V, ld, n, d, false);
            for (int i = 0; i < d && !bad_att; i++) {
                double s = 0, a = 0;
                for (int k = 0; k < n; k++) { s += (double)sc[k] * V[k * ld + i]; a += fabs((double)sc[k] * V[k * ld + i]); }
                if (!(fabs(y1[i] - s) <= 2e-6 * a + 1e-30)) {
                    snprintf(why3, sizeof why3, "mix d=%d n=%d i=%d got %g want %g", d, n, i, y1[i], s);
                    bad_att++;
                }
            }
            for (int k0 = 0; k0 < n; k0 += 16) mx_attn_mix(y2, sc + k0, V + (size_t)k0 * ld, ld, MX_MIN(16, n - k0), d, k0 > 0);
            if (!bad_att && memcmp(y1, y2, sizeof(float) * d)) {
                snprintf(why3, sizeof why3, "mix in blocks of 16 keys differs d=%d n=%d", d, n);
                bad_att++;
            }
            /* two rows at once (two heads of a group): each row the one-row function's bits */
            float *q2 = malloc(sizeof(float) * d), *s1 = malloc(sizeof(float) * n), *s2 = malloc(sizeof(float) * n), *s3 = malloc(sizeof(float) * n);
            float *z1 = malloc(sizeof(float) * d), *z2 = malloc(sizeof(float) * d), *z3 = malloc(sizeof(float) * d);
            for (int i = 0; i < d; i++) q2[i] = t_randf(&seed) * 2;
            mx_attn_scores(q2, K, ld, n, d, 0.125f, s1);
            mx_attn_scores(q, K, ld, n, d, 0.125f, s3);
            mx_attn_scores2(q, q2, K, ld, n, d, 0.125f, sc, s2, n % 2);
            if (!bad_att && (memcmp(sc, s3, sizeof(float) * n) || memcmp(s1, s2, sizeof(float) * n))) {
                snprintf(why3, sizeof why3, "two-row scores differ from one-row d=%d n=%d", d, n);
                bad_att++;
            }
            for (int k = 0; k < n; k++) { sc[k] = t_randf(&seed) + 0.5f; s1[k] = t_randf(&seed) + 0.5f; }
            for (int i = 0; i < d; i++) z1[i] = z2[i] = t_randf(&seed); /* accumulated onto */
            memcpy(y1, z1, sizeof(float) * d);
            memcpy(z3, z1, sizeof(float) * d);
            mx_attn_mix(y1, sc, V, ld, n, d, true);
            mx_attn_mix(z3, s1, V, ld, n, d, true);
            memcpy(y2, z1, sizeof(float) * d);
            mx_attn_mix2(y2, z2, sc, s1, V, ld, n, d, true, n % 2);
            if (!bad_att && (memcmp(y1, y2, sizeof(float) * d) || memcmp(z3, z2, sizeof(float) * d))) {
                snprintf(why3, sizeof why3, "two-row mix differs from one-row d=%d n=%d", d, n);
                bad_att++;
            }
            free(q2); free(s1); free(s2); free(s3); free(z1); free(z2); free(z3);
            free(q); free(K); free(V); free(sc); free(y1); free(y2);
        }
    snprintf(name, sizeof name, "ops_attention_%s", lvl);
    CHECK(name, !bad_att, "%s", why3);
    snprintf(name, sizeof name, "ops_dot_%s", lvl);
    CHECK(name, !bad_dot, "%d bad", bad_dot);
    snprintf(name, sizeof name, "ops_axpy_%s", lvl);
    CHECK(name, !bad_axpy, "%d bad", bad_axpy);
    snprintf(name, sizeof name, "ops_add_scale_%s", lvl);
    CHECK(name, !bad_add, "%d bad", bad_add);
    snprintf(name, sizeof name, "ops_rmsnorm_%s", lvl);
    CHECK(name, !bad_rms, "%d bad", bad_rms);
    snprintf(name, sizeof name, "ops_softmax_%s", lvl);
    CHECK(name, !bad_sm, "%d bad: %s", bad_sm, why);
    snprintf(name, sizeof name, "ops_act_%s", lvl);
    CHECK(name, !bad_act, "%d bad: %s", bad_act, why2);
}

/* mx_pool_run_sets: every (set, i) runs exactly once, with more sets than one
 * job takes and with empty sets */
typedef struct { _Atomic int hits[64]; } set_hits;
static void count_hit(void *ctx, int i, int tid) {
    (void)tid;
    set_hits *h = ctx;
    if (i >= 0 && i < 64) h->hits[i]++;
}

static void test_pool_sets(mx_pool *pool) {
    set_hits h[11];
    mx_task_set sets[11];
    int bad = 0;
    for (int count = 0; count <= 11 && !bad; count++) {
        memset(h, 0, sizeof h);
        for (int k = 0; k < count; k++) sets[k] = (mx_task_set){count_hit, &h[k], (k * 7) % 13, k % 4};
        mx_pool_run_sets(pool, sets, count);
        for (int k = 0; k < count; k++)
            for (int i = 0; i < 64; i++) bad += h[k].hits[i] != (i < sets[k].n);
    }
    CHECK(pool ? "pool_run_sets" : "pool_run_sets_nopool", !bad, "%d (set, task) pairs ran other than once", bad);
}

/* Lanes: every task runs once; a thread runs the tasks of any one lane in
 * increasing order; one thread (no pool) runs lane 0 of every set, then the
 * other lanes. */
#define LANE_MAX 96
typedef struct { int set, i; } task_ref;
typedef struct {
    task_ref ran[4][2 * LANE_MAX];
    int n[4];
    _Atomic int hits[2][LANE_MAX];
} lane_log;
typedef struct { lane_log *log; int set; } lane_ctx;
static void lane_task(void *ctx, int i, int tid) {
    lane_ctx *a = ctx;
    lane_log *g = a->log;
    if (tid < 0 || tid >= 4 || g->n[tid] >= 2 * LANE_MAX || i < 0 || i >= LANE_MAX) return;
    g->hits[a->set][i]++;
    g->ran[tid][g->n[tid]++] = (task_ref){a->set, i};
}

static int lane_of(int i, int n, int lanes) {
    int u = 0;
    while (u + 1 < lanes && i >= n * (u + 1) / lanes) u++;
    return u;
}

static void test_pool_lanes(mx_pool *pool) {
    static lane_log g;
    int bad = 0;
    for (int lanes = 1; lanes <= 5; lanes++)
        for (int n = 0; n <= 40; n += 13) {
            memset(&g, 0, sizeof g);
            lane_ctx c[2] = {{&g, 0}, {&g, 1}};
            int ns[2] = {n, n / 2 + 1};
            mx_pool_run_sets(pool, (mx_task_set[]){{lane_task, &c[0], ns[0], lanes}, {lane_task, &c[1], ns[1], lanes}}, 2);
            for (int s = 0; s < 2; s++)
                for (int i = 0; i < LANE_MAX; i++) bad += g.hits[s][i] != (i < ns[s]);
            for (int t = 0; t < 4; t++)
                for (int k = 1; k < g.n[t]; k++)
                    for (int q = 0; q < k; q++) {
                        task_ref a = g.ran[t][q], b = g.ran[t][k];
                        bool same_lane = a.set == b.set && lane_of(a.i, ns[a.set], lanes) == lane_of(b.i, ns[a.set], lanes);
                        bad += same_lane && b.i < a.i;
                    }
            if (!pool) { /* deterministic: lane 0 of each set, then lanes 1.. */
                int k = 0;
                for (int pass = 0; pass < 2; pass++)
                    for (int s = 0; s < 2; s++)
                        for (int u = pass ? 1 : 0; u < (pass ? lanes : 1); u++)
                            for (int i = ns[s] * u / lanes; i < ns[s] * (u + 1) / lanes; i++, k++)
                                bad += k >= g.n[0] || g.ran[0][k].set != s || g.ran[0][k].i != i;
            }
        }
    CHECK(pool ? "pool_run_lanes" : "pool_run_lanes_nopool", !bad, "%d tasks ran other than once or out of lane order", bad);
}

int main(void) {
    mx_pool *pool = mx_pool_new(3);
    const mx_cpu_info *ci = mx_cpu();
    /* mx_cpu_force only lowers the level: run from the top down. */
    mx_cpu_level levels[] = {MX_CPU_AVX512, MX_CPU_AVX2, MX_CPU_PORTABLE};
    bool split_ref = false; /* the first level run gives mx_bf16_split's reference words */
    for (int li = 0; li < 3; li++) {
        mx_cpu_level l = levels[li];
        if (ci->level < l) {
            printf("ok skip_%s (cpu has no %s)\n", mx_cpu_name(l), mx_cpu_name(l));
            continue;
        }
        mx_cpu_force(l);
        mx_kernels_redispatch();
        const char *nm = mx_cpu_name(l);
        test_matmul_level(nm, NULL, 0, false);
        test_matmul_level(nm, pool, 0, false);
        if (l == MX_CPU_AVX512 && ci->avx512_bf16) {
            test_matmul_level(nm, pool, 1, false);
            test_matmul_level(nm, NULL, 0, true);
            test_matmul_level(nm, pool, 0, true);
            test_matmul_level(nm, pool, 1, true);
        }
        test_ops_level(nm);
        test_argmax_level(nm);
        test_bf16_split(nm, !split_ref);
        split_ref = true;
    }
    test_pool_sets(pool);
    test_pool_sets(NULL);
    test_pool_lanes(pool);
    test_pool_lanes(NULL);
    free(g_split_ref);
    /* row splits: every row in exactly one task range, ranges in whole
     * units; prefill tasks tile [0, rows) in order, none empty; a decode lane's
     * parts run on from task to task (each a sequential stream) */
    int bad_split = 0;
    char whys[128] = "";
    static unsigned char seen[3000];
    for (int rows = 1; rows < 3000 && !bad_split; rows += 37)
        for (int unit = 16; unit <= 48; unit += 32)
            for (int lanes = 1; lanes <= 3; lanes++)
                for (int m = 0; m < 4; m++) { /* streams 1 / 2, small / large rows (the 256 KiB cap) */
                    int streams = 1 + (m & 1), cols = m & 2 ? 65536 : 128;
                    mx_weight w = {.fmt = MX_W_BF16, .rows = rows, .cols = cols, .row_bytes = 2 * (size_t)cols};
                    mx_rowsplit sp = mx_rowsplit_make(&w, 4 * lanes, unit, lanes, streams);
                    bool prefill = lanes == 1 && streams == 1;
                    memset(seen, 0, sizeof seen);
                    int next = 0, tasks = mx_rowsplit_tasks(&sp), ends[2] = {-1, -1};
                    for (int i = 0; i < tasks && !bad_split; i++) {
                        int r[2][2];
                        mx_rowsplit_range(&sp, i, r);
                        if (i % sp.per_lane == 0) ends[0] = ends[1] = -1;
                        for (int p = 0; p < sp.streams; p++) {
                            int r0 = r[p][0], r1 = r[p][1];
                            if (r0 > r1 || r0 < 0 || r1 > rows || r0 % unit || (r1 % unit && r1 != rows)) bad_split++;
                            for (int x = r0; x < r1; x++) seen[x]++;
                            if (r0 < r1 && ends[p] >= 0 && r0 != ends[p]) bad_split++;
                            if (r0 < r1) ends[p] = r1;
                        }
                        if (prefill) {
                            if (r[0][0] != next || r[0][1] <= r[0][0]) bad_split++;
                            next = r[0][1];
                        }
                        if (!prefill && (size_t)(r[0][1] - r[0][0] + (streams == 2 ? r[1][1] - r[1][0] : 0)) * w.row_bytes > ((size_t)256 << 10) + (size_t)unit * w.row_bytes * 2) bad_split++;
                    }
                    for (int x = 0; x < rows; x++) bad_split += seen[x] != 1;
                    if (bad_split && !whys[0]) snprintf(whys, sizeof whys, "rows=%d unit=%d lanes=%d streams=%d cols=%d", rows, unit, lanes, streams, cols);
                }
    CHECK("row_split", !bad_split, "%s", whys);
    /* the bandwidth probe runs and gives a positive number on a small buffer */
    double bw = mx_measure_read_bw(pool, 8u << 20, 3);
    CHECK("membw_probe", bw > 0.1, "got %g GB/s", bw);
    mx_pool_free(pool);
    TEST_END();
}
