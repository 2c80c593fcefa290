/* DeepSeek sparse attention (nn/dsa.c) beyond the fixture's 64 positions,
 * on the deepseek_v32 fixture (index_topk 16): a 100-token prompt in one
 * forward, in chunks of 7 and one token at a time agree (the indexer keys
 * come from the cache across chunks); one thread and three give the same
 * bits (the keys are split across threads for a decode token); with an
 * index_topk that covers the whole prompt the model equals the dense run
 * (MLXCEL_DSA_DENSE), with 16 it does not. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "runtime/engine.h"
#include "fixtures.h"
#include <unistd.h>

enum { T = 100 };
static const char *FX = "tests/fixtures/deepseek_v32";

/* logits of toks[0..T) fed in chunks of `chunk` */
static int run(const mx_model *m, const int32_t *toks, int chunk, int threads, float *out) {
    mx_pool *pool = mx_pool_new(threads);
    mx_ctx *c = mx_ctx_new(m, chunk, T, pool);
    mx_kv *kv = mx_kv_new(m, T);
    int rc = c && kv ? 0 : -1;
    for (int i = 0; i < T && !rc; i += chunk) {
        int n = MX_MIN(chunk, T - i);
        mx_seq_in s = {.kv = kv, .tokens = toks + i, .n = n};
        rc = mx_forward(c, &s, 1, out + (size_t)i * m->arch.vocab, true);
    }
    mx_kv_free(kv);
    mx_ctx_free(c);
    mx_pool_free(pool);
    return rc;
}

static float rel_diff(const float *a, const float *b, size_t n) {
    float mx = 1;
    for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(a[i]));
    return t_maxdiff(a, b, n) / mx;
}

/* the fixture in dir with config key index_topk set to k (model.safetensors linked) */
static int variant(const char *dir, int k) {
    char path[512], *cfg = NULL;
    snprintf(path, sizeof path, "%s/config.json", FX);
    json_t *j = mx_json_load_file(path, 1 << 20);
    if (!j) return -1;
    json_object_set_new(j, "index_topk", json_integer(k));
    cfg = json_dumps(j, 0);
    json_decref(j);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    int rc = f && cfg && fputs(cfg, f) >= 0 ? 0 : -1;
    if (f) fclose(f);
    free(cfg);
    char src[512], dst[512], *abs = realpath(FX, NULL);
    snprintf(src, sizeof src, "%s/model.safetensors", abs ? abs : FX);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    free(abs);
    unlink(dst);
    return rc || symlink(src, dst) ? -1 : 0;
}

int main(void) {
    if (access(FX, R_OK)) { printf("FAIL dsa: %s missing\n", FX); return 1; }
    mx_engine e;
    if (mx_engine_open(FX, &e)) { printf("FAIL dsa_open: %s\n", mx_errmsg()); return 1; }
    const mx_model *m = &e.model;
    int V = m->arch.vocab;
    CHECK("dsa_topk_below_prompt", m->arch.mla.index_topk > 0 && m->arch.mla.index_topk < T / 4, "index_topk %d", m->arch.mla.index_topk);
    int32_t toks[T];
    unsigned seed = 5;
    for (int i = 0; i < T; i++) toks[i] = (int32_t)(t_rng(&seed) % (unsigned)V);
    size_t n = (size_t)T * V;
    float *whole = malloc(sizeof(float) * n), *c7 = malloc(sizeof(float) * n), *step = malloc(sizeof(float) * n), *one = malloc(sizeof(float) * n);
    int rc = run(m, toks, T, 3, whole) || run(m, toks, 7, 3, c7) || run(m, toks, 1, 3, step) || run(m, toks, 1, 1, one);
    CHECK("dsa_forward", !rc, "%s", mx_errmsg());
    if (!rc) {
        float d7 = rel_diff(whole, c7, n), d1 = rel_diff(whole, step, n);
        CHECK("dsa_prefill_eq_chunks_of_7", d7 <= 1e-5f, "relative max diff %g", d7);
        CHECK("dsa_prefill_eq_stepwise", d1 <= 1e-5f, "relative max diff %g", d1);
        CHECK("dsa_decode_threads_bit_identical", !memcmp(step, one, sizeof(float) * n), "1 thread vs 3 differ by %g", t_maxdiff(step, one, n));
    }
    mx_engine_close(&e);

    /* index_topk covering the prompt = dense; the fixture's 16 is not */
    char dir[] = "/tmp/mlxcel_dsa_XXXXXX";
    float *dense = malloc(sizeof(float) * n), *all = malloc(sizeof(float) * n);
    if (!mkdtemp(dir) || variant(dir, T)) { CHECK("dsa_variant", 0, "cannot write %s", dir); goto out; }
    setenv("MLXCEL_DSA_DENSE", "1", 1);
    rc = mx_engine_open(FX, &e);
    unsetenv("MLXCEL_DSA_DENSE");
    if (rc) { CHECK("dsa_dense_open", 0, "%s", mx_errmsg()); goto out; }
    CHECK("dsa_dense_has_no_indexer", e.model.arch.mla.index_topk == 0, "index_topk %d", e.model.arch.mla.index_topk);
    rc = run(&e.model, toks, T, 3, dense);
    mx_engine_close(&e);
    if (rc || mx_engine_open(dir, &e)) { CHECK("dsa_variant_open", 0, "%s", mx_errmsg()); goto out; }
    rc = run(&e.model, toks, T, 3, all);
    mx_engine_close(&e);
    CHECK("dsa_variant_forward", !rc, "%s", mx_errmsg());
    if (!rc) {
        float da = rel_diff(dense, all, n), ds = rel_diff(dense, whole, n);
        CHECK("dsa_topk_covering_prompt_eq_dense", da <= 1e-6f, "relative max diff %g", da);
        CHECK("dsa_topk_16_differs_from_dense", ds > 1e-2f, "relative max diff %g", ds);
    }
out:;
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    rmdir(dir);
    free(whole); free(c7); free(step); free(one); free(dense); free(all);
    TEST_END();
}
