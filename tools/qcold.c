/* qcold: hand-run microbenchmark of the int8 one-token kernel on cold
 * matrices of a model's shapes (not a test).
 *   build/qcold ROWS COLS [BITS]
 * Makes enough copies of a ROWS x COLS affine BITS-bit (group 64) weight to
 * pass 600 MB, repacks them all, then times one-token products cycling
 * through the copies, so every call reads DRAM as a decode step does (where
 * test_quant_bench's 100 MB matrix and small shapes that stay in L3 read
 * faster). Prints the median and best GB/s of packed weights and the time
 * per call, whose fixed part (pool start and finish, stream ramp-up) is what
 * small projections pay. 2 threads; compare shapes interleaved. */
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
    if (argc < 3) { fprintf(stderr, "usage: qcold ROWS COLS [BITS]\n"); return 2; }
    int rows = atoi(argv[1]), cols = atoi(argv[2]), bits = argc > 3 ? atoi(argv[3]) : 4;
    if (rows < 16 || cols < 64 || cols % 64 || (bits != 4 && bits != 8)) { fprintf(stderr, "qcold: rows >= 16, cols a multiple of 64, bits 4 or 8\n"); return 2; }
    mx_pool *pool = mx_pool_new(2);
    size_t rb = (size_t)cols * bits / 8, ns = (size_t)rows * (cols / 64) * 2; /* bf16 scales, then biases */
    size_t one = (size_t)rows * rb + 2 * ns;
    int copies = (int)MX_MIN(((size_t)600 << 20) / one + 1, (size_t)4000);
    mx_weight *w = calloc((size_t)copies, sizeof *w);
    float *x = malloc(sizeof(float) * (size_t)cols), *y = malloc(sizeof(float) * (size_t)rows);
    if (!w || !x || !y) return 1;
    for (int k = 0; k < copies; k++) {
        uint8_t *p = malloc(one);
        if (!p) return 1;
        for (size_t i = 0; i < (size_t)rows * rb; i++) p[i] = (uint8_t)(i * 2654435761u >> 13);
        for (size_t i = 0; i < ns; i++) { p[(size_t)rows * rb + i] = (uint8_t)i; p[(size_t)rows * rb + ns + i] = (uint8_t)(i % 2 ? 0x3c : 0); }
        w[k] = (mx_weight){.fmt = MX_W_AFFINE, .rows = rows, .cols = cols, .bits = bits, .group = 64, .row_bytes = rb,
                           .data = p, .scales = p + (size_t)rows * rb, .biases = p + (size_t)rows * rb + ns, .scale_dtype = MX_DT_BF16};
    }
    for (int i = 0; i < cols; i++) x[i] = (float)(i % 7) * 0.1f - 0.3f;
    for (int k = 0; k < copies; k++) mx_matmul(&w[k], x, 1, cols, y, rows, pool); /* repack every copy */
    enum { R = 5 };
    double t[R];
    for (int r = 0; r < R; r++) {
        double t0 = mx_now();
        for (int k = 0; k < copies; k++) mx_matmul(&w[k], x, 1, cols, y, rows, pool);
        t[r] = mx_now() - t0;
    }
    qsort(t, R, sizeof(double), cmp_d);
    double bytes = (double)mx_qbytes(&w[0]) * copies;
    printf("%d x %d, %d-bit, %d copies: %.1f GB/s median, %.1f best, %.1f us per call\n", rows, cols, bits, copies,
           bytes / t[R / 2] / 1e9, bytes / t[0] / 1e9, t[R / 2] / copies * 1e6);
    mx_pool_free(pool);
    return 0;
}
