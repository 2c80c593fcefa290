/* libFuzzer target: the grammar compiler (GBNF), the JSON Schema converter
 * and the matcher with its token mask. Input: MODE GRAMMAR \0 TEXT.
 * MODE bit 0: GRAMMAR is a JSON Schema (its GBNF must then compile: a
 * converter output that does not is a bug) instead of GBNF. Bit 1: TEXT
 * is fed as bytes (the matcher must stay consistent: complete implies
 * accepting no more only when finished); otherwise TEXT bytes choose tokens
 * of the tiny test vocabulary (tests/server/tinymodel, loaded from the repo
 * root) among those the mask allows, and every step the mask is checked
 * against stepping 16 tokens one by one. Every failure must leave a message. */
#include "grammar/grammar.h"
#include <stdlib.h>
#include <string.h>

static mx_tokenizer *g_tok;
static mx_gvocab *g_voc;
static int g_V;

/* mx_errmsg() reads "unknown error" when nothing set a message */
static bool no_message(void) { return !strcmp(mx_errmsg(), "unknown error"); }

static void load_vocab(void) {
    static bool tried;
    if (tried) return;
    tried = true;
    g_tok = mx_tok_load("tests/server/tinymodel");
    if (!g_tok) return;
    g_V = mx_tok_vocab_size(g_tok);
    int32_t eos = mx_tok_eos(g_tok);
    g_voc = mx_gvocab_new(g_tok, g_V, &eos, 1);
}

static void run_tokens(mx_grammar *g, const uint8_t *t, size_t n) {
    mx_gmatch *m = mx_gmatch_new(g);
    if (!m) { /* a grammar past the matcher's limits (stacks, work) is refused with a message */
        if (no_message()) abort();
        return;
    }
    uint32_t *bits = calloc((size_t)(g_V + 31) / 32, sizeof *bits);
    if (!bits) abort();
    for (size_t i = 0; i < n && i < 48; i++) {
        int allowed = mx_gmatch_mask(m, bits);
        if (allowed < 0 && no_message()) abort();
        if (allowed <= 0) break;
        for (int k = 0; k < 16; k++) {
            int32_t tok = (int32_t)((t[i] * 131u + (unsigned)k * 977u) % (unsigned)g_V);
            bool in = (bits[tok >> 5] >> (tok & 31)) & 1;
            bool can = !mx_gmatch_accept_token(m, tok);
            if (can && mx_gmatch_rollback(m, 1)) abort();
            if (!can && strstr(mx_errmsg(), "too ambiguous")) goto out; /* a limit, not a disagreement */
            if (in != can) abort(); /* the mask disagrees with stepping */
        }
        int pick = t[i] % allowed, seen = 0;
        int32_t tok = -1;
        for (int id = 0; id < g_V && tok < 0; id++)
            if (((bits[id >> 5] >> (id & 31)) & 1) && seen++ == pick) tok = id;
        if (tok < 0 || mx_gmatch_accept_token(m, tok)) abort();
        if (mx_gmatch_finished(m)) break;
    }
out:
    free(bits);
    mx_gmatch_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 14) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    const uint8_t *sep = memchr(data, 0, size);
    size_t glen = sep ? (size_t)(sep - data) : size;
    const uint8_t *text = sep ? sep + 1 : data + size;
    size_t tlen = sep ? size - glen - 1 : 0;
    load_vocab();
    mx_set_err("%s", "");
    const mx_gvocab *v = (mode & 2) ? NULL : g_voc;
    mx_grammar *g;
    if (mode & 1) {
        json_t *j = json_loadb((const char *)data, glen, JSON_DECODE_ANY, NULL);
        if (!j) return 0;
        mx_buf gbnf = {0};
        g = NULL;
        if (mx_schema_to_gbnf(j, &gbnf)) {
            if (no_message()) abort();
        } else {
            /* the converter's output compiles, unless a $ref cycle or a pattern's
             * repeated empty group makes it left-recursive, or it is past a limit */
            g = mx_grammar_from_gbnf(gbnf.data, gbnf.len, v);
            if (!g && !strstr(mx_errmsg(), "left-recursive") && !strstr(mx_errmsg(), "more than")) abort();
        }
        mx_buf_free(&gbnf);
        json_decref(j);
    } else {
        g = mx_grammar_from_gbnf((const char *)data, glen, v);
        if (!g && no_message()) abort();
    }
    if (!g) return 0;
    if (v) run_tokens(g, text, tlen);
    else {
        mx_gmatch *m = mx_gmatch_new(g);
        if (!m && no_message()) abort();
        for (size_t i = 0; m && i < tlen; i++) {
            bool done = mx_gmatch_finished(m);
            if (mx_gmatch_accept_bytes(m, (const char *)text + i, 1)) break;
            if (done) abort(); /* finished, yet a byte was accepted */
        }
        mx_gmatch_free(m);
    }
    mx_grammar_unref(g);
    return 0;
}
