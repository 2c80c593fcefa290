#include "sampling_opts.h"
#include "../base/base.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int mx_samp_set(mx_sampling *s, const mx_samp_field *f, double v, const char *name) {
    char txt[64];
    snprintf(txt, sizeof txt, "%.17g", v);
    if (!(v >= f->lo && v <= f->hi) || (f->kind != MX_SF_FLOAT && v != floor(v))) return range_err(f, name, txt);
    if (f->kind == MX_SF_FLOAT) *(float *)field(s, f) = (float)v;
    else if (f->kind == MX_SF_INT) *(int *)field(s, f) = (int)v;
    else *(uint64_t *)field(s, f) = (uint64_t)v;
    return MX_OK;
}

int mx_samp_set_str(mx_sampling *s, const mx_samp_field *f, const char *text, const char *name) {
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

const mx_samp_field *mx_samp_find_json(const char *json_name) {
    for (int i = 0; i < mx_n_samp_fields; i++)
        if (!strcmp(mx_samp_fields[i].json, json_name)) return &mx_samp_fields[i];
    return NULL;
}
