/* grammar: constrained decoding. A GBNF grammar (llama.cpp's format) or a
 * JSON Schema compiles to a byte-level pushdown automaton; a matcher follows
 * one generation through it and, before each token, gives the mask of the
 * tokens that keep the output inside the grammar.
 *
 * The mask is fast because most of it is precomputed over the vocabulary
 * (the XGrammar / llguidance idea): the vocabulary's byte strings form a
 * trie (mx_gvocab, built once per model), and for each grammar position the
 * tokens that it accepts or rejects whatever the enclosing rules are, are
 * found once by walking that trie and cached in the grammar. Each step then
 * ORs the cached sets of the current positions and checks only the few
 * context-dependent tokens (those that run past the end of the position's
 * rule) against the full parser stack.
 *
 * A compiled grammar is immutable apart from that cache (filled under a
 * lock), so one grammar may serve many matchers on several threads; it is
 * reference counted so a server can keep recent ones. */
#ifndef MX_GRAMMAR_H
#define MX_GRAMMAR_H
#include "../base/base.h"
#include "../tokenizer/tokenizer.h"
#include <jansson.h>

typedef struct mx_gvocab mx_gvocab;
typedef struct mx_grammar mx_grammar;
typedef struct mx_gmatch mx_gmatch;

/* The vocabulary as the grammar sees it: each token's bytes in the middle of
 * a text. n_vocab is the model's (logits) width, which may exceed the
 * tokenizer's; special tokens other than the end tokens are never allowed
 * while a grammar is active. NULL + mx_errmsg() on failure. */
mx_gvocab *mx_gvocab_new(const mx_tokenizer *t, int n_vocab, const int32_t *eos, int n_eos);
void mx_gvocab_free(mx_gvocab *v);
int mx_gvocab_size(const mx_gvocab *v);

/* Compiles GBNF text. v may be NULL (byte matching only: tests, the fuzzer);
 * a grammar used for masks must have been compiled with the vocabulary it
 * masks. Errors name the line and the problem ("grammar line 3: undefined
 * rule 'valu'"). */
mx_grammar *mx_grammar_from_gbnf(const char *text, size_t len, const mx_gvocab *v);
/* JSON Schema (the subset in README's "Structured output") to GBNF; an
 * unsupported keyword is an error naming it and where it is
 * ("schema at /properties/a: 'uniqueItems' is not supported"). NULL schema:
 * any JSON object (response_format json_object). */
int mx_schema_to_gbnf(json_t *schema, mx_buf *out);
mx_grammar *mx_grammar_from_schema(json_t *schema, const mx_gvocab *v);
/* Copies GBNF text with every rule name (definitions and references)
 * prefixed, so that several grammars combine into one ("t0-" + "root"). */
int mx_gbnf_prefix(const char *text, size_t len, const char *prefix, mx_buf *out);
mx_grammar *mx_grammar_ref(mx_grammar *g);
void mx_grammar_unref(mx_grammar *g);

/* One generation's position in a grammar. */
mx_gmatch *mx_gmatch_new(mx_grammar *g);
void mx_gmatch_free(mx_gmatch *m);
/* Fills bits (one bit per token, (n_vocab + 31) / 32 words) with the tokens
 * allowed next; the end tokens are allowed once the grammar is complete.
 * Returns the number of allowed tokens (0: a dead end, the caller stops),
 * or MX_ERR (the grammar is too ambiguous to follow: mx_errmsg()). */
int mx_gmatch_mask(mx_gmatch *m, uint32_t *bits);
/* The parser work of the matcher's last mask or accepted token, and the
 * most that one precomputation of the grammar's cache took: each is at most
 * a fixed budget (past it the mask or the token fails with "too ambiguous").
 * For tests. */
uint64_t mx_gmatch_work(const mx_gmatch *m);
uint64_t mx_grammar_precompute_work(mx_grammar *g);
/* Sets the logits of the tokens not in bits to -infinity. */
void mx_gmask_apply(const uint32_t *bits, float *logits, int n);
/* Advances by one token (an end token is accepted only when complete).
 * MX_ERR when the token is not allowed. */
int mx_gmatch_accept_token(mx_gmatch *m, int32_t tok);
/* Undoes the last n accepted tokens (speculative decoding, tests). */
int mx_gmatch_rollback(mx_gmatch *m, int n);
/* Advances by raw bytes (tests, validation). MX_ERR when they leave the grammar. */
int mx_gmatch_accept_bytes(mx_gmatch *m, const char *s, size_t n);
/* The text so far is a complete sentence of the grammar. */
bool mx_gmatch_complete(const mx_gmatch *m);
/* Complete and nothing can follow: generation must end here. */
bool mx_gmatch_finished(const mx_gmatch *m);
#endif
