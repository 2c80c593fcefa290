/* libFuzzer target: opening a model folder whose config.json is the input
 * (family detection, configuration, the quantization block, weight binding
 * against a fixed checkpoint), then a two-token forward pass when it opens.
 * A rejected config must leave a one-line error; nothing may crash, hang or
 * allocate without bound. The weights come from MLXCEL_FUZZ_MODEL (default
 * tests/fixtures/mlxq_affine_mixed: per-layer quantization overrides),
 * linked into a private temporary folder. Built by `make fuzz` against a
 * clang ASan/UBSan build of the whole library (build/fuzzlib). */
#define _GNU_SOURCE
#include "base/base.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[PATH_MAX];

static int setup(void) {
    const char *src = getenv("MLXCEL_FUZZ_MODEL");
    if (!src) src = "tests/fixtures/mlxq_affine_mixed";
    char abs[PATH_MAX], from[PATH_MAX + 64], to[PATH_MAX + 64];
    if (!realpath(src, abs)) { fprintf(stderr, "fuzz_model: no model folder %s\n", src); return -1; }
    snprintf(g_dir, sizeof g_dir, "%s/mlxcel-fuzz-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) return -1;
    const char *files[] = {"model.safetensors", "model.safetensors.index.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(from, sizeof from, "%s/%s", abs, files[i]);
        snprintf(to, sizeof to, "%s/%s", g_dir, files[i]);
        if (access(from, R_OK) == 0 && symlink(from, to) != 0) return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static int ready = 0;
    if (!ready) {
        if (setup()) abort();
        ready = 1;
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(d, 1, n, f) != n) abort();
    fclose(f);
    mx_engine e;
    if (mx_engine_open(g_dir, &e)) {
        const char *m = mx_errmsg();
        if (!m || !*m || strchr(m, '\n')) abort();
        return 0;
    }
    mx_session s;
    if (mx_session_init(&s, &e, 8, 8, NULL) == 0) {
        float *last = malloc(sizeof(float) * (size_t)MX_MAX(1, e.model.arch.vocab));
        int32_t tok[2] = {0, e.model.arch.vocab > 1 ? 1 : 0};
        if (last && mx_session_feed(&s, tok, 2, NULL, last)) {
            const char *m = mx_errmsg();
            if (!m || !*m || strchr(m, '\n')) abort();
        }
        free(last);
        mx_session_free(&s);
    }
    mx_engine_close(&e);
    return 0;
}
