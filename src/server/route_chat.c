/* POST /v1/chat/completions: messages rendered through the model's chat
 * template, then generated in the OpenAI chat shape. */
#include "gen.h"
#include "../base/base.h"
#include <stdio.h>
#include <string.h>

/* Message content: a string, or a list of {"type":"text","text":...} parts. */
static bool normalize_messages(json_t *msgs, char *err, size_t errn) {
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
            size_t k;
            json_t *part;
            json_array_foreach(c, k, part) {
                json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
                if (!json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
                    mx_buf_free(&t);
                    snprintf(err, errn, "messages[%zu].content[%zu]: only text parts are supported", i, k);
                    return false;
                }
                mx_buf_append(&t, json_string_value(text), json_string_length(text));
            }
            json_object_set_new(m, "content", json_stringn(t.data ? t.data : "", t.len));
            mx_buf_free(&t);
        } else if (c && !json_is_string(c) && !json_is_null(c)) {
            snprintf(err, errn, "messages[%zu].content must be a string or a list of text parts", i);
            return false;
        }
    }
    return true;
}

/* The template's variables: messages, tools, documents, chat_template_kwargs
 * and the generation prompt (or continue_final_message when the last message
 * is the assistant's). NULL with err set. */
static json_t *chat_context(json_t *req, mx_gen_params *g, bool *cont, char *err, size_t errn) {
    json_t *msgs = json_deep_copy(json_object_get(req, "messages"));
    if (!normalize_messages(msgs, err, errn)) { json_decref(msgs); return NULL; }
    json_t *ctx = json_object();
    json_object_set_new(ctx, "messages", msgs);
    json_t *tools = json_object_get(req, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) { json_decref(ctx); snprintf(err, errn, "'tools' must be a list"); return NULL; }
        json_t *tc = json_object_get(req, "tool_choice");
        bool none = json_is_string(tc) && !strcmp(json_string_value(tc), "none");
        if (json_array_size(tools) && !none) { json_object_set(ctx, "tools", tools); g->tools = true; }
    }
    const char *pass[] = {"documents", "chat_template_kwargs"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(req, pass[i]);
        if (!v) continue;
        if (i == 1 && json_is_object(v)) json_object_update(ctx, v);
        else json_object_set(ctx, pass[i], v);
    }
    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
    json_t *role = json_object_get(last, "role");
    *cont = json_is_string(role) && !strcmp(json_string_value(role), "assistant");
    json_object_set_new(ctx, *cont ? "continue_final_message" : "add_generation_prompt", json_true());
    return ctx;
}

int mx_route_chat(server *sv, mx_srv_req *rq, json_t *req) {
    char err[512] = "";
    mx_gen_params g = {0};
    if (!mx_gen_parse_common(sv, req, &g, err, sizeof err)) { mx_gen_params_free(&g); return mx_srv_bad_request(sv, rq, "%s", err); }
    if (!sv->tm.tok) { mx_gen_params_free(&g); return mx_srv_bad_request(sv, rq, "this model has no tokenizer; use /v1/completions with token ids"); }
    json_t *lp = json_object_get(req, "logprobs");
    if (lp && !json_is_null(lp) && !json_is_boolean(lp)) { mx_gen_params_free(&g); return mx_srv_bad_request(sv, rq, "'logprobs' must be a boolean"); }
    g.logprobs = json_is_true(lp);
    int top = 0;
    if (!mx_opt_int(req, "top_logprobs", 0, MX_MAX_TOP_LOGPROBS, &top, err, sizeof err)) { mx_gen_params_free(&g); return mx_srv_bad_request(sv, rq, "%s", err); }
    if (g.logprobs) g.p.top_logprobs = top;
    bool cont = false;
    json_t *ctx = chat_context(req, &g, &cont, err, sizeof err);
    if (!ctx) { mx_gen_params_free(&g); return mx_srv_bad_request(sv, rq, "%s", err); }
    mx_buf text = {0};
    if (mx_textmodel_render(&sv->tm, ctx, &text)) {
        json_decref(ctx);
        mx_gen_params_free(&g);
        return mx_srv_bad_request(sv, rq, "chat template: %s", mx_errmsg());
    }
    json_decref(ctx);
    g.reasoning = sv->tm.reasoning;
    /* a template that leaves the reply inside an open <think> block */
    if (sv->tm.reasoning && text.len) {
        size_t e = text.len;
        while (e && (text.data[e - 1] == '\n' || text.data[e - 1] == ' ')) e--;
        g.starts_in_think = e >= 7 && !memcmp(text.data + e - 7, "<think>", 7);
    }
    int n = 0;
    int rc = mx_textmodel_encode_chat(&sv->tm, text.data ? text.data : "", text.len, &g.prompt, &n);
    /* the plain format's next turn marks the end of the reply */
    if (!rc && mx_textmodel_plain_chat(&sv->tm) && !cont) rc = mx_gen_add_stop(&g, mx_textmodel_plain_stop);
    mx_buf_free(&text);
    if (rc) { mx_gen_params_free(&g); return mx_srv_bad_request(sv, rq, "%s", mx_errmsg()); }
    g.p.n_prompt = n;
    return mx_gen_run(sv, rq, &g, &mx_oai_chat_format);
}
