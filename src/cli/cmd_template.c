/* mlxcel template: renders a chat template with a JSON context exactly as HF
 * transformers' apply_chat_template(tokenize=False) does, and prints it. */
#include "cli.h"
#include "../base/base.h"
#include "../format/json.h"
#include "../template/template.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *tfile, *cfile;
} tmpl_opts;

static const mx_opt tmpl_tab[] = {
    OPT_MODEL(tmpl_opts, model),
    {NULL, "--template", NULL, OPT_STR, "FILE.jinja", 0, 0, offsetof(tmpl_opts, tfile), "a template file instead of the model's", NULL, 0},
    {NULL, "--context", NULL, OPT_STR, "FILE.json", 0, 0, offsetof(tmpl_opts, cfile),
     "messages and optionally tools, documents, add_generation_prompt, continue_final_message, special tokens, other variables", NULL, 0},
    {0},
};

static int render(const tmpl_opts *o, const char *dir);

static int tmpl_run(void *p) {
    const tmpl_opts *o = p;
    if (!o->model == !o->tfile || !o->cfile) { fprintf(stderr, "mlxcel template: give -m MODEL or --template FILE, and --context FILE\n"); return 2; }
    char *dir = o->model ? cli_model_dir("template", o->model) : NULL;
    if (o->model && !dir) return 1;
    int rc = render(o, dir);
    free(dir);
    return rc;
}

const mx_cmd mx_cmd_template = {
    .name = "template",
    .summary = "render a chat template with a JSON context, as HF transformers does",
    .usage = "(-m MODEL | --template FILE.jinja) --context FILE.json",
    .details = "Prints the rendered prompt exactly as transformers' apply_chat_template(tokenize=False); with -m the template "
               "and special tokens come from the model folder.",
    .opts = tmpl_tab,
    .size = sizeof(tmpl_opts),
    .samp_off = OPT_NO_SAMPLING,
    .run = tmpl_run,
};

static int render(const tmpl_opts *o, const char *dir) {
    const char *tfile = o->tfile, *cfile = o->cfile;
    int rc = 1;
    char *src = NULL;
    size_t len = 0;
    json_t *special = NULL, *ctx = NULL, *full = NULL;
    mx_tmpl *t = NULL;
    mx_buf out = {0};
    ctx = mx_json_load_file(cfile, (size_t)256 << 20);
    if (!ctx) goto done;
    if (!json_is_object(ctx)) { mx_set_err("%s: the context must be a JSON object", cfile); goto done; }
    const char *name;
    if (dir) {
        json_t *tools = json_object_get(ctx, "tools");
        bool with_tools = tools && !json_is_null(tools) && !(json_is_array(tools) && !json_array_size(tools));
        if (mx_chat_template_load(dir, with_tools, &src, &len, &special) != MX_OK) goto done;
        if (!src) {
            mx_set_err("%s: no chat template (chat_template.jinja, chat_template.json or tokenizer_config.json chat_template)", dir);
            goto done;
        }
        name = "chat_template";
    } else {
        if (mx_read_file(tfile, (size_t)16 << 20, &src, &len) != MX_OK) goto done;
        const char *slash = strrchr(tfile, '/');
        name = slash ? slash + 1 : tfile;
    }
    /* special tokens first; the context's own values take precedence */
    full = special ? json_copy(special) : json_object();
    if (!full || json_object_update(full, ctx)) { mx_set_err("out of memory"); goto done; }
    t = mx_tmpl_parse(src, len, name);
    if (!t) goto done;
    if (mx_tmpl_render_chat(t, full, &out) != MX_OK) goto done;
    if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) { mx_set_err("write error"); goto done; }
    if (fflush(stdout)) { mx_set_err("write error"); goto done; }
    rc = 0;
done:
    if (rc) fprintf(stderr, "mlxcel template: %s\n", mx_errmsg());
    mx_buf_free(&out);
    mx_tmpl_free(t);
    json_decref(full);
    json_decref(special);
    json_decref(ctx);
    free(src);
    return rc;
}
