#define _GNU_SOURCE
/* Recurrent mixers (Mamba-1/2, RG-LRU and hybrids) on the fixture models with
 * random prompts: a prefill cut into random chunks equals the one-pass
 * prefill (the scan carries its state across forwards), a reused cache
 * restarted at position 0 forgets its old state, and sequences stacked in
 * one forward keep separate states; a thread pool changes nothing. */
#include "test.h"
#include "base/base.h"
#include "runtime/engine.h"
#include "format/safetensors.h"
#include <unistd.h>

static float maxabs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

static int fwd(mx_ctx *c, mx_kv *kv, const int32_t *tok, int n, float *logits) {
    mx_seq_in in = {.kv = kv, .tokens = tok, .n = n, .seg_end = 0};
    return mx_forward(c, &in, 1, logits, true);
}

static void run(const char *name) {
    char dir[256], label[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    mx_engine e;
    if (mx_engine_open(dir, &e)) { printf("# %s: not present (%s)\n", name, mx_errmsg()); return; }
    bool rec = false;
    for (int l = 0; l < e.model.arch.n_layers; l++) {
        const mx_layer_spec *ls = &e.model.arch.layers[l];
        rec |= (ls->mixer && ls->mixer->recurrent) || (ls->mixer2 && ls->mixer2->recurrent);
    }
    snprintf(label, sizeof label, "ssm/%s/recurrent", name);
    CHECK(label, rec, "no layer has a recurrent mixer");
    enum { T = 37, CAP = 64 };
    int V = e.model.arch.vocab;
    unsigned seed = 1234;
    int32_t tok[T], tok2[T];
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(t_rng(&seed) % (unsigned)V), tok2[i] = (int32_t)(t_rng(&seed) % (unsigned)V);
    float *ref = malloc(sizeof(float) * T * V), *got = malloc(sizeof(float) * T * V), *ref2 = malloc(sizeof(float) * T * V);
    mx_ctx *c = mx_ctx_new(&e.model, CAP, CAP, NULL);
    mx_kv *a = mx_kv_new(&e.model, CAP), *b = mx_kv_new(&e.model, CAP), *d = mx_kv_new(&e.model, CAP);
    int rc = fwd(c, a, tok, T, ref) || fwd(c, d, tok2, T, ref2);
    float tol = 1e-4f * fmaxf(1, maxabs(ref, (size_t)T * V));

    /* random chunks, then the step-by-step path */
    for (int i = 0; i < T && !rc;) {
        int n = 1 + (int)(t_rng(&seed) % 9);
        if (n > T - i) n = T - i;
        rc = fwd(c, b, tok + i, n, got + (size_t)i * V);
        i += n;
    }
    snprintf(label, sizeof label, "ssm/%s/random_chunks", name);
    CHECK(label, !rc && t_maxdiff(got, ref, (size_t)T * V) <= tol, "rc %d, max diff %g > %g", rc,
          rc ? 0 : t_maxdiff(got, ref, (size_t)T * V), tol);
    b->len = 0;
    for (int i = 0; i < T && !rc; i++) rc = fwd(c, b, tok + i, 1, got + (size_t)i * V);
    snprintf(label, sizeof label, "ssm/%s/step_by_step", name);
    CHECK(label, !rc && t_maxdiff(got, ref, (size_t)T * V) <= tol, "rc %d, max diff %g", rc, rc ? 0 : t_maxdiff(got, ref, (size_t)T * V));

    /* restart a used cache at position 0: exactly the fresh result */
    b->len = 0;
    rc = rc || fwd(c, b, tok, T, got);
    snprintf(label, sizeof label, "ssm/%s/reset_at_position_0", name);
    CHECK(label, !rc && t_maxdiff(got, ref, (size_t)T * V) == 0, "max diff %g", rc ? 0 : t_maxdiff(got, ref, (size_t)T * V));

    /* two sequences in one forward: a continues after 10 tokens, d restarts */
    a->len = 0;
    rc = rc || fwd(c, a, tok, 10, got);
    d->len = 0;
    mx_seq_in in[2] = {{.kv = a, .tokens = tok + 10, .n = 20}, {.kv = d, .tokens = tok2, .n = 15}};
    float *both = malloc(sizeof(float) * 35 * V);
    rc = rc || mx_forward(c, in, 2, both, true);
    snprintf(label, sizeof label, "ssm/%s/stacked_sequences", name);
    float d1 = rc ? 0 : t_maxdiff(both, ref + (size_t)10 * V, (size_t)20 * V);
    float d2 = rc ? 0 : t_maxdiff(both + (size_t)20 * V, ref2, (size_t)15 * V);
    CHECK(label, !rc && d1 <= tol && d2 <= tol, "rc %d, diffs %g %g (tol %g)", rc, d1, d2, tol);
    /* the same with a thread pool (channels / heads split over workers) */
    mx_pool *pool = mx_pool_new(4);
    mx_ctx *cp = pool ? mx_ctx_new(&e.model, CAP, CAP, pool) : NULL;
    b->len = 0;
    rc = rc || !cp;
    for (int i = 0; i < T && !rc; i += 8) rc = fwd(cp, b, tok + i, T - i < 8 ? T - i : 8, got + (size_t)i * V);
    snprintf(label, sizeof label, "ssm/%s/threaded_chunks", name);
    CHECK(label, !rc && t_maxdiff(got, ref, (size_t)T * V) <= tol, "rc %d, max diff %g", rc, rc ? 0 : t_maxdiff(got, ref, (size_t)T * V));
    mx_ctx_free(cp);
    mx_pool_free(pool);
    if (rc) printf("# %s: %s\n", name, mx_errmsg());
    free(both);
    free(ref); free(got); free(ref2);
    mx_kv_free(a); mx_kv_free(b); mx_kv_free(d);
    mx_ctx_free(c);
    mx_engine_close(&e);
}

static float *prompt_logits(const char *dir, const int32_t *tok, int T, int *V) {
    mx_engine e;
    if (mx_engine_open(dir, &e)) return NULL;
    *V = e.model.arch.vocab;
    float *lg = malloc(sizeof(float) * (size_t)T * *V);
    mx_ctx *c = mx_ctx_new(&e.model, T, T, NULL);
    mx_kv *kv = mx_kv_new(&e.model, T);
    if (!c || !kv || fwd(c, kv, tok, T, lg)) { free(lg); lg = NULL; }
    mx_kv_free(kv);
    mx_ctx_free(c);
    mx_engine_close(&e);
    return lg;
}

/* MiniMax: a checkpoint without the slope buffers (the decays then come from
 * HF's formula) gives the logits of the one that stores them */
static void minimax_slope_formula(void) {
    const char *src = "tests/fixtures/minimax";
    char dir[] = "/tmp/mlxcel_minimax_XXXXXX";
    if (!mkdtemp(dir)) { CHECK("ssm/minimax/slope_formula", 0, "mkdtemp failed"); return; }
    char *sp = mx_path_join(src, "model.safetensors"), *dp = mx_path_join(dir, "model.safetensors");
    char *sc = mx_path_join(src, "config.json"), *dc = mx_path_join(dir, "config.json");
    mx_st_file f;
    bool ok = !mx_st_open(sp, &f);
    if (ok) {
        mx_st_out *o = malloc(sizeof(mx_st_out) * (size_t)f.n_tensors);
        int n = 0;
        for (int i = 0; i < f.n_tensors; i++) {
            const mx_tensor *t = &f.tensors[i];
            if (strstr(t->name, "decay") || strstr(t->name, "slope_rate")) continue;
            o[n] = (mx_st_out){t->name, t->dtype, t->ndim, {0}, t->data, t->nbytes};
            memcpy(o[n].shape, t->shape, sizeof t->shape);
            n++;
        }
        ok = n < f.n_tensors && !mx_st_write(dp, o, n, NULL);
        free(o);
        mx_st_close(&f);
    }
    json_t *cfg = ok ? mx_json_load_file(sc, 1 << 20) : NULL;
    ok = cfg && !json_dump_file(cfg, dc, 0);
    json_decref(cfg);
    enum { T = 40 };
    int32_t tok[T];
    unsigned seed = 77;
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(3 + t_rng(&seed) % 300u);
    int V = 0;
    float *a = ok ? prompt_logits(src, tok, T, &V) : NULL, *b = a ? prompt_logits(dir, tok, T, &V) : NULL;
    float tol = a ? 1e-4f * fmaxf(1, maxabs(a, (size_t)T * V)) : 0;
    CHECK("ssm/minimax/slope_formula", a && b && t_maxdiff(a, b, (size_t)T * V) <= tol, "%s, max diff %g", a && b ? "ran" : mx_errmsg(),
          a && b ? t_maxdiff(a, b, (size_t)T * V) : 0);
    free(a); free(b);
    unlink(dp); unlink(dc); rmdir(dir);
    free(sp); free(dp); free(sc); free(dc);
}

int main(void) {
    const char *names[] = {"mamba", "falcon_mamba", "mamba2", "jamba", "recurrent_gemma", "bamba", "falcon_h1",
                           "granitemoehybrid", "nemotron_h", "zamba2", "lfm2", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text",
                           "lfm2_moe", "minimax"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run(names[i]);
    minimax_slope_formula();
    TEST_END();
}
