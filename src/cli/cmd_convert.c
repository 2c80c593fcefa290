/* mlxcel convert: float checkpoint -> (optionally quantized) checkpoint in
 * the layout mlx_lm.convert writes. */
#include "cli.h"
#include "args.h"
#include "../base/base.h"
#include "../base/threadpool.h"
#include "../quant/quant.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void convert_usage(void) {
    fprintf(stderr,
            "usage: mlxcel convert -m SRC -o OUT [--dtype bf16|f16|f32] [-q] [--q-bits B] [--q-group-size G]\n"
            "                      [--q-mode affine|mxfp4|nvfp4|mxfp8] [-t THREADS]\n"
            "  Writes OUT in mlx-lm's layout; with -q every Linear/Embedding weight whose input\n"
            "  dimension the group size divides is quantized (defaults: affine 4 bits, group 64;\n"
            "  mxfp4 4/32; nvfp4 4/16; mxfp8 8/32).\n");
}

int cmd_convert(int argc, char **argv) {
    const char *src = NULL, *dst = NULL;
    mx_convert_opts o = {0};
    o.progress = isatty(2);
    mx_args a = {"convert", argc, 1, argv};
    for (; a.i < argc; a.i++) {
        bool ok = true;
        if (mx_arg_is(&a, "-m", "--model")) ok = (src = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-o", "--output")) ok = (dst = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--dtype", NULL)) ok = (o.dtype = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-q", "--quantize")) o.quantize = true;
        else if (mx_arg_is(&a, "--q-bits", NULL)) ok = mx_arg_int(&a, 1, 8, &o.bits);
        else if (mx_arg_is(&a, "--q-group-size", NULL)) ok = mx_arg_int(&a, 1, 1 << 16, &o.group);
        else if (mx_arg_is(&a, "--q-mode", NULL)) ok = (o.mode = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-t", "--threads")) ok = mx_arg_int(&a, 1, 1024, &o.threads);
        else if (mx_arg_is(&a, "--progress", NULL)) o.progress = true;
        else if (mx_arg_is(&a, "--no-progress", NULL)) o.progress = false;
        else if (mx_arg_is(&a, "-h", "--help")) { convert_usage(); return 0; }
        else return mx_arg_unknown(&a);
        if (!ok) return 2;
    }
    if (!src || !dst) { convert_usage(); return 2; }
    if ((o.bits || o.group || o.mode) && !o.quantize) {
        fprintf(stderr, "mlxcel convert: --q-bits/--q-group-size/--q-mode need -q\n");
        return 2;
    }
    if (mx_convert(src, dst, &o)) { fprintf(stderr, "mlxcel convert: %s\n", mx_errmsg()); return 1; }
    return 0;
}
