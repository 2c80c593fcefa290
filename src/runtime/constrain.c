#include "constrain.h"
#include "../format/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mx_gvocab *mx_textmodel_gvocab(const mx_textmodel *tm) {
    if (!tm->tok) { mx_set_err("this model has no tokenizer: grammars need one"); return NULL; }
    int32_t eos[64];
    int n = 0;
    for (int i = 0; i < tm->e.model.n_eos && n < 63; i++) eos[n++] = tm->e.model.eos[i];
    if (mx_tok_eos(tm->tok) >= 0) eos[n++] = mx_tok_eos(tm->tok);
    return mx_gvocab_new(tm->tok, tm->e.model.arch.vocab, eos, n);
}

mx_grammar *mx_grammar_load_file(const mx_gvocab *v, const char *schema_file, const char *gbnf_file) {
    const char *path = schema_file ? schema_file : gbnf_file;
    mx_grammar *g = NULL;
    if (schema_file) {
        json_t *s = mx_json_load_file(schema_file, 16u << 20);
        if (!s) return NULL;
        g = mx_grammar_from_schema(s, v);
        json_decref(s);
    } else {
        char *text;
        size_t len;
        if (mx_read_file(gbnf_file, 16u << 20, &text, &len)) return NULL;
        g = mx_grammar_from_gbnf(text, len, v);
        free(text);
    }
    if (!g) mx_err_prefix("%s", path);
    return g;
}

int mx_constraint_init(mx_constraint *c, mx_grammar *g, int vocab) {
    memset(c, 0, sizeof *c);
    c->vocab = vocab;
    c->bits = mx_malloc(((size_t)vocab + 31) / 32 * sizeof *c->bits);
    c->m = c->bits ? mx_gmatch_new(g) : NULL;
    if (!c->m) { mx_constraint_free(c); return MX_ERR; }
    return MX_OK;
}

void mx_constraint_free(mx_constraint *c) {
    mx_gmatch_free(c->m);
    free(c->bits);
    memset(c, 0, sizeof *c);
}

int mx_constraint_mask(mx_constraint *c, float *logits) {
    int n = mx_gmatch_mask(c->m, c->bits);
    if (n > 0) mx_gmask_apply(c->bits, logits, c->vocab);
    return n;
}

int mx_constraint_accept(mx_constraint *c, int32_t tok) { return mx_gmatch_accept_token(c->m, tok); }

bool mx_constraint_done(const mx_constraint *c) { return mx_gmatch_finished(c->m); }

mx_tool_format mx_textmodel_tool_format(const mx_textmodel *tm) {
    const char *t = tm->tmpl_src;
    if (!t) return MX_TOOLFMT_NONE;
    if (strstr(t, "<tool_call>")) return MX_TOOLFMT_HERMES;
    if (strstr(t, "[TOOL_CALLS]")) return strstr(t, "[ARGS]") ? MX_TOOLFMT_MISTRAL_ARGS : MX_TOOLFMT_MISTRAL;
    if (strstr(t, "ipython")) return MX_TOOLFMT_LLAMA3; /* Llama 3.1+: JSON calls, tool results in "ipython" turns */
    return MX_TOOLFMT_NONE;
}

mx_grammar *mx_tool_call_grammar(mx_tool_format f, json_t *fns, const mx_gvocab *v) {
    if (f == MX_TOOLFMT_NONE) { mx_set_err("this model's chat template has no known tool-call format"); return NULL; }
    mx_buf g = {0}, one = {0}, calls = {0};
    mx_grammar *gr = NULL;
    const char *akey = f == MX_TOOLFMT_LLAMA3 ? "parameters" : "arguments";
    size_t i;
    json_t *fn;
    json_array_foreach(fns, i, fn) {
        const char *name = json_string_value(json_object_get(fn, "name"));
        json_t *params = json_object_get(fn, "parameters"), *empty = NULL;
        if (!params || json_is_null(params)) params = empty = json_pack("{s:s,s:{},s:b}", "type", "object", "properties", "additionalProperties", 0);
        one.len = 0;
        int rc = mx_schema_to_gbnf(params, &one);
        json_decref(empty);
        if (rc) { mx_err_prefix("tool '%s' parameters", name); goto out; }
        char pfx[32];
        snprintf(pfx, sizeof pfx, "t%zu-", i);
        if (mx_gbnf_prefix(one.data, one.len, pfx, &g)) goto out;
        /* the call's text around the arguments (names need no escaping) */
        if (f == MX_TOOLFMT_MISTRAL_ARGS) mx_buf_printf(&g, "call%zu ::= \"%s[ARGS]\" t%zu-root\n", i, name, i);
        else mx_buf_printf(&g, "call%zu ::= \"{\\\"name\\\": \\\"%s\\\", \\\"%s\\\": \" t%zu-root \"}\"\n", i, name, akey, i);
        mx_buf_printf(&calls, "%scall%zu", i ? " | " : "", i);
    }
    if (!calls.len) { mx_set_err("no function to call"); goto out; }
    switch (f) {
    case MX_TOOLFMT_HERMES: mx_buf_printf(&g, "root ::= \"<tool_call>\\n\" (%s) \"\\n</tool_call>\"\n", calls.data); break;
    case MX_TOOLFMT_MISTRAL: mx_buf_printf(&g, "root ::= \"[TOOL_CALLS][\" (%s) \"]\"\n", calls.data); break;
    case MX_TOOLFMT_MISTRAL_ARGS: mx_buf_printf(&g, "root ::= \"[TOOL_CALLS]\" (%s)\n", calls.data); break;
    default: mx_buf_printf(&g, "root ::= %s\n", calls.data); break;
    }
    if (!g.data) { mx_set_err("out of memory"); goto out; }
    gr = mx_grammar_from_gbnf(g.data, g.len, v);
    if (!gr) mx_err_prefix("tool-call grammar (a bug: please report the tools)");
out:
    mx_buf_free(&g);
    mx_buf_free(&one);
    mx_buf_free(&calls);
    return gr;
}
