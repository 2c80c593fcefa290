#include "args.h"
#include "../base/base.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mx_parse_ids(const char *cmd, const char *opt, const char *s, int32_t **ids, int *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    *ids = malloc(cap * sizeof(int32_t));
    *n = 0;
    if (!*ids) return false;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (errno || end == p || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "mlxcel %s: %s: '%s' is not a comma-separated list of token ids\n", cmd, opt, s);
            free(*ids);
            *ids = NULL;
            return false;
        }
        (*ids)[(*n)++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    return true;
}
