/* template: a Jinja2 engine for chat templates, rendering byte-exactly as
 * Hugging Face transformers does (jinja2 ImmutableSandboxedEnvironment with
 * trim_blocks, lstrip_blocks and loopcontrols, plus raise_exception,
 * strftime_now and transformers' own tojson).
 *
 * Errors name the template and line: "NAME:LINE: message". Untrusted
 * templates are safe to render: nesting depth, steps, memory and output size
 * are capped (see mx_tmpl_limits). */
#ifndef MX_TEMPLATE_H
#define MX_TEMPLATE_H
#include "../base/base.h"
#include <jansson.h>

typedef struct mx_tmpl mx_tmpl;

typedef struct {
    size_t max_output; /* bytes of rendered text (default 64 MiB) */
    size_t max_memory; /* bytes the renderer may allocate (default 256 MiB) */
    uint64_t max_steps; /* statements + loop iterations + calls (default 20M, a few seconds) */
    int max_depth;     /* nesting of evaluation, incl. macro recursion (default 1000) */
} mx_tmpl_limits;

/* Parses a template. NULL + mx_set_err("NAME:LINE: msg") on a syntax error. */
mx_tmpl *mx_tmpl_parse(const char *src, size_t len, const char *name);
void mx_tmpl_free(mx_tmpl *t);
void mx_tmpl_set_limits(mx_tmpl *t, const mx_tmpl_limits *lim);

/* Renders with the variables of `context` (a JSON object; may be NULL) and
 * appends the text to *out. MX_ERR + mx_set_err("NAME:LINE: msg") on error;
 * for raise_exception(msg) the message is "NAME:LINE: msg" and
 * mx_tmpl_raised() returns msg, else NULL. */
int mx_tmpl_render(const mx_tmpl *t, json_t *context, mx_buf *out);
const char *mx_tmpl_raised(void);

/* Options of one render. Markup tracking tells the template's own text
 * from the data it was given: with `markup` set, the output's bytes that
 * come from the template source (text, string literals) or from a trusted
 * variable (special tokens) — directly or copied through concatenation,
 * joins, formatting, slicing — are reported as markup; bytes of the
 * context's strings and bytes a filter computes are not. A tokenizer then
 * reads special tokens only in markup (mx_tok_opts). */
typedef struct {
    double deadline;   /* mx_now() time past which the render fails (0: none) */
    size_t max_memory; /* bytes the render may allocate (0: the template's limit) */
    json_t *trusted;   /* variables set where the context lacks them; their strings are markup */
    mx_buf *markup;    /* NULL, or gets size_t pairs [start, end): the markup byte ranges, as offsets into out */
} mx_tmpl_opts;
int mx_tmpl_render_ex(const mx_tmpl *t, json_t *context, const mx_tmpl_opts *o, mx_buf *out);

/* transformers' apply_chat_template(tokenize=False) on a context object:
 * messages, tools (an empty list becomes none), documents,
 * add_generation_prompt, continue_final_message (not passed to the template:
 * the output is cut after the final message's content), any other variables. */
int mx_tmpl_render_chat(const mx_tmpl *t, json_t *context, mx_buf *out);
int mx_tmpl_render_chat_ex(const mx_tmpl *t, json_t *context, const mx_tmpl_opts *o, mx_buf *out);

/* Finds a model directory's chat template as transformers does:
 * chat_template.jinja, chat_template.json, else tokenizer_config.json
 * `chat_template` (a string or a list of {name, template}: "tool_use" when
 * with_tools and present, else "default"). *special gets a new object with
 * the string special tokens of tokenizer_config.json (bos_token, ...). A
 * folder without a template is not an error: *src stays NULL. */
int mx_chat_template_load(const char *dir, bool with_tools, char **src, size_t *len, json_t **special);

/* Built-in templates by name ("plain", "chatml", "llama3", ...); NULL when
 * the name is unknown. mx_chat_template_name_at(i) walks the names (NULL
 * past the end), with a one-line description in *about. */
const char *mx_chat_template_named(const char *name);
const char *mx_chat_template_name_at(size_t i, const char **about);
#endif
