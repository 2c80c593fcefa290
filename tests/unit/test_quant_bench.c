/* Quantized kernel throughput. Without arguments: a quick smoke run (small
 * sizes, prints ok lines). With --bench [THREADS] [N]: decode (N = 1, the
 * default) reports GB/s of packed weights + scales streamed per call over
 * ~100 MB weights (past L3), prefill (N > 1) GFLOP/s on 4096 x 4096; a plain
 * bf16 float matmul of the same size is measured first as the baseline of
 * what this machine streams right now. One thread uses thread CPU time
 * (the shared machines are noisy), more threads wall time. QB_COLS sets the
 * columns (default 4096), QB_IT the prefill repetitions (best of; 3),
 * QB_ROWS the prefill rows (default 4096; a few hundred with QB_IT=100
 * give the in-cache rate), QB_ONLY a substring of the formats to run,
 * QB_ACT8=1 the fast mode's 8-bit activation codes (policy act8). */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include <stdint.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static mx_weight mk(mx_wfmt fmt, int bits, int group, int rows, int cols, uint8_t **buf) {
    mx_weight w;
    memset(&w, 0, sizeof w);
    w.fmt = fmt; w.rows = rows; w.cols = cols; w.bits = bits; w.group = group;
    w.row_bytes = fmt == MX_W_FP8B ? (size_t)cols : (size_t)cols * bits / 8;
    int ng = (cols + group - 1) / group;
    size_t np = (size_t)rows * w.row_bytes, ns = (size_t)rows * ng * (fmt == MX_W_AFFINE ? 2 : fmt == MX_W_FP8B ? 4 : 1);
    uint8_t *p = malloc(np + 2 * ns + 64);
    for (size_t i = 0; i < np; i++) p[i] = (uint8_t)(i * 2654435761u >> 13);
    if (fmt == MX_W_AFFINE) for (size_t i = 0; i < 2 * ns; i += 2) { p[np + i] = (uint8_t)i; p[np + i + 1] = 0x3c; }
    else if (fmt == MX_W_FP8B) for (size_t i = 0; i < ns / 4; i++) { float f = 0.01f; memcpy(p + np + 4 * i, &f, 4); }
    else for (size_t i = 0; i < ns; i++) p[np + i] = (uint8_t)(fmt == MX_W_NVFP4 ? 0x30 + i % 8 : 120 + i % 8);
    w.data = p; w.scales = p + np; w.biases = fmt == MX_W_AFFINE ? p + np + ns : NULL;
    w.scale_dtype = fmt == MX_W_AFFINE ? MX_DT_BF16 : fmt == MX_W_FP8B ? MX_DT_F32 : MX_DT_U8;
    *buf = p;
    return w;
}

static double run(const mx_weight *w, const float *x, int n, float *y, mx_pool *pool, int iters, bool cpu) {
    mx_kpolicy kp = mx_kpolicy_on(pool);
    kp.act8 = getenv("QB_ACT8") && !strcmp(getenv("QB_ACT8"), "1");
    mx_matmul(w, x, n, w->cols, y, w->rows, &kp);
    double best = 1e9;
    for (int it = 0; it < iters; it++) {
        double t0 = cpu ? cpu_now() : mx_now();
        mx_matmul(w, x, n, w->cols, y, w->rows, &kp);
        double dt = (cpu ? cpu_now() : mx_now()) - t0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    bool bench = argc > 1 && !strcmp(argv[1], "--bench");
    int threads = bench && argc > 2 ? atoi(argv[2]) : 2, n = bench && argc > 3 ? atoi(argv[3]) : 1;
    if (threads < 1) threads = 1;
    if (n < 1) n = 1;
    mx_pool *pool = threads > 1 ? mx_pool_new(threads) : NULL;
    bool cpu = threads == 1;
    struct { const char *nm; mx_wfmt f; int b, g; } fs[] = {
        {"affine4_g64", MX_W_AFFINE, 4, 64}, {"affine8_g64", MX_W_AFFINE, 8, 64}, {"affine2_g64", MX_W_AFFINE, 2, 64},
        {"affine3_g64", MX_W_AFFINE, 3, 64}, {"mxfp4", MX_W_MXFP4, 4, 32},     {"nvfp4", MX_W_NVFP4, 4, 16},
        {"mxfp8", MX_W_MXFP8, 8, 32},        {"fp8_block128", MX_W_FP8B, 8, 128}};
    int cols = getenv("QB_COLS") ? atoi(getenv("QB_COLS")) : 4096;
    if (cols < 128 || cols % 128) cols = 4096;
    if (bench) {
        mx_weight w;
        memset(&w, 0, sizeof w);
        w.fmt = MX_W_BF16; w.rows = n == 1 ? 12288 : 4096; w.cols = cols; w.row_bytes = (size_t)cols * 2;
        uint8_t *p = malloc((size_t)w.rows * w.row_bytes);
        memset(p, 0x3c, (size_t)w.rows * w.row_bytes);
        w.data = p;
        float *x = calloc((size_t)n * cols, 4), *y = calloc((size_t)n * w.rows, 4);
        double t = run(&w, x, n, y, pool, n == 1 ? 10 : 3, cpu);
        if (n == 1) printf("%-14s decode  %s, %d thread(s): %6.1f GB/s\n", "bf16 (float)", mx_cpu_name(mx_cpu()->level), threads, (double)w.rows * w.row_bytes / t / 1e9);
        else printf("%-14s prefill %s, %d thread(s), n=%d: %6.1f GFLOP/s\n", "bf16 (float)", mx_cpu_name(mx_cpu()->level), threads, n, 2.0 * n * w.rows * cols / t / 1e9);
        free(p); free(x); free(y);
    }
    int prow = getenv("QB_ROWS") ? atoi(getenv("QB_ROWS")) : 4096;
    if (prow < 16 || prow > (1 << 16)) prow = 4096;
    for (size_t i = 0; i < MX_ARRAY_LEN(fs); i++) {
        if (bench && getenv("QB_ONLY") && !strstr(fs[i].nm, getenv("QB_ONLY"))) continue;
        int rows = !bench ? 96 : n == 1 ? (fs[i].b <= 4 ? 49152 : 24576) : prow;
        int nn = bench ? n : 3;
        uint8_t *buf;
        mx_weight w = mk(fs[i].f, fs[i].b, fs[i].g, rows, bench ? cols : 512, &buf);
        mx_kpolicy kp = mx_kpolicy_on(pool); /* repacked as a model's weights are at load */
        kp.act8 = getenv("QB_ACT8") && !strcmp(getenv("QB_ACT8"), "1");
        mx_weight_prepare(&w, &kp);
        float *x = malloc(sizeof(float) * (size_t)nn * w.cols), *y = malloc(sizeof(float) * (size_t)nn * rows);
        for (int k = 0; k < nn * w.cols; k++) x[k] = (float)(k % 7) * 0.1f - 0.3f;
        double t = run(&w, x, nn, y, pool, bench ? (nn == 1 ? 20 : getenv("QB_IT") ? atoi(getenv("QB_IT")) : 3) : 2, cpu);
        if (!bench) {
            char name[64];
            snprintf(name, sizeof name, "qbench_smoke_%s", fs[i].nm);
            CHECK(name, t > 0 && y[0] == y[0], "no result");
        } else if (nn == 1)
            printf("%-14s decode  %s, %d thread(s): %6.1f GB/s (%.1f MB, %.2f ms)\n", fs[i].nm, mx_cpu_name(mx_cpu()->level), threads,
                   mx_weight_bytes(&w) / t / 1e9, mx_weight_bytes(&w) / 1e6, t * 1e3);
        else
            printf("%-14s prefill %s, %d thread(s), n=%d: %6.1f GFLOP/s\n", fs[i].nm, mx_cpu_name(mx_cpu()->level), threads, nn,
                   2.0 * nn * rows * w.cols / t / 1e9);
        mx_weight_free(&w);
        free(buf); free(x); free(y);
    }
    mx_pool_free(pool);
    TEST_END();
}
