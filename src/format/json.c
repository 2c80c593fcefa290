#include "json.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Python's json module writes the non-standard tokens Infinity, -Infinity
 * and NaN (Mamba2 configs: "time_step_limit": [0.0, Infinity]). A copy with
 * them outside strings replaced by +-DBL_MAX and null; NULL when there are
 * none. */
static char *py_nonfinite(const char *d, size_t len, size_t *out_len) {
    static const struct { const char *tok, *rep; } R[] = {
        {"-Infinity", "-1.7976931348623157e308"}, {"Infinity", "1.7976931348623157e308"}, {"NaN", "null"}};
    char *o = malloc(3 * len + 1);
    if (!o) return NULL;
    size_t n = 0;
    bool in_str = false, any = false;
    for (size_t i = 0; i < len;) {
        char ch = d[i];
        if (in_str) {
            o[n++] = ch;
            i++;
            if (ch == '\\' && i < len) o[n++] = d[i++];
            else if (ch == '"') in_str = false;
            continue;
        }
        if (ch == '"') in_str = true;
        size_t k = 0;
        for (; k < MX_ARRAY_LEN(R); k++) {
            size_t tl = strlen(R[k].tok);
            if (i + tl <= len && !memcmp(d + i, R[k].tok, tl)) {
                size_t rl = strlen(R[k].rep);
                memcpy(o + n, R[k].rep, rl);
                n += rl;
                i += tl;
                any = true;
                break;
            }
        }
        if (k == MX_ARRAY_LEN(R)) o[n++] = d[i++];
    }
    if (!any) { free(o); return NULL; }
    *out_len = n;
    return o;
}

json_t *mx_json_parse(const char *data, size_t len, const char *what) {
    json_error_t e;
    json_t *j = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!j) {
        size_t n2 = 0;
        char *d2 = py_nonfinite(data, len, &n2);
        if (d2) {
            json_error_t e2;
            j = json_loadb(d2, n2, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e2);
            free(d2);
        }
    }
    /* Real tokenizer_config.json files hold model_max_length = 1e30 as an
     * integer literal, past jansson's int64: read such a document's integers
     * as reals (the checked getters accept integral reals). */
    if (!j && strstr(e.text, "too big")) j = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
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

bool mx_cfg_absent(const mx_cfg *c, const char *key) {
    return !(c->sub && json_object_get(c->sub, key)) && !(c->root && json_object_get(c->root, key));
}

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
