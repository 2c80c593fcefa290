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
