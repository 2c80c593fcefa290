/* kbench: hand-run microbenchmark of the float matmul kernels (not a test).
 *   build/kbench [--rows 2048] [--cols 8192] [--n 512] [--reps 7] [--threads 1,2] [--fmt f32,bf16,f16]
 *                [--bf16dot] [--level portable|avx2]     |   build/kbench --ops
 * Prints, per thread count: the read bandwidth probe (1 GiB), decode GEMV
 * GB/s streaming cold copies of the matrix (>= 512 MiB cycled, so every call
 * reads DRAM), and prefill GFLOP/s for n tokens (matrix warm in cache/DRAM).
 * Medians of --reps. Each rate is given twice: by wall time, and by process
 * CPU time / threads ("cpu"), which leaves out time the threads spent
 * descheduled -- on a shared machine the second is closer to what dedicated
 * cores do (spin-waiting still counts). --bf16dot also runs bf16 prefill
 * through vdpbf16ps. MLXCEL_CPU applies as usual. */
#define _GNU_SOURCE
#include "base/base.h"
#include "base/cpu.h"
#include "base/half.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kernels/matmul_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *huge_alloc(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, len, MADV_HUGEPAGE);
    return p;
}

/* ns per call of the row-wise ops, at the current dispatch level. */
static void bench_ops(const char *lvl) {
    enum { N = 8192 };
    static float a[N], b[N], c[N];
    for (int i = 0; i < N; i++) { a[i] = (float)(i % 13) * 0.1f - 0.6f; b[i] = (float)(i % 7) * 0.2f - 0.5f; }
    volatile float sink = 0;
    double t0, dt[6];
    int it;
    it = 2000000; t0 = cpu_now(); for (int i = 0; i < it; i++) sink += mx_dot(a + (i & 63), b, 64); dt[0] = (cpu_now() - t0) / it;
    it = 2000000; t0 = cpu_now(); for (int i = 0; i < it; i++) mx_axpy(c, 1e-6f, a + (i & 63), 64); dt[1] = (cpu_now() - t0) / it;
    it = 20000; t0 = cpu_now(); for (int i = 0; i < it; i++) mx_rmsnorm(c, a, b, 0, 1, 2048, 2048, 1e-5f); dt[2] = (cpu_now() - t0) / it;
    it = 20000; t0 = cpu_now(); for (int i = 0; i < it; i++) { memcpy(c, a, 4096); mx_softmax(c, 1024); } dt[3] = (cpu_now() - t0) / it;
    it = 5000; t0 = cpu_now(); for (int i = 0; i < it; i++) { memcpy(c, a, sizeof a); mx_act_mul(MX_ACT_SILU, c, b, N); } dt[4] = (cpu_now() - t0) / it;
    it = 5000; t0 = cpu_now(); for (int i = 0; i < it; i++) { memcpy(c, a, sizeof a); mx_act_mul(MX_ACT_GELU_TANH, c, b, N); } dt[5] = (cpu_now() - t0) / it;
    printf("  ops %-8s dot64 %5.1f ns | axpy64 %5.1f ns | rmsnorm2048 %6.0f ns | softmax1024 %6.0f ns | silu_mul8192 %6.0f ns | gelu_tanh_mul8192 %6.0f ns\n",
           lvl, dt[0] * 1e9, dt[1] * 1e9, dt[2] * 1e9, dt[3] * 1e9, dt[4] * 1e9, dt[5] * 1e9);
    (void)sink;
}

int main(int argc, char **argv) {
    int rows = 2048, cols = 8192, n = 512, reps = 7, bf16dot = 0;
    mx_kpolicy env = mx_kpolicy_default();
    mx_kpolicy_env(&env); /* MLXCEL_CPU applies as usual */
    mx_kpolicy_set_default(&env);
    const char *threads = "1,2", *fmts = "f32,bf16,f16";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = argv[++i];
        else if (!strcmp(argv[i], "--fmt") && i + 1 < argc) fmts = argv[++i];
        else if (!strcmp(argv[i], "--bf16dot")) bf16dot = 1;
        else if (!strcmp(argv[i], "--level") && i + 1 < argc) { /* portable | avx2: cap the dispatch level */
            i++;
            mx_cpu_force(!strcmp(argv[i], "portable") ? MX_CPU_PORTABLE : !strcmp(argv[i], "avx2") ? MX_CPU_AVX2 : MX_CPU_AVX512);
            mx_kernels_redispatch();
        }
        else if (!strcmp(argv[i], "--ops")) {
            printf("row-wise ops, single thread, CPU time per call:\n");
            bench_ops(mx_cpu_name(mx_cpu()->level));
            mx_cpu_force(MX_CPU_PORTABLE);
            mx_kernels_redispatch();
            bench_ops("portable");
            return 0;
        }
        else { fprintf(stderr, "usage: see tools/kbench.c\n"); return 2; }
    }
    if (reps < 1 || reps > 100) reps = 7;
    printf("cpu level %s, matrix %d x %d, prefill n=%d, median of %d\n", mx_cpu_name(mx_cpu()->level), rows, cols, n, reps);
    float *x = malloc(sizeof(float) * (size_t)n * cols), *y = malloc(sizeof(float) * (size_t)n * rows);
    unsigned s = 1;
    for (size_t i = 0; i < (size_t)n * cols; i++) { s = s * 1664525u + 1013904223u; x[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }

    char tl[64];
    snprintf(tl, sizeof tl, "%s", threads);
    for (char *tok = strtok(tl, ","); tok; tok = strtok(NULL, ",")) {
        int nt = atoi(tok);
        mx_pool *pool = nt > 1 ? mx_pool_new(nt) : NULL;
        mx_kpolicy kp = mx_kpolicy_on(pool);
        double bw = mx_measure_read_bw(pool, (size_t)1 << 30, reps);
        printf("\n[%d thread%s] read bandwidth probe (1 GiB): %.1f GB/s\n", nt, nt > 1 ? "s" : "", bw);
        char fl[64];
        snprintf(fl, sizeof fl, "%s", fmts);
        char *save = NULL;
        for (char *f = strtok_r(fl, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
            mx_wfmt fmt = !strcmp(f, "f32") ? MX_W_F32 : !strcmp(f, "f16") ? MX_W_F16 : MX_W_BF16;
            size_t es = fmt == MX_W_F32 ? 4 : 2, mbytes = (size_t)rows * cols * es;
            int copies = (int)(((size_t)512 << 20) / mbytes) + 1;
            uint8_t *mem = huge_alloc(mbytes * (size_t)copies);
            if (!mem) { perror("mmap"); return 1; }
            for (size_t i = 0; i < mbytes * copies / 2; i++) {
                s = s * 1664525u + 1013904223u;
                uint16_t h = fmt == MX_W_F16 ? mx_f32_to_f16(((float)(s >> 8) / 16777216.0f - 0.5f) * 0.04f)
                                             : (uint16_t)(0x3c00 + (s >> 25)); /* bf16 ~ +-0.01, f32 halves */
                memcpy(mem + 2 * i, &h, 2);
            }
            mx_weight w = {.fmt = fmt, .rows = rows, .cols = cols, .row_bytes = (size_t)cols * es};
            /* decode: one call per copy, cycling */
            double t[100], g[100], tc[100], gc[100];
            for (int c = 0; c < copies; c++) { w.data = mem + (size_t)c * mbytes; mx_matmul(&w, x, 1, cols, y, rows, &kp); }
            for (int r = 0; r < reps; r++) {
                double t0 = mx_now(), c0 = cpu_now();
                for (int c = 0; c < copies; c++) { w.data = mem + (size_t)c * mbytes; mx_matmul(&w, x, 1, cols, y, rows, &kp); }
                t[r] = (mx_now() - t0) / copies;
                tc[r] = (cpu_now() - c0) / nt / copies;
            }
            double td = median(t, reps), tdc = median(tc, reps);
            /* prefill on the first copy */
            w.data = mem;
            for (int pass = 0; pass < 1 + (bf16dot && fmt == MX_W_BF16); pass++) {
                kp.bf16_dot = pass;
                mx_matmul(&w, x, n, cols, y, rows, &kp);
                for (int r = 0; r < reps; r++) {
                    double t0 = mx_now(), c0 = cpu_now();
                    mx_matmul(&w, x, n, cols, y, rows, &kp);
                    g[r] = 2.0 * rows * cols * n / (mx_now() - t0) / 1e9;
                    gc[r] = 2.0 * rows * cols * n / ((cpu_now() - c0) / nt) / 1e9;
                }
                double gf = median(g, reps), gfc = median(gc, reps);
                if (!pass)
                    printf("  %-4s decode %6.1f GB/s (%3.0f%% of probe), cpu %6.1f GB/s | prefill n=%d %6.1f GFLOP/s, cpu %6.1f\n",
                           f, mbytes / td / 1e9, 100 * mbytes / td / 1e9 / bw, mbytes / tdc / 1e9, n, gf, gfc);
                else
                    printf("  bf16 prefill with vdpbf16ps (MLXCEL_BF16_DOT=1): %6.1f GFLOP/s, cpu %6.1f\n", gf, gfc);
            }
            kp.bf16_dot = false;
            munmap(mem, mbytes * (size_t)copies);
        }
        mx_pool_free(pool);
    }
    free(x);
    free(y);
    return 0;
}
