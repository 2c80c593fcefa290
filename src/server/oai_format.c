/* The OpenAI reply shapes of a generation: chat.completion(.chunk) and
 * text_completion, with their logprobs, usage and tool calls. */
#include "gen.h"
#include <string.h>

static json_t *chunk_base(mx_gen *x, const char *object) {
    return json_pack("{s:s,s:s,s:i,s:s}", "id", x->id, "object", object, "created", (json_int_t)x->created, "model", x->sv->name);
}

/* Streaming ends the same way in both shapes: the usage chunk when asked
 * for, then [DONE] (after every choice's last chunk when n > 1). */
static void oai_close_as(mx_gen *x, const char *object) {
    if (x->g.include_usage) {
        json_t *u = chunk_base(x, object);
        json_object_set_new(u, "choices", json_array());
        json_object_set_new(u, "usage", mx_gen_usage(x));
        mx_gen_sse_put(x, u);
    }
    mx_buf_puts(&x->sse, "data: [DONE]\n\n");
}

static void stream_close(mx_gen *x, json_t *last_chunk, const char *object) {
    mx_gen_sse_put(x, last_chunk);
    if (!x->multi) oai_close_as(x, object);
}

static void chat_close(mx_gen *x) { oai_close_as(x, "chat.completion.chunk"); }
static void text_close(mx_gen *x) { oai_close_as(x, "text_completion"); }

static json_t *reply_base(mx_gen *x, const char *object, json_t *choice) {
    return json_pack("{s:s,s:s,s:i,s:s,s:[o],s:o}", "id", x->id, "object", object, "created", (json_int_t)x->created, "model",
                     x->sv->name, "choices", choice, "usage", mx_gen_usage(x));
}

/* ---- chat.completion ---- */

static json_t *chat_logprob(mx_gen *x, const mx_tok_event *ev) {
    if (!x->lp) x->lp = json_array();
    json_t *tt = mx_gen_token_text(x->sv, ev->token), *top = json_array();
    for (int i = 0; i < ev->n_top; i++) {
        json_t *t2 = mx_gen_token_text(x->sv, ev->top_ids[i]);
        json_array_append_new(top, json_pack("{s:O,s:f,s:o}", "token", t2, "logprob", (double)ev->top_lp[i], "bytes", mx_gen_token_bytes(x->sv, ev->top_ids[i])));
        json_decref(t2);
    }
    json_t *e = json_pack("{s:O,s:f,s:o,s:o}", "token", tt, "logprob", (double)ev->logprob, "bytes", mx_gen_token_bytes(x->sv, ev->token), "top_logprobs", top);
    json_decref(tt);
    json_array_append(x->lp, e);
    return json_pack("{s:[o],s:n}", "content", e, "refusal");
}

static void chat_delta(mx_gen *x, const char *content, size_t cn, const char *reasoning, size_t rn, json_t *lp) {
    json_t *ch = chunk_base(x, "chat.completion.chunk"), *delta = json_object();
    if (!x->sent_role) { json_object_set_new(delta, "role", json_string("assistant")); x->sent_role = true; }
    if (cn || !rn) json_object_set_new(delta, "content", json_stringn(content ? content : "", cn));
    if (rn) json_object_set_new(delta, "reasoning_content", json_stringn(reasoning, rn));
    json_t *choice = json_pack("{s:i,s:o,s:o,s:n}", "index", x->index, "delta", delta, "logprobs", lp ? lp : json_null(), "finish_reason");
    json_object_set_new(ch, "choices", json_pack("[o]", choice));
    mx_gen_sse_put(x, ch);
}

static void chat_final(mx_gen *x) {
    json_t *ch = chunk_base(x, "chat.completion.chunk"), *delta = json_object();
    if (x->calls) {
        json_t *calls = json_deep_copy(x->calls);
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c) json_object_set_new(c, "index", json_integer((json_int_t)i));
        json_object_set_new(delta, "tool_calls", calls);
    }
    json_t *choice = json_pack("{s:i,s:o,s:n,s:s}", "index", x->index, "delta", delta, "logprobs", "finish_reason", x->finish);
    json_object_set_new(ch, "choices", json_pack("[o]", choice));
    stream_close(x, ch, "chat.completion.chunk");
}

static json_t *chat_reply(mx_gen *x) {
    const char *content = x->content.data ? x->content.data : "";
    json_t *msg = json_pack("{s:s,s:s%,s:n}", "role", "assistant", "content", content, x->content.len, "refusal");
    if (x->reasoning.len) json_object_set_new(msg, "reasoning_content", json_stringn(x->reasoning.data, x->reasoning.len));
    if (x->calls) {
        json_object_set(msg, "tool_calls", x->calls);
        if (!x->content.len) json_object_set_new(msg, "content", json_null());
    }
    json_t *lp = x->g.logprobs ? json_pack("{s:o,s:n}", "content", x->lp ? json_incref(x->lp) : json_array(), "refusal") : json_null();
    json_t *choice = json_pack("{s:i,s:o,s:o,s:s}", "index", x->index, "message", msg, "logprobs", lp, "finish_reason", x->finish);
    return reply_base(x, "chat.completion", choice);
}

/* A stream that cannot finish normally ends with an error object, then [DONE]. */
static void oai_fail(mx_gen *x, const char *type, const char *msg) {
    mx_gen_sse_put(x, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", msg, "type", type, "param", "code"));
    mx_buf_puts(&x->sse, "data: [DONE]\n\n");
}

const mx_gen_format mx_oai_chat_format = {"chatcmpl", chat_logprob, chat_delta, chat_final, chat_reply, oai_fail, chat_close};

/* ---- text_completion ---- */

static json_t *text_logprob(mx_gen *x, const mx_tok_event *ev) {
    if (!x->lp) x->lp = json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset");
    json_t *tt = mx_gen_token_text(x->sv, ev->token), *top = json_object();
    json_t *off = json_integer(x->g.text_offset); /* the token's first character, counted from the prompt's start */
    for (const unsigned char *p = (const unsigned char *)json_string_value(tt); *p; p++) x->g.text_offset += (*p & 0xc0) != 0x80;
    for (int i = 0; i < ev->n_top; i++) {
        json_t *t2 = mx_gen_token_text(x->sv, ev->top_ids[i]);
        json_object_set_new(top, json_string_value(t2), json_real(ev->top_lp[i]));
        json_decref(t2);
    }
    json_t *lpv = json_real(ev->logprob);
    json_array_append(json_object_get(x->lp, "tokens"), tt);
    json_array_append(json_object_get(x->lp, "token_logprobs"), lpv);
    json_array_append(json_object_get(x->lp, "top_logprobs"), top);
    json_array_append(json_object_get(x->lp, "text_offset"), off);
    return json_pack("{s:[o],s:[o],s:[o],s:[o]}", "tokens", tt, "token_logprobs", lpv, "top_logprobs", top, "text_offset", off);
}

static void text_delta(mx_gen *x, const char *content, size_t cn, const char *reasoning, size_t rn, json_t *lp) {
    (void)reasoning; (void)rn;
    json_t *ch = chunk_base(x, "text_completion");
    json_t *choice = json_pack("{s:i,s:s%,s:o,s:n}", "index", x->index, "text", content ? content : "", cn, "logprobs", lp ? lp : json_null(), "finish_reason");
    json_object_set_new(ch, "choices", json_pack("[o]", choice));
    mx_gen_sse_put(x, ch);
}

static void text_final(mx_gen *x) {
    json_t *ch = chunk_base(x, "text_completion");
    json_t *choice = json_pack("{s:i,s:s,s:n,s:s}", "index", x->index, "text", "", "logprobs", "finish_reason", x->finish);
    json_object_set_new(ch, "choices", json_pack("[o]", choice));
    stream_close(x, ch, "text_completion");
}

static json_t *text_reply(mx_gen *x) {
    const char *content = x->content.data ? x->content.data : "";
    json_t *lp = x->g.logprobs ? (x->lp ? json_incref(x->lp) : json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs", "text_offset"))
                               : json_null();
    json_t *choice = json_pack("{s:i,s:s%,s:o,s:s}", "index", x->index, "text", content, x->content.len, "logprobs", lp, "finish_reason", x->finish);
    return reply_base(x, "text_completion", choice);
}

const mx_gen_format mx_oai_completion_format = {"cmpl", text_logprob, text_delta, text_final, text_reply, oai_fail, text_close};
