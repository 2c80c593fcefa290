/* textmodel: a model with its tokenizer and chat template — what the text
 * front ends (generate -p, chat, serve) need to go from messages to token
 * ids and from ids back to text. The tokenizer and template are optional:
 * without them only token-id input works. */
#ifndef MX_TEXTMODEL_H
#define MX_TEXTMODEL_H
#include "engine.h"
#include "../tokenizer/tokenizer.h"
#include "../template/template.h"

typedef struct {
    mx_engine e;
    mx_tokenizer *tok;       /* NULL when the folder has no tokenizer */
    mx_tmpl *tmpl;           /* NULL when there is no chat template */
    mx_tmpl *tmpl_tools;     /* the "tool_use" template when it differs; else NULL */
    json_t *special;         /* bos_token, eos_token, ... strings for the template */
    char *tmpl_src;
    bool reasoning;          /* the template knows <think> blocks */
    char name[256];          /* model id for the API: the folder's base name */
} mx_textmodel;

int mx_textmodel_open(const char *dir, mx_textmodel *tm);
/* The API model id of a folder: its base name without trailing slashes. */
void mx_model_dir_name(const char *dir, char *out, size_t n);
void mx_textmodel_close(mx_textmodel *tm);
bool mx_textmodel_is_eos(const mx_textmodel *tm, int32_t tok);

/* Renders a chat: ctx holds messages (and tools, documents,
 * add_generation_prompt, ...); the special tokens are added unless present. */
int mx_textmodel_render(const mx_textmodel *tm, json_t *ctx, mx_buf *out);
/* Encodes raw text (add_special: BOS/EOS as the tokenizer's post-processor
 * adds them) or a rendered chat (no extra specials, as transformers does). */
int mx_textmodel_encode(const mx_textmodel *tm, const char *text, size_t len, bool add_special, int32_t **ids, int *n);
#endif
