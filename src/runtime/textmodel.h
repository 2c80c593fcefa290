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
    mx_tmpl *tmpl;           /* NULL when there is no chat template: chats then use the
                                built-in "plain" format (mx_textmodel_render) */
    mx_tmpl *tmpl_tools;     /* the "tool_use" template when it differs; else NULL */
    json_t *special;         /* bos_token, eos_token, ... strings for the template */
    char *tmpl_src;
    bool reasoning;          /* the template knows <think> blocks */
    char name[256];          /* model id for the API: the folder's base name */
    mx_tmpl *plain;          /* the fallback format, parsed when tmpl is NULL */
} mx_textmodel;

int mx_textmodel_open(const char *dir, mx_textmodel *tm);
/* Opens with mx_engine_open_local: whole, in this process alone, in a
 * distributed run too (a draft model). */
int mx_textmodel_open_local(const char *dir, mx_textmodel *tm);
/* Replaces the model's chat template with a built-in one (name, see
 * mx_chat_template_named) or a Jinja file; exactly one of the two. */
int mx_textmodel_set_template(mx_textmodel *tm, const char *name, const char *file);
/* The chat format is the fallback (no template in the folder, none given):
 * role-prefixed text that a base model continues; front ends warn once and
 * stop a reply at mx_textmodel_plain_stop. */
static inline bool mx_textmodel_plain_chat(const mx_textmodel *tm) { return !tm->tmpl; }
#define mx_textmodel_plain_stop "\nUser:"
/* One line for the user when the chat format is the fallback. */
void mx_textmodel_warn_plain(const mx_textmodel *tm, const char *who);
/* The API model id of a folder: its base name without trailing slashes. */
void mx_model_dir_name(const char *dir, char *out, size_t n);
void mx_textmodel_close(mx_textmodel *tm);
bool mx_textmodel_is_eos(const mx_textmodel *tm, int32_t tok);

/* Renders a chat: ctx holds messages (and tools, documents,
 * add_generation_prompt, ...); the special tokens are added unless present.
 * Without a template the "plain" format is used. */
int mx_textmodel_render(const mx_textmodel *tm, json_t *ctx, mx_buf *out);
/* Encodes raw text (add_special: BOS/EOS as the tokenizer's post-processor
 * adds them) or a rendered chat (no extra specials, as transformers does). */
int mx_textmodel_encode(const mx_textmodel *tm, const char *text, size_t len, bool add_special, int32_t **ids, int *n);
/* Encodes what mx_textmodel_render gave: a template writes its own specials;
 * the plain fallback is raw text, which gets the tokenizer's (BOS) as a
 * prompt to a base model does. */
int mx_textmodel_encode_chat(const mx_textmodel *tm, const char *text, size_t len, int32_t **ids, int *n);

/* Rendering and encoding a chat in one step, for untrusted requests. */
typedef struct {
    /* Special tokens only where the template wrote them: text in message
     * content (and tools, documents, other variables) is tokenized as text,
     * so "<|im_end|>" in a message cannot close its turn (the server's
     * default; mx_tmpl_opts / mx_tok_opts tell how). */
    bool content_as_text;
    double deadline;     /* mx_now() time past which rendering or encoding fails (0: none) */
    size_t max_memory;   /* the template's memory for this render (0: its limit) */
    int max_tokens;      /* > 0: a prompt that cannot fit is refused before it is tokenized */
} mx_chat_opts;
/* Renders ctx (as mx_textmodel_render) into *text (appended to an empty
 * buffer) and encodes it (as mx_textmodel_encode_chat). */
int mx_textmodel_chat_ids(const mx_textmodel *tm, json_t *ctx, const mx_chat_opts *o, mx_buf *text, int32_t **ids, int *n);
/* Its two steps, for a front end that edits the rendered text between them
 * (image placeholders, vlprompt.h): marks gets the markup ranges (size_t
 * pairs, as mx_tok_opts reads them) when o->content_as_text. */
int mx_textmodel_chat_render(const mx_textmodel *tm, json_t *ctx, const mx_chat_opts *o, mx_buf *text, mx_buf *marks);
int mx_textmodel_chat_encode(const mx_textmodel *tm, const char *text, size_t len, const mx_chat_opts *o, const mx_buf *marks, int32_t **ids,
                             int *n);
/* Fewest tokens len bytes of text can encode to (assuming a normalizer
 * shrinks text at most 4x); 0 without a tokenizer. */
int64_t mx_textmodel_min_tokens(const mx_textmodel *tm, size_t len);
#endif
