/* kv_bench: the attention rows over a cache of each KV type
 * (kernels/kvcache.h), as one decode token's task reads them: for every kv
 * head, scores against n keys then the mix of n values, in key blocks of
 * 128, the rows of all heads interleaved in one allocation as the cache lays
 * them out. One thread; prints the best of R runs by thread CPU time (less
 * sensitive to a shared machine than wall time) and the bytes read per second.
 *   build/kv_bench [N_KEYS [HEAD_DIM [KV_HEADS [REPS]]]]   (default 8192 64 8 40) */
#include "kernels/kvcache.h"
#include "kernels/kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8192, d = argc > 2 ? atoi(argv[2]) : 64, kvh = argc > 3 ? atoi(argv[3]) : 8, reps = argc > 4 ? atoi(argv[4]) : 40;
    if (n < 128 || d < 8 || d > 1024 || kvh < 1 || kvh > 64 || reps < 1) { fprintf(stderr, "kv_bench: N_KEYS >= 128, HEAD_DIM 8..1024, KV_HEADS 1..64\n"); return 2; }
    float *q = malloc(sizeof(float) * d), *x = malloc(sizeof(float) * d), *sc = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * d);
    unsigned rng = 1;
    for (int i = 0; i < d; i++) q[i] = (float)((rng = rng * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int k = 0; k < n; k++) sc[k] = 1.0f / n;
    printf("| type | bytes per key and head | us per token (all %d heads, %d keys, d %d) | ns per key and head | GB/s read |\n|---|---|---|---|---|\n", kvh, n, d);
    for (int t = 0; t < MX_KV_N_TYPES; t++) {
        size_t rb = mx_kv_row_bytes((mx_kv_type)t, d), ld = rb * kvh;
        unsigned char *K = malloc(ld * n);
        if (!K) return 1;
        for (int k = 0; k < n; k++)
            for (int h = 0; h < kvh; h++) {
                for (int i = 0; i < d; i++) x[i] = (float)((rng = rng * 1664525u + 1013904223u) >> 8) / 16777216.0f * 2 - 1;
                mx_kv_store((mx_kv_type)t, K + (size_t)k * ld + (size_t)h * rb, x, d);
            }
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = cpu_now();
            for (int h = 0; h < kvh; h++) { /* K and V: the same rows (the reads are what counts) */
                for (int k0 = 0; k0 < n; k0 += 128) mx_attn_scores_kv((mx_kv_type)t, q, K + (size_t)k0 * ld + (size_t)h * rb, ld, 128, d, 0.125f, sc + k0);
                for (int k0 = 0; k0 < n; k0 += 128) mx_attn_mix_kv((mx_kv_type)t, y, sc + k0, K + (size_t)k0 * ld + (size_t)h * rb, ld, 128, d, k0 > 0);
            }
            double dt = cpu_now() - t0;
            if (dt < best) best = dt;
        }
        printf("| %s | %zu | %.0f | %.2f | %.1f |\n", mx_kv_type_name((mx_kv_type)t), rb, best * 1e6, best * 1e9 / n / kvh, 2.0 * ld * n / best / 1e9);
        free(K);
    }
    free(q); free(x); free(sc); free(y);
    return 0;
}
