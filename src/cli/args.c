#include "args.h"
#include "../base/base.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mx_arg_is(const mx_args *a, const char *s1, const char *s2) {
    const char *x = a->argv[a->i];
    return (s1 && !strcmp(x, s1)) || (s2 && !strcmp(x, s2));
}

const char *mx_arg_val(mx_args *a) {
    if (a->i + 1 >= a->argc) {
        fprintf(stderr, "mlxcel %s: option %s needs a value\n", a->cmd, a->argv[a->i]);
        return NULL;
    }
    return a->argv[++a->i];
}

bool mx_arg_int(mx_args *a, long lo, long hi, int *out) {
    const char *opt = a->argv[a->i], *v = mx_arg_val(a);
    if (!v) return false;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "mlxcel %s: %s: '%s' is not an integer in [%ld, %ld]\n", a->cmd, opt, v, lo, hi);
        return false;
    }
    *out = (int)x;
    return true;
}

bool mx_arg_float(mx_args *a, double lo, double hi, float *out) {
    const char *opt = a->argv[a->i], *v = mx_arg_val(a);
    if (!v) return false;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "mlxcel %s: %s: '%s' is not a number in [%g, %g]\n", a->cmd, opt, v, lo, hi);
        return false;
    }
    *out = (float)x;
    return true;
}

bool mx_arg_u64(mx_args *a, uint64_t *out) {
    const char *opt = a->argv[a->i], *v = mx_arg_val(a);
    if (!v) return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        fprintf(stderr, "mlxcel %s: %s: '%s' is not a non-negative integer\n", a->cmd, opt, v);
        return false;
    }
    *out = x;
    return true;
}

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

int mx_arg_unknown(const mx_args *a) {
    fprintf(stderr, "mlxcel %s: unknown option '%s'\n", a->cmd, a->argv[a->i]);
    return 2;
}
