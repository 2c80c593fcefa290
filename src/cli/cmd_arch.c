/* mlxcel arch: the model_type -> family matrix compiled into this binary
 * (text families, then the vision-language families). */
#include "cli.h"
#include "../models/family.h"
#include "../vision/vision.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bool json;
} arch_opts;

static const mx_opt arch_tab[] = {
    {NULL, "--json", NULL, OPT_FLAG, NULL, 0, 0, offsetof(arch_opts, json), "a JSON list of {model_type, family, task, status, features}", NULL, 0},
    {0},
};

static int arch_run(void *p) {
    bool json = ((arch_opts *)p)->json;
    json_t *arr = json_array();
    if (!json) printf("%-20s %-20s %-10s %s\n", "model_type", "family", "status", "features");
    for (const mx_family *f = mx_family_list(); f; f = f->next) {
        const char *task = f->task ? f->task : "causal-lm";
        for (int k = -1; k < 0 || (f->aliases && f->aliases[k]); k++) {
            const char *mt = k < 0 ? f->name : f->aliases[k];
            if (json) {
                json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:s}", "model_type", mt, "family", f->name,
                                                     "task", task, "status", "supported", "features", f->features ? f->features : ""));
            } else printf("%-20s %-20s %-10s %s [%s]\n", mt, f->name, "supported", f->features ? f->features : "", task);
        }
    }
    /* vision-language folders: config.json's model_type names the vision
     * family, text_config's the text family above */
    for (const mx_vision_family *f = mx_vision_family_list(); f; f = f->next) {
        const char *feat = f->features ? f->features : "vision tower + projector (src/vision)";
        for (int k = -1; k < 0 || (f->aliases && f->aliases[k]); k++) {
            const char *mt = k < 0 ? f->name : f->aliases[k];
            if (json) {
                json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:s}", "model_type", mt, "family", f->name, "task", "vlm",
                                                     "status", "supported", "features", feat));
            } else printf("%-20s %-20s %-10s %s [vlm]\n", mt, f->name, "supported", feat);
        }
    }
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(1));
        if (s) puts(s);
        free(s);
    }
    json_decref(arr);
    return 0;
}

const mx_cmd mx_cmd_arch = {
    .name = "arch",
    .summary = "list the architectures compiled in",
    .usage = "[--json]",
    .details = "The model_type -> family matrix of this binary.",
    .opts = arch_tab,
    .size = sizeof(arch_opts),
    .samp_off = OPT_NO_SAMPLING,
    .run = arch_run,
};
