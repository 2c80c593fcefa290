#include "textmodel.h"
#include "../base/base.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mx_model_dir_name(const char *dir, char *out, size_t n) {
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(out, n, "%.*s", (int)(len - start), dir + start);
}

static int textmodel_open(const char *dir, mx_textmodel *tm, bool local) {
    memset(tm, 0, sizeof *tm);
    mx_model_dir_name(dir, tm->name, sizeof tm->name);
    if (local ? mx_engine_open_local(dir, &tm->e) : mx_engine_open(dir, &tm->e)) return MX_ERR;
    if (tm->e.model.encoder) { /* an encoder-decoder decodes after its encoder, never from text alone */
        mx_set_err("%s: %s is a speech-to-text model: use mlxcel transcribe (or generate --audio FILE)", dir, tm->e.model_type);
        mx_engine_close(&tm->e);
        return MX_ERR;
    }
    char *tj = mx_path_join(dir, "tokenizer.json"), *tmod = mx_path_join(dir, "tokenizer.model"), *vj = mx_path_join(dir, "vocab.json");
    bool has_tok = (tj && mx_file_exists(tj)) || (tmod && mx_file_exists(tmod)) || (vj && mx_file_exists(vj)); /* vocab.json: + merges.txt */
    free(tj);
    free(tmod);
    free(vj);
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
            tm->special = special;
            const char *plain = mx_chat_template_named("plain");
            tm->plain = mx_tmpl_parse(plain, strlen(plain), "plain");
            if (!tm->plain) { mx_textmodel_close(tm); return MX_ERR; }
        }
    }
    return MX_OK;
}

int mx_textmodel_open(const char *dir, mx_textmodel *tm) { return textmodel_open(dir, tm, false); }
int mx_textmodel_open_local(const char *dir, mx_textmodel *tm) { return textmodel_open(dir, tm, true); }

int mx_textmodel_set_template(mx_textmodel *tm, const char *name, const char *file) {
    char *src = NULL;
    size_t len = 0;
    if (name) {
        const char *s = mx_chat_template_named(name);
        if (!s) {
            mx_buf names = {0};
            const char *n;
            for (size_t i = 0; (n = mx_chat_template_name_at(i, NULL)); i++) {
                if (i) mx_buf_append(&names, ", ", 2);
                mx_buf_append(&names, n, strlen(n));
            }
            mx_set_err("--chat-template: unknown template '%s' (built-in: %.*s)", name, (int)names.len, names.data ? names.data : "");
            mx_buf_free(&names);
            return MX_ERR;
        }
        len = strlen(s);
        if (!(src = mx_strndup(s, len))) return MX_ERR;
    } else if (mx_read_file(file, (size_t)16 << 20, &src, &len) != MX_OK) {
        return MX_ERR;
    }
    mx_tmpl *t = mx_tmpl_parse(src, len, name ? name : file);
    if (!t) { free(src); return MX_ERR; }
    mx_tmpl_free(tm->tmpl);
    mx_tmpl_free(tm->tmpl_tools);
    free(tm->tmpl_src);
    tm->tmpl_tools = NULL;
    if (name && !strcmp(name, "plain")) {
        /* the fallback itself: raw text with the tokenizer's specials, stop at the next turn */
        mx_tmpl_free(tm->plain);
        tm->plain = t;
        tm->tmpl = NULL;
        tm->tmpl_src = NULL;
        tm->reasoning = false;
        free(src);
        return MX_OK;
    }
    tm->tmpl = t;
    tm->tmpl_src = src;
    tm->reasoning = strstr(src, "<think>") != NULL;
    return MX_OK;
}

void mx_textmodel_warn_plain(const mx_textmodel *tm, const char *who) {
    if (mx_textmodel_plain_chat(tm))
        fprintf(stderr, "%s: warning: %s has no chat template; chats use plain \"User: ...\" / \"Assistant:\" text "
                        "(--chat-template NAME or --chat-template-file F to choose one)\n", who, tm->name);
}

void mx_textmodel_close(mx_textmodel *tm) {
    mx_tmpl_free(tm->tmpl);
    mx_tmpl_free(tm->tmpl_tools);
    mx_tmpl_free(tm->plain);
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

static const mx_tmpl *chat_template(const mx_textmodel *tm, json_t *ctx) {
    json_t *tools = json_object_get(ctx, "tools");
    const mx_tmpl *t = (tm->tmpl_tools && json_is_array(tools) && json_array_size(tools)) ? tm->tmpl_tools : tm->tmpl;
    if (!t) t = tm->plain;
    if (!t) mx_set_err("this model folder has no tokenizer, so no chat can be rendered");
    return t;
}

int mx_textmodel_render(const mx_textmodel *tm, json_t *ctx, mx_buf *out) {
    const mx_tmpl *t = chat_template(tm, ctx);
    if (!t) return MX_ERR;
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
    if (!tm->tok) return mx_set_err("this model folder has no tokenizer (tokenizer.json, vocab.json + merges.txt or tokenizer.model)");
    return mx_tok_encode(tm->tok, text, len, add_special, ids, n);
}

int mx_textmodel_encode_chat(const mx_textmodel *tm, const char *text, size_t len, int32_t **ids, int *n) {
    return mx_textmodel_encode(tm, text, len, mx_textmodel_plain_chat(tm), ids, n);
}

int64_t mx_textmodel_min_tokens(const mx_textmodel *tm, size_t len) {
    size_t m = tm->tok ? mx_tok_max_token_bytes(tm->tok) : 0;
    return m ? (int64_t)(len / (4 * m)) : 0;
}

int mx_textmodel_chat_render(const mx_textmodel *tm, json_t *ctx, const mx_chat_opts *o, mx_buf *text, mx_buf *marks) {
    const mx_tmpl *t = chat_template(tm, ctx);
    if (!t) return MX_ERR;
    if (text->len) return mx_set_err("mx_textmodel_chat_render: the text buffer must be empty");
    mx_tmpl_opts to = {.deadline = o->deadline, .max_memory = o->max_memory, .trusted = tm->special, .markup = o->content_as_text ? marks : NULL};
    int rc = mx_tmpl_render_chat_ex(t, ctx, &to, text);
    int64_t least = rc ? 0 : mx_textmodel_min_tokens(tm, text->len);
    if (!rc && o->max_tokens > 0 && least >= o->max_tokens)
        rc = mx_set_err("the prompt has at least %lld tokens (%zu bytes); the context size is %d", (long long)least, text->len, o->max_tokens);
    return rc;
}

int mx_textmodel_chat_encode(const mx_textmodel *tm, const char *text, size_t len, const mx_chat_opts *o, const mx_buf *marks, int32_t **ids,
                             int *n) {
    mx_tok_opts ko = {.add_special = mx_textmodel_plain_chat(tm), .split_special = o->content_as_text, .markup = (const size_t *)(void *)marks->data,
                      .n_markup = marks->len / (2 * sizeof(size_t)), .deadline = o->deadline};
    return mx_tok_encode_ex(tm->tok, text ? text : "", len, &ko, ids, n);
}

int mx_textmodel_chat_ids(const mx_textmodel *tm, json_t *ctx, const mx_chat_opts *o, mx_buf *text, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    mx_buf marks = {0};
    int rc = mx_textmodel_chat_render(tm, ctx, o, text, &marks);
    if (!rc) rc = mx_textmodel_chat_encode(tm, text->data, text->len, o, &marks, ids, n);
    mx_buf_free(&marks);
    return rc;
}
