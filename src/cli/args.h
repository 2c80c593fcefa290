/* args: checked option parsing shared by the subcommands. Each returns
 * false after printing "mlxcel CMD: ..." to stderr when the value is bad. */
#ifndef MX_ARGS_H
#define MX_ARGS_H
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    const char *cmd;
    int argc, i;
    char **argv;
} mx_args;

/* True when argv[i] is one of the given spellings (NULL-terminated). */
bool mx_arg_is(const mx_args *a, const char *s1, const char *s2);
/* The option's value (argv[++i]); NULL after an error when missing. */
const char *mx_arg_val(mx_args *a);
bool mx_arg_int(mx_args *a, long lo, long hi, int *out);
bool mx_arg_float(mx_args *a, double lo, double hi, float *out);
bool mx_arg_u64(mx_args *a, uint64_t *out);
/* Parses "1,2,3" into a new array; false on bad ids. */
bool mx_parse_ids(const char *cmd, const char *opt, const char *s, int32_t **ids, int *n);
int mx_arg_unknown(const mx_args *a);
#endif
