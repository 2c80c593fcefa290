/* sampling_opts: the one table of sampling parameters, shared by every
 * front end: the CLI's options (generate, chat, serve's request defaults)
 * and the server's request fields read their names, ranges and help from
 * it, so a value one accepts the other accepts too. */
#ifndef MX_SAMPLING_OPTS_H
#define MX_SAMPLING_OPTS_H
#include "sampler.h"
#include <jansson.h>
#include <stddef.h>

typedef enum { MX_SF_FLOAT, MX_SF_INT, MX_SF_SEED } mx_sf_kind;

typedef struct {
    const char *json;      /* request field ("temperature") */
    const char *cli;       /* command-line option ("--temp") */
    const char *cli_alias; /* another spelling ("--temperature") or NULL */
    const char *cli_short; /* a short option ("-s") or NULL */
    mx_sf_kind kind;
    double lo, hi;         /* inclusive range */
    size_t off;            /* offsetof(mx_sampling, field) */
    const char *meta, *help;
} mx_samp_field;

extern const mx_samp_field mx_samp_fields[];
extern const int mx_n_samp_fields;

/* Sets f's field from a number after the range check; on failure the error
 * reads "NAME: VALUE is not ... in [lo, hi]" with the caller's name. */
int mx_samp_set(mx_sampling *s, const mx_samp_field *f, double v, const char *name);
/* The same from text (a CLI value). */
int mx_samp_set_str(mx_sampling *s, const mx_samp_field *f, const char *text, const char *name);
/* Reads every field present (and not null) in a request object; the error
 * names the field ("'top_p' must be a number in [0, 1]"). */
int mx_sampling_from_json(mx_sampling *s, json_t *req);
/* The field's current value as text (help shows the defaults). */
void mx_samp_format(const mx_sampling *s, const mx_samp_field *f, char *out, size_t n);
const mx_samp_field *mx_samp_find_json(const char *json_name);
/* The model folder's sampling defaults: generation_config.json's
 * temperature, top_k, top_p, min_p and repetition_penalty set the fields
 * not given (s->set), and do_sample false sets temperature 0 (greedy) when
 * it was not given. No file: nothing. A bad value is an error naming the
 * file and field. what (may be NULL) gets "temperature 0.6, top_p 0.9"
 * for what was taken ("" when nothing). */
int mx_sampling_gencfg(mx_sampling *s, const char *dir, char *what, size_t whatn);
#endif
