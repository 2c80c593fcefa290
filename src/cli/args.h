/* args: value parsers the option tables do not cover. */
#ifndef MX_ARGS_H
#define MX_ARGS_H
#include <stdbool.h>
#include <stdint.h>

/* Parses "1,2,3" into a new array; false (after printing
 * "mlxcel CMD: OPT: ...") on bad ids. */
bool mx_parse_ids(const char *cmd, const char *opt, const char *s, int32_t **ids, int *n);
#endif
