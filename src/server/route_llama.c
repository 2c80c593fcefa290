/* llama-server's own routes: POST /completion and /infill (its request
 * fields and its reply and streaming shape), GET /props and /slots, POST
 * /apply-template. A request is read into the shared generation parameters
 * (gen_params.c) after its llama-server names are translated (n_predict,
 * repeat_penalty, seed -1, logit_bias pairs, n_probs); a field whose
 * feature mlxcel lacks is accepted only at its "off" value and refused
 * otherwise, naming the field. */
#include "gen.h"
#include "../base/base.h"
#include "../base/version.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama-server's seed for "random" (LLAMA_DEFAULT_SEED) */
#define LL_SEED_RANDOM 4294967295.0

/* ---- token lists ---- */

typedef struct {
    int32_t *v;
    int n, cap;
} ids;

/* The last k ids of t (NULL when none). */
static const int32_t *ids_tail(const ids *t, int k) { return k > 0 ? t->v + t->n - k : NULL; }

static bool ids_push(ids *t, const int32_t *v, int n, char *err, size_t errn) {
    if (t->n + n > t->cap) {
        int cap = MX_MAX(t->n + n, t->cap * 2 + 16);
        int32_t *nv = realloc(t->v, sizeof(int32_t) * (size_t)cap);
        if (!nv) { snprintf(err, errn, "out of memory"); return false; }
        t->v = nv;
        t->cap = cap;
    }
    if (n) memcpy(t->v + t->n, v, sizeof(int32_t) * (size_t)n);
    t->n += n;
    return true;
}

/* Text to ids. add_special: the tokenizer's BOS/EOS...; parse_special
 * false reads special-token text as plain text (llama-server's FIM parts). */
static bool encode(server *sv, const char *s, size_t len, bool add_special, bool parse_special, ids *out, char *err, size_t errn) {
    if (mx_textmodel_min_tokens(&sv->tm, len) + out->n >= sv->o.ctx_size) {
        snprintf(err, errn, "the prompt has more tokens than the context size (%d)", sv->o.ctx_size);
        return false;
    }
    int32_t *v = NULL;
    int n = 0;
    mx_tok_opts to = {.add_special = add_special, .split_special = !parse_special, .deadline = mx_now() + sv->o.prompt_budget};
    if (mx_tok_encode_ex(sv->tm.tok, s, len, &to, &v, &n)) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
    bool ok = ids_push(out, v, n, err, errn);
    free(v);
    return ok;
}

/* llama-server's prompt: a string, a list of token ids, or a list mixing
 * strings and ids (add_special applies to a string that comes first). */
static bool tokenize_mixed(server *sv, json_t *p, const char *what, bool add_special, bool parse_special, ids *out, char *err, size_t errn) {
    if (json_is_string(p)) return encode(sv, json_string_value(p), json_string_length(p), add_special, parse_special, out, err, errn);
    if (!json_is_array(p)) {
        snprintf(err, errn, "'%s' must be a string, a list of token ids, or a list of strings and token ids", what);
        return false;
    }
    int vocab = sv->tm.e.model.arch.vocab;
    size_t i;
    json_t *v;
    json_array_foreach(p, i, v) {
        if (json_is_string(v)) {
            if (!encode(sv, json_string_value(v), json_string_length(v), add_special && i == 0, parse_special, out, err, errn)) return false;
        } else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < vocab) {
            int32_t id = (int32_t)json_integer_value(v);
            if (!ids_push(out, &id, 1, err, errn)) return false;
        } else if (json_is_array(v)) {
            snprintf(err, errn, "'%s[%zu]': several prompts in one request are not supported; send one per request", what, i);
            return false;
        } else {
            snprintf(err, errn, "'%s[%zu]' must be a string or a token id in [0, %d)", what, i, vocab);
            return false;
        }
    }
    return true;
}

/* ---- the request ---- */

/* Fields of features mlxcel lacks: accepted at the value that turns them off. */
static const struct {
    const char *name;
    double off;
} g_off_num[] = {
    {"typical_p", 1}, {"mirostat", 0}, {"dry_multiplier", 0}, {"xtc_probability", 0}, {"dynatemp_range", 0},
    {"min_keep", 0}, {"t_max_predict_ms", 0}, {"n_indent", 0}, {"n_keep", 0}, {"id_slot", -1},
};
/* settings of those features, without effect while they are off */
static const char *const g_inert[] = {"mirostat_tau", "mirostat_eta", "dry_base", "dry_allowed_length", "dry_penalty_last_n",
                                      "dry_sequence_breakers", "xtc_threshold", "dynatemp_exponent", NULL};

static bool take_off_fields(json_t *o, char *err, size_t errn) {
    for (size_t i = 0; i < MX_ARRAY_LEN(g_off_num); i++) {
        json_t *v = json_object_get(o, g_off_num[i].name);
        if (!v || json_is_null(v)) { json_object_del(o, g_off_num[i].name); continue; }
        if (!json_is_number(v) || json_number_value(v) != g_off_num[i].off) {
            snprintf(err, errn, "'%s' is not supported (only %g, which turns it off, is accepted)", g_off_num[i].name, g_off_num[i].off);
            return false;
        }
        json_object_del(o, g_off_num[i].name);
    }
    for (int i = 0; g_inert[i]; i++) json_object_del(o, g_inert[i]);
    static const struct {
        const char *name;
        bool off;
    } flags[] = {{"timings_per_token", false}, {"post_sampling_probs", false}, {"cache_prompt", true}};
    for (size_t i = 0; i < MX_ARRAY_LEN(flags); i++) {
        json_t *v = json_object_get(o, flags[i].name);
        if (v && !json_is_null(v) && (!json_is_boolean(v) || json_is_true(v) != flags[i].off)) {
            snprintf(err, errn, "'%s' is not supported (only %s is accepted%s)", flags[i].name, flags[i].off ? "true" : "false",
                     flags[i].off ? ": the slot's cached prompt prefix is always reused" : "");
            return false;
        }
        json_object_del(o, flags[i].name);
    }
    static const char *const empty_lists[] = {"lora", "image_data", NULL};
    for (int i = 0; empty_lists[i]; i++) {
        json_t *v = json_object_get(o, empty_lists[i]);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v))) {
            snprintf(err, errn, "'%s' is not supported", empty_lists[i]);
            return false;
        }
        json_object_del(o, empty_lists[i]);
    }
    return true;
}

/* llama-server's names for the shared fields. Bans (logit_bias [id, false])
 * are kept in *bans, applied after the common parse. */
static bool translate(server *sv, json_t *o, ids *bans, char *err, size_t errn) {
    json_t *v = json_object_get(o, "n_predict");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) == 0 || json_integer_value(v) > (1 << 24)) {
            snprintf(err, errn, "'n_predict' must be -1 (until the end or the context is full) or an integer in [1, %d]", 1 << 24);
            return false;
        }
        if (json_integer_value(v) > 0) json_object_set(o, "max_tokens", v);
        else json_object_del(o, "max_tokens");
    }
    json_object_del(o, "n_predict");
    if ((v = json_object_get(o, "repeat_penalty"))) {
        json_object_set(o, "repetition_penalty", v);
        json_object_del(o, "repeat_penalty");
    }
    /* seed -1 (or its unsigned form): a random seed */
    if ((v = json_object_get(o, "seed")) && json_is_integer(v) && (json_integer_value(v) == -1 || (double)json_integer_value(v) == LL_SEED_RANDOM))
        json_object_del(o, "seed");
    /* temperature <= 0 is greedy, top_k <= 0 is off */
    if ((v = json_object_get(o, "temperature")) && json_is_number(v) && json_number_value(v) < 0) json_object_set_new(o, "temperature", json_real(0));
    if ((v = json_object_get(o, "top_k")) && json_is_integer(v) && json_integer_value(v) < 0) json_object_set_new(o, "top_k", json_integer(0));
    /* logit_bias: [[id or text, bias or false], ...] as well as {"id": bias} */
    v = json_object_get(o, "logit_bias");
    if (json_is_array(v) && json_array_size(v) > 4096) { snprintf(err, errn, "'logit_bias' has more than 4096 entries"); return false; }
    if (json_is_array(v)) {
        json_t *obj = json_object();
        size_t i;
        json_t *pair;
        json_array_foreach(v, i, pair) {
            json_t *k = json_array_get(pair, 0), *b = json_array_get(pair, 1);
            if (!json_is_array(pair) || json_array_size(pair) != 2 || !(json_is_integer(k) || json_is_string(k)) ||
                !(json_is_number(b) || json_is_false(b))) {
                json_decref(obj);
                snprintf(err, errn, "'logit_bias[%zu]' must be [token id or text, bias or false]", i);
                return false;
            }
            ids t = {0};
            bool ok = true;
            if (json_is_string(k)) ok = encode(sv, json_string_value(k), json_string_length(k), false, false, &t, err, errn);
            else if (json_integer_value(k) < 0 || json_integer_value(k) >= sv->tm.e.model.arch.vocab) {
                snprintf(err, errn, "'logit_bias[%zu]': token %lld is not in the vocabulary", i, (long long)json_integer_value(k));
                ok = false;
            } else {
                int32_t id = (int32_t)json_integer_value(k);
                ok = ids_push(&t, &id, 1, err, errn);
            }
            for (int j = 0; ok && j < t.n; j++) {
                char key[16];
                snprintf(key, sizeof key, "%d", t.v[j]);
                if (json_is_false(b)) ok = ids_push(bans, &t.v[j], 1, err, errn);
                else json_object_set(obj, key, b);
            }
            free(t.v);
            if (!ok) { json_decref(obj); return false; }
        }
        json_object_set_new(o, "logit_bias", obj);
    }
    return true;
}

/* The sampling settings in llama-server's names (generation_settings, /props). */
static json_t *settings_json(server *sv, const mx_sampling *s, int n_predict, char **stops, int n_stops, bool stream, bool ignore_eos, int n_probs) {
    json_t *st = json_array();
    for (int i = 0; i < n_stops; i++) json_array_append_new(st, json_string(stops[i]));
    json_int_t seed = s->seed == MX_SEED_RANDOM ? (json_int_t)LL_SEED_RANDOM : (json_int_t)s->seed;
    json_t *j = json_pack("{s:i,s:i,s:I,s:f,s:i,s:f,s:f,s:i,s:f,s:f,s:f,s:o,s:i,s:b,s:b,s:i,s:s}", "n_ctx", sv->o.ctx_size, "n_predict", n_predict,
                          "seed", seed, "temperature", (double)s->temperature, "top_k", s->top_k, "top_p", (double)s->top_p, "min_p",
                          (double)s->min_p, "repeat_last_n", s->penalty_last_n, "repeat_penalty", (double)s->repetition_penalty,
                          "presence_penalty", (double)s->presence_penalty, "frequency_penalty", (double)s->frequency_penalty, "stop", st,
                          "max_tokens", n_predict, "stream", stream, "ignore_eos", ignore_eos, "n_probs", n_probs, "model",
                          sv->name);
    return j;
}

/* A /completion or /infill request (the prompt given as ids in *prompt
 * for /infill, or NULL: read 'prompt') into g. */
static bool ll_parse(server *sv, json_t *req, ids *prompt, mx_gen_params *g, char *err, size_t errn) {
    if (!sv->tm.tok) { snprintf(err, errn, "this model has no tokenizer to turn generated ids into text"); return false; }
    json_t *o = json_copy(req);
    ids p = {0}, bans = {0};
    bool ok = false, return_tokens = false;
    int n_probs = 0;
    if (!o) { snprintf(err, errn, "out of memory"); goto out; }
    if (!take_off_fields(o, err, errn)) goto out;
    if (json_object_get(o, "samplers") || json_object_get(o, "response_fields")) {
        snprintf(err, errn, "'%s' is not supported", json_object_get(o, "samplers") ? "samplers" : "response_fields");
        goto out;
    }
    if (!mx_opt_bool(o, "return_tokens", &return_tokens, err, errn) || !mx_opt_int(o, "n_probs", 0, MX_MAX_TOP_LOGPROBS, &n_probs, err, errn))
        goto out;
    json_object_del(o, "return_tokens");
    json_object_del(o, "n_probs");
    if (!prompt) {
        json_t *pr = json_object_get(o, "prompt");
        if (!pr) { snprintf(err, errn, "'prompt' is required"); goto out; }
        if (!tokenize_mixed(sv, pr, "prompt", true, true, &p, err, errn)) goto out;
        json_object_del(o, "prompt");
        prompt = &p;
    }
    if (!prompt->n) { snprintf(err, errn, "the prompt is empty"); goto out; }
    if (!translate(sv, o, &bans, err, errn)) goto out;
    static const char *const none[] = {NULL};
    if (!mx_gen_check_fields(o, none, err, errn) || !mx_gen_parse_common(sv, o, g, err, errn)) goto out;
    /* ids banned with [id, false]: never produced */
    if (bans.n) {
        int32_t *bi = realloc(g->bias_ids, sizeof(int32_t) * (size_t)(g->p.n_bias + bans.n));
        if (bi) g->bias_ids = bi;
        float *bv = bi ? realloc(g->bias_vals, sizeof(float) * (size_t)(g->p.n_bias + bans.n)) : NULL;
        if (bv) g->bias_vals = bv;
        if (!bi || !bv) { snprintf(err, errn, "out of memory"); goto out; }
        for (int i = 0; i < bans.n; i++) {
            g->bias_ids[g->p.n_bias] = bans.v[i];
            g->bias_vals[g->p.n_bias++] = -1e30f; /* probability 0, and finite: a row of bans only still samples */
        }
        g->p.bias_ids = g->bias_ids;
        g->p.bias_vals = g->bias_vals;
    }
    g->prompt = prompt->v;
    g->p.n_prompt = prompt->n;
    prompt->v = NULL;
    prompt->n = prompt->cap = 0;
    /* every token reaches the format (its id for "tokens"); top
     * logprobs only when asked */
    g->logprobs = true;
    g->p.top_logprobs = n_probs > 0 ? n_probs : -1;
    if (!mx_gen_parse_grammar(sv, o, g, err, errn)) goto out;
    json_t *np = json_object_get(req, "n_predict");
    int n_predict = json_is_integer(np) ? (int)json_integer_value(np) : json_object_get(o, "max_tokens") ? g->p.max_tokens : -1;
    g->route_data = json_pack("{s:b,s:i,s:o}", "return_tokens", return_tokens, "n_probs", n_probs, "settings",
                       settings_json(sv, &g->p.samp, n_predict, g->stops, g->n_stops, g->stream, g->p.ignore_eos, n_probs));
    ok = g->route_data != NULL;
    if (!ok) snprintf(err, errn, "out of memory");
out:
    json_decref(o);
    free(p.v);
    free(bans.v);
    return ok;
}

/* ---- the reply ---- */

static json_t *byte_list(json_t *s) {
    json_t *a = json_array();
    const unsigned char *p = (const unsigned char *)json_string_value(s);
    for (size_t i = 0; i < json_string_length(s); i++) json_array_append_new(a, json_integer(p[i]));
    return a;
}

static json_t *prob_entry(server *sv, int32_t id, float lp) {
    json_t *t = mx_gen_token_text(sv, id);
    json_t *e = json_pack("{s:i,s:O,s:f,s:o}", "id", (int)id, "token", t, "logprob", (double)lp, "bytes", byte_list(t));
    json_decref(t);
    return e;
}

/* x->lp: {"tokens": [ids], "probs": [completion_probabilities]} */
static json_t *ll_token(mx_gen *x, const mx_tok_event *ev) {
    if (!x->lp) x->lp = json_pack("{s:[],s:[]}", "tokens", "probs");
    json_t *rec = json_pack("{s:[]}", "tokens");
    if (!(mx_textmodel_is_eos(&x->sv->tm, ev->token) && !x->g.p.ignore_eos)) {
        json_array_append_new(json_object_get(x->lp, "tokens"), json_integer(ev->token));
        json_array_append_new(json_object_get(rec, "tokens"), json_integer(ev->token));
    }
    if (x->g.p.top_logprobs > 0) {
        json_t *e = prob_entry(x->sv, ev->token, ev->logprob), *top = json_array();
        for (int i = 0; i < ev->n_top; i++) json_array_append_new(top, prob_entry(x->sv, ev->top_ids[i], ev->top_lp[i]));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append(json_object_get(x->lp, "probs"), e);
        json_object_set_new(rec, "completion_probabilities", json_pack("[o]", e));
    }
    return rec;
}

static void ll_delta(mx_gen *x, const char *content, size_t cn, const char *reasoning, size_t rn, json_t *lp) {
    (void)reasoning; (void)rn;
    json_t *ch = json_pack("{s:i,s:s%,s:b,s:i,s:i}", "index", 0, "content", content ? content : "", cn, "stop", 0, "tokens_predicted", x->n_gen,
                           "tokens_evaluated", x->g.p.n_prompt);
    if (lp) json_object_update(ch, lp);
    else json_object_set_new(ch, "tokens", json_array());
    json_decref(lp);
    mx_gen_sse_put(x, ch);
}

/* The whole result: the blocking body, or the last event of a stream (its
 * content and tokens were sent before). */
static json_t *ll_result(mx_gen *x, bool stream) {
    const char *content = x->content.data ? x->content.data : "";
    double t0, t_first, t_end;
    mx_req_times(x->req, &t0, &t_first, &t_end);
    if (!t_end) t_end = mx_now();
    if (!t_first) t_first = t_end;
    int cached = mx_req_cached_tokens(x->req), n_prompt = x->g.p.n_prompt;
    double prompt_ms = (t_first - t0) * 1e3, pred_ms = (t_end - t_first) * 1e3;
    int prompt_n = n_prompt - cached, pred_n = x->n_gen;
    json_t *timings = json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:f}", "cache_n", cached, "prompt_n", prompt_n, "prompt_ms", prompt_ms,
                                "prompt_per_token_ms", prompt_n ? prompt_ms / prompt_n : 0.0, "prompt_per_second",
                                prompt_ms > 0 ? prompt_n * 1e3 / prompt_ms : 0.0, "predicted_n", pred_n, "predicted_ms", pred_ms,
                                "predicted_per_token_ms", pred_n ? pred_ms / pred_n : 0.0, "predicted_per_second",
                                pred_ms > 0 ? pred_n * 1e3 / pred_ms : 0.0);
    const char *stop_type = x->op.stopped ? "word" : !strcmp(x->finish, "length") ? "limit" : "eos";
    const char *word = x->op.stopped && x->op.stop_index >= 0 && x->op.stop_index < x->g.n_stops ? x->g.stops[x->op.stop_index] : "";
    mx_buf pt = {0};
    mx_tok_decode(x->sv->tm.tok, x->g.prompt, x->g.p.n_prompt, false, &pt);
    json_t *ext = x->g.route_data;
    bool want_tokens = json_is_true(json_object_get(ext, "return_tokens"));
    json_t *toks = !stream && want_tokens && x->lp ? json_incref(json_object_get(x->lp, "tokens")) : json_array();
    json_t *r = json_pack("{s:i,s:s%,s:o,s:b,s:s,s:i,s:i,s:O,s:s%,s:b,s:b,s:s,s:s,s:i,s:o}", "index", 0, "content", stream ? "" : content,
                          stream ? 0 : x->content.len, "tokens", toks, "stop", 1, "model", x->sv->name, "tokens_predicted", x->n_gen,
                          "tokens_evaluated", n_prompt, "generation_settings", json_object_get(ext, "settings"), "prompt",
                          pt.data ? pt.data : "", pt.len, "has_new_line", memchr(content, '\n', x->content.len) != NULL, "truncated", 0,
                          "stop_type", stop_type, "stopping_word", word, "tokens_cached", cached, "timings", timings);
    mx_buf_free(&pt);
    if (!r) return json_pack("{s:s}", "content", content); /* a prompt that is not valid UTF-8 text */
    if (!stream && x->g.p.top_logprobs > 0)
        json_object_set(r, "completion_probabilities", x->lp ? json_object_get(x->lp, "probs") : json_array());
    return r;
}

static void ll_final(mx_gen *x) { mx_gen_sse_put(x, ll_result(x, true)); }
static json_t *ll_reply(mx_gen *x) { return ll_result(x, false); }

static void ll_fail(mx_gen *x, const char *type, const char *msg) {
    int code = !strcmp(type, "unavailable_error") ? 503 : 500;
    mx_gen_sse_put(x, json_pack("{s:{s:i,s:s,s:s}}", "error", "code", code, "message", msg, "type", type));
}

static const mx_gen_format ll_format = {"llama", ll_token, ll_delta, ll_final, ll_reply, ll_fail, NULL};

/* ---- routes ---- */

int mx_route_llama_completion(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_gen_params g = {0};
    if (!ll_parse(sv, req, NULL, &g, err, sizeof err)) {
        mx_gen_params_free(&g);
        return mx_srv_bad_request(sv, rq, "%s", err);
    }
    return mx_gen_run(sv, rq, &g, &ll_format);
}

/* A FIM token: the first of names the vocabulary has (llama.cpp's lists). */
static int32_t fim_token(server *sv, const char *const *names) {
    for (int i = 0; names[i]; i++) {
        int32_t id = mx_tok_token_id(sv->tm.tok, names[i], strlen(names[i]));
        if (id >= 0) return id;
    }
    return -1;
}

static const char *const g_fim_pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<|code_prefix|>", NULL};
static const char *const g_fim_suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<|code_suffix|>", NULL};
static const char *const g_fim_mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<|code_middle|>", NULL};
static const char *const g_fim_rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const g_fim_sep[] = {"<|file_sep|>", "<|file_separator|>", "<fim-sep>", "<file_sep>", NULL};

/* llama-server's infill prompt (its repo-level FIM pattern):
 *   [REP]myproject\n [SEP]name\n text ... [SEP]filename\n  (the extra context, when the tokens exist)
 *   [BOS][PRE] prefix prompt [SUF] suffix [MID]
 * with at most 3/4 of a batch (llama-server's default, 2048) of prefix (its
 * end), the rest of a quarter of suffix (its start), and the end of the
 * extra context that leaves a batch and twice n_predict of the context. */
static bool infill_prompt(server *sv, json_t *req, ids *out, char *err, size_t errn) {
    int32_t pre = fim_token(sv, g_fim_pre), suf = fim_token(sv, g_fim_suf), mid = fim_token(sv, g_fim_mid);
    int32_t rep = fim_token(sv, g_fim_rep), sep = fim_token(sv, g_fim_sep);
    if (pre < 0 || suf < 0 || mid < 0) {
        snprintf(err, errn, "/infill needs a model whose tokenizer has fill-in-the-middle tokens (prefix, suffix and middle, such as "
                            "<|fim_prefix|>); this one has none");
        return false;
    }
    json_t *jp = json_object_get(req, "input_prefix"), *js = json_object_get(req, "input_suffix"), *je = json_object_get(req, "input_extra");
    json_t *jprompt = json_object_get(req, "prompt");
    if (!jp || !js) { snprintf(err, errn, "'%s' is required", jp ? "input_suffix" : "input_prefix"); return false; }
    if (je && !json_is_null(je) && !json_is_array(je)) { snprintf(err, errn, "'input_extra' must be a list of {filename, text} objects"); return false; }
    if (jprompt && !json_is_null(jprompt) && !json_is_string(jprompt)) { snprintf(err, errn, "'prompt' must be a string"); return false; }
    ids prefix = {0}, suffix = {0}, extra = {0}, prm = {0};
    bool ok = tokenize_mixed(sv, jp, "input_prefix", false, false, &prefix, err, errn) &&
              tokenize_mixed(sv, js, "input_suffix", false, false, &suffix, err, errn);
    if (ok && json_is_string(jprompt)) ok = encode(sv, json_string_value(jprompt), json_string_length(jprompt), false, true, &prm, err, errn);
    if (ok && rep >= 0) ok = ids_push(&extra, &rep, 1, err, errn) && encode(sv, "myproject\n", 10, false, false, &extra, err, errn);
    size_t i;
    json_t *c;
    json_array_foreach(je, i, c) {
        if (!ok) break;
        json_t *text = json_object_get(c, "text"), *fname = json_object_get(c, "filename");
        if (!json_is_object(c) || (text && !json_is_string(text)) || (fname && !json_is_string(fname)) ||
            !mx_only_fields(c, (const char *const[]){"text", "filename", NULL}, "input_extra[]", err, errn)) {
            if (!err[0]) snprintf(err, errn, "'input_extra[%zu]' must be an object with string 'text' and 'filename'", i);
            ok = false;
            break;
        }
        if (sep >= 0) {
            const char *fn = fname ? json_string_value(fname) : "tmp";
            size_t fl = strlen(fn);
            char *line = malloc(fl + 2);
            if (!line) { snprintf(err, errn, "out of memory"); ok = false; break; }
            memcpy(line, fn, fl);
            line[fl] = '\n';
            ok = ids_push(&extra, &sep, 1, err, errn) && encode(sv, line, fl + 1, false, false, &extra, err, errn);
            free(line);
        } else {
            ok = encode(sv, "\n\n--- snippet ---\n\n", 19, false, false, &extra, err, errn);
        }
        if (ok && text) ok = encode(sv, json_string_value(text), json_string_length(text), false, false, &extra, err, errn);
    }
    if (ok && sep >= 0) ok = ids_push(&extra, &sep, 1, err, errn) && encode(sv, "filename\n", 9, false, false, &extra, err, errn);
    if (ok) {
        int n_batch = 2048, n_predict = -1; /* llama-server's default -b */
        json_t *np = json_object_get(req, "n_predict");
        if (json_is_integer(np)) n_predict = (int)json_integer_value(np);
        int take_pre = MX_MIN(prefix.n, 3 * (n_batch / 4));
        int take_suf = MX_MIN(suffix.n, MX_MAX(0, n_batch / 4 - (2 + prm.n)));
        int take_extra = MX_MIN(MX_MAX(0, sv->o.ctx_size - n_batch - 2 * MX_MAX(n_predict, -1)), extra.n);
        /* BOS when the tokenizer adds one */
        int32_t *b = NULL;
        int nb = 0;
        mx_tok_opts to = {.add_special = true};
        int32_t bos = mx_tok_bos(sv->tm.tok);
        bool add_bos = bos >= 0 && !mx_tok_encode_ex(sv->tm.tok, "", 0, &to, &b, &nb) && nb > 0 && b[0] == bos;
        free(b);
        ok = ids_push(out, ids_tail(&extra, take_extra), take_extra, err, errn) && (!add_bos || ids_push(out, &bos, 1, err, errn)) &&
             ids_push(out, &pre, 1, err, errn) && ids_push(out, ids_tail(&prefix, take_pre), take_pre, err, errn) &&
             ids_push(out, prm.v, prm.n, err, errn) && ids_push(out, &suf, 1, err, errn) && ids_push(out, suffix.v, take_suf, err, errn) &&
             ids_push(out, &mid, 1, err, errn);
    }
    free(prefix.v); free(suffix.v); free(extra.v); free(prm.v);
    return ok;
}

int mx_route_llama_infill(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_gen_params g = {0};
    ids p = {0};
    json_t *rest = json_copy(req);
    if (!rest) return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    static const char *const own[] = {"input_prefix", "input_suffix", "input_extra", "prompt"};
    for (size_t i = 0; i < MX_ARRAY_LEN(own); i++) json_object_del(rest, own[i]);
    bool ok = sv->tm.tok ? infill_prompt(sv, req, &p, err, sizeof err) && ll_parse(sv, rest, &p, &g, err, sizeof err)
                         : (snprintf(err, sizeof err, "this model has no tokenizer"), false);
    json_decref(rest);
    free(p.v);
    if (!ok) {
        mx_gen_params_free(&g);
        return mx_srv_bad_request(sv, rq, "%s", err);
    }
    return mx_gen_run(sv, rq, &g, &ll_format);
}

int mx_route_llama_props(server *sv, mx_srv_req *rq, json_t *req) {
    (void)req;
    mx_sampling s;
    if (sv->o.sampling) s = *sv->o.sampling;
    else {
        mx_sampling_defaults(&s);
        s.temperature = 1.0f;
        s.seed = MX_SEED_RANDOM;
    }
    const char *bos = sv->tm.tok ? mx_tok_special_str(sv->tm.tok, "bos_token") : NULL;
    const char *eos = sv->tm.tok ? mx_tok_special_str(sv->tm.tok, "eos_token") : NULL;
    char build[64];
    snprintf(build, sizeof build, "mlxcel %s", MX_VERSION);
    json_t *r = json_pack("{s:{s:i,s:o},s:i,s:s,s:s,s:{s:b,s:b},s:s,s:s,s:s,s:s}", "default_generation_settings", "n_ctx", sv->o.ctx_size, "params",
                          settings_json(sv, &s, -1, NULL, 0, false, false, 0), "total_slots", sv->o.parallel, "model_path",
                          sv->o.model_dir, "model_alias", sv->name, "modalities", "vision", sv->tm.e.vision != NULL, "audio", 0, "chat_template",
                          sv->tm.tmpl_src ? sv->tm.tmpl_src : "", "bos_token", bos ? bos : "", "eos_token", eos ? eos : "", "build_info", build);
    return r ? mx_srv_json(rq, 200, r) : mx_srv_error(sv, rq, 500, "server_error", "out of memory");
}

int mx_route_llama_slots(server *sv, mx_srv_req *rq, json_t *req) {
    (void)req;
    mx_slot_info info[256];
    int n = MX_MIN(mx_sched_slots(sv->sched, info, 256), 256);
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:i,s:i,s:b,s:b,s:i,s:{s:i}}", "id", i, "n_ctx", sv->o.ctx_size, "speculative", sv->o.lookup_ngram > 0 || sv->o.draft_dir, "is_processing",
                                           info[i].busy, "n_prompt_tokens", info[i].n_prompt, "next_token", "n_decoded", info[i].n_decoded));
    return mx_srv_json(rq, 200, a);
}

int mx_route_llama_apply_template(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_buf text = {0};
    if (!mx_chat_render(sv, req, mx_srv_body_len(rq), &text, err, sizeof err)) {
        mx_buf_free(&text);
        return mx_srv_bad_request(sv, rq, "%s", err);
    }
    json_t *r = json_pack("{s:s%}", "prompt", text.data ? text.data : "", text.len);
    mx_buf_free(&text);
    return r ? mx_srv_json(rq, 200, r) : mx_srv_error(sv, rq, 500, "server_error", "the rendered prompt is not valid UTF-8");
}
