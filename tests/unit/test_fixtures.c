#define _GNU_SOURCE
/* Parity against the Hugging Face reference fixtures in tests/fixtures/:
 * prompt logits and greedy decode, with whole-prompt prefill and with
 * one-token chunks (the decode path). Tolerance: 1e-4 * max(1, max|ref|). */
#include "test.h"
#include "base/base.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include <dirent.h>

static int read_i64(const mx_st_file *f, const char *name, int32_t **out, int *n) {
    const mx_tensor *t = mx_st_find(f, name);
    if (!t || t->dtype != MX_DT_I64) return -1;
    *n = (int)t->numel;
    *out = malloc(sizeof(int32_t) * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) { int64_t v; memcpy(&v, t->data + 8 * i, 8); (*out)[i] = (int32_t)v; }
    return 0;
}

static float *read_f32(const mx_st_file *f, const char *name, size_t *n) {
    const mx_tensor *t = mx_st_find(f, name);
    if (!t) return NULL;
    float *p = malloc(sizeof(float) * (size_t)t->numel);
    mx_tensor_to_f32(t, p);
    *n = (size_t)t->numel;
    return p;
}

static float maxabs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

static void run_mode(const char *name, mx_engine *e, int chunk, const int32_t *ids, int T, const float *ref_logits,
                     const int32_t *gids, int N, const float *ref_glogits, bool check_prompt) {
    char label[256];
    int V = e->model.arch.vocab;
    mx_session s;
    snprintf(label, sizeof label, "%s/chunk%d", name, chunk);
    if (mx_session_init(&s, e, T + N + 1, chunk, NULL)) { CHECK(label, 0, "session: %s", mx_errmsg()); return; }
    float *lg = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
    if (mx_session_feed(&s, ids, T, lg, last)) { CHECK(label, 0, "prefill: %s", mx_errmsg()); goto out; }
    if (check_prompt) {
        float tol = 1e-4f * fmaxf(1, maxabs(ref_logits, (size_t)T * V));
        float d = t_maxdiff(lg, ref_logits, (size_t)T * V);
        snprintf(label, sizeof label, "%s/chunk%d/prompt_logits", name, chunk);
        CHECK(label, d <= tol, "max diff %g > tol %g", d, tol);
    }
    float tol = 1e-4f * fmaxf(1, maxabs(ref_glogits, (size_t)N * V)), worst = 0;
    int bad_id = -1;
    for (int i = 0; i < N; i++) {
        float d = t_maxdiff(last, ref_glogits + (size_t)i * V, V);
        if (d > worst) worst = d;
        int32_t tok = mx_argmax(last, V);
        if (tok != gids[i] && bad_id < 0) bad_id = i;
        if (i + 1 < N && mx_session_feed(&s, &gids[i], 1, NULL, last)) { CHECK(label, 0, "decode: %s", mx_errmsg()); goto out; }
    }
    snprintf(label, sizeof label, "%s/chunk%d/greedy_ids", name, chunk);
    CHECK(label, bad_id < 0, "first mismatch at step %d", bad_id);
    snprintf(label, sizeof label, "%s/chunk%d/greedy_logits", name, chunk);
    CHECK(label, worst <= tol, "max diff %g > tol %g", worst, tol);
out:
    free(lg);
    free(last);
    mx_session_free(&s);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : "tests/fixtures";
    DIR *d = opendir(root);
    if (!d) { printf("FAIL fixtures: cannot open %s\n", root); return 1; }
    char *names[512];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 512)
        if (de->d_name[0] != '.') names[nn++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof(char *), cmp_str);
    for (int k = 0; k < nn; k++) {
        char *dir = mx_path_join(root, names[k]), *refp = mx_path_join(dir, "reference.safetensors");
        char *rj = mx_path_join(dir, "reference.json");
        json_t *meta = mx_json_load_file(rj, 1 << 20);
        const char *task = meta ? json_string_value(json_object_get(meta, "task")) : NULL;
        if (!task || strcmp(task, "causal-lm") != 0) goto next; /* encoders: test_encoders */
        mx_st_file ref;
        if (mx_st_open(refp, &ref)) { CHECK(names[k], 0, "%s", mx_errmsg()); goto next; }
        mx_engine e;
        if (mx_engine_open(dir, &e)) { CHECK(names[k], 0, "load: %s", mx_errmsg()); mx_st_close(&ref); goto next; }
        int32_t *ids = NULL, *gids = NULL;
        int T = 0, N = 0;
        size_t nl = 0, ng = 0;
        read_i64(&ref, "input_ids", &ids, &T);
        read_i64(&ref, "greedy_ids", &gids, &N);
        float *logits = read_f32(&ref, "logits", &nl), *gl = read_f32(&ref, "greedy_logits", &ng);
        run_mode(names[k], &e, 512, ids, T, logits, gids, N, gl, true);
        run_mode(names[k], &e, 1, ids, T, logits, gids, N, gl, true);
        free(ids); free(gids); free(logits); free(gl);
        mx_engine_close(&e);
        mx_st_close(&ref);
    next:
        json_decref(meta);
        free(dir); free(refp); free(rj); free(names[k]);
    }
    TEST_END();
}
