/* membw: STREAM-style read bandwidth with the inference threads, the yardstick
 * for decode efficiency (bytes read per token x tok/s / this). */
#define _GNU_SOURCE
#include "kernels.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef struct {
    const uint8_t *buf;
    size_t chunk;            /* bytes per task, multiple of 256 */
    uint64_t sink[64 * 8];   /* one cache line per task slot (keeps the reads live) */
} bw_job;

/* Each task reads its chunk as BW_STREAMS interleaved parts: one core keeps
 * more lines in flight from several streams than from one (~36 vs ~30 GB/s
 * on the dev VM), as the matmul kernels do with their several weight rows,
 * and a single-stream probe would rate them above 100 %. */
#define BW_STREAMS 4
static void bw_task(void *ctx, int i, int tid) {
    (void)tid;
    bw_job *j = ctx;
    const uint8_t *p = j->buf + (size_t)i * j->chunk;
    const size_t part = j->chunk / BW_STREAMS;
#if defined(__SSE2__)
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t o = 0; o < part; o += 64)
        for (int k = 0; k < BW_STREAMS; k++) {
            const uint8_t *q = p + (size_t)k * part + o;
            a0 = _mm_add_epi64(a0, _mm_load_si128((const __m128i *)(const void *)q));
            a1 = _mm_add_epi64(a1, _mm_load_si128((const __m128i *)(const void *)(q + 16)));
            a2 = _mm_add_epi64(a2, _mm_load_si128((const __m128i *)(const void *)(q + 32)));
            a3 = _mm_add_epi64(a3, _mm_load_si128((const __m128i *)(const void *)(q + 48)));
        }
    __m128i s = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
    uint64_t out[2];
    _mm_storeu_si128((__m128i *)(void *)out, s);
    j->sink[(i % 64) * 8] += out[0] + out[1];
#else
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t o = 0; o < part; o += 64)
        for (int k = 0; k < BW_STREAMS; k++) {
            uint64_t v[4];
            memcpy(v, p + (size_t)k * part + o, 32);
            s0 += v[0]; s1 += v[1]; s2 += v[2]; s3 += v[3];
        }
    j->sink[(i % 64) * 8] += s0 + s1 + s2 + s3;
#endif
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct mx_bw_probe {
    uint8_t *buf;
    size_t len;
    bool warm; /* one untimed pass made: TLB, page tables, threads awake */
};

mx_bw_probe *mx_bw_probe_new(size_t bytes) {
    size_t len = bytes & ~(size_t)4095;
    if (len == 0) return NULL;
    uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(buf, len, MADV_HUGEPAGE);
#endif
    for (size_t o = 0; o < len; o += 64) buf[o] = (uint8_t)(o >> 6); /* fault in, non-zero pages */
    mx_bw_probe *b = calloc(1, sizeof *b);
    if (!b) { munmap(buf, len); return NULL; }
    b->buf = buf;
    b->len = len;
    return b;
}

void mx_bw_probe_free(mx_bw_probe *b) {
    if (!b) return;
    munmap(b->buf, b->len);
    free(b);
}

double mx_bw_probe_run(mx_bw_probe *b, mx_pool *pool, int reps) {
    if (!b) return 0;
    if (reps < 1) reps = 1;
    if (reps > 1000) reps = 1000;
    int tasks = mx_pool_size(pool) * 8;
    size_t chunk = (b->len / (size_t)tasks) & ~(size_t)4095;
    if (chunk == 0) return 0;
    size_t len = chunk * (size_t)tasks;
    bw_job *j = calloc(1, sizeof *j);
    double *t = malloc(sizeof(double) * (size_t)reps);
    double bw = 0;
    if (j && t) {
        j->buf = b->buf;
        j->chunk = chunk;
        if (!b->warm) mx_pool_run(pool, bw_task, j, tasks);
        b->warm = true;
        for (int r = 0; r < reps; r++) {
            double t0 = mx_now();
            mx_pool_run(pool, bw_task, j, tasks);
            t[r] = mx_now() - t0;
        }
        qsort(t, (size_t)reps, sizeof(double), cmp_d);
        double med = reps & 1 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
        if (med > 0) bw = (double)len / med / 1e9;
    }
    free(j);
    free(t);
    return bw;
}

double mx_measure_read_bw(mx_pool *pool, size_t bytes, int reps) {
    mx_bw_probe *b = mx_bw_probe_new(bytes);
    double bw = mx_bw_probe_run(b, pool, reps);
    mx_bw_probe_free(b);
    return bw;
}
