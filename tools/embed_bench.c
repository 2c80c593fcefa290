/* embed_bench: embedding throughput of an encoder checkpoint through the
 * library API (mx_embed_batch), for batches of texts of a fixed length.
 *   embed_bench -m DIR [-t THREADS] [--len 128] [--batches 1,16,64] [--seconds 3]
 * Inputs are random token ids (a [CLS]-like first id, then ids from the upper
 * part of the vocabulary). Prints one line per batch size: texts/s, tokens/s
 * and milliseconds per call (median of the timed calls after one warm-up). */
#include "base/base.h"
#include "base/threadpool.h"
#include "runtime/embed.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *batches = "1,16,64";
    int threads = mx_default_threads(), len = 128;
    double seconds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--len") && i + 1 < argc) len = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batches") && i + 1 < argc) batches = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else { fprintf(stderr, "usage: embed_bench -m DIR [-t THREADS] [--len 128] [--batches 1,16,64] [--seconds 3]\n"); return 2; }
    }
    if (!dir || threads < 1 || len < 2) { fprintf(stderr, "embed_bench: -m DIR is required (threads >= 1, len >= 2)\n"); return 2; }
    mx_pool *pool = mx_pool_new(threads);
    mx_embedder *e;
    mx_embed_opts o = {.pooling = MX_EMB_POOL_AUTO};
    if (mx_embedder_open(dir, &o, pool, &e)) { fprintf(stderr, "embed_bench: %s\n", mx_errmsg()); return 1; }
    const mx_arch *a = &mx_embedder_engine(e)->model.arch;
    printf("model %s: %s, hidden %d, %d layers, %d heads, ffn %d; pooling %s; %d threads; %d tokens per text\n", dir,
           mx_embedder_engine(e)->model_type, a->hidden, a->n_layers, a->attn->n_heads, a->ffn, mx_embedder_describe(e), threads, len);
    int rc = 0;
    for (const char *p = batches; *p;) {
        int n = atoi(p);
        while (*p && *p != ',') p++;
        if (*p) p++;
        if (n < 1) continue;
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)n * len);
        const int32_t **rows = malloc(sizeof(*rows) * (size_t)n);
        int *lens = malloc(sizeof(int) * (size_t)n);
        float *out = malloc(sizeof(float) * (size_t)n * mx_embedder_dim(e));
        unsigned s = 12345u + (unsigned)n;
        for (int i = 0; i < n; i++) {
            for (int t = 0; t < len; t++) {
                s = s * 1664525u + 1013904223u;
                ids[(size_t)i * len + t] = t == 0 ? 101 % a->vocab : (int32_t)(a->vocab / 2 + (s >> 8) % (unsigned)(a->vocab / 2));
            }
            rows[i] = ids + (size_t)i * len;
            lens[i] = len;
        }
        double times[1000];
        int k = 0;
        if (mx_embed_batch(e, rows, lens, n, out)) { fprintf(stderr, "embed_bench: %s\n", mx_errmsg()); rc = 1; }
        double t_end = mx_now() + seconds;
        while (!rc && k < 1000 && (k < 3 || mx_now() < t_end)) {
            double t0 = mx_now();
            if (mx_embed_batch(e, rows, lens, n, out)) { fprintf(stderr, "embed_bench: %s\n", mx_errmsg()); rc = 1; }
            times[k++] = mx_now() - t0;
        }
        if (k) {
            qsort(times, (size_t)k, sizeof(double), cmp_d);
            double med = times[k / 2];
            printf("batch %3d x %d tokens: %8.1f texts/s %9.0f tokens/s %8.2f ms/call (median of %d)\n", n, len, n / med,
                   (double)n * len / med, med * 1e3, k);
        }
        free(ids); free(rows); free(lens); free(out);
    }
    mx_embedder_close(e);
    mx_pool_free(pool);
    return rc;
}
