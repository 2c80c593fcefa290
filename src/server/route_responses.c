/* POST /v1/responses: the OpenAI Responses API. The request is
 * translated into the chat request it means (instructions as the system
 * message, message items (input_image parts as image_url parts), function_call / function_call_output items as
 * tool calls and tool messages, function tools, text.format as
 * response_format) and parsed by mx_chat_parse; the reply is a response
 * object with reasoning, message and function_call output items, or its
 * event stream (response.created ... response.completed, or
 * response.incomplete when max_output_tokens cuts it).
 *
 * store (default true, as OpenAI's): a finished response is kept for the
 * server's lifetime in a bounded LRU (resp_store.c) with the conversation
 * it ends; previous_response_id continues that conversation (its
 * instructions are not carried over, as OpenAI's are not), GET and DELETE
 * /v1/responses/{id} read and remove it. An unknown id gets a 404; fields
 * not implemented get a 400 naming them. */
#include "gen.h"
#include "resp_store.h"
#include "../base/base.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message item's content: a string, or input_text / output_text parts
 * (joined) and, in a user message, input_image parts: image_url as the
 * chat route reads it (a data URL, or a file under --allowed-image-dir;
 * remote URLs are not fetched), file_id refused (no file store), detail
 * "auto" only. The chat form: a string, or text and image_url parts. New,
 * or NULL + err. */
static json_t *item_content(json_t *c, bool user, const char *what, char *err, size_t errn) {
    static const char *const text_parts[] = {"input_text", "output_text", NULL};
    static const char *const img_keys[] = {"type", "image_url", "file_id", "detail", NULL};
    if (!json_is_array(c)) return mx_text_parts(c, text_parts, what, err, errn);
    json_t *parts = json_array(), *p;
    bool images = false;
    size_t k;
    json_array_foreach(c, k, p) {
        char w[64];
        snprintf(w, sizeof w, "%s[%zu]", what, k);
        const char *type = json_string_value(json_object_get(p, "type"));
        if (!type || strcmp(type, "input_image")) {
            json_t *one = json_pack("[O]", p), *t = mx_text_parts(one, text_parts, what, err, errn);
            json_decref(one);
            if (!t) { /* name the part by its own index */
                snprintf(err, errn, "'%s': %s parts are not supported (input_text and output_text with a string text%s are)", w, type ? type : "untyped",
                         user ? ", and input_image" : "");
                goto bad;
            }
            json_array_append_new(parts, json_pack("{s:s,s:o}", "type", "text", "text", t));
            continue;
        }
        if (!user) { snprintf(err, errn, "'%s': input_image parts are supported in user messages only", w); goto bad; }
        if (!mx_only_fields(p, img_keys, w, err, errn)) goto bad;
        json_t *url = json_object_get(p, "image_url"), *fid = json_object_get(p, "file_id"), *det = json_object_get(p, "detail");
        if (fid && !json_is_null(fid)) { snprintf(err, errn, "'%s.file_id' is not supported (no file store): send image_url as a data URL", w); goto bad; }
        if (det && !json_is_null(det) && (!json_is_string(det) || strcmp(json_string_value(det), "auto"))) {
            snprintf(err, errn, "'%s.detail' must be \"auto\" (the model's image processor decides the resolution)", w);
            goto bad;
        }
        if (!json_is_string(url)) { snprintf(err, errn, "'%s.image_url' must be a string (a data URL)", w); goto bad; }
        json_array_append_new(parts, json_pack("{s:s,s:{s:O}}", "type", "image_url", "image_url", "url", url));
        images = true;
    }
    if (images) return parts;
    mx_buf t = {0};
    json_array_foreach(parts, k, p) {
        json_t *x = json_object_get(p, "text");
        mx_buf_append(&t, json_string_value(x), json_string_length(x));
    }
    json_decref(parts);
    json_t *s = json_stringn(t.data ? t.data : "", t.len);
    mx_buf_free(&t);
    return s;
bad:
    json_decref(parts);
    return NULL;
}

static bool add_items(json_t *input, json_t *msgs, char *err, size_t errn) {
    if (json_is_string(input)) { json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", input)); return true; }
    if (!json_is_array(input) || !json_array_size(input)) { snprintf(err, errn, "'input' must be a string or a non-empty list of items"); return false; }
    size_t i;
    json_t *it;
    json_t *pending = NULL; /* function calls of one assistant turn */
    json_array_foreach(input, i, it) {
        if (!json_is_object(it)) { snprintf(err, errn, "input[%zu] must be an object", i); goto bad; }
        const char *type = json_string_value(json_object_get(it, "type"));
        char what[32];
        snprintf(what, sizeof what, "input[%zu]", i);
        if (!type || !strcmp(type, "message")) {
            static const char *const keys[] = {"type", "role", "content", "id", "status", NULL};
            if (!mx_only_fields(it, keys, what, err, errn)) goto bad;
            const char *role = json_string_value(json_object_get(it, "role"));
            if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") && strcmp(role, "developer"))) {
                snprintf(err, errn, "input[%zu].role must be user, assistant, system or developer", i);
                goto bad;
            }
            snprintf(what + strlen(what), sizeof what - strlen(what), ".content");
            json_t *t = item_content(json_object_get(it, "content"), !strcmp(role, "user"), what, err, errn);
            if (!t) goto bad;
            pending = NULL;
            json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", !strcmp(role, "developer") ? "system" : role, "content", t));
        } else if (!strcmp(type, "function_call")) {
            static const char *const keys[] = {"type", "call_id", "name", "arguments", "id", "status", NULL};
            if (!mx_only_fields(it, keys, what, err, errn)) goto bad;
            json_t *cid = json_object_get(it, "call_id"), *name = json_object_get(it, "name"), *args = json_object_get(it, "arguments");
            if (!json_is_string(cid) || !json_is_string(name) || !json_is_string(args)) {
                snprintf(err, errn, "input[%zu]: a function_call needs string call_id, name and arguments", i);
                goto bad;
            }
            /* arguments as the object templates render with tojson */
            json_t *a = json_loads(json_string_value(args), 0, NULL);
            if (!json_is_object(a)) { json_decref(a); snprintf(err, errn, "input[%zu].arguments must be a JSON object", i); goto bad; }
            json_t *call = json_pack("{s:O,s:s,s:{s:O,s:o}}", "id", cid, "type", "function", "function", "name", name, "arguments", a);
            if (!pending) {
                json_t *m = json_pack("{s:s,s:s,s:[]}", "role", "assistant", "content", "", "tool_calls");
                json_array_append_new(msgs, m);
                pending = json_object_get(m, "tool_calls");
            }
            json_array_append_new(pending, call);
        } else if (!strcmp(type, "function_call_output")) {
            static const char *const keys[] = {"type", "call_id", "output", "id", "status", NULL};
            if (!mx_only_fields(it, keys, what, err, errn)) goto bad;
            json_t *cid = json_object_get(it, "call_id"), *out = json_object_get(it, "output");
            if (!json_is_string(cid) || !json_is_string(out)) { snprintf(err, errn, "input[%zu]: a function_call_output needs string call_id and output", i); goto bad; }
            pending = NULL;
            json_array_append_new(msgs, json_pack("{s:s,s:O,s:O}", "role", "tool", "tool_call_id", cid, "content", out));
        } else if (!strcmp(type, "reasoning")) {
            /* earlier reasoning: chat templates drop it from past turns, so it is not rendered */
        } else {
            snprintf(err, errn, "input[%zu]: %s items are not supported", i, type);
            goto bad;
        }
    }
    return true;
bad:
    return false;
}

/* The request as a chat request; NULL with err and *code (400, or 404 for
 * an unknown previous_response_id). *state gets the route's own state for
 * the reply: {"store", "previous_response_id", "history": the conversation
 * without the instructions}. */
static json_t *translate(server *sv, json_t *req, json_t **state, unsigned *code, char *err, size_t errn) {
    *code = 400;
    static const char *const keys[] = {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "tools", "tool_choice",
                                       "parallel_tool_calls", "text", "store", "metadata", "reasoning", "truncation", "user", "previous_response_id",
                                       "include", "prompt_cache_key", "prompt_cache_retention", NULL};
    if (!mx_only_fields(req, keys, "", err, errn) || !mx_gen_check_cache_fields(req, err, errn)) return NULL;
    json_t *v = json_object_get(req, "store");
    bool store = true;
    if (v && !json_is_null(v) && !json_is_boolean(v)) { snprintf(err, errn, "'store' must be a boolean"); return NULL; }
    if (json_is_false(v)) store = false;
    json_t *prev_id = json_object_get(req, "previous_response_id"), *prev = NULL;
    if (prev_id && !json_is_null(prev_id)) {
        if (!json_is_string(prev_id)) { snprintf(err, errn, "'previous_response_id' must be a string"); return NULL; }
        if (!mx_resp_store_get(sv, json_string_value(prev_id), NULL, &prev)) {
            *code = 404;
            snprintf(err, errn, "Previous response with id '%.64s' not found.", json_string_value(prev_id));
            return NULL;
        }
    } else prev_id = NULL;
    json_t *o = json_object(), *msgs = json_array();
    json_object_set_new(o, "messages", msgs); /* o holds it from here: every exit frees o */
    if ((v = json_object_get(req, "include")) && !json_is_null(v) && (!json_is_array(v) || json_array_size(v))) { snprintf(err, errn, "'include' is not supported"); goto bad; }
    if ((v = json_object_get(req, "truncation")) && !json_is_null(v) && !(json_is_string(v) && !strcmp(json_string_value(v), "disabled"))) {
        snprintf(err, errn, "'truncation' must be \"disabled\"");
        goto bad;
    }
    if ((v = json_object_get(req, "reasoning")) && !json_is_null(v)) { snprintf(err, errn, "'reasoning' is not supported (a thinking model reasons as its template says)"); goto bad; }
    if ((v = json_object_get(req, "metadata")) && !json_is_null(v) && !json_is_object(v)) { snprintf(err, errn, "'metadata' must be an object"); goto bad; }
    if ((v = json_object_get(req, "user")) && !json_is_null(v) && !json_is_string(v)) { snprintf(err, errn, "'user' must be a string"); goto bad; }
    static const char *const same[] = {"model", "temperature", "top_p", "stream", "tool_choice", "parallel_tool_calls", NULL};
    for (int i = 0; same[i]; i++)
        if ((v = json_object_get(req, same[i]))) json_object_set(o, same[i], v);
    if ((v = json_object_get(req, "max_output_tokens"))) json_object_set(o, "max_tokens", v);
    /* tool_choice {"type": "function", "name": N} is the chat route's {"type": "function", "function": {"name": N}} */
    json_t *tc = json_object_get(req, "tool_choice");
    if (json_is_object(tc) && json_is_string(json_object_get(tc, "name")))
        json_object_set_new(o, "tool_choice", json_pack("{s:O,s:{s:O}}", "type", json_object_get(tc, "type"), "function", "name", json_object_get(tc, "name")));
    json_t *ins = json_object_get(req, "instructions");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) { snprintf(err, errn, "'instructions' must be a string"); goto bad; }
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", ins));
    }
    size_t n_ins = json_array_size(msgs);
    if (prev) json_array_extend(msgs, prev);
    if (!add_items(json_object_get(req, "input"), msgs, err, errn)) goto bad;
    /* the conversation to store (before the chat parse rewrites messages) */
    json_t *hist = json_array();
    for (size_t i = n_ins; i < json_array_size(msgs); i++) json_array_append_new(hist, json_deep_copy(json_array_get(msgs, i)));
    *state = json_pack("{s:b,s:O,s:o}", "store", store, "previous_response_id", prev_id ? prev_id : json_null(), "history", hist);
    json_t *tools = json_object_get(req, "tools");
    if (tools && !json_is_null(tools)) {
        static const char *const tool_keys[] = {"type", "name", "description", "parameters", "strict", NULL};
        if (!json_is_array(tools)) { snprintf(err, errn, "'tools' must be a list"); goto bad; }
        json_t *fns = json_array();
        json_object_set_new(o, "tools", fns);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            char what[32];
            snprintf(what, sizeof what, "tools[%zu]", i);
            const char *type = json_string_value(json_object_get(t, "type"));
            if (!json_is_object(t) || !type || strcmp(type, "function")) { snprintf(err, errn, "'%s.type' must be \"function\" (built-in tools are not supported)", what); goto bad; }
            if (!mx_only_fields(t, tool_keys, what, err, errn)) goto bad;
            json_t *f = json_deep_copy(t);
            json_object_del(f, "type");
            json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", f));
        }
    }
    json_t *text = json_object_get(req, "text");
    if (text && !json_is_null(text)) {
        static const char *const text_keys[] = {"format", "verbosity", NULL};
        if (!json_is_object(text) || !mx_only_fields(text, text_keys, "text", err, errn)) {
            if (!err[0]) snprintf(err, errn, "'text' must be an object");
            goto bad;
        }
        json_t *vb = json_object_get(text, "verbosity");
        if (vb && !json_is_null(vb) && !(json_is_string(vb) && !strcmp(json_string_value(vb), "medium"))) { snprintf(err, errn, "'text.verbosity' is not supported"); goto bad; }
        json_t *f = json_object_get(text, "format");
        const char *ft = json_string_value(json_object_get(f, "type"));
        if (f && !json_is_null(f)) {
            if (!ft) { snprintf(err, errn, "'text.format.type' must be a string"); goto bad; }
            if (!strcmp(ft, "json_schema")) {
                /* flat here, nested in the chat shape */
                json_t *js = json_deep_copy(f);
                json_object_del(js, "type");
                json_object_set_new(o, "response_format", json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", js));
            } else json_object_set(o, "response_format", f);
        }
    }
    json_decref(prev);
    return o;
bad:
    json_decref(prev);
    json_decref(o);
    return NULL;
}

/* ---- the reply ---- */

static void r_event(mx_gen *x, const char *name, json_t *data) {
    json_object_set_new(data, "type", json_string(name));
    json_object_set_new(data, "sequence_number", json_integer(x->n_events++));
    char *s = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (!s) return;
    mx_buf_printf(&x->sse, "event: %s\ndata: %s\n\n", name, s);
    free(s);
}

static json_t *r_usage(mx_gen *x) {
    int pt = mx_req_prompt_tokens(x->req);
    return json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", pt, "input_tokens_details", "cached_tokens", mx_req_cached_tokens(x->req), "output_tokens",
                     x->n_gen, "output_tokens_details", "reasoning_tokens", 0, "total_tokens", pt + x->n_gen);
}

static json_t *r_message(mx_gen *x, const char *status) {
    char id[64];
    snprintf(id, sizeof id, "msg_%s", x->id + 5);
    return json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:s%,s:[]}]}", "type", "message", "id", id, "status", status, "role", "assistant", "content", "type", "output_text",
                     "text", x->content.data ? x->content.data : "", x->content.len, "annotations");
}

static json_t *r_reasoning(mx_gen *x) {
    char id[64];
    snprintf(id, sizeof id, "rs_%s", x->id + 5);
    return json_pack("{s:s,s:s,s:[],s:[{s:s,s:s%}]}", "type", "reasoning", "id", id, "summary", "content", "type", "reasoning_text", "text",
                     x->reasoning.data ? x->reasoning.data : "", x->reasoning.len);
}

static json_t *r_call(json_t *call) {
    json_t *fn = json_object_get(call, "function");
    const char *cid = json_string_value(json_object_get(call, "id"));
    char id[64];
    snprintf(id, sizeof id, "fc_%s", cid + 5);
    return json_pack("{s:s,s:s,s:s,s:O,s:O,s:s}", "type", "function_call", "id", id, "call_id", cid, "name", json_object_get(fn, "name"), "arguments",
                     json_object_get(fn, "arguments"), "status", "completed");
}

/* The response object; output NULL: in progress. */
static json_t *r_response(mx_gen *x, json_t *output) {
    const char *status = !output ? "in_progress" : !x->finish ? "failed" : !strcmp(x->finish, "length") ? "incomplete" : "completed";
    json_t *st = x->g.route_data;
    json_t *r = json_pack("{s:s,s:s,s:i,s:s,s:s,s:o,s:O,s:n,s:O}", "id", x->id, "object", "response", "created_at", (json_int_t)x->created, "status", status,
                          "model", x->sv->name, "output", output ? output : json_array(), "previous_response_id",
                          json_object_get(st, "previous_response_id"), "error", "store", json_object_get(st, "store"));
    json_object_set_new(r, "incomplete_details", !strcmp(status, "incomplete") ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    json_object_set_new(r, "usage", output ? r_usage(x) : json_null());
    json_object_set_new(r, "parallel_tool_calls", json_boolean(!x->g.one_call));
    json_object_set_new(r, "tools", json_array());
    json_object_set_new(r, "metadata", json_object());
    if (!x->finish && output) json_object_set_new(r, "error", json_pack("{s:s,s:s}", "code", "server_error", "message", x->err_msg ? x->err_msg : "failed"));
    return r;
}

static json_t *r_output(mx_gen *x) {
    json_t *out = json_array();
    if (x->reasoning.len) json_array_append_new(out, r_reasoning(x));
    if (x->content.len || !x->calls) json_array_append_new(out, r_message(x, x->finish && !strcmp(x->finish, "length") ? "incomplete" : "completed"));
    size_t i;
    json_t *c;
    json_array_foreach(x->calls, i, c) json_array_append_new(out, r_call(c));
    return out;
}

static json_t *r_logprob(mx_gen *x, const mx_tok_event *ev) { (void)x; (void)ev; return NULL; }

static void r_start(mx_gen *x) {
    if (x->sent_role) return;
    x->sent_role = true;
    x->block = -1;
    r_event(x, "response.created", json_pack("{s:o}", "response", r_response(x, NULL)));
    r_event(x, "response.in_progress", json_pack("{s:o}", "response", r_response(x, NULL)));
}

/* Output items are opened in order: reasoning (index 0 when there is any), then the message. */
static void r_close_item(mx_gen *x) {
    if (!x->block_kind) return;
    bool msg = !strcmp(x->block_kind, "message");
    json_t *item = msg ? r_message(x, "completed") : r_reasoning(x);
    const char *id = json_string_value(json_object_get(item, "id"));
    json_t *part = json_incref(json_array_get(json_object_get(item, "content"), 0));
    const char *text = json_string_value(json_object_get(part, "text"));
    if (msg) {
        r_event(x, "response.output_text.done", json_pack("{s:s,s:i,s:i,s:s}", "item_id", id, "output_index", x->block, "content_index", 0, "text", text));
        r_event(x, "response.content_part.done", json_pack("{s:s,s:i,s:i,s:O}", "item_id", id, "output_index", x->block, "content_index", 0, "part", part));
    } else
        r_event(x, "response.reasoning_text.done", json_pack("{s:s,s:i,s:i,s:s}", "item_id", id, "output_index", x->block, "content_index", 0, "text", text));
    json_decref(part);
    r_event(x, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", x->block, "item", item));
    x->block_kind = NULL;
}

static void r_open(mx_gen *x, const char *kind) {
    bool msg = !strcmp(kind, "message");
    if (x->block_kind && !strcmp(x->block_kind, kind)) return;
    r_close_item(x);
    x->block++;
    x->block_kind = kind;
    json_t *item = msg ? r_message(x, "in_progress") : r_reasoning(x);
    json_array_clear(json_object_get(item, "content"));
    r_event(x, "response.output_item.added", json_pack("{s:i,s:O}", "output_index", x->block, "item", item));
    if (msg)
        r_event(x, "response.content_part.added", json_pack("{s:O,s:i,s:i,s:{s:s,s:s,s:[]}}", "item_id", json_object_get(item, "id"), "output_index", x->block,
                                                            "content_index", 0, "part", "type", "output_text", "text", "", "annotations"));
    json_decref(item);
}

static void r_text(mx_gen *x, const char *kind, const char *s, size_t n) {
    if (!n) return;
    bool msg = !strcmp(kind, "message");
    r_open(x, kind);
    char id[64];
    snprintf(id, sizeof id, "%s_%s", msg ? "msg" : "rs", x->id + 5);
    r_event(x, msg ? "response.output_text.delta" : "response.reasoning_text.delta",
            json_pack("{s:s,s:i,s:i,s:s%}", "item_id", id, "output_index", x->block, "content_index", 0, "delta", s, n));
}

static void r_delta(mx_gen *x, const char *content, size_t cn, const char *reasoning, size_t rn, json_t *lp) {
    json_decref(lp);
    r_start(x);
    r_text(x, "reasoning", reasoning, rn);
    r_text(x, "message", content, cn);
}

static void r_keep(mx_gen *x, json_t *resp);

static void r_final(mx_gen *x) {
    r_start(x);
    if (!x->calls && !x->content.len) r_open(x, "message"); /* no text: the message item still comes */
    r_close_item(x);
    size_t i;
    json_t *c;
    json_array_foreach(x->calls, i, c) {
        json_t *item = r_call(c);
        int idx = ++x->block;
        json_t *added = json_deep_copy(item);
        json_object_set_new(added, "arguments", json_string(""));
        json_object_set_new(added, "status", json_string("in_progress"));
        r_event(x, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", idx, "item", added));
        r_event(x, "response.function_call_arguments.delta", json_pack("{s:O,s:i,s:O}", "item_id", json_object_get(item, "id"), "output_index", idx, "delta",
                                                                       json_object_get(item, "arguments")));
        r_event(x, "response.function_call_arguments.done", json_pack("{s:O,s:i,s:O}", "item_id", json_object_get(item, "id"), "output_index", idx,
                                                                      "arguments", json_object_get(item, "arguments")));
        r_event(x, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", idx, "item", item));
    }
    json_t *resp = r_response(x, r_output(x));
    bool incomplete = !strcmp(json_string_value(json_object_get(resp, "status")), "incomplete");
    r_keep(x, resp);
    r_event(x, incomplete ? "response.incomplete" : "response.completed", json_pack("{s:o}", "response", resp));
}

/* store: keeps a finished response and the conversation it ends. */
static void r_keep(mx_gen *x, json_t *resp) {
    json_t *st = x->g.route_data;
    if (!x->finish || !json_is_true(json_object_get(st, "store"))) return;
    json_t *msgs = json_deep_copy(json_object_get(st, "history"));
    json_t *m = json_pack("{s:s,s:s%}", "role", "assistant", "content", x->content.data ? x->content.data : "", x->content.len);
    if (x->calls) {
        /* arguments as the object templates render with tojson (as add_items reads them) */
        json_t *calls = json_deep_copy(x->calls), *c;
        size_t i;
        json_array_foreach(calls, i, c) {
            json_t *fn = json_object_get(c, "function");
            json_t *a = json_loads(json_string_value(json_object_get(fn, "arguments")) ? json_string_value(json_object_get(fn, "arguments")) : "", 0, NULL);
            json_object_set_new(fn, "arguments", json_is_object(a) ? a : json_object());
            if (!json_is_object(a)) json_decref(a);
        }
        json_object_set_new(m, "tool_calls", calls);
    }
    json_array_append_new(msgs, m);
    mx_resp_store_put(x->sv, x->id, resp, msgs);
    json_decref(msgs);
}

static json_t *r_reply(mx_gen *x) {
    json_t *resp = r_response(x, r_output(x));
    r_keep(x, resp);
    return resp;
}

static void r_fail(mx_gen *x, const char *type, const char *msg) {
    r_start(x);
    (void)type;
    r_event(x, "response.failed", json_pack("{s:o}", "response", r_response(x, r_output(x))));
    (void)msg;
}

static const mx_gen_format r_format = {"resp", r_logprob, r_delta, r_final, r_reply, r_fail, NULL};

int mx_route_responses(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_gen_params g = {0};
    json_t *state = NULL;
    unsigned code = 400;
    json_t *o = translate(sv, req, &state, &code, err, sizeof err);
    bool ok = o && mx_chat_parse(sv, o, mx_srv_body_len(rq), &g, err, sizeof err) && (!g.images || mx_gen_prepare_images(sv, &g, err, sizeof err));
    json_decref(o);
    if (!ok) {
        json_decref(state);
        mx_gen_params_free(&g);
        return code == 404 ? mx_srv_error(sv, rq, 404, "invalid_request_error", err) : mx_srv_bad_request(sv, rq, "%s", err);
    }
    g.route_data = state;
    return mx_gen_run(sv, rq, &g, &r_format);
}

/* GET /v1/responses/{id}: a stored response; DELETE removes it. */
int mx_route_response_id(server *sv, mx_srv_req *rq, json_t *body) {
    (void)body;
    const char *path = mx_srv_path(rq), *id = strrchr(path, '/') + 1;
    json_t *resp = NULL;
    bool del = mx_srv_method(rq) == MX_HTTP_DELETE;
    if (del ? !mx_resp_store_delete(sv, id) : !mx_resp_store_get(sv, id, &resp, NULL)) {
        char msg[256];
        snprintf(msg, sizeof msg, "Response with id '%.64s' not found.", id);
        return mx_srv_error(sv, rq, 404, "invalid_request_error", msg);
    }
    if (del) return mx_srv_json(rq, 200, json_pack("{s:s,s:s,s:b}", "id", id, "object", "response", "deleted", 1));
    return mx_srv_json(rq, 200, resp);
}
