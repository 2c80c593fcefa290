/* json: loading JSON files (jansson) and checked reads of config values.
 * Every getter names the file and key in its error and checks the range, so
 * an absurd config value is refused before anything is sized from it. */
#ifndef MX_JSON_H
#define MX_JSON_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Parses a file of at most max_bytes; errors read "PATH: line L: message". */
json_t *mx_json_load_file(const char *path, size_t max_bytes);
json_t *mx_json_parse(const char *data, size_t len, const char *what);

/* A config: the root object and, when present, a nested section (e.g.
 * text_config) whose keys take precedence. `file` is used in messages. */
typedef struct {
    json_t *root;
    json_t *sub; /* may be NULL */
    const char *file;
} mx_cfg;

json_t *mx_cfg_get(const mx_cfg *c, const char *key); /* NULL when absent or null */
bool mx_cfg_has(const mx_cfg *c, const char *key);
/* The key is not in the config at all (a config class default applies), as
 * opposed to present with null. */
bool mx_cfg_absent(const mx_cfg *c, const char *key);
/* Each returns MX_OK and the default when the key is absent/null; MX_ERR with
 * "FILE: KEY: ..." when present but of the wrong type or out of [lo, hi]. */
int mx_cfg_int(const mx_cfg *c, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out);
int mx_cfg_i32(const mx_cfg *c, const char *key, int def, int lo, int hi, int *out);
int mx_cfg_float(const mx_cfg *c, const char *key, double def, double lo, double hi, double *out);
int mx_cfg_f32(const mx_cfg *c, const char *key, float def, float lo, float hi, float *out);
int mx_cfg_bool(const mx_cfg *c, const char *key, bool def, bool *out);
/* Returns a borrowed string or def; MX_ERR through *err when not a string. */
const char *mx_cfg_str(const mx_cfg *c, const char *key, const char *def, int *err);
/* Same checks on a value of an object, named obj_name in messages. */
int mx_json_num(json_t *v, const char *file, const char *key, double lo, double hi, double *out);
#endif
