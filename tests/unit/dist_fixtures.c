#define _GNU_SOURCE
/* Every causal fixture through a distributed run (issue 27's self-parity):
 *   dist_fixtures --write DIR [ROOT]       one process: each fixture's prompt
 *       logits (whole-prompt prefill) and its greedy decode's step logits
 *       (one token at a time, fed the reference's greedy ids) into DIR/NAME.f32
 *   mpirun -np N dist_fixtures --tp T --pp P --check DIR [ROOT]
 *       the same run over T x P processes; rank 0 compares each fixture with
 *       DIR/NAME.f32: within 1e-4 * max(1, max|single|) and the same argmax at
 *       every position. Under --pp every fixture must load; under --tp a family
 *       the split refuses by name ("--tp ...") is a "skip" line, not a failure.
 * Run with exact activations (MLXCEL_INT8=0): a sum the all-reduce rounds
 * another way may move a 12-bit activation code by one step. */
#include "test.h"
#include "base/base.h"
#include "base/threadpool.h"
#include "dist/dist.h"
#include "fixtures.h"
#include "kernels/kernels.h"
#include "kernels/policy.h"
#include "runtime/generate.h"
#include <stdio.h>

static const char *g_dir;
static bool g_check;
static int g_tp = 1, g_pp = 1, g_skipped;
static mx_pool *g_pool;

/* prompt logits [T][V] then step logits [N][V]: the prompt whole, then each reference greedy id fed alone */
static float *run(mx_engine *e, const int32_t *ids, int T, const int32_t *gids, int N, const char *name) {
    int V = e->model.arch.vocab;
    float *out = malloc(sizeof(float) * (size_t)(T + N) * V);
    mx_session s;
    if (!out || mx_session_init(&s, e, T + N + 1, 512, g_pool)) {
        CHECK(name, 0, "session: %s", mx_errmsg());
        free(out);
        return NULL;
    }
    float *step = out + (size_t)T * V;
    int rc = mx_session_feed(&s, ids, T, out, step);
    for (int i = 0; !rc && i + 1 < N; i++) rc = mx_session_feed(&s, &gids[i], 1, NULL, step + (size_t)(i + 1) * V);
    mx_session_free(&s); /* before the workers are released: its caches' frees are announced to them */
    if (rc) {
        CHECK(name, 0, "run: %s", mx_errmsg());
        free(out);
        return NULL;
    }
    return out;
}

static void one(const char *name, const char *dir, const char *task, void *ctx) {
    (void)ctx;
    if (!task || strcmp(task, "causal-lm") != 0) return; /* encoders, speech: not distributed */
    char path[4096], label[300];
    snprintf(path, sizeof path, "%s/%s.f32", g_dir, name);
    snprintf(label, sizeof label, "%s/%s", name, !g_check ? "single" : g_tp > 1 && g_pp > 1 ? "tp_pp" : g_tp > 1 ? "tp" : "pp");
    bool root = mx_dist_rank() == 0;
    mx_st_file ref;
    char *refp = mx_path_join(dir, "reference.safetensors");
    int orc = mx_st_open(refp, &ref);
    free(refp);
    if (orc) { /* every process reads it: all take the same path */
        if (root) CHECK(label, 0, "%s", mx_errmsg());
        return;
    }
    int32_t *ids = NULL, *gids = NULL;
    int T = 0, N = 0;
    fx_read_i64(&ref, "input_ids", &ids, &T);
    fx_read_i64(&ref, "greedy_ids", &gids, &N);
    mx_engine e;
    if (mx_engine_open(dir, &e)) { /* collective under MPI: every process fails alike */
        if (root) {
            if (g_check && g_tp > 1 && !strncmp(mx_errmsg(), "--tp", 4)) {
                printf("skip %s: %s\n", label, mx_errmsg());
                g_skipped++;
            } else CHECK(label, 0, "load: %s", mx_errmsg());
        }
        goto out;
    }
    if (!root) { /* serve rank 0's passes until it is done with this model */
        if (mx_dist_worker(&e.model)) printf("FAIL %s: worker: %s\n", label, mx_errmsg());
        mx_engine_close(&e);
        goto out;
    }
    int V = e.model.arch.vocab;
    float *got = run(&e, ids, T, gids, N, label);
    mx_dist_release();
    mx_engine_close(&e);
    if (!got) goto out;
    size_t n = (size_t)(T + N) * V;
    if (!g_check) {
        FILE *f = fopen(path, "wb");
        bool ok = f && fwrite(got, sizeof(float), n, f) == n;
        if (f) ok &= fclose(f) == 0;
        CHECK(label, ok, "cannot write %s", path);
    } else {
        float *want = malloc(sizeof(float) * n);
        FILE *f = fopen(path, "rb");
        bool have = want && f && fread(want, sizeof(float), n, f) == n;
        if (f) fclose(f);
        if (!have) CHECK(label, 0, "no single-process logits in %s", path);
        else {
            float tol = 1e-4f * fmaxf(1, fx_maxabs(want, n)), d = t_maxdiff(got, want, n);
            int bad = -1;
            for (int r = 0; r < T + N && bad < 0; r++)
                if (mx_argmax(got + (size_t)r * V, V) != mx_argmax(want + (size_t)r * V, V)) bad = r;
            char l2[340];
            snprintf(l2, sizeof l2, "%s/logits", label);
            CHECK(l2, d <= tol, "max diff %g > %g", d, tol);
            snprintf(l2, sizeof l2, "%s/argmax", label);
            CHECK(l2, bad < 0, "position %d (of %d prompt + %d decode) differs", bad, T, N);
        }
        free(want);
    }
    free(got);
out:
    free(ids);
    free(gids);
    mx_st_close(&ref);
}

int main(int argc, char **argv) {
    const char *root = "tests/fixtures";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--write") && i + 1 < argc) g_dir = argv[++i];
        else if (!strcmp(argv[i], "--check") && i + 1 < argc) g_dir = argv[++i], g_check = true;
        else if (!strcmp(argv[i], "--tp") && i + 1 < argc) g_tp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pp") && i + 1 < argc) g_pp = atoi(argv[++i]);
        else root = argv[i];
    }
    if (!g_dir || g_tp < 1 || g_pp < 1) {
        fprintf(stderr, "usage: dist_fixtures --write DIR | --check DIR [--tp T] [--pp P] [ROOT]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* a hang shows where it stands */
    if (mx_dist_start(g_tp, g_pp, 1)) {
        if (mx_dist_rank() == 0) printf("FAIL dist_fixtures: %s\n", mx_errmsg());
        mx_dist_finish();
        return 1;
    }
    mx_kpolicy kp = mx_kpolicy_default(); /* the documented environment (MLXCEL_INT8=0), as the CLI reads it */
    mx_kpolicy_env(&kp);
    mx_kpolicy_set_default(&kp);
    g_pool = mx_pool_new(1);
    int rc = fx_each(root, one, NULL);
    mx_pool_free(g_pool);
    bool root0 = mx_dist_rank() == 0;
    mx_dist_finish();
    if (!root0) return 0; /* rank 0 reports */
    if (rc) { printf("FAIL dist_fixtures: cannot open %s\n", root); return 1; }
    if (g_skipped) printf("# %d fixtures refused by --tp (by name)\n", g_skipped);
    TEST_END();
}
