/* libFuzzer target: the image path. Byte 0 picks the mode.
 *   < 0xc0: the rest is an image file; it is decoded (alpha dropped or, on odd
 *           bytes, composited over white) under a 4 Mpx bound and, when it
 *           decodes, run through one of the six fixture processors (byte 0
 *           picks which) and its prompt expanded.
 *   >= 0xc0: the rest is a preprocessor_config.json written next to the llava
 *           fixture's processor_config.json and config.json; when it loads,
 *           a 37x23 image goes through the configured processor.
 * Every refusal must leave a one-line error; accepted outputs are checked for
 * consistency (sizes, value counts, finite pixel values). Run from the repo
 * root (the processors load from tests/fixtures). */
#define _GNU_SOURCE
#include "base/base.h"
#include "image/processor.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mx_image_processor g_proc[16];
static int g_nproc;
static char g_dir[64];

static void check_err(void) {
    const char *m = mx_errmsg();
    if (!m || !*m || strchr(m, '\n')) abort();
}

static void run(const mx_image_processor *p, const mx_image *im) {
    mx_image_input in;
    if (mx_image_preprocess(p, im, &in)) {
        check_err();
        return;
    }
    if (!in.pixels || in.n_tokens <= 0 || in.n_tokens > MX_IP_MAX_TOKENS || in.n_values > MX_IP_MAX_VALUES) abort();
    if (p->layout != MX_IP_LAYOUT_PATCHIFY && in.n_values != (size_t)in.n_views * 3 * in.h * in.w) abort();
    for (size_t i = 0; i < in.n_values; i++)
        if (!isfinite(in.pixels[i])) abort();
    char *text;
    bool bos;
    if (!mx_image_expand_prompt(p, p->placeholder, &in, 1, "<bos>", &text, &bos)) free(text);
    else check_err();
    mx_image_input_free(&in);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *names[] = {"qwen2_vl", "llava", "llava_next", "paligemma", "idefics3", "gemma3", "mistral3", "internvl", "aya_vision"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char d[128];
        snprintf(d, sizeof d, "tests/fixtures/%s", names[i]);
        if (mx_image_processor_load(d, &g_proc[g_nproc])) {
            fprintf(stderr, "fuzz_image: %s (run from the repo root)\n", mx_errmsg());
            exit(1);
        }
        g_nproc++;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_image_%d", (int)getpid());
    char cmd[256];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/fixtures/llava/processor_config.json tests/fixtures/llava/config.json %s/", g_dir, g_dir);
    if (system(cmd)) exit(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 1) return 0;
    if (d[0] < 0xc0) {
        mx_image im;
        if (mx_image_decode_alpha(d + 1, n - 1, 1 << 22, "fuzz", d[0] & 1 ? MX_ALPHA_WHITE : MX_ALPHA_DROP, &im)) {
            check_err();
            return 0;
        }
        if (im.w <= 0 || im.h <= 0 || (int64_t)im.w * im.h > (1 << 22) || !im.px) abort();
        run(&g_proc[(d[0] >> 1) % g_nproc], &im);
        mx_image_free(&im);
        return 0;
    }
    char path[96];
    snprintf(path, sizeof path, "%s/preprocessor_config.json", g_dir);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fwrite(d + 1, 1, n - 1, f);
    fclose(f);
    mx_image_processor p;
    if (mx_image_processor_load(g_dir, &p)) {
        check_err();
        return 0;
    }
    static uint8_t px[37 * 23 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7);
    mx_image im = {37, 23, px};
    run(&p, &im);
    return 0;
}
