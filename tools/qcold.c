/* qcold: hand-run microbenchmark of one-token products (decode) on cold
 * matrices of a model's shapes (not a test).
 *   build/qcold ROWS COLS [1-8|mxfp4|mxfp8|bf16] [PASSES]
 * Makes enough copies of a ROWS x COLS weight (affine 1- to 8-bit group 64,
 * mxfp4, mxfp8, or plain bf16) to pass 600 MB, repacks them all, then times passes
 * of one-token products cycling through the copies, so every call reads DRAM
 * as a decode step does. Each pass is rated against the read probe taken
 * right before and after it (this machine's bandwidth flips between phases
 * within seconds, so only such a ratio compares builds run minutes apart).
 * QCOLD_HOT=1 calls one copy instead (in cache: the kernel's compute rate).
 * Prints the median GB/s, the median and range of the ratio, and the time
 * per call, whose fixed part (pool start and finish, stream ramp-up) is what
 * small projections pay. 2 threads; compare builds interleaved. */
#define _GNU_SOURCE
#include "base/base.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: qcold ROWS COLS [1-8|mxfp4|mxfp8|bf16] [PASSES]\n"); return 2; }
    int rows = atoi(argv[1]), cols = atoi(argv[2]), passes = argc > 4 ? atoi(argv[4]) : 5;
    const char *kind = argc > 3 ? argv[3] : "4";
    bool fp4 = !strcmp(kind, "mxfp4"), fp8 = !strcmp(kind, "mxfp8"), bf16 = !strcmp(kind, "bf16"), mx = fp4 || fp8;
    int bits = fp4 ? 4 : fp8 ? 8 : bf16 ? 16 : atoi(kind), group = mx ? 32 : 64;
    if (rows < 16 || cols < 64 || cols % 64 || ((bits < 1 || bits > 8 || bits == 7) && bits != 16) || passes < 1 || passes > 100) {
        fprintf(stderr, "qcold: rows >= 16, cols a multiple of 64, kind 1-6 or 8, mxfp4, mxfp8 or bf16, 1-100 passes\n");
        return 2;
    }
    mx_pool *pool = mx_pool_new(2);
    size_t rb = (size_t)cols * bits / 8, ng = (size_t)rows * (cols / group);
    size_t ns = bf16 ? 0 : mx ? ng : ng * 2; /* E8M0 bytes, or bf16 scales then as many bias bytes */
    size_t one = (size_t)rows * rb + 2 * ns;
    int copies = (int)MX_MIN(((size_t)600 << 20) / one + 1, (size_t)4000);
    /* QCOLD_HOT=1: one copy, called as many times (it stays in cache: the
     * kernel's compute rate, not the memory's) */
    bool hot = getenv("QCOLD_HOT") != NULL;
    int calls = copies;
    if (hot) copies = 1;
    mx_weight *w = calloc((size_t)copies, sizeof *w);
    float *x = malloc(sizeof(float) * (size_t)cols), *y = malloc(sizeof(float) * (size_t)rows);
    double *t = malloc(sizeof(double) * (size_t)passes), *ratio = malloc(sizeof(double) * (size_t)passes);
    mx_bw_probe *pr = mx_bw_probe_new((size_t)1 << 30);
    if (!w || !x || !y || !t || !ratio || !pr) return 1;
    for (int k = 0; k < copies; k++) {
        uint8_t *p = malloc(one);
        if (!p) return 1;
        for (size_t i = 0; i < (size_t)rows * rb; i++) p[i] = (uint8_t)(i * 2654435761u >> 13);
        if (bf16)
            for (size_t i = 1; i < (size_t)rows * rb; i += 2) p[i] = 0x3c; /* modest exponents */
        uint8_t *sc = p + (size_t)rows * rb;
        for (size_t i = 0; i < ns; i++) { sc[i] = mx ? (uint8_t)(120 + i % 8) : (uint8_t)i; sc[ns + i] = (uint8_t)(i % 2 ? 0x3c : 0); }
        if (bf16) w[k] = (mx_weight){.fmt = MX_W_BF16, .rows = rows, .cols = cols, .row_bytes = rb, .data = p};
        else if (mx)
            w[k] = (mx_weight){.fmt = fp4 ? MX_W_MXFP4 : MX_W_MXFP8, .rows = rows, .cols = cols, .bits = bits, .group = 32, .row_bytes = rb,
                               .data = p, .scales = sc, .scale_dtype = MX_DT_U8};
        else
            w[k] = (mx_weight){.fmt = MX_W_AFFINE, .rows = rows, .cols = cols, .bits = bits, .group = 64, .row_bytes = rb,
                               .data = p, .scales = sc, .biases = sc + ns, .scale_dtype = MX_DT_BF16};
    }
    for (int i = 0; i < cols; i++) x[i] = (float)(i % 7) * 0.1f - 0.3f;
    mx_kpolicy kp = mx_kpolicy_on(pool);
    for (int k = 0; k < copies; k++) { /* repack every copy, as a model's weights are at load */
        mx_weight_prepare(&w[k], &kp);
        mx_matmul(&w[k], x, 1, cols, y, rows, &kp);
    }
    double bytes = (double)mx_weight_bytes(&w[0]) * calls;
    for (int r = 0; r < passes; r++) {
        double p0 = mx_bw_probe_run(pr, pool, 3), t0 = mx_now();
        for (int k = 0; k < calls; k++) mx_matmul(&w[k % copies], x, 1, cols, y, rows, &kp);
        t[r] = mx_now() - t0;
        double p1 = mx_bw_probe_run(pr, pool, 3);
        ratio[r] = bytes / t[r] / 1e9 / (0.5 * (p0 + p1));
        if (getenv("QCOLD_PASSES")) fprintf(stderr, "pass %.1f %.1f %.1f %.3f\n", p0, p1, bytes / t[r] / 1e9, ratio[r]);
    }
    qsort(t, (size_t)passes, sizeof(double), cmp_d);
    qsort(ratio, (size_t)passes, sizeof(double), cmp_d);
    printf("%d x %d %s, %d copies: %.1f GB/s median, %.3f of the probe around each pass (%.3f-%.3f), %.1f us per call\n", rows,
           cols, kind, calls, bytes / t[passes / 2] / 1e9,
           ratio[passes / 2], ratio[0], ratio[passes - 1], t[passes / 2] / calls * 1e6);
    mx_bw_probe_free(pr);
    mx_pool_free(pool);
    return 0;
}
