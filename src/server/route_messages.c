/* POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages
 * API. A request is translated into the OpenAI chat request it means
 * (system message, text and tool_result blocks as messages, image blocks
 * as image_url parts with a data URL, text documents as text, tool_use
 * blocks as tool_calls, tools with input_schema as functions, tool_choice
 * any/tool as required/named) and parsed by mx_chat_parse, so templates,
 * limits and constraints are the chat route's; the reply is shaped here:
 * a message with text / thinking / tool_use blocks, or its event stream
 * (message_start, content_block_start/delta/stop, ping, message_delta,
 * message_stop). Fields not implemented get a 400 naming them. */
#include "gen.h"
#include "../base/base.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const text_only[] = {"text", NULL};

/* An image block -> an OpenAI image_url part (a data URL) appended to
 * parts. Anthropic's media types are jpeg, png, gif and webp; the decoder
 * reads the three others. URL and file sources are refused: the server
 * does not fetch for a client and has no file store. */
static bool add_image(json_t *b, const char *what, json_t *parts, char *err, size_t errn) {
    static const char *const keys[] = {"type", "source", "cache_control", NULL};
    static const char *const src_keys[] = {"type", "media_type", "data", NULL};
    if (!mx_only_fields(b, keys, what, err, errn)) return false;
    json_t *src = json_object_get(b, "source");
    const char *st = json_string_value(json_object_get(src, "type"));
    if (!json_is_object(src) || !st) { snprintf(err, errn, "'%s.source' must be an object with a type", what); return false; }
    if (!strcmp(st, "url")) { snprintf(err, errn, "'%s.source': image URLs are not fetched by this server; send the image as {\"type\": \"base64\", ...}", what); return false; }
    if (strcmp(st, "base64")) { snprintf(err, errn, "'%s.source.type' \"%.32s\" is not supported (only \"base64\")", what, st); return false; }
    char sw[96];
    snprintf(sw, sizeof sw, "%s.source", what);
    if (!mx_only_fields(src, src_keys, sw, err, errn)) return false;
    const char *mt = json_string_value(json_object_get(src, "media_type"));
    json_t *data = json_object_get(src, "data");
    if (!mt || (strcmp(mt, "image/jpeg") && strcmp(mt, "image/png") && strcmp(mt, "image/gif") && strcmp(mt, "image/webp"))) {
        snprintf(err, errn, "'%s.source.media_type' must be image/jpeg, image/png, image/gif or image/webp", what);
        return false;
    }
    if (!strcmp(mt, "image/gif")) { snprintf(err, errn, "'%s': GIF images are not supported (PNG, JPEG and WebP are)", what); return false; }
    if (!json_is_string(data) || !json_string_length(data)) { snprintf(err, errn, "'%s.source.data' must be a non-empty base64 string", what); return false; }
    /* the data's signature must be the media type's (as Anthropic checks) */
    uint8_t head[12] = {0};
    const char *d = json_string_value(data);
    size_t nb = 0;
    for (size_t q = 0; q + 4 <= json_string_length(data) && nb < sizeof head; q += 4) {
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", *f = d[q + k] ? strchr(a, d[q + k]) : NULL;
            v = v << 6 | (f ? (uint32_t)(f - a) : 0);
        }
        head[nb++] = (uint8_t)(v >> 16);
        head[nb++] = (uint8_t)(v >> 8);
        head[nb++] = (uint8_t)v;
    }
    bool match = !strcmp(mt, "image/png") ? !memcmp(head, "\x89PNG", 4)
               : !strcmp(mt, "image/jpeg") ? head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF
               : !memcmp(head, "RIFF", 4) && !memcmp(head + 8, "WEBP", 4);
    if (!match) { snprintf(err, errn, "'%s.source': the image data is not %s (its media_type)", what, mt); return false; }
    mx_buf url = {0};
    mx_buf_printf(&url, "data:%s;base64,", mt);
    mx_buf_append(&url, json_string_value(data), json_string_length(data));
    if (!url.data) { snprintf(err, errn, "out of memory"); return false; }
    json_array_append_new(parts, json_pack("{s:s,s:{s:s%}}", "type", "image_url", "image_url", "url", url.data, url.len));
    mx_buf_free(&url);
    return true;
}

/* A document block -> a text part appended to parts, in this form (title
 * and context lines only when given):
 *   <document>\n<title>T</title>\n<context>C</context>\n<content>\nTEXT\n</content>\n</document>\n
 * Plain-text sources ({"type": "text", "media_type": "text/plain"}) and
 * content sources (a string or text blocks) are read; PDFs, URLs, files
 * and citations are refused. */
static bool add_document(json_t *b, const char *what, json_t *parts, char *err, size_t errn) {
    static const char *const keys[] = {"type", "source", "title", "context", "citations", "cache_control", NULL};
    if (!mx_only_fields(b, keys, what, err, errn)) return false;
    json_t *src = json_object_get(b, "source"), *title = json_object_get(b, "title"), *ctx = json_object_get(b, "context"), *cit = json_object_get(b, "citations");
    if (cit && !json_is_null(cit)) {
        json_t *en = json_object_get(cit, "enabled");
        if (!json_is_object(cit) || (en && !json_is_boolean(en))) { snprintf(err, errn, "'%s.citations' must be {\"enabled\": BOOL}", what); return false; }
        if (json_is_true(en)) { snprintf(err, errn, "'%s.citations': citations are not supported", what); return false; }
    }
    if (title && !json_is_null(title) && !json_is_string(title)) { snprintf(err, errn, "'%s.title' must be a string", what); return false; }
    if (ctx && !json_is_null(ctx) && !json_is_string(ctx)) { snprintf(err, errn, "'%s.context' must be a string", what); return false; }
    const char *st = json_string_value(json_object_get(src, "type"));
    if (!json_is_object(src) || !st) { snprintf(err, errn, "'%s.source' must be an object with a type", what); return false; }
    char sw[96];
    snprintf(sw, sizeof sw, "%s.source", what);
    json_t *body = NULL;
    if (!strcmp(st, "text")) {
        static const char *const tk[] = {"type", "media_type", "data", NULL};
        if (!mx_only_fields(src, tk, sw, err, errn)) return false;
        const char *mt = json_string_value(json_object_get(src, "media_type"));
        if (mt && strcmp(mt, "text/plain")) { snprintf(err, errn, "'%s.media_type' must be text/plain", sw); return false; }
        json_t *d = json_object_get(src, "data");
        if (!json_is_string(d)) { snprintf(err, errn, "'%s.data' must be a string", sw); return false; }
        body = json_incref(d);
    } else if (!strcmp(st, "content")) {
        static const char *const ck[] = {"type", "content", NULL};
        if (!mx_only_fields(src, ck, sw, err, errn)) return false;
        snprintf(sw + strlen(sw), sizeof sw - strlen(sw), ".content");
        if (!(body = mx_text_parts(json_object_get(src, "content"), text_only, sw, err, errn))) return false;
    } else if (!strcmp(st, "base64") || !strcmp(st, "url")) {
        const char *mt = json_string_value(json_object_get(src, "media_type"));
        snprintf(err, errn, "'%s': %s documents are not supported (plain text and content documents are)", sw, !strcmp(st, "url") || (mt && !strcmp(mt, "application/pdf")) ? "PDF" : "base64");
        return false;
    } else {
        snprintf(err, errn, "'%s.type' \"%.32s\" is not supported (text or content)", sw, st);
        return false;
    }
    mx_buf t = {0};
    mx_buf_puts(&t, "<document>\n");
    if (json_is_string(title)) mx_buf_printf(&t, "<title>%s</title>\n", json_string_value(title));
    if (json_is_string(ctx)) mx_buf_printf(&t, "<context>%s</context>\n", json_string_value(ctx));
    mx_buf_puts(&t, "<content>\n");
    mx_buf_append(&t, json_string_value(body), json_string_length(body));
    mx_buf_puts(&t, "\n</content>\n</document>\n");
    json_decref(body);
    if (!t.data) { snprintf(err, errn, "out of memory"); return false; }
    json_array_append_new(parts, json_pack("{s:s,s:s%}", "type", "text", "text", t.data, t.len));
    mx_buf_free(&t);
    return true;
}

/* OpenAI content from parts: the texts joined when there is no image,
 * else the parts themselves (the chat route reads the images). New. */
static json_t *parts_content(json_t *parts) {
    size_t i;
    json_t *p;
    json_array_foreach(parts, i, p)
        if (!strcmp(json_string_value(json_object_get(p, "type")), "image_url")) return json_incref(parts);
    mx_buf t = {0};
    json_array_foreach(parts, i, p) {
        json_t *s = json_object_get(p, "text");
        mx_buf_append(&t, json_string_value(s), json_string_length(s));
    }
    json_t *s = json_stringn(t.data ? t.data : "", t.len);
    mx_buf_free(&t);
    return s;
}

/* tool_result content: a string, or text and image blocks. New, or NULL + err. */
static json_t *result_content(json_t *rc, char *what, char *err, size_t errn) {
    if (!rc) return json_string("");
    if (json_is_string(rc)) return json_incref(rc);
    if (!json_is_array(rc)) { snprintf(err, errn, "'%s' must be a string or a list of text and image blocks", what); return NULL; }
    json_t *parts = json_array(), *b;
    size_t k;
    json_array_foreach(rc, k, b) {
        char w[96];
        snprintf(w, sizeof w, "%s[%zu]", what, k);
        const char *type = json_string_value(json_object_get(b, "type"));
        json_t *t = json_object_get(b, "text");
        bool ok;
        if (type && !strcmp(type, "text") && json_is_string(t)) ok = json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", t)) == 0;
        else if (type && !strcmp(type, "image")) ok = add_image(b, w, parts, err, errn);
        else if (type && !strcmp(type, "document")) ok = add_document(b, w, parts, err, errn);
        else { snprintf(err, errn, "'%s': %s blocks are not supported in tool results (text, image and document are)", w, type ? type : "untyped"); ok = false; }
        if (!ok) { json_decref(parts); return NULL; }
    }
    json_t *c = parts_content(parts);
    json_decref(parts);
    return c;
}

/* One Anthropic message -> OpenAI messages appended to out. */
static bool add_message(json_t *m, size_t i, json_t *out, char *err, size_t errn) {
    static const char *const msg_keys[] = {"role", "content", NULL};
    static const char *const tu_keys[] = {"type", "id", "name", "input", "cache_control", NULL};
    static const char *const tr_keys[] = {"type", "tool_use_id", "content", "is_error", "cache_control", NULL};
    if (!json_is_object(m)) { snprintf(err, errn, "messages[%zu] must be an object", i); return false; }
    char mw[32];
    snprintf(mw, sizeof mw, "messages[%zu]", i);
    if (!mx_only_fields(m, msg_keys, mw, err, errn)) return false;
    const char *role = json_string_value(json_object_get(m, "role"));
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant"))) { snprintf(err, errn, "messages[%zu].role must be \"user\" or \"assistant\"", i); return false; }
    json_t *c = json_object_get(m, "content");
    if (json_is_string(c)) { json_array_append_new(out, json_pack("{s:s,s:O}", "role", role, "content", c)); return true; }
    if (!json_is_array(c)) { snprintf(err, errn, "messages[%zu].content must be a string or a list of blocks", i); return false; }
    json_t *parts = json_array(); /* text, documents and images, in order */
    json_t *calls = json_array();
    size_t n_before = json_array_size(out), j;
    json_t *b;
    bool ok = true, user = !strcmp(role, "user");
    json_array_foreach(c, j, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        char what[64];
        snprintf(what, sizeof what, "messages[%zu].content[%zu]", i, j);
        if (!type) { snprintf(err, errn, "'%s.type' must be a string", what); ok = false; break; }
        if (!strcmp(type, "text")) {
            json_t *t = json_object_get(b, "text");
            if (!json_is_string(t)) { snprintf(err, errn, "'%s.text' must be a string", what); ok = false; break; }
            json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", t));
        } else if (!strcmp(type, "image") && user) {
            if (!(ok = add_image(b, what, parts, err, errn))) break;
        } else if (!strcmp(type, "document") && user) {
            if (!(ok = add_document(b, what, parts, err, errn))) break;
        } else if (!strcmp(type, "tool_use") && !user) {
            if (!mx_only_fields(b, tu_keys, what, err, errn)) { ok = false; break; }
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name"), *input = json_object_get(b, "input");
            if (ok && (!json_is_string(id) || !json_is_string(name) || !json_is_object(input))) {
                snprintf(err, errn, "'%s' needs a string id and name and an object input", what);
                ok = false;
            }
            if (!ok) break;
            /* arguments as the object: what chat templates render with tojson */
            json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function", "function", "name", name, "arguments", input));
        } else if (!strcmp(type, "tool_result") && user) {
            if (!mx_only_fields(b, tr_keys, what, err, errn)) { ok = false; break; }
            json_t *id = json_object_get(b, "tool_use_id"), *rc = json_object_get(b, "content"), *ie = json_object_get(b, "is_error");
            if (ok && !json_is_string(id)) { snprintf(err, errn, "'%s.tool_use_id' must be a string", what); ok = false; }
            if (ok && ie && !json_is_boolean(ie)) { snprintf(err, errn, "'%s.is_error' must be a boolean", what); ok = false; }
            if (!ok) break;
            snprintf(what + strlen(what), sizeof what - strlen(what), ".content");
            json_t *rt = result_content(rc, what, err, errn);
            if (!rt) { ok = false; break; }
            if (json_is_true(ie) && json_is_string(rt)) { /* the template has no error flag: say it in the text */
                mx_buf e = {0};
                mx_buf_puts(&e, "Error: ");
                mx_buf_append(&e, json_string_value(rt), json_string_length(rt));
                json_decref(rt);
                rt = json_stringn(e.data ? e.data : "Error", e.data ? e.len : 5);
                mx_buf_free(&e);
            } else if (json_is_true(ie)) { /* parts (with images): the flag goes first */
                json_array_insert_new(rt, 0, json_pack("{s:s,s:s}", "type", "text", "text", "Error: "));
            }
            json_array_append_new(out, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", rt));
        } else {
            snprintf(err, errn, "'%s': %s blocks are not supported%s", what, type,
                     !strcmp(type, "tool_use") || !strcmp(type, "tool_result") || !strcmp(type, "image") || !strcmp(type, "document") ? " in this role" : "");
            ok = false;
            break;
        }
    }
    /* tool results went out as tool messages; the text follows them */
    json_t *content = ok ? parts_content(parts) : NULL;
    bool some = content && (!json_is_string(content) || json_string_length(content));
    if (ok && json_array_size(calls))
        json_array_append_new(out, json_pack("{s:s,s:O,s:O}", "role", role, "content", content, "tool_calls", calls));
    else if (ok && (some || json_array_size(out) == n_before))
        json_array_append_new(out, json_pack("{s:s,s:O}", "role", role, "content", content));
    json_decref(content);
    json_decref(parts);
    json_decref(calls);
    return ok;
}

/* The Anthropic request -> the OpenAI chat request (new), or NULL + err. */
static json_t *translate(server *sv, json_t *req, bool count_only, int *budget, char *err, size_t errn) {
    static const char *const keys[] = {"model", "max_tokens", "messages", "system", "stop_sequences", "temperature", "top_p", "top_k",
                                       "stream", "tools", "tool_choice", "metadata", "thinking", NULL};
    if (!mx_only_fields(req, keys, "", err, errn)) return NULL;
    json_t *v;
    json_t *o = json_object(), *msgs = json_array();
    json_object_set_new(o, "messages", msgs);
    /* the same fields under the same names (validated by the chat parser) */
    static const char *const same[] = {"model", "max_tokens", "temperature", "top_p", "top_k", "stream", NULL};
    for (int i = 0; same[i]; i++)
        if ((v = json_object_get(req, same[i]))) json_object_set(o, same[i], v);
    if (!count_only && !json_is_integer(json_object_get(req, "max_tokens"))) { snprintf(err, errn, "'max_tokens' is required (an integer)"); goto bad; }
    json_t *md = json_object_get(req, "metadata"); /* user_id: for the client's records, nothing to do here */
    if (md && !json_is_null(md) && !json_is_object(md)) { snprintf(err, errn, "'metadata' must be an object"); goto bad; }
    /* thinking: disabled (enable_thinking false for a thinking template), or
     * enabled with a budget the generation holds to (parse sets it up) */
    *budget = 0;
    json_t *th = json_object_get(req, "thinking");
    if (th && !json_is_null(th)) {
        static const char *const th_keys[] = {"type", "budget_tokens", NULL};
        const char *t = json_string_value(json_object_get(th, "type"));
        if (!json_is_object(th) || !t) { snprintf(err, errn, "'thinking' must be an object with a type"); goto bad; }
        if (!mx_only_fields(th, th_keys, "thinking", err, errn)) goto bad;
        json_t *bt = json_object_get(th, "budget_tokens");
        if (!strcmp(t, "disabled")) {
            if (bt) { snprintf(err, errn, "'thinking.budget_tokens' goes with \"type\": \"enabled\" only"); goto bad; }
            if (sv->tm.reasoning) json_object_set_new(o, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 0));
        } else if (!strcmp(t, "enabled")) {
            json_t *mt = json_object_get(req, "max_tokens");
            if (!json_is_integer(bt) || json_integer_value(bt) < 1024 || (json_is_integer(mt) && json_integer_value(bt) >= json_integer_value(mt))) {
                snprintf(err, errn, "'thinking.budget_tokens' must be an integer, at least 1024 and less than 'max_tokens'");
                goto bad;
            }
            if (!sv->tm.reasoning) {
                snprintf(err, errn, "'thinking' enabled: this model's chat template has no thinking (<think>) block; leave 'thinking' out or disabled");
                goto bad;
            }
            json_t *tc = json_object_get(req, "tool_choice");
            const char *tct = json_string_value(json_object_get(tc, "type"));
            if (tct && (!strcmp(tct, "any") || !strcmp(tct, "tool"))) {
                snprintf(err, errn, "'thinking' enabled cannot go with 'tool_choice' %s (as with Anthropic: use auto or none)", tct);
                goto bad;
            }
            json_object_set_new(o, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 1));
            *budget = json_integer_value(bt) > INT32_MAX ? INT32_MAX : (int)json_integer_value(bt);
        } else {
            snprintf(err, errn, "'thinking.type' must be \"enabled\" or \"disabled\"");
            goto bad;
        }
    }
    json_t *sys = json_object_get(req, "system");
    if (sys && !json_is_null(sys)) {
        json_t *t = mx_text_parts(sys, text_only, "system", err, errn);
        if (!t) goto bad;
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "system", "content", t));
    }
    json_t *ms = json_object_get(req, "messages");
    if (!json_is_array(ms) || !json_array_size(ms)) { snprintf(err, errn, "'messages' must be a non-empty list"); goto bad; }
    if (json_array_size(ms) > (size_t)sv->o.max_messages) {
        snprintf(err, errn, "'messages' has %zu entries; at most %d are accepted", json_array_size(ms), sv->o.max_messages);
        goto bad;
    }
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m)
        if (!add_message(m, i, msgs, err, errn)) goto bad;
    json_t *stop = json_object_get(req, "stop_sequences");
    if (stop && !json_is_null(stop)) {
        if (!json_is_array(stop)) { snprintf(err, errn, "'stop_sequences' must be a list of strings"); goto bad; }
        json_object_set(o, "stop", stop);
    }
    json_t *tools = json_object_get(req, "tools");
    if (tools && !json_is_null(tools)) {
        static const char *const tool_keys[] = {"name", "description", "input_schema", "type", "cache_control", NULL};
        if (!json_is_array(tools)) { snprintf(err, errn, "'tools' must be a list"); goto bad; }
        json_t *fns = json_array();
        json_object_set_new(o, "tools", fns);
        json_t *t;
        json_array_foreach(tools, i, t) {
            if (!json_is_object(t)) { snprintf(err, errn, "tools[%zu] must be an object", i); goto bad; }
            char what[32];
            snprintf(what, sizeof what, "tools[%zu]", i);
            if (!mx_only_fields(t, tool_keys, what, err, errn)) goto bad;
            const char *type = json_string_value(json_object_get(t, "type"));
            if (type && strcmp(type, "custom")) { snprintf(err, errn, "'tools[%zu].type' \"%.64s\" is not supported (server tools are not)", i, type); goto bad; }
            json_t *f = json_object();
            json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", f));
            if ((v = json_object_get(t, "name"))) json_object_set(f, "name", v);
            if ((v = json_object_get(t, "description"))) json_object_set(f, "description", v);
            if (!json_is_object(v = json_object_get(t, "input_schema"))) { snprintf(err, errn, "'tools[%zu].input_schema' must be an object", i); goto bad; }
            json_object_set(f, "parameters", v);
        }
    }
    json_t *tc = json_object_get(req, "tool_choice");
    if (tc && !json_is_null(tc)) {
        static const char *const tc_keys[] = {"type", "name", "disable_parallel_tool_use", NULL};
        const char *type = json_string_value(json_object_get(tc, "type"));
        if (!json_is_object(tc) || !type) { snprintf(err, errn, "'tool_choice' must be an object with a type"); goto bad; }
        if (!mx_only_fields(tc, tc_keys, "tool_choice", err, errn)) goto bad;
        json_t *name = json_object_get(tc, "name"), *dp = json_object_get(tc, "disable_parallel_tool_use");
        if (!strcmp(type, "auto") || !strcmp(type, "none")) json_object_set_new(o, "tool_choice", json_string(type));
        else if (!strcmp(type, "any")) json_object_set_new(o, "tool_choice", json_string("required"));
        else if (!strcmp(type, "tool") && json_is_string(name))
            json_object_set_new(o, "tool_choice", json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name));
        else { snprintf(err, errn, "'tool_choice' must be auto, any, none or {\"type\": \"tool\", \"name\": ...}"); goto bad; }
        if (dp && !json_is_null(dp)) {
            if (!json_is_boolean(dp)) { snprintf(err, errn, "'tool_choice.disable_parallel_tool_use' must be a boolean"); goto bad; }
            json_object_set_new(o, "parallel_tool_calls", json_boolean(!json_is_true(dp)));
        }
    }
    return o;
bad:
    json_decref(o);
    return NULL;
}

/* Anthropic's error body (the SDK reads error.type and error.message). */
static int a_error(server *sv, mx_srv_req *rq, unsigned code, const char *type, const char *msg) {
    atomic_fetch_add(&sv->n_errors, 1);
    return mx_srv_json(rq, code, json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", type, "message", msg));
}

/* ---- the reply ---- */

static void a_event(mx_gen *x, const char *name, json_t *data) {
    char *s = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (!s) return;
    mx_buf_printf(&x->sse, "event: %s\ndata: %s\n\n", name, s);
    free(s);
}

/* Anthropic counts a prompt as input_tokens + cache_creation_input_tokens +
 * cache_read_input_tokens: the tokens read from the slot's cached prefix are
 * cache reads, the rest are input. Creation is always 0: the prefix cache is
 * automatic (cache_control breakpoints are accepted and change nothing), so
 * no prompt token is billed as written to a cache. */
static json_t *a_usage(mx_gen *x) {
    int pt = mx_req_prompt_tokens(x->req), cached = mx_req_cached_tokens(x->req);
    return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", pt - cached, "output_tokens", x->n_gen, "cache_creation_input_tokens", 0,
                     "cache_read_input_tokens", cached);
}

static void a_start(mx_gen *x) {
    if (x->sent_role) return;
    x->sent_role = true;
    x->block = -1;
    a_event(x, "message_start", json_pack("{s:s,s:{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:o}}", "type", "message_start", "message", "id", x->id, "type", "message",
                                          "role", "assistant", "model", x->sv->name, "content", "stop_reason", "stop_sequence", "usage", a_usage(x)));
    a_event(x, "ping", json_pack("{s:s}", "type", "ping"));
}

static int a_blocks(mx_gen *x) { return x->block + 1; } /* blocks opened so far (they are numbered in order) */

static void a_close_block(mx_gen *x) {
    if (!x->block_kind) return;
    a_event(x, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", x->block));
    x->block_kind = NULL;
}

/* Text of one kind into the open block, opening a new one when the kind changes. */
static void a_text(mx_gen *x, const char *kind, const char *s, size_t n) {
    if (!n) return;
    if (!x->block_kind || strcmp(x->block_kind, kind)) {
        a_close_block(x);
        x->block++;
        x->block_kind = kind;
        json_t *cb = !strcmp(kind, "text") ? json_pack("{s:s,s:s}", "type", "text", "text", "") : json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", "");
        a_event(x, "content_block_start", json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", x->block, "content_block", cb));
    }
    json_t *d = !strcmp(kind, "text") ? json_pack("{s:s,s:s%}", "type", "text_delta", "text", s, n) : json_pack("{s:s,s:s%}", "type", "thinking_delta", "thinking", s, n);
    a_event(x, "content_block_delta", json_pack("{s:s,s:i,s:o}", "type", "content_block_delta", "index", x->block, "delta", d));
}

static json_t *a_logprob(mx_gen *x, const mx_tok_event *ev) { (void)x; (void)ev; return NULL; }

static void a_delta(mx_gen *x, const char *content, size_t cn, const char *reasoning, size_t rn, json_t *lp) {
    json_decref(lp);
    a_start(x);
    a_text(x, "thinking", reasoning, rn);
    a_text(x, "text", content, cn);
}

static const char *a_stop_reason(mx_gen *x) {
    if (x->calls) return "tool_use";
    if (x->op.stopped) return "stop_sequence";
    return !strcmp(x->finish, "length") ? "max_tokens" : "end_turn";
}

/* A tool call as a tool_use block (input: the arguments' object). */
static json_t *a_tool_use(json_t *call) {
    json_t *fn = json_object_get(call, "function");
    json_t *in = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
    if (!json_is_object(in)) { json_decref(in); in = json_object(); }
    char id[64];
    snprintf(id, sizeof id, "toolu_%s", json_string_value(json_object_get(call, "id")) + 5); /* "call_..." */
    return json_pack("{s:s,s:s,s:O,s:o}", "type", "tool_use", "id", id, "name", json_object_get(fn, "name"), "input", in);
}

static void a_final(mx_gen *x) {
    a_start(x);
    a_close_block(x);
    size_t i;
    json_t *c;
    json_array_foreach(x->calls, i, c) {
        json_t *tu = a_tool_use(c);
        char *args = json_dumps(json_object_get(tu, "input"), JSON_COMPACT);
        json_object_set_new(tu, "input", json_object());
        int idx = a_blocks(x);
        x->block = idx;
        a_event(x, "content_block_start", json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", idx, "content_block", tu));
        a_event(x, "content_block_delta", json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", idx, "delta", "type", "input_json_delta",
                                                    "partial_json", args ? args : "{}"));
        a_event(x, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", idx));
        free(args);
    }
    json_t *seq = x->op.stopped && !x->calls ? json_string(x->g.stops[x->op.stop_index]) : json_null();
    a_event(x, "message_delta", json_pack("{s:s,s:{s:s,s:o},s:o}", "type", "message_delta", "delta", "stop_reason", a_stop_reason(x), "stop_sequence",
                                          seq, "usage", a_usage(x)));
    a_event(x, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

static json_t *a_reply(mx_gen *x) {
    json_t *content = json_array();
    if (x->reasoning.len) json_array_append_new(content, json_pack("{s:s,s:s%,s:s}", "type", "thinking", "thinking", x->reasoning.data, x->reasoning.len, "signature", ""));
    if (x->content.len) json_array_append_new(content, json_pack("{s:s,s:s%}", "type", "text", "text", x->content.data, x->content.len));
    size_t i;
    json_t *c;
    json_array_foreach(x->calls, i, c) json_array_append_new(content, a_tool_use(c));
    json_t *seq = x->op.stopped && !x->calls ? json_string(x->g.stops[x->op.stop_index]) : json_null();
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:o}", "id", x->id, "type", "message", "role", "assistant", "model", x->sv->name, "content", content,
                     "stop_reason", a_stop_reason(x), "stop_sequence", seq, "usage", a_usage(x));
}

static void a_fail(mx_gen *x, const char *type, const char *msg) {
    a_start(x);
    a_event(x, "error", json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", !strcmp(type, "unavailable_error") ? "overloaded_error" : "api_error",
                                  "message", msg));
}

static const mx_gen_format a_format = {"msg", a_logprob, a_delta, a_final, a_reply, a_fail, NULL};

/* A marker's token ids (as the tokenizer reads the text alone). */
static bool marker_ids(server *sv, const char *text, int32_t *out, int *n, char *err, size_t errn) {
    int32_t *ids = NULL;
    int k = 0;
    if (mx_tok_encode(sv->tm.tok, text, strlen(text), false, &ids, &k) || k < 1 || k > MX_THINK_MARK_MAX) {
        free(ids);
        snprintf(err, errn, "'thinking': this model's tokenizer does not read %s as at most %d tokens", text, MX_THINK_MARK_MAX);
        return false;
    }
    memcpy(out, ids, sizeof(int32_t) * (size_t)k);
    *n = k;
    free(ids);
    return true;
}

/* The thinking budget: the reasoning block (open from the start when the
 * prompt opened it, else when the reply begins with <think>) gets budget
 * tokens; then the scheduler writes </think> and the reply goes on. */
static bool set_budget(server *sv, int budget, mx_gen_params *g, char *err, size_t errn) {
    g->p.think_budget = budget;
    g->p.n_think_open = 0;
    if (!g->starts_in_think && !marker_ids(sv, "<think>", g->p.think_open, &g->p.n_think_open, err, errn)) return false;
    return marker_ids(sv, "</think>", g->p.think_end, &g->p.n_think_end, err, errn);
}

static bool parse(server *sv, mx_srv_req *rq, json_t *req, bool count_only, mx_gen_params *g, char *err, size_t errn) {
    int budget = 0;
    json_t *o = translate(sv, req, count_only, &budget, err, errn);
    if (!o) return false;
    bool ok = mx_chat_parse(sv, o, mx_srv_body_len(rq), g, err, errn) && (!budget || count_only || set_budget(sv, budget, g, err, errn));
    json_decref(o);
    return ok;
}

int mx_route_messages(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_gen_params g = {0};
    if (!parse(sv, rq, req, false, &g, err, sizeof err) || (g.images && !mx_gen_prepare_images(sv, &g, err, sizeof err))) {
        mx_gen_params_free(&g);
        return a_error(sv, rq, 400, "invalid_request_error", err);
    }
    return mx_gen_run(sv, rq, &g, &a_format);
}

int mx_route_count_tokens(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_gen_params g = {0};
    bool ok = parse(sv, rq, req, true, &g, err, sizeof err);
    int n = g.p.n_prompt;
    mx_gen_params_free(&g);
    if (!ok) return a_error(sv, rq, 400, "invalid_request_error", err);
    return mx_srv_json(rq, 200, json_pack("{s:i}", "input_tokens", n));
}
