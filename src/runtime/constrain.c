#include "constrain.h"
#include "../format/json.h"
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
