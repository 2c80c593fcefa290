/* Structured output for the generation routes: the request's output
 * constraint (OpenAI response_format json_object / json_schema,
 * llama-server's json_schema and GBNF grammar) compiled by the grammar
 * engine into the mx_grammar the scheduler masks each step with.
 *
 * The vocabulary (a trie of every token's bytes) is built on first use;
 * compiled grammars are kept in a small most-recently-used cache keyed by
 * their canonical text, because a grammar's precomputed masks are what
 * makes it fast and agents send the same schema request after request. */
#include "gen.h"
#include "../base/base.h"
#include "../runtime/constrain.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_N 16

struct mx_srv_grammars {
    mx_gvocab *v;
    struct { char *key; mx_grammar *g; } e[CACHE_N]; /* e[0]: the most recent */
};

/* One server per process; the lock covers the vocabulary and the cache. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

void mx_srv_grammars_free(server *sv) {
    mx_srv_grammars *c = sv->grammars;
    if (!c) return;
    for (int i = 0; i < CACHE_N; i++) { free(c->e[i].key); mx_grammar_unref(c->e[i].g); }
    mx_gvocab_free(c->v);
    free(c);
    sv->grammars = NULL;
}

/* The compiled grammar for key (a kind letter + its canonical text; build
 * makes it on a miss); a new
 * reference, or NULL + mx_errmsg(). Compiling happens under the lock: it is
 * quick next to a generation, and two requests with a new schema should
 * not both compile it. */
typedef mx_grammar *grammar_build_fn(const void *arg, const mx_gvocab *v);
static mx_grammar *grammar_get(server *sv, const char *key, grammar_build_fn *build, const void *arg) {
    pthread_mutex_lock(&g_mu);
    mx_grammar *g = NULL;
    mx_srv_grammars *c = sv->grammars;
    if (!c && (c = sv->grammars = calloc(1, sizeof *c)) == NULL) { mx_set_err("out of memory"); goto out; }
    if (!c->v && !(c->v = mx_textmodel_gvocab(&sv->tm))) goto out;
    int hit = -1;
    for (int i = 0; i < CACHE_N && c->e[i].key; i++)
        if (!strcmp(c->e[i].key, key)) { hit = i; break; }
    if (hit < 0) {
        g = build(arg, c->v);
        char *k = g ? mx_strdup(key) : NULL;
        if (!k) { mx_grammar_unref(g); g = NULL; goto out; }
        free(c->e[CACHE_N - 1].key);
        mx_grammar_unref(c->e[CACHE_N - 1].g);
        hit = CACHE_N - 1;
        c->e[hit].key = k;
        c->e[hit].g = g;
    }
    /* to the front */
    char *k = c->e[hit].key;
    g = c->e[hit].g;
    memmove(&c->e[1], &c->e[0], sizeof c->e[0] * (size_t)hit);
    c->e[0].key = k;
    c->e[0].g = g;
    g = mx_grammar_ref(g);
out:
    pthread_mutex_unlock(&g_mu);
    return g;
}

static mx_grammar *build_schema(const void *arg, const mx_gvocab *v) { return mx_grammar_from_schema((json_t *)arg, v); }
static mx_grammar *build_gbnf(const void *arg, const mx_gvocab *v) {
    const char *t = json_string_value(arg);
    return mx_grammar_from_gbnf(t, strlen(t), v);
}
typedef struct { mx_tool_format f; json_t *fns; } tool_arg;
static mx_grammar *build_tools(const void *arg, const mx_gvocab *v) {
    const tool_arg *a = arg;
    return mx_tool_call_grammar(a->f, a->fns, v);
}

/* response_format -> *schema (borrowed; NULL with *json true: any JSON
 * object) or nothing (type "text"). */
static bool parse_response_format(json_t *rf, json_t **schema, bool *json, char *err, size_t errn) {
    static const char *const rf_keys[] = {"type", "json_schema", NULL};
    static const char *const js_keys[] = {"name", "description", "schema", "strict", NULL};
    if (!json_is_object(rf)) { snprintf(err, errn, "'response_format' must be an object"); return false; }
    if (!mx_only_fields(rf, rf_keys, "response_format", err, errn)) return false;
    json_t *type = json_object_get(rf, "type");
    const char *t = json_string_value(type);
    if (!t) { snprintf(err, errn, "'response_format.type' must be a string"); return false; }
    json_t *js = json_object_get(rf, "json_schema");
    if (strcmp(t, "json_schema") && js) { snprintf(err, errn, "'response_format.json_schema' goes with type \"json_schema\""); return false; }
    if (!strcmp(t, "text")) return true;
    if (!strcmp(t, "json_object")) { *json = true; return true; }
    if (strcmp(t, "json_schema")) {
        snprintf(err, errn, "'response_format.type' \"%.64s\" is not supported (text, json_object and json_schema are)", t);
        return false;
    }
    if (!json_is_object(js)) { snprintf(err, errn, "'response_format.json_schema' must be an object"); return false; }
    if (!mx_only_fields(js, js_keys, "response_format.json_schema", err, errn)) return false;
    json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict"), *s = json_object_get(js, "schema");
    if (!json_is_string(name)) { snprintf(err, errn, "'response_format.json_schema.name' must be a string"); return false; }
    /* strict or not, the output is held to the schema: a constraint is never a hint */
    if (strict && !json_is_boolean(strict) && !json_is_null(strict)) { snprintf(err, errn, "'response_format.json_schema.strict' must be a boolean"); return false; }
    if (s && !json_is_null(s) && !json_is_object(s) && !json_is_boolean(s)) {
        snprintf(err, errn, "'response_format.json_schema.schema' must be an object");
        return false;
    }
    *json = true;
    *schema = json_is_null(s) ? NULL : s;
    return true;
}

bool mx_gen_parse_grammar(server *sv, json_t *req, mx_gen_params *g, char *err, size_t errn) {
    json_t *rf = json_object_get(req, "response_format"), *js = json_object_get(req, "json_schema"), *gr = json_object_get(req, "grammar");
    if (json_is_null(rf)) rf = NULL;
    if (json_is_null(js)) js = NULL;
    if (json_is_null(gr)) gr = NULL;
    if ((rf != NULL) + (js != NULL) + (gr != NULL) > 1) {
        snprintf(err, errn, "give one of 'response_format', 'json_schema' and 'grammar'");
        return false;
    }
    json_t *schema = NULL;
    bool json = false;
    if (rf && !parse_response_format(rf, &schema, &json, err, errn)) return false;
    if (js) {
        if (!json_is_object(js) && !json_is_boolean(js)) { snprintf(err, errn, "'json_schema' must be an object"); return false; }
        schema = js;
        json = true;
    }
    if (gr && (!json_is_string(gr) || !json_string_length(gr) || strlen(json_string_value(gr)) != json_string_length(gr))) {
        snprintf(err, errn, "'grammar' must be a non-empty GBNF string without NUL characters");
        return false;
    }
    if (!json && !gr) return true;
    if (g->starts_in_think) {
        /* the grammar would hold the hidden reasoning to the schema too */
        snprintf(err, errn, "structured output with a prompt that opens a <think> block is not supported: "
                            "turn thinking off (chat_template_kwargs {\"enable_thinking\": false})");
        return false;
    }
    mx_buf key = {0};
    if (gr) {
        mx_buf_puts(&key, "g");
        mx_buf_append(&key, json_string_value(gr), json_string_length(gr));
    } else {
        char *s = schema ? json_dumps(schema, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
        if (schema && !s) { snprintf(err, errn, "out of memory"); return false; }
        mx_buf_puts(&key, "s");
        if (s) mx_buf_puts(&key, s);
        free(s);
    }
    if (!key.data) { snprintf(err, errn, "out of memory"); return false; }
    g->p.grammar = gr ? grammar_get(sv, key.data, build_gbnf, gr) : grammar_get(sv, key.data, build_schema, schema);
    mx_buf_free(&key);
    if (!g->p.grammar) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
    return true;
}

bool mx_gen_tool_grammar(server *sv, json_t *fns, mx_gen_params *g, char *err, size_t errn) {
    if (g->p.grammar) { snprintf(err, errn, "'tool_choice' that requires a call cannot go with 'response_format', 'json_schema' or 'grammar'"); return false; }
    if (g->starts_in_think) {
        snprintf(err, errn, "'tool_choice' that requires a call with a prompt that opens a <think> block is not supported: "
                            "turn thinking off (chat_template_kwargs {\"enable_thinking\": false})");
        return false;
    }
    tool_arg a = {mx_textmodel_tool_format(&sv->tm), fns};
    if (a.f == MX_TOOLFMT_NONE) {
        snprintf(err, errn, "'tool_choice' that requires a call: this model's chat template has no known tool-call format "
                            "(Hermes/Qwen <tool_call>, Mistral [TOOL_CALLS], Llama 3 JSON)");
        return false;
    }
    char *s = json_dumps(fns, JSON_COMPACT | JSON_SORT_KEYS);
    mx_buf key = {0};
    mx_buf_printf(&key, "t%d%s", (int)a.f, s ? s : "");
    free(s);
    if (!key.data) { snprintf(err, errn, "out of memory"); return false; }
    g->p.grammar = grammar_get(sv, key.data, build_tools, &a);
    mx_buf_free(&key);
    if (!g->p.grammar) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
    return true;
}
