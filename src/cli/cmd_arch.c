/* mlxcel arch: the model_type -> family matrix compiled into this binary. */
#include "cli.h"
#include "../models/family.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_arch(int argc, char **argv) {
    bool json = argc > 1 && !strcmp(argv[1], "--json");
    if (argc > 1 && !json) { fprintf(stderr, "usage: mlxcel arch [--json]\n"); return 2; }
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
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(1));
        if (s) puts(s);
        free(s);
    }
    json_decref(arr);
    return 0;
}
