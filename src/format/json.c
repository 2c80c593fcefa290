#include "json.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>

json_t *mx_json_parse(const char *data, size_t len, const char *what) {
    json_error_t e;
    json_t *j = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!j) mx_set_err("%s: invalid JSON at line %d column %d: %s", what, e.line, e.column, e.text);
    return j;
}

json_t *mx_json_load_file(const char *path, size_t max_bytes) {
    char *data;
    size_t len;
    if (mx_read_file(path, max_bytes, &data, &len)) return NULL;
    json_t *j = mx_json_parse(data, len, path);
    free(data);
    return j;
}

json_t *mx_cfg_get(const mx_cfg *c, const char *key) {
    json_t *v = NULL;
    if (c->sub) v = json_object_get(c->sub, key);
    if ((!v || json_is_null(v)) && c->root) v = json_object_get(c->root, key);
    if (v && json_is_null(v)) v = NULL;
    return v;
}

bool mx_cfg_has(const mx_cfg *c, const char *key) { return mx_cfg_get(c, key) != NULL; }

int mx_json_num(json_t *v, const char *file, const char *key, double lo, double hi, double *out) {
    if (!json_is_number(v)) return mx_set_err("%s: %s: expected a number", file, key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) return mx_set_err("%s: %s: value %g is outside [%g, %g]", file, key, d, lo, hi);
    *out = d;
    return MX_OK;
}

int mx_cfg_int(const mx_cfg *c, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out) {
    json_t *v = mx_cfg_get(c, key);
    if (!v) { *out = def; return MX_OK; }
    int64_t x;
    if (json_is_integer(v)) x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        x = (int64_t)json_real_value(v);
    else return mx_set_err("%s: %s: expected an integer", c->file, key);
    if (x < lo || x > hi)
        return mx_set_err("%s: %s: value %lld is outside [%lld, %lld]", c->file, key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return MX_OK;
}

int mx_cfg_i32(const mx_cfg *c, const char *key, int def, int lo, int hi, int *out) {
    int64_t x;
    if (mx_cfg_int(c, key, def, lo, hi, &x)) return MX_ERR;
    *out = (int)x;
    return MX_OK;
}

int mx_cfg_float(const mx_cfg *c, const char *key, double def, double lo, double hi, double *out) {
    json_t *v = mx_cfg_get(c, key);
    if (!v) { *out = def; return MX_OK; }
    return mx_json_num(v, c->file, key, lo, hi, out);
}

int mx_cfg_f32(const mx_cfg *c, const char *key, float def, float lo, float hi, float *out) {
    double d;
    if (mx_cfg_float(c, key, def, lo, hi, &d)) return MX_ERR;
    *out = (float)d;
    return MX_OK;
}

int mx_cfg_bool(const mx_cfg *c, const char *key, bool def, bool *out) {
    json_t *v = mx_cfg_get(c, key);
    if (!v) { *out = def; return MX_OK; }
    if (!json_is_boolean(v)) return mx_set_err("%s: %s: expected true or false", c->file, key);
    *out = json_is_true(v);
    return MX_OK;
}

const char *mx_cfg_str(const mx_cfg *c, const char *key, const char *def, int *err) {
    json_t *v = mx_cfg_get(c, key);
    if (!v) return def;
    if (!json_is_string(v)) {
        mx_set_err("%s: %s: expected a string", c->file, key);
        if (err) *err = MX_ERR;
        return def;
    }
    return json_string_value(v);
}
