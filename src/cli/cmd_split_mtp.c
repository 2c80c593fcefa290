/* mlxcel split-mtp: a checkpoint's next-n (multi-token prediction) module as
 * a draft folder of its own (convert/splitmtp.c), for --draft-model. */
#include "cli.h"
#include "../base/base.h"
#include "../convert/convert.h"
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    const char *src, *dst;
    int layer;
} split_opts;

static const mx_opt split_tab[] = {
    OPT_MODEL(split_opts, src),
    {"-o", "--output", NULL, OPT_STR, "OUT", 0, 0, offsetof(split_opts, dst), "the folder to write", NULL, 0},
    {NULL, "--layer", NULL, OPT_INT, "I", 0, 7, offsetof(split_opts, layer), "which next-n module, of num_nextn_predict_layers (default 0)", NULL, 0},
    {0},
};

static int split_run(void *p) {
    split_opts *o = p;
    if (!o->src || !o->dst) { fprintf(stderr, "mlxcel split-mtp: give -m SRC and -o OUT\n"); return 2; }
    char *dir = cli_model_dir("split-mtp", o->src);
    if (!dir) return 1;
    int rc = mx_split_mtp(dir, o->dst, o->layer);
    free(dir);
    if (rc) { fprintf(stderr, "mlxcel split-mtp: %s\n", mx_errmsg()); return 1; }
    fprintf(stderr, "mlxcel split-mtp: wrote %s (use it as --draft-model with generate, chat, bench or serve)\n", o->dst);
    return 0;
}

const mx_cmd mx_cmd_split_mtp = {
    .name = "split-mtp",
    .summary = "write a checkpoint's multi-token-prediction module as a draft model folder",
    .usage = "-m SRC -o OUT [--layer I]",
    .details = "For DeepSeek V3 / R1, GLM-4.5 and GLM-4.7-Flash checkpoints (model.layers.<N>.eh_proj and the rest) and Qwen3-Next / Qwen3.5 "
               "ones (mtp.fc and the rest) that keep their next-n module (mlx-lm's conversions drop it). generate, chat, bench and serve then speculate with it: --draft-model OUT. The tensors are copied as "
               "they are (quantized ones too).",
    .opts = split_tab,
    .size = sizeof(split_opts),
    .samp_off = OPT_NO_SAMPLING,
    .run = split_run,
    .loads_model = true,
};
