#include "textmodel.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

void mx_model_dir_name(const char *dir, char *out, size_t n) {
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(out, n, "%.*s", (int)(len - start), dir + start);
}

int mx_textmodel_open(const char *dir, mx_textmodel *tm) {
    memset(tm, 0, sizeof *tm);
    mx_model_dir_name(dir, tm->name, sizeof tm->name);
    if (mx_engine_open(dir, &tm->e)) return MX_ERR;
    char *tj = mx_path_join(dir, "tokenizer.json"), *tmod = mx_path_join(dir, "tokenizer.model");
    bool has_tok = (tj && mx_file_exists(tj)) || (tmod && mx_file_exists(tmod));
    free(tj);
    free(tmod);
    if (has_tok) {
        tm->tok = mx_tok_load(dir);
        if (!tm->tok) { mx_textmodel_close(tm); return MX_ERR; }
        char *src = NULL;
        size_t len = 0;
        json_t *special = NULL;
        if (mx_chat_template_load(dir, false, &src, &len, &special) != MX_OK) {
            json_decref(special);
            mx_textmodel_close(tm);
            return MX_ERR;
        }
        if (src) {
            tm->tmpl = mx_tmpl_parse(src, len, "chat_template");
            if (!tm->tmpl) { free(src); json_decref(special); mx_textmodel_close(tm); return MX_ERR; }
            tm->reasoning = strstr(src, "<think>") != NULL;
            tm->tmpl_src = src;
            tm->special = special;
            char *src2 = NULL;
            size_t len2 = 0;
            json_t *sp2 = NULL;
            if (mx_chat_template_load(dir, true, &src2, &len2, &sp2) == MX_OK && src2 && (len2 != len || memcmp(src, src2, len))) {
                tm->tmpl_tools = mx_tmpl_parse(src2, len2, "chat_template(tool_use)");
                if (!tm->tmpl_tools) { free(src2); json_decref(sp2); mx_textmodel_close(tm); return MX_ERR; }
            }
            free(src2);
            json_decref(sp2);
        } else {
            free(src);
            json_decref(special);
        }
    }
    return MX_OK;
}

void mx_textmodel_close(mx_textmodel *tm) {
    mx_tmpl_free(tm->tmpl);
    mx_tmpl_free(tm->tmpl_tools);
    mx_tok_free(tm->tok);
    json_decref(tm->special);
    free(tm->tmpl_src);
    mx_engine_close(&tm->e);
    memset(tm, 0, sizeof *tm);
}

bool mx_textmodel_is_eos(const mx_textmodel *tm, int32_t tok) {
    if (mx_engine_is_eos(&tm->e, tok)) return true;
    return tm->tok && mx_tok_eos(tm->tok) == tok;
}

int mx_textmodel_render(const mx_textmodel *tm, json_t *ctx, mx_buf *out) {
    if (!tm->tmpl) return mx_set_err("this model has no chat template");
    json_t *tools = json_object_get(ctx, "tools");
    const mx_tmpl *t = (tm->tmpl_tools && json_is_array(tools) && json_array_size(tools)) ? tm->tmpl_tools : tm->tmpl;
    json_t *c = json_copy(ctx);
    if (!c) return mx_set_err("out of memory");
    const char *k;
    json_t *v;
    if (tm->special)
        json_object_foreach(tm->special, k, v) if (!json_object_get(c, k)) json_object_set(c, k, v);
    int rc = mx_tmpl_render_chat(t, c, out);
    json_decref(c);
    return rc;
}

int mx_textmodel_encode(const mx_textmodel *tm, const char *text, size_t len, bool add_special, int32_t **ids, int *n) {
    if (!tm->tok) return mx_set_err("this model folder has no tokenizer (tokenizer.json or tokenizer.model)");
    return mx_tok_encode(tm->tok, text, len, add_special, ids, n);
}
