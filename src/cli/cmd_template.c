/* mlxcel template: renders a chat template with a JSON context exactly as HF
 * transformers' apply_chat_template(tokenize=False) does, and prints it. */
#include "cli.h"
#include "../base/base.h"
#include "../format/json.h"
#include "../template/template.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: mlxcel template (-m DIR | --template FILE.jinja) --context FILE.json\n"
                    "  prints the rendered prompt; the context holds messages and optionally tools, documents,\n"
                    "  add_generation_prompt, continue_final_message, special tokens and other variables.\n"
                    "  With -m the template and special tokens come from the model directory.\n");
    return 2;
}

int cmd_template(int argc, char **argv) {
    const char *dir = NULL, *tfile = NULL, *cfile = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(a, "--template") && i + 1 < argc) tfile = argv[++i];
        else if (!strcmp(a, "--context") && i + 1 < argc) cfile = argv[++i];
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        else return usage();
    }
    if ((!dir && !tfile) || (dir && tfile) || !cfile) return usage();
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
