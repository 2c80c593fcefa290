/* mlxcel convert: float checkpoint -> (optionally quantized) checkpoint in
 * the layout mlx_lm.convert writes. */
#include "cli.h"
#include "../format/json.h"
#include "../format/safetensors.h"
#include <dirent.h>
#include <stdlib.h>
#include "../base/base.h"
#include "../base/progress.h"
#include "../base/threadpool.h"
#include "../convert/convert.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *src, *dst;
    mx_convert_opts c;
    bool progress, no_progress;
} conv_opts;

#define C(f) offsetof(conv_opts, c.f)
static const mx_opt conv_tab[] = {
    OPT_MODEL(conv_opts, src),
    {"-o", "--output", NULL, OPT_STR, "OUT", 0, 0, offsetof(conv_opts, dst), "the folder to write", NULL, 0},
    {NULL, "--dtype", NULL, OPT_CHOICE, NULL, 0, 0, C(dtype), "float type of the weights not quantized (default: config torch_dtype)",
     "bf16|f16|f32", 0},
    {"-q", "--quantize", NULL, OPT_FLAG, NULL, 0, 0, C(quantize),
     "quantize every Linear/Embedding weight whose input dimension the group size divides", NULL, 0},
    {NULL, "--q-bits", NULL, OPT_INT, "B", 1, 8, C(bits), "bits per weight (default: affine 4, mxfp4 4, nvfp4 4, mxfp8 8)", NULL, 0},
    {NULL, "--q-group-size", NULL, OPT_INT, "G", 1, 1 << 16, C(group), "weights per scale (default: affine 64, mxfp4 32, nvfp4 16, mxfp8 32)", NULL, 0},
    {NULL, "--q-mode", NULL, OPT_CHOICE, NULL, 0, 0, C(mode), "quantization format (default affine)", "affine|mxfp4|nvfp4|mxfp8", 0},
    OPT_THREADS(conv_opts, c.threads),
    {NULL, "--progress", NULL, OPT_FLAG, NULL, 0, 0, offsetof(conv_opts, progress), "a progress bar even when standard error is not a terminal", NULL, 0},
    {NULL, "--no-progress", NULL, OPT_FLAG, NULL, 0, 0, offsetof(conv_opts, no_progress), "no progress bar", NULL, 0},
    {0},
};
#undef C

/* What was written: bytes, parameters (a packed quantized weight counts
 * its unpacked values) and bits per parameter. */
static void summary(const char *dst, double secs) {
    char *cfgp = mx_path_join(dst, "config.json");
    json_t *cfg = cfgp ? mx_json_load_file(cfgp, 64u << 20) : NULL;
    free(cfgp);
    json_t *q = cfg ? json_object_get(cfg, "quantization") : NULL;
    int bits = json_is_integer(json_object_get(q, "bits")) ? (int)json_integer_value(json_object_get(q, "bits")) : 0;
    uint64_t bytes = 0, params = 0;
    DIR *d = opendir(dst);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 12 || strcmp(de->d_name + l - 12, ".safetensors")) continue;
        char *path = mx_path_join(dst, de->d_name);
        mx_st_file f;
        if (path && !mx_st_open(path, &f)) {
            bytes += f.map_len;
            for (int i = 0; i < f.n_tensors; i++) {
                const mx_tensor *t = &f.tensors[i];
                size_t n = strlen(t->name);
                bool aux = (n > 7 && !strcmp(t->name + n - 7, ".scales")) || (n > 7 && !strcmp(t->name + n - 7, ".biases"));
                if (aux) continue;
                char sc[1024];
                snprintf(sc, sizeof sc, "%.*s.scales", (int)(n > 7 ? n - 7 : n), t->name);
                bool packed = t->dtype == MX_DT_U32 && n > 7 && !strcmp(t->name + n - 7, ".weight") && mx_st_find(&f, sc);
                params += packed && bits ? (uint64_t)t->numel * (32 / (uint64_t)bits) : (uint64_t)t->numel;
            }
            mx_st_close(&f);
        }
        free(path);
    }
    if (d) closedir(d);
    json_decref(cfg);
    char b[32], pc[32];
    cli_fmt_bytes((double)bytes, b, sizeof b);
    cli_fmt_count((double)params, pc, sizeof pc);
    fprintf(stderr, "mlxcel convert: wrote %s: %s, %s parameters, %.2f bits per parameter, in %.1f s\n", dst, b, pc,
            params ? bytes * 8.0 / (double)params : 0.0, secs);
}

static int conv_run(void *p) {
    conv_opts *o = p;
    if (!o->src || !o->dst) { fprintf(stderr, "mlxcel convert: give -m SRC and -o OUT\n"); return 2; }
    if ((o->c.bits || o->c.group || o->c.mode) && !o->c.quantize) {
        fprintf(stderr, "mlxcel convert: --q-bits/--q-group-size/--q-mode need -q\n");
        return 2;
    }
    if (o->no_progress) mx_progress_set_sink(NULL);
    else if (o->progress) cli_progress_force_bar();
    char *dir = cli_model_dir("convert", o->src);
    if (!dir) return 1;
    double t0 = mx_now();
    int rc = mx_convert(dir, o->dst, &o->c);
    free(dir);
    if (rc) { fprintf(stderr, "mlxcel convert: %s\n", mx_errmsg()); return 1; }
    summary(o->dst, mx_now() - t0);
    return 0;
}

const mx_cmd mx_cmd_convert = {
    .name = "convert",
    .summary = "convert a float checkpoint, optionally quantized, to the layout mlx-lm writes",
    .usage = "-m SRC -o OUT [options]",
    .details = "Ends with a summary: size, parameters, bits per parameter and time.",
    .opts = conv_tab,
    .size = sizeof(conv_opts),
    .samp_off = OPT_NO_SAMPLING,
    .run = conv_run,
    .loads_model = true,
};
