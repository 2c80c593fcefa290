/* template chat layer: transformers' apply_chat_template conventions and
 * locating a model directory's chat template and special tokens. */
#include "tmpl_int.h"
#include "../format/json.h"
#include <stdlib.h>
#include <string.h>

/* python str.strip() bounds of s[0..n) */
static void py_strip_bounds(const char *s, size_t n, size_t *a, size_t *b) {
    size_t i = 0, j = n;
    while (i < j) {
        size_t adv;
        uint32_t cp = tmpl_utf8_decode(s + i, j - i, &adv);
        if (!tmpl_py_isspace(cp)) break;
        i += adv;
    }
    while (j > i) {
        size_t k = j - 1;
        while (k > i && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        size_t adv;
        uint32_t cp = tmpl_utf8_decode(s + k, j - k, &adv);
        if (!tmpl_py_isspace(cp)) break;
        j = k;
    }
    *a = i;
    *b = j;
}

static const char *final_text(json_t *messages, size_t *len) {
    size_t n = json_array_size(messages);
    if (!n) return NULL;
    json_t *content = json_object_get(json_array_get(messages, n - 1), "content");
    if (json_is_string(content)) { *len = json_string_length(content); return json_string_value(content); }
    if (json_is_array(content)) {
        for (size_t i = json_array_size(content); i-- > 0;) {
            json_t *t = json_object_get(json_array_get(content, i), "text");
            if (json_is_string(t)) { *len = json_string_length(t); return json_string_value(t); }
        }
    }
    return NULL;
}

int mx_tmpl_render_chat(const mx_tmpl *t, json_t *context, mx_buf *out) { return mx_tmpl_render_chat_ex(t, context, NULL, out); }

int mx_tmpl_render_chat_ex(const mx_tmpl *t, json_t *context, const mx_tmpl_opts *o, mx_buf *out) {
    if (context && !json_is_object(context)) return mx_set_err("chat template context must be a JSON object");
    json_t *ctx = context ? json_copy(context) : json_object();
    if (!ctx) return mx_set_err("out of memory");
    bool cont = json_is_true(json_object_get(ctx, "continue_final_message"));
    json_object_del(ctx, "continue_final_message");
    json_t *agp = json_object_get(ctx, "add_generation_prompt");
    if (cont && json_is_true(agp)) {
        json_decref(ctx);
        return mx_set_err("continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when you want the model to continue the final message, and add_generation_prompt when you want to add a header that will prompt it to generate a new assistant message instead.");
    }
    if (!agp) json_object_set_new(ctx, "add_generation_prompt", json_false());
    const char *opt[] = {"tools", "documents"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(ctx, opt[i]);
        if (!v || (json_is_array(v) && !json_array_size(v)) || (json_is_object(v) && !json_object_size(v)) || json_is_false(v))
            json_object_set_new(ctx, opt[i], json_null());
    }
    mx_buf tmp = {0}, marks = {0};
    mx_tmpl_opts ro = o ? *o : (mx_tmpl_opts){0};
    if (o && o->markup) ro.markup = &marks;
    int rc = mx_tmpl_render_ex(t, ctx, &ro, &tmp);
    if (rc == MX_OK && cont) {
        size_t fl = 0;
        const char *fm = final_text(json_object_get(ctx, "messages"), &fl);
        if (!fm) {
            rc = mx_set_err("continue_final_message is set but we could not find any text to continue in the final message!");
        } else {
            size_t a, b;
            py_strip_bounds(fm, fl, &a, &b);
            size_t sl = b - a, pos = SIZE_MAX;
            if (sl <= tmp.len)
                for (size_t j = tmp.len - sl + 1; j-- > 0;)
                    if (!memcmp(tmp.data + j, fm + a, sl)) { pos = j; break; }
            if (pos == SIZE_MAX) {
                rc = mx_set_err("continue_final_message is set but the final message does not appear in the chat after applying the chat template! This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible.");
            } else {
                size_t lsl = fl - a; /* len(final_message.lstrip()) */
                if (pos + lsl <= tmp.len && lsl == fl && !memcmp(tmp.data + pos, fm, fl)) tmp.len = pos + lsl;
                else tmp.len = pos + sl;
            }
        }
    }
    if (rc == MX_OK && o && o->markup) { /* ranges past the cut go, the rest move to out's offsets */
        size_t *r = (size_t *)(void *)marks.data, nr = marks.len / (2 * sizeof(size_t));
        for (size_t i = 0; rc == MX_OK && i < nr && r[2 * i] < tmp.len; i++) {
            size_t pr[2] = {out->len + r[2 * i], out->len + MX_MIN(r[2 * i + 1], tmp.len)};
            rc = mx_buf_append(o->markup, pr, sizeof pr);
        }
    }
    if (rc == MX_OK) rc = mx_buf_append(out, tmp.data ? tmp.data : "", tmp.len);
    mx_buf_free(&tmp);
    mx_buf_free(&marks);
    json_decref(ctx);
    return rc;
}

static const char *token_str(json_t *v) {
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content"))) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static int pick_template(json_t *ct, bool with_tools, const char *file, char **src, size_t *len) {
    if (json_is_string(ct)) {
        *len = json_string_length(ct);
        *src = mx_strndup(json_string_value(ct), *len);
        return *src ? MX_OK : MX_ERR;
    }
    if (json_is_array(ct)) {
        json_t *def = NULL, *tool = NULL, *e;
        size_t i;
        json_array_foreach(ct, i, e) {
            const char *name = json_string_value(json_object_get(e, "name"));
            json_t *tt = json_object_get(e, "template");
            if (!name || !json_is_string(tt)) continue;
            if (!strcmp(name, "default")) def = tt;
            if (!strcmp(name, "tool_use")) tool = tt;
        }
        json_t *use = with_tools && tool ? tool : def;
        if (!use) return mx_set_err("%s: chat_template has no \"default\" template", file);
        return pick_template(use, with_tools, file, src, len);
    }
    return mx_set_err("%s: chat_template is neither a string nor a list of {name, template}", file);
}

int mx_chat_template_load(const char *dir, bool with_tools, char **src, size_t *len, json_t **special) {
    *src = NULL;
    *len = 0;
    if (special) *special = json_object();
    int rc = MX_OK;
    char *cfg_path = mx_path_join(dir, "tokenizer_config.json");
    json_t *cfg = NULL;
    if (cfg_path && mx_file_exists(cfg_path)) {
        cfg = mx_json_load_file(cfg_path, (size_t)64 << 20);
        if (!cfg) { free(cfg_path); return MX_ERR; }
        if (special && json_is_object(cfg)) {
            static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token", NULL};
            for (int i = 0; keys[i]; i++) {
                const char *s = token_str(json_object_get(cfg, keys[i]));
                if (s) json_object_set_new(*special, keys[i], json_string(s));
            }
            json_t *add = json_object_get(cfg, "additional_special_tokens");
            if (json_is_array(add) && json_array_size(add)) {
                json_t *l = json_array();
                size_t i;
                json_t *e;
                json_array_foreach(add, i, e) {
                    const char *s = token_str(e);
                    if (s) json_array_append_new(l, json_string(s));
                }
                json_object_set_new(*special, "additional_special_tokens", l);
            }
        }
    }
    char *jinja = mx_path_join(dir, "chat_template.jinja");
    char *ctjson = mx_path_join(dir, "chat_template.json");
    if (jinja && mx_file_exists(jinja)) {
        rc = mx_read_file(jinja, (size_t)16 << 20, src, len);
    } else if (ctjson && mx_file_exists(ctjson)) {
        json_t *j = mx_json_load_file(ctjson, (size_t)16 << 20);
        if (!j) rc = MX_ERR;
        else {
            rc = pick_template(json_object_get(j, "chat_template"), with_tools, ctjson, src, len);
            json_decref(j);
        }
    } else if (cfg && json_object_get(cfg, "chat_template") && !json_is_null(json_object_get(cfg, "chat_template"))) {
        rc = pick_template(json_object_get(cfg, "chat_template"), with_tools, cfg_path, src, len);
    }
    json_decref(cfg);
    free(cfg_path);
    free(jinja);
    free(ctjson);
    if (rc != MX_OK && special) { json_decref(*special); *special = NULL; }
    return rc;
}
