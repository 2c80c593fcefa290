/* The request fields every generation route shares (OpenAI shape):
 * model, sampling (read through the shared table, runtime/sampling_opts.c),
 * limits, stream, stop strings and logit_bias. */
#include "gen.h"
#include "../base/base.h"
#include "../runtime/sampling_opts.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mx_gen_images_free(mx_gen_params *g) {
    if (g->images) mx_vlprompt_free(g->images);
    free(g->images);
    free(g->tags);
    g->images = NULL;
    g->tags = NULL;
    g->p.lay = NULL;
    g->p.rows = NULL;
    g->p.n_rows = 0;
    g->p.tags = NULL;
}

bool mx_gen_prepare_images(server *sv, mx_gen_params *g, char *err, size_t errn) {
    mx_vlprompt *vp = g->images;
    int n = g->p.n_prompt;
    if (mx_vlprompt_prepare(vp, &sv->tm.e, g->prompt, n, sv->vpool) || !(g->tags = mx_malloc(sizeof(uint64_t) * (size_t)(n ? n : 1)))) {
        snprintf(err, errn, "%s", mx_errmsg());
        return false;
    }
    mx_vlprompt_tags(vp, g->tags);
    g->p.lay = &vp->lay;
    g->p.rows = vp->rows;
    g->p.n_rows = vp->n_rows;
    g->p.tags = g->tags;
    return true;
}

void mx_gen_params_free(mx_gen_params *g) {
    mx_gen_images_free(g);
    free(g->prompt);
    free(g->bias_ids);
    free(g->bias_vals);
    for (int i = 0; i < g->n_stops; i++) free(g->stops[i]);
    free(g->stops);
    mx_grammar_unref(g->p.grammar);
    json_decref(g->route_data);
    memset(g, 0, sizeof *g);
}

int mx_gen_add_stop(mx_gen_params *g, const char *s) {
    char **st = realloc(g->stops, sizeof(char *) * (size_t)(g->n_stops + 1));
    if (!st) return mx_set_err("out of memory");
    g->stops = st;
    if (!(g->stops[g->n_stops] = mx_strdup(s))) return MX_ERR;
    g->n_stops++;
    return MX_OK;
}

bool mx_opt_int(json_t *req, const char *key, long lo, long hi, int *out, char *err, size_t errn) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, errn, "'%s' must be an integer in [%ld, %ld]", key, lo, hi);
        return false;
    }
    *out = (int)json_integer_value(v);
    return true;
}

bool mx_opt_bool(json_t *req, const char *key, bool *out, char *err, size_t errn) {
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) { snprintf(err, errn, "'%s' must be a boolean", key); return false; }
    *out = json_is_true(v);
    return true;
}

bool mx_only_fields(json_t *o, const char *const *ok, const char *what, char *err, size_t errn) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        bool known = false;
        for (int i = 0; ok[i] && !known; i++) known = !strcmp(k, ok[i]);
        if (!known) { snprintf(err, errn, "'%s%s%.64s' is not supported", what, *what ? "." : "", k); return false; }
    }
    return true;
}

json_t *mx_text_parts(json_t *c, const char *const *types, const char *what, char *err, size_t errn) {
    if (json_is_string(c)) return json_incref(c);
    if (!json_is_array(c)) { snprintf(err, errn, "'%s' must be a string or a list of %s parts", what, types[0]); return NULL; }
    mx_buf t = {0};
    size_t i;
    json_t *p;
    json_array_foreach(c, i, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *text = json_object_get(p, "text");
        bool ok = false;
        for (int k = 0; type && types[k] && !ok; k++) ok = !strcmp(type, types[k]);
        if (!ok || !json_is_string(text)) {
            mx_buf_free(&t);
            snprintf(err, errn, "'%s[%zu]': %s parts are not supported (%s%s%s are, with a string text)", what, i, type ? type : "untyped", types[0],
                     types[1] ? " and " : "", types[1] ? types[1] : "");
            return NULL;
        }
        mx_buf_append(&t, json_string_value(text), json_string_length(text));
    }
    json_t *s = json_stringn(t.data ? t.data : "", t.len);
    mx_buf_free(&t);
    return s;
}

bool mx_gen_check_fields(json_t *req, const char *const *extra, char *err, size_t errn) {
    /* what every generation route reads (the sampling fields come from their table) */
    static const char *const common[] = {"model", "max_tokens", "max_completion_tokens", "n", "stream", "stream_options", "ignore_eos", "stop",
                                         "logit_bias", "response_format", "json_schema", "grammar", "user",
                                         "speculative.n_max", "speculative.n_min", NULL};
    const char *k;
    json_t *v;
    json_object_foreach(req, k, v) {
        bool ok = mx_samp_find_json(k) != NULL;
        for (int i = 0; !ok && common[i]; i++) ok = !strcmp(k, common[i]);
        for (int i = 0; !ok && extra[i]; i++) ok = !strcmp(k, extra[i]);
        if (!ok) { snprintf(err, errn, "'%.64s' is not supported", k); return false; }
    }
    json_t *u = json_object_get(req, "user"); /* the client's end-user id: for its records */
    if (u && !json_is_null(u) && !json_is_string(u)) { snprintf(err, errn, "'user' must be a string"); return false; }
    return true;
}

bool mx_gen_check_cache_fields(json_t *req, char *err, size_t errn) {
    /* OpenAI's prompt-cache hints: the prompt cache here is keyed by the prompt's tokens themselves (one
     * server, nothing to route), so a key changes nothing; entries stay in memory until --cache-ram or
     * --kv-memory needs their room, which is "in_memory" and not a promise of 24 hours */
    json_t *k = json_object_get(req, "prompt_cache_key"), *r = json_object_get(req, "prompt_cache_retention");
    if (k && !json_is_null(k) && !json_is_string(k)) { snprintf(err, errn, "'prompt_cache_key' must be a string"); return false; }
    if (r && !json_is_null(r) && !(json_is_string(r) && !strcmp(json_string_value(r), "in_memory"))) {
        snprintf(err, errn, "'prompt_cache_retention' must be \"in_memory\": cached prompts stay in memory until the server needs the room (--cache-ram), with no fixed retention");
        return false;
    }
    return true;
}

bool mx_gen_parse_common(server *sv, json_t *req, mx_gen_params *g, char *err, size_t errn) {
    g->p.samp = sv->samp; /* the server's options, then generation_config.json (mx_srv_load) */
    g->p.top_logprobs = -1;
    int max_tokens = -1, n = 1;
    json_t *model = json_object_get(req, "model");
    if (model && !json_is_null(model)) {
        /* one model is served: any name means it (agents send their own) */
        if (!json_is_string(model)) { snprintf(err, errn, "'model' must be a string"); return false; }
    }
    if (!mx_opt_int(req, "max_tokens", 1, 1 << 24, &max_tokens, err, errn) ||
        !mx_opt_int(req, "max_completion_tokens", 1, 1 << 24, &max_tokens, err, errn) ||
        !mx_opt_int(req, "n", 1, 1 << 20, &n, err, errn) ||
        !mx_opt_bool(req, "stream", &g->stream, err, errn) || !mx_opt_bool(req, "ignore_eos", &g->p.ignore_eos, err, errn))
        return false;
    /* the sampling fields: the table the CLI's options come from, with the same ranges */
    if (mx_sampling_from_json(&g->p.samp, req)) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
    if (g->p.samp.seed == MX_SEED_RANDOM) g->p.samp.seed = (uint64_t)time(NULL) ^ (uint64_t)rand();
    if (n > sv->o.parallel || n > MX_GEN_MAX_N) {
        snprintf(err, errn, "'n' must be at most %d (the server's slots, --parallel %d)", MX_MIN(sv->o.parallel, MX_GEN_MAX_N), sv->o.parallel);
        return false;
    }
    g->n = n;
    g->p.max_tokens = max_tokens > 0 ? max_tokens : sv->o.ctx_size;
    /* llama-server's per-request speculation: n_max 0 turns it off */
    int sn_max = -1, sn_min = 0;
    if (!mx_opt_int(req, "speculative.n_max", 0, 64, &sn_max, err, errn) || !mx_opt_int(req, "speculative.n_min", 0, 64, &sn_min, err, errn)) return false;
    if ((sn_max > 0 || sn_min > 0) && !sv->o.lookup_ngram && !sv->o.draft_dir) {
        snprintf(err, errn, "'speculative.%s': this server does not speculate (start it with --lookup-ngram N or --draft-model DIR)", sn_max > 0 ? "n_max" : "n_min");
        return false;
    }
    g->p.spec_max = sn_max < 0 ? 0 : sn_max == 0 ? -1 : sn_max;
    g->p.spec_min = sn_min;
    json_t *so = json_object_get(req, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) { snprintf(err, errn, "'stream_options' must be an object"); return false; }
        if (!mx_opt_bool(so, "include_usage", &g->include_usage, err, errn)) return false;
    }
    json_t *stop = json_object_get(req, "stop");
    if (stop && !json_is_null(stop)) {
        size_t cnt = json_is_string(stop) ? 1 : json_is_array(stop) ? json_array_size(stop) : 0;
        if ((!json_is_string(stop) && !json_is_array(stop)) || cnt > 16) { snprintf(err, errn, "'stop' must be a string or a list of at most 16 strings"); return false; }
        for (size_t i = 0; i < cnt; i++) {
            json_t *s = json_is_string(stop) ? stop : json_array_get(stop, i);
            if (!json_is_string(s) || !json_string_length(s)) { snprintf(err, errn, "'stop' entries must be non-empty strings"); return false; }
            if (mx_gen_add_stop(g, json_string_value(s))) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
        }
    }
    json_t *lb = json_object_get(req, "logit_bias");
    if (lb && !json_is_null(lb)) {
        if (!json_is_object(lb) || json_object_size(lb) > 4096) { snprintf(err, errn, "'logit_bias' must be an object of token id -> bias"); return false; }
        size_t cnt = json_object_size(lb);
        g->bias_ids = calloc(cnt + 1, sizeof(int32_t));
        g->bias_vals = calloc(cnt + 1, sizeof(float));
        if (!g->bias_ids || !g->bias_vals) { snprintf(err, errn, "out of memory"); return false; }
        const char *k;
        json_t *v;
        json_object_foreach(lb, k, v) {
            char *end;
            long id = strtol(k, &end, 10);
            if (*end || end == k || id < 0 || id >= sv->tm.e.model.arch.vocab || !json_is_number(v) ||
                json_number_value(v) < -100 || json_number_value(v) > 100) {
                snprintf(err, errn, "'logit_bias': '%s' must be a token id with a bias in [-100, 100]", k);
                return false;
            }
            g->bias_ids[g->p.n_bias] = (int32_t)id;
            g->bias_vals[g->p.n_bias++] = (float)json_number_value(v);
        }
        g->p.bias_ids = g->bias_ids;
        g->p.bias_vals = g->bias_vals;
    }
    return true;
}
