/* constrain: constrained decoding for a text model. The model's vocabulary
 * as the grammar engine sees it (built once per model, on first use), a
 * grammar from a JSON Schema or GBNF file, and the per-sequence state the
 * sampling loops use: mask the logits, sample, accept the token. */
#ifndef MX_CONSTRAIN_H
#define MX_CONSTRAIN_H
#include "../grammar/grammar.h"
#include "textmodel.h"

/* The vocabulary with the model's end tokens (config, generation_config and
 * the tokenizer's). NULL + mx_errmsg() when the model has no tokenizer. */
mx_gvocab *mx_textmodel_gvocab(const mx_textmodel *tm);
/* A grammar from a JSON Schema file or a GBNF file (exactly one non-NULL);
 * errors name the file. */
mx_grammar *mx_grammar_load_file(const mx_gvocab *v, const char *schema_file, const char *gbnf_file);

/* How the model's chat template writes a tool call (what outparse reads
 * back): Hermes/Qwen <tool_call>{"name", "arguments"}</tool_call>, Mistral
 * [TOOL_CALLS][{"name", "arguments"}], Mistral v11 [TOOL_CALLS]name[ARGS]{...},
 * Llama 3 {"name", "parameters"}; NONE when the template shows none. */
typedef enum { MX_TOOLFMT_NONE, MX_TOOLFMT_HERMES, MX_TOOLFMT_MISTRAL, MX_TOOLFMT_MISTRAL_ARGS, MX_TOOLFMT_LLAMA3 } mx_tool_format;
mx_tool_format mx_textmodel_tool_format(const mx_textmodel *tm);
/* A grammar for exactly one call, in format f, of one of the functions in
 * fns (a list of {"name", "parameters"}; names [A-Za-z0-9_-], checked by
 * the caller), its arguments valid against the function's parameters
 * schema (absent: an empty object). Errors name the function. */
mx_grammar *mx_tool_call_grammar(mx_tool_format f, json_t *fns, const mx_gvocab *v);

typedef struct {
    mx_gmatch *m;
    uint32_t *bits;
    int vocab;
} mx_constraint;

int mx_constraint_init(mx_constraint *c, mx_grammar *g, int vocab);
void mx_constraint_free(mx_constraint *c);
/* Sets the logits of tokens the grammar forbids to -inf. Returns the number
 * allowed (0: the grammar allows nothing, generation ends) or MX_ERR. */
int mx_constraint_mask(mx_constraint *c, float *logits);
/* Follows the sampled token; MX_ERR when the grammar refuses it. */
int mx_constraint_accept(mx_constraint *c, int32_t tok);
/* Complete and nothing can follow: stop after this token. */
bool mx_constraint_done(const mx_constraint *c);
#endif
