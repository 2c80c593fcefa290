/* POST /v1/chat/completions: messages rendered through the model's chat
 * template, then generated in the OpenAI chat shape. */
#include "gen.h"
#include "../base/base.h"
#include <stdio.h>
#include <string.h>

/* One image_url part: read (a data URL, or a local file only under
 * --allowed-image-dir; remote URLs are refused: the server does not fetch
 * for a client), decoded and preprocessed into g->images. */
static bool add_image(server *sv, json_t *part, size_t i, size_t k, mx_gen_params *g, char *err, size_t errn) {
    const mx_engine *e = &sv->tm.e;
    if (!e->vision) { snprintf(err, errn, "messages[%zu].content[%zu]: this model does not take images", i, k); return false; }
    json_t *iu = json_object_get(part, "image_url"), *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
    if (!json_is_string(url)) { snprintf(err, errn, "messages[%zu].content[%zu].image_url.url must be a string", i, k); return false; }
    if (!g->images && !(g->images = mx_calloc(1, sizeof *g->images))) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
    char *data, what[64];
    size_t len;
    snprintf(what, sizeof what, "messages[%zu].content[%zu]", i, k);
    if (mx_image_source_read(json_string_value(url), sv->o.image_dir, &data, &len)) {
        snprintf(err, errn, "%s: %s", what, mx_errmsg());
        return false;
    }
    int r = mx_vlprompt_add(g->images, e, data, len, 0, what);
    free(data);
    if (r) snprintf(err, errn, "%s", mx_errmsg());
    return !r;
}

/* Message content: a string, or a list of parts: {"type":"text","text":...}
 * and, for a vision-language model, {"type":"image_url","image_url":{"url":
 * "data:image/png;base64,..."}}. The images go into g->images in order; a
 * message with images keeps its parts for the template as [{"type":"image"},
 * {"type":"text", ...}], whose placeholders mx_vlprompt_chat_ids expands
 * (the plain chat format, with none, gets the images first). */
static bool normalize_messages(server *sv, json_t *msgs, mx_gen_params *g, char *err, size_t errn) {
    if (!json_is_array(msgs) || !json_array_size(msgs)) { snprintf(err, errn, "'messages' must be a non-empty list"); return false; }
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) { snprintf(err, errn, "messages[%zu] must be an object", i); return false; }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) { snprintf(err, errn, "messages[%zu].role must be a string", i); return false; }
        json_t *c = json_object_get(m, "content");
        if (json_is_array(c)) {
            mx_buf t = {0};
            json_t *parts = json_array();
            bool images = false, ok = true;
            size_t k;
            json_t *part;
            json_array_foreach(c, k, part) {
                json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
                const char *ty = json_string_value(type);
                if (ty && !strcmp(ty, "text") && json_is_string(text)) {
                    mx_buf_append(&t, json_string_value(text), json_string_length(text));
                    json_array_append_new(parts, json_pack("{s:s,s:O}", "type", "text", "text", text));
                } else if (ty && !strcmp(ty, "image_url")) {
                    if (!(ok = add_image(sv, part, i, k, g, err, errn))) break;
                    images = true;
                    json_array_append_new(parts, json_pack("{s:s}", "type", "image"));
                } else {
                    snprintf(err, errn, "messages[%zu].content[%zu]: only text and image_url parts are supported", i, k);
                    ok = false;
                    break;
                }
            }
            if (ok && images && !mx_textmodel_plain_chat(&sv->tm)) json_object_set(m, "content", parts);
            else if (ok) json_object_set_new(m, "content", json_stringn(t.data ? t.data : "", t.len));
            json_decref(parts);
            mx_buf_free(&t);
            if (!ok) return false;
        } else if (c && !json_is_string(c) && !json_is_null(c)) {
            snprintf(err, errn, "messages[%zu].content must be a string or a list of text and image_url parts", i);
            return false;
        }
    }
    return true;
}

/* chat_template_kwargs: extra template variables (enable_thinking, ...);
 * they may not replace what the server sets (messages, tools, the
 * generation prompt), the special tokens or the template's globals. */
static bool check_kwargs(json_t *kw, char *err, size_t errn) {
    static const char *const reserved[] = {"messages", "tools", "documents", "add_generation_prompt", "continue_final_message", "tool_choice",
                                           "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
                                           "additional_special_tokens", "raise_exception", "strftime_now", "range", "namespace", "dict",
                                           "lipsum", "cycler", "joiner", "loop", "self", "caller", "varargs", "kwargs", NULL};
    if (!json_is_object(kw)) { snprintf(err, errn, "'chat_template_kwargs' must be an object"); return false; }
    if (json_object_size(kw) > 64) { snprintf(err, errn, "'chat_template_kwargs' has more than 64 keys"); return false; }
    const char *k;
    json_t *v;
    json_object_foreach(kw, k, v) {
        bool ident = (*k == '_' || (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z')) && strlen(k) <= 64;
        for (const char *p = k; ident && *p; p++) ident = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (!ident) { snprintf(err, errn, "'chat_template_kwargs': '%.64s' is not a variable name", k); return false; }
        for (int i = 0; reserved[i]; i++)
            if (!strcmp(k, reserved[i])) { snprintf(err, errn, "'chat_template_kwargs' may not set '%s'", k); return false; }
    }
    return true;
}

/* tools, tool_choice and parallel_tool_calls. *offer: the tools the
 * template shows (borrowed; NULL: none); *required: the functions one of
 * which the reply must call ({"name", "parameters"} each; new reference,
 * NULL when the call is the model's choice). */
static bool parse_tools(json_t *req, mx_gen_params *g, json_t **offer, json_t **required, char *err, size_t errn) {
    static const char *const tool_keys[] = {"type", "function", NULL};
    static const char *const fn_keys[] = {"name", "description", "parameters", "strict", NULL};
    *offer = *required = NULL;
    json_t *tools = json_object_get(req, "tools"), *tc = json_object_get(req, "tool_choice");
    bool par = true;
    if (!mx_opt_bool(req, "parallel_tool_calls", &par, err, errn)) return false;
    g->one_call = !par;
    if (json_is_null(tools)) tools = NULL;
    if (json_is_null(tc)) tc = NULL;
    if (tools && !json_is_array(tools)) { snprintf(err, errn, "'tools' must be a list"); return false; }
    json_t *fns = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char what[64];
        snprintf(what, sizeof what, "tools[%zu]", i);
        if (!json_is_object(t) || !mx_only_fields(t, tool_keys, what, err, errn)) {
            if (!err[0]) snprintf(err, errn, "'%s' must be an object", what);
            goto bad;
        }
        const char *type = json_string_value(json_object_get(t, "type"));
        json_t *fn = json_object_get(t, "function");
        if (!type || strcmp(type, "function")) { snprintf(err, errn, "'%s.type' must be \"function\" (the only tool type supported)", what); goto bad; }
        snprintf(what, sizeof what, "tools[%zu].function", i);
        if (!json_is_object(fn) || !mx_only_fields(fn, fn_keys, what, err, errn)) {
            if (!err[0]) snprintf(err, errn, "'%s' must be an object", what);
            goto bad;
        }
        const char *name = json_string_value(json_object_get(fn, "name"));
        size_t n = name ? strlen(name) : 0;
        bool ok = n >= 1 && n <= 64;
        for (size_t k = 0; ok && k < n; k++) ok = (name[k] >= 'a' && name[k] <= 'z') || (name[k] >= 'A' && name[k] <= 'Z') || (name[k] >= '0' && name[k] <= '9') || name[k] == '_' || name[k] == '-';
        if (!ok) { snprintf(err, errn, "'%s.name' must be 1 to 64 of a-z, A-Z, 0-9, _ and -", what); goto bad; }
        json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict"), *desc = json_object_get(fn, "description");
        if (params && !json_is_null(params) && !json_is_object(params)) { snprintf(err, errn, "'%s.parameters' must be an object", what); goto bad; }
        if (strict && !json_is_null(strict) && !json_is_boolean(strict)) { snprintf(err, errn, "'%s.strict' must be a boolean", what); goto bad; }
        if (desc && !json_is_null(desc) && !json_is_string(desc)) { snprintf(err, errn, "'%s.description' must be a string", what); goto bad; }
        json_t *f = json_pack("{s:s}", "name", name);
        if (json_is_object(params)) json_object_set(f, "parameters", params);
        json_array_append_new(fns, f);
    }
    const char *choice = json_string_value(tc);
    if (tc && !choice) {
        /* {"type": "function", "function": {"name": ...}} */
        json_t *fn = json_object_get(tc, "function");
        const char *type = json_string_value(json_object_get(tc, "type")), *name = json_string_value(json_object_get(fn, "name"));
        if (!json_is_object(tc) || !type || strcmp(type, "function") || !name || json_object_size(tc) != 2 || json_object_size(fn) != 1) {
            snprintf(err, errn, "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            goto bad;
        }
        json_t *pick = NULL, *f;
        json_array_foreach(fns, i, f)
            if (!strcmp(json_string_value(json_object_get(f, "name")), name)) pick = f;
        if (!pick) { snprintf(err, errn, "'tool_choice' names '%.64s', which is not in 'tools'", name); goto bad; }
        *required = json_pack("[O]", pick);
    } else if (choice && !strcmp(choice, "required")) {
        if (!json_array_size(fns)) { snprintf(err, errn, "'tool_choice' \"required\" needs 'tools'"); goto bad; }
        *required = json_incref(fns);
    } else if (choice && strcmp(choice, "none") && strcmp(choice, "auto")) {
        snprintf(err, errn, "'tool_choice' \"%.32s\" is not supported (none, auto, required or a function)", choice);
        goto bad;
    }
    if (json_array_size(fns) && !(choice && !strcmp(choice, "none"))) *offer = tools;
    json_decref(fns);
    return true;
bad:
    json_decref(fns);
    return false;
}

/* The template's variables: chat_template_kwargs, documents, messages,
 * tools and the generation prompt (or continue_final_message when the last
 * message is the assistant's); what the server sets goes in last. NULL with
 * err set. */
static json_t *chat_context(server *sv, json_t *req, mx_gen_params *g, bool *cont, json_t **required, char *err, size_t errn) {
    json_t *msgs = json_object_get(req, "messages");
    if (json_is_array(msgs) && json_array_size(msgs) > (size_t)sv->o.max_messages) {
        snprintf(err, errn, "'messages' has %zu entries; at most %d are accepted", json_array_size(msgs), sv->o.max_messages);
        return NULL;
    }
    json_t *kw = json_object_get(req, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !check_kwargs(kw, err, errn)) return NULL;
    json_t *offer;
    if (!parse_tools(req, g, &offer, required, err, errn)) return NULL;
    msgs = json_deep_copy(msgs);
    if (!normalize_messages(sv, msgs, g, err, errn)) { json_decref(msgs); return NULL; }
    json_t *ctx = json_object();
    if (json_is_object(kw)) json_object_update(ctx, kw);
    json_t *docs = json_object_get(req, "documents");
    if (docs) json_object_set(ctx, "documents", docs);
    json_object_set_new(ctx, "messages", msgs);
    if (offer) { json_object_set(ctx, "tools", offer); g->tools = true; }
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    json_t *role = json_object_get(last, "role");
    *cont = json_is_string(role) && !strcmp(json_string_value(role), "assistant");
    json_object_set_new(ctx, *cont ? "continue_final_message" : "add_generation_prompt", json_true());
    return ctx;
}

bool mx_chat_parse(server *sv, json_t *req, size_t body_len, mx_gen_params *g, char *err, size_t errn) {
    static const char *const fields[] = {"messages", "logprobs", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
                                         "chat_template_kwargs", "documents", "prompt_cache_key", "prompt_cache_retention", NULL};
    if (!mx_gen_check_fields(req, fields, err, errn) || !mx_gen_check_cache_fields(req, err, errn) || !mx_gen_parse_common(sv, req, g, err, errn)) return false;
    if (!sv->tm.tok) { snprintf(err, errn, "this model has no tokenizer; use /v1/completions with token ids"); return false; }
    json_t *lp = json_object_get(req, "logprobs");
    if (lp && !json_is_null(lp) && !json_is_boolean(lp)) { snprintf(err, errn, "'logprobs' must be a boolean"); return false; }
    g->logprobs = json_is_true(lp);
    int top = 0;
    if (!mx_opt_int(req, "top_logprobs", 0, MX_MAX_TOP_LOGPROBS, &top, err, errn)) return false;
    if (g->logprobs) g->p.top_logprobs = top;
    bool cont = false;
    json_t *required = NULL;
    json_t *ctx = chat_context(sv, req, g, &cont, &required, err, errn);
    if (!ctx) { json_decref(required); return false; }
    /* the prompt's budgets: time, template memory, and no tokenizing of what cannot fit */
    mx_chat_opts co = {.content_as_text = !sv->o.allow_special_in_content, .deadline = mx_now() + sv->o.prompt_budget,
                       .max_memory = ((size_t)64 << 20) + 8 * body_len, .max_tokens = sv->o.ctx_size};
    mx_buf text = {0};
    int n = 0;
    int rc = g->images ? mx_vlprompt_chat_ids(g->images, &sv->tm, ctx, &co, &text, &g->prompt, &n)
                       : mx_textmodel_chat_ids(&sv->tm, ctx, &co, &text, &g->prompt, &n);
    json_decref(ctx);
    if (rc) {
        json_decref(required);
        snprintf(err, errn, "%s%s", text.len ? "" : "chat template: ", mx_errmsg()); /* nothing rendered: the template failed */
        mx_buf_free(&text);
        return false;
    }
    g->p.n_prompt = n;
    g->reasoning = sv->tm.reasoning;
    /* a template that leaves the reply inside an open <think> block */
    if (sv->tm.reasoning && text.len) {
        size_t e = text.len;
        while (e && (text.data[e - 1] == '\n' || text.data[e - 1] == ' ')) e--;
        g->starts_in_think = e >= 7 && !memcmp(text.data + e - 7, "<think>", 7);
    }
    mx_buf_free(&text);
    /* the plain format's next turn marks the end of the reply */
    if (mx_textmodel_plain_chat(&sv->tm) && !cont && mx_gen_add_stop(g, mx_textmodel_plain_stop)) {
        json_decref(required);
        snprintf(err, errn, "%s", mx_errmsg());
        return false;
    }
    bool ok = mx_gen_parse_grammar(sv, req, g, err, errn) && (!required || mx_gen_tool_grammar(sv, required, g, err, errn));
    json_decref(required);
    return ok;
}

bool mx_chat_render(server *sv, json_t *req, size_t body_len, mx_buf *text, char *err, size_t errn) {
    static const char *const fields[] = {"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "documents", NULL};
    if (!mx_only_fields(req, fields, "", err, errn)) return false;
    if (!sv->tm.tok) { snprintf(err, errn, "this model has no tokenizer and no chat template"); return false; }
    mx_gen_params g = {0};
    bool cont = false;
    json_t *required = NULL;
    json_t *ctx = chat_context(sv, req, &g, &cont, &required, err, errn);
    json_decref(required);
    mx_gen_params_free(&g);
    if (!ctx) return false;
    mx_chat_opts co = {.content_as_text = !sv->o.allow_special_in_content, .deadline = mx_now() + sv->o.prompt_budget,
                       .max_memory = ((size_t)64 << 20) + 8 * body_len};
    mx_buf marks = {0};
    int rc = mx_textmodel_chat_render(&sv->tm, ctx, &co, text, &marks);
    mx_buf_free(&marks);
    json_decref(ctx);
    if (rc) snprintf(err, errn, "chat template: %s", mx_errmsg());
    return !rc;
}

int mx_route_chat(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_gen_params g = {0};
    if (!mx_chat_parse(sv, req, mx_srv_body_len(rq), &g, err, sizeof err) || (g.images && !mx_gen_prepare_images(sv, &g, err, sizeof err))) {
        mx_gen_params_free(&g);
        return mx_srv_bad_request(sv, rq, "%s", err);
    }
    return mx_gen_run(sv, rq, &g, &mx_oai_chat_format);
}
