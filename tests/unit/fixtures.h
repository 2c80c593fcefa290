/* Shared by the fixture-driven tests: walking tests/fixtures in name order
 * with each fixture's task, and reading reference tensors. */
#ifndef MX_TEST_FIXTURES_H
#define MX_TEST_FIXTURES_H
#include "base/base.h"
#include "format/json.h"
#include "format/safetensors.h"
#include "runtime/generate.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static inline int fx_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Calls fn for every folder under root (sorted) with its reference.json task
 * (NULL when absent); returns -1 when root cannot be read. */
static inline int fx_each(const char *root, void (*fn)(const char *name, const char *dir, const char *task, void *ctx), void *ctx) {
    DIR *d = opendir(root);
    if (!d) return -1;
    char *names[512];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 512)
        if (de->d_name[0] != '.') names[nn++] = mx_strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof(char *), fx_cmp_str);
    for (int k = 0; k < nn; k++) {
        char *dir = mx_path_join(root, names[k]), *rj = mx_path_join(dir, "reference.json");
        json_t *meta = mx_file_exists(rj) ? mx_json_load_file(rj, 1 << 20) : NULL;
        fn(names[k], dir, meta ? json_string_value(json_object_get(meta, "task")) : NULL, ctx);
        json_decref(meta);
        free(dir);
        free(rj);
        free(names[k]);
    }
    return 0;
}

static inline int fx_read_i64(const mx_st_file *f, const char *name, int32_t **out, int *n) {
    const mx_tensor *t = mx_st_find(f, name);
    if (!t || t->dtype != MX_DT_I64) return -1;
    *n = (int)t->numel;
    *out = malloc(sizeof(int32_t) * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++) { int64_t v; memcpy(&v, t->data + 8 * i, 8); (*out)[i] = (int32_t)v; }
    return 0;
}

static inline float *fx_read_f32(const mx_st_file *f, const char *name, size_t *n) {
    const mx_tensor *t = mx_st_find(f, name);
    if (!t) return NULL;
    float *p = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
    mx_tensor_to_f32(t, p);
    *n = (size_t)t->numel;
    return p;
}

static inline float fx_maxabs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}
/* A causal-lm fixture's reference file and engine, opened (false: another
 * task, or a CHECK line under `name` says what failed); fx_causal_close
 * closes both. For the tests that walk every causal fixture (test.h first). */
static inline bool fx_causal_open(const char *name, const char *dir, const char *task, mx_st_file *ref, mx_engine *e) {
    if (!task || strcmp(task, "causal-lm") != 0) return false;
    char *refp = mx_path_join(dir, "reference.safetensors");
    int rc = mx_st_open(refp, ref);
    free(refp);
    if (rc) { CHECK(name, 0, "%s", mx_errmsg()); return false; }
    if (mx_engine_open(dir, e)) { CHECK(name, 0, "load: %s", mx_errmsg()); mx_st_close(ref); return false; }
    return true;
}
static inline void fx_causal_close(mx_st_file *ref, mx_engine *e) {
    mx_engine_close(e);
    mx_st_close(ref);
}
#endif
