#include "sampling_opts.h"
#include "../base/base.h"
#include "../format/json.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Ranges: OpenAI's for its own fields (penalties in [-2, 2]), Hugging
 * Face's meaning for repetition_penalty (> 0; 1 = off). */
const mx_samp_field mx_samp_fields[] = {
    {"temperature", "--temp", "--temperature", NULL, MX_SF_FLOAT, 0, 100, offsetof(mx_sampling, temperature), "T",
     "sampling temperature; 0 = greedy"},
    {"top_k", "--top-k", NULL, NULL, MX_SF_INT, 0, 1 << 24, offsetof(mx_sampling, top_k), "K", "keep the K most likely tokens; 0 = off"},
    {"top_p", "--top-p", NULL, NULL, MX_SF_FLOAT, 0, 1, offsetof(mx_sampling, top_p), "P", "nucleus: the most likely tokens up to mass P; 1 = off"},
    {"min_p", "--min-p", NULL, NULL, MX_SF_FLOAT, 0, 1, offsetof(mx_sampling, min_p), "P",
     "drop tokens less likely than P times the most likely; 0 = off"},
    {"repetition_penalty", "--repeat-penalty", "--repetition-penalty", NULL, MX_SF_FLOAT, 0.01, 100,
     offsetof(mx_sampling, repetition_penalty), "R", "divide the logits of tokens already seen by R (Hugging Face); 1 = off"},
    {"presence_penalty", "--presence-penalty", NULL, NULL, MX_SF_FLOAT, -2, 2, offsetof(mx_sampling, presence_penalty), "P",
     "subtract P from the logit of every token already seen (OpenAI)"},
    {"frequency_penalty", "--frequency-penalty", NULL, NULL, MX_SF_FLOAT, -2, 2, offsetof(mx_sampling, frequency_penalty), "F",
     "subtract F times its count from the logit of every token seen (OpenAI)"},
    {"repeat_last_n", "--repeat-last-n", NULL, NULL, MX_SF_INT, -1, 1 << 24, offsetof(mx_sampling, penalty_last_n), "N",
     "the penalties look at the last N tokens; -1 = all"},
    {"seed", "--seed", NULL, "-s", MX_SF_SEED, 0, 9223372036854775807.0, offsetof(mx_sampling, seed), "S",
     "random seed: the same seed gives the same tokens"},
};
const int mx_n_samp_fields = (int)MX_ARRAY_LEN(mx_samp_fields);

static void *field(mx_sampling *s, const mx_samp_field *f) { return (char *)s + f->off; }

static int range_err(const mx_samp_field *f, const char *name, const char *v) {
    const char *what = f->kind == MX_SF_FLOAT ? "a number" : "an integer";
    if (f->kind == MX_SF_SEED) return mx_set_err("%s: '%s' is not an integer in [0, 2^63-1]", name, v);
    return mx_set_err("%s: '%s' is not %s in [%.10g, %.10g]", name, v, what, f->lo, f->hi);
}

static void mark(mx_sampling *s, const mx_samp_field *f) { s->set |= 1u << (f - mx_samp_fields); }

int mx_samp_set(mx_sampling *s, const mx_samp_field *f, double v, const char *name) {
    mark(s, f);
    char txt[64];
    snprintf(txt, sizeof txt, "%.17g", v);
    if (!(v >= f->lo && v <= f->hi) || (f->kind != MX_SF_FLOAT && v != floor(v))) return range_err(f, name, txt);
    if (f->kind == MX_SF_FLOAT) *(float *)field(s, f) = (float)v;
    else if (f->kind == MX_SF_INT) *(int *)field(s, f) = (int)v;
    else *(uint64_t *)field(s, f) = (uint64_t)v;
    return MX_OK;
}

int mx_samp_set_str(mx_sampling *s, const mx_samp_field *f, const char *text, const char *name) {
    mark(s, f);
    char *end;
    errno = 0;
    if (f->kind == MX_SF_FLOAT) {
        double x = strtod(text, &end);
        if (errno || end == text || *end) return range_err(f, name, text);
        return mx_samp_set(s, f, x, name);
    }
    /* integers parse exactly (a seed may not fit a double) */
    long long x = strtoll(text, &end, 10);
    if (errno || end == text || *end || (double)x < f->lo || (double)x > f->hi) return range_err(f, name, text);
    if (f->kind == MX_SF_INT) *(int *)field(s, f) = (int)x;
    else *(uint64_t *)field(s, f) = (uint64_t)x;
    return MX_OK;
}

int mx_sampling_from_json(mx_sampling *s, json_t *req) {
    for (int i = 0; i < mx_n_samp_fields; i++) {
        const mx_samp_field *f = &mx_samp_fields[i];
        json_t *v = json_object_get(req, f->json);
        if (!v || json_is_null(v)) continue;
        bool ok = f->kind == MX_SF_FLOAT ? json_is_number(v) : json_is_integer(v);
        double x = ok ? json_number_value(v) : 0;
        if (ok && f->kind != MX_SF_FLOAT) {
            json_int_t k = json_integer_value(v);
            ok = (double)k >= f->lo && (double)k <= f->hi;
            if (ok) mark(s, f);
            if (ok && f->kind == MX_SF_INT) *(int *)field(s, f) = (int)k;
            if (ok && f->kind == MX_SF_SEED) *(uint64_t *)field(s, f) = (uint64_t)k;
            if (ok) continue;
        } else if (ok && !mx_samp_set(s, f, x, f->json)) continue;
        if (f->kind == MX_SF_SEED) return mx_set_err("'%s' must be an integer in [0, 2^63-1]", f->json);
        return mx_set_err("'%s' must be %s in [%.10g, %.10g]", f->json, f->kind == MX_SF_FLOAT ? "a number" : "an integer", f->lo, f->hi);
    }
    return MX_OK;
}

void mx_samp_format(const mx_sampling *s, const mx_samp_field *f, char *out, size_t n) {
    const void *p = (const char *)s + f->off;
    if (f->kind == MX_SF_FLOAT) snprintf(out, n, "%g", (double)*(const float *)p);
    else if (f->kind == MX_SF_INT) snprintf(out, n, "%d", *(const int *)p);
    else if (*(const uint64_t *)p == MX_SEED_RANDOM) snprintf(out, n, "random");
    else snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)p);
}

int mx_sampling_gencfg(mx_sampling *s, const char *dir, char *what, size_t whatn) {
    if (what && whatn) what[0] = 0;
    char *path = mx_path_join(dir, "generation_config.json");
    if (!path) return MX_ERR;
    if (access(path, F_OK)) { free(path); return MX_OK; }
    json_t *g = mx_json_load_file(path, 1u << 20);
    int rc = MX_OK;
    size_t wl = 0;
    if (!json_is_object(g)) {
        rc = g ? mx_set_err("%s: not a JSON object", path) : MX_ERR;
        goto out;
    }
    json_t *ds = json_object_get(g, "do_sample");
    if (ds && !json_is_null(ds) && !json_is_boolean(ds)) { rc = mx_set_err("%s: 'do_sample' must be true or false", path); goto out; }
    static const char *const keys[] = {"temperature", "top_k", "top_p", "min_p", "repetition_penalty"};
    for (size_t k = 0; k < MX_ARRAY_LEN(keys); k++) {
        const mx_samp_field *f = mx_samp_find_json(keys[k]);
        json_t *v = json_object_get(g, keys[k]);
        if (!v || json_is_null(v)) continue;
        bool ok = f->kind == MX_SF_FLOAT ? json_is_number(v) : json_is_integer(v);
        double x = ok ? json_number_value(v) : 0;
        if (!ok || !(x >= f->lo && x <= f->hi)) {
            rc = mx_set_err("%s: '%s' must be %s in [%.10g, %.10g]", path, f->json, f->kind == MX_SF_FLOAT ? "a number" : "an integer", f->lo, f->hi);
            goto out;
        }
        if (s->set & (1u << (f - mx_samp_fields))) continue; /* given: it wins */
        if (f->kind == MX_SF_FLOAT) *(float *)field(s, f) = (float)x;
        else *(int *)field(s, f) = (int)x;
        if (what && wl < whatn) wl += (size_t)snprintf(what + wl, whatn - wl, "%s%s %g", wl ? ", " : "", f->json, x);
    }
    const mx_samp_field *t = mx_samp_find_json("temperature");
    if (json_is_false(ds) && !(s->set & (1u << (t - mx_samp_fields)))) {
        s->temperature = 0;
        if (what && wl < whatn) snprintf(what + wl, whatn - wl, "%sdo_sample false (greedy)", wl ? ", " : "");
    }
out:
    json_decref(g);
    free(path);
    return rc;
}

const mx_samp_field *mx_samp_find_json(const char *json_name) {
    for (int i = 0; i < mx_n_samp_fields; i++)
        if (!strcmp(mx_samp_fields[i].json, json_name)) return &mx_samp_fields[i];
    return NULL;
}
