/* Minimal unit-test helpers. Each check prints "ok NAME" or "FAIL NAME: why";
 * tests/run.sh counts those lines across all test programs. */
#ifndef MX_TEST_H
#define MX_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

static int t_failed;
#define CHECK(name, cond, ...)                                              \
    do {                                                                    \
        if (cond) printf("ok %s\n", name);                                  \
        else {                                                              \
            printf("FAIL %s: ", name);                                      \
            printf(__VA_ARGS__);                                            \
            printf(" (%s:%d)\n", __FILE__, __LINE__);                       \
            t_failed++;                                                     \
        }                                                                   \
    } while (0)
#define TEST_END() return t_failed ? 1 : 0

static inline float t_maxdiff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as failure */
    }
    return m;
}
static inline unsigned t_rng(unsigned *s) { *s = *s * 1664525u + 1013904223u; return *s >> 8; }
static inline float t_randf(unsigned *s) { return (float)t_rng(s) / (float)(1u << 24) * 2.0f - 1.0f; }
#endif
