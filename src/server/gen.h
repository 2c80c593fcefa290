/* Internal to server/: one generation request from parsed parameters to the
 * reply. Routes of every API family fill an mx_gen_params (gen_params.c
 * parses the sampling and limit fields they share), then mx_gen_run submits
 * it to the scheduler and drives the reply in the shape of an
 * mx_gen_format: the family's streaming events and blocking body. The
 * runner itself (gen.c) knows no API: it turns token events into content,
 * reasoning, tool calls and a finish reason. */
#ifndef MX_SERVER_GEN_H
#define MX_SERVER_GEN_H
#include "server_int.h"
#include "../runtime/outparse.h"
#include "../runtime/vlprompt.h"

typedef struct {
    mx_req_params p;
    int32_t *prompt;
    int32_t *bias_ids;
    float *bias_vals;
    char **stops;
    int n_stops;
    bool stream, include_usage, logprobs, tools;
    bool one_call;           /* parallel_tool_calls false: at most one tool call */
    bool starts_in_think;    /* the prompt leaves the reply inside <think> */
    bool reasoning;          /* split <think> blocks into reasoning text */
    mx_vlprompt *images;     /* NULL, or the chat's images: decoded by the parse, their rows by
                                mx_gen_prepare_images; p.lay, p.rows and p.tags point into them */
    uint64_t *tags;
    json_t *route_data;      /* the route's own state for its reply format (owned; NULL: none) */
    int n;                   /* choices (OpenAI's n): samples of the one prompt; 0 or 1: one */
    long text_offset;        /* /v1/completions logprobs: characters of the prompt (text_offset's start) */
#define MX_GEN_MAX_N 64      /* the most choices one request may ask (and no more than the slots) */
} mx_gen_params;

void mx_gen_params_free(mx_gen_params *g);
/* The images' rows (the vision tower, or the cache), layout and tags for
 * the prompt; false with err. */
bool mx_gen_prepare_images(server *sv, mx_gen_params *g, char *err, size_t errn);
/* Frees the images (the scheduler has copied what it needs). */
void mx_gen_images_free(mx_gen_params *g);
/* The sampling and limit fields of the OpenAI request shape: model,
 * max_tokens, the sampling table's fields (temperature, top_p, ...; the
 * server's --temp etc. are their defaults), stream, stop, logit_bias. false
 * with err set when a field is bad. */
bool mx_gen_parse_common(server *sv, json_t *req, mx_gen_params *g, char *err, size_t errn);
/* Every field of req is one the routes read: the common ones, the
 * sampling table's, or extra (NULL-terminated); else false with err naming
 * it (a field not implemented is refused, never ignored). */
bool mx_gen_check_fields(json_t *req, const char *const *extra, char *err, size_t errn);
/* OpenAI's prompt_cache_key (a string: changes nothing, the cache is keyed by
 * the prompt) and prompt_cache_retention ("in_memory" only). */
bool mx_gen_check_cache_fields(json_t *req, char *err, size_t errn);
/* o has no keys beyond ok[] (NULL-terminated); else false with err
 * "'what.key' is not supported" ("'key' ..." when what is ""). */
bool mx_only_fields(json_t *o, const char *const *ok, const char *what, char *err, size_t errn);
/* Message content as one string: a string, or a list of parts whose type
 * is one of types[] (NULL-terminated, at most two) with a string text,
 * joined. NULL with err naming the part otherwise. */
json_t *mx_text_parts(json_t *c, const char *const *types, const char *what, char *err, size_t errn);
/* Optional fields with a range: absent or null leaves *out; false with err. */
bool mx_opt_int(json_t *req, const char *key, long lo, long hi, int *out, char *err, size_t errn);
bool mx_opt_bool(json_t *req, const char *key, bool *out, char *err, size_t errn);
/* The output constraint: response_format (json_object, json_schema),
 * llama-server's json_schema or grammar (GBNF) -> g->p.grammar (owned).
 * Call after the prompt is known (g->starts_in_think). false with err set
 * (an unsupported schema keyword is named). */
bool mx_gen_parse_grammar(server *sv, json_t *req, mx_gen_params *g, char *err, size_t errn);
/* tool_choice "required" or a named function: g->p.grammar holds the
 * reply to one call, in the template's format, of one of fns ({"name",
 * "parameters"} each), its arguments valid against the parameters. */
bool mx_gen_tool_grammar(server *sv, json_t *fns, mx_gen_params *g, char *err, size_t errn);
/* Adds a stop string (copied). */
int mx_gen_add_stop(mx_gen_params *g, const char *s);

/* The OpenAI requests parsed into generation parameters, prompt ids
 * included (what the routes submit; fuzz/fuzz_http.c checks them). false
 * with err set when the request is bad. body_len: the request's size (the
 * template's memory budget grows with it). */
bool mx_chat_parse(server *sv, json_t *req, size_t body_len, mx_gen_params *g, char *err, size_t errn);
bool mx_completion_parse(server *sv, json_t *req, mx_gen_params *g, char *err, size_t errn);
/* The chat request's messages (and tools, ...) rendered by the template
 * into text, not tokenized (llama-server's /apply-template). */
bool mx_chat_render(server *sv, json_t *req, size_t body_len, mx_buf *text, char *err, size_t errn);

typedef struct mx_gen mx_gen;
typedef struct mx_gen_multi mx_gen_multi;

/* How an API family shapes a generation's reply. */
typedef struct {
    const char *id_prefix;   /* "chatcmpl" -> id "chatcmpl-..." */
    /* Records a token's logprobs for the blocking reply (in x->lp) and
     * returns the streaming chunk's logprobs object for it (new reference). */
    json_t *(*logprob)(mx_gen *x, const mx_tok_event *ev);
    /* Streaming: appends the events for a piece of text (and logprobs lp,
     * taken; may be NULL) to x->sse. */
    void (*delta)(mx_gen *x, const char *content, size_t cn, const char *reasoning, size_t rn, json_t *lp);
    /* Streaming: appends the closing events (finish reason, usage, [DONE]). */
    void (*final)(mx_gen *x);
    /* Blocking: the reply body. */
    json_t *(*reply)(mx_gen *x);
    /* Streaming: appends the closing events of a generation that failed or
     * was cut (an error event; never a normal finish). */
    void (*fail)(mx_gen *x, const char *type, const char *msg);
    /* n > 1 (NULL: the format has one choice only): final writes a choice's
     * last chunk only, and close appends what ends the whole stream (the
     * usage of all choices, [DONE]) once every choice has its final. */
    void (*close)(mx_gen *x);
} mx_gen_format;

struct mx_gen {
    server *sv;
    mx_srv_req *rq;            /* held: woken by the scheduler */
    const mx_gen_format *fmt;
    mx_gen_params g;
    mx_req *req;
    mx_detok *dt;
    mx_outparse op;
    mx_buf content, reasoning; /* whole texts (blocking replies) */
    mx_buf piece, dc, dr;      /* scratch per event */
    json_t *lp;                /* the format's logprobs record */
    json_t *calls;             /* tool calls, at the end */
    int n_gen;
    const char *finish;        /* "stop", "length", "tool_calls"; NULL: failed (see error) */
    const char *err_type;      /* why it failed: "unavailable_error" (shutdown), "server_error" */
    const char *err_msg;
    char id[48];
    long created;
    mx_buf sse;                /* streaming bytes not yet sent */
    size_t sse_off;
    double last_out;           /* when bytes last went out (keep-alives) */
    bool done, finished, sent_role;
    int block;                 /* the Anthropic stream's open content block (its index; -1: none) */
    const char *block_kind;    /* its kind ("text", "thinking"; Responses: the open output item's) */
    int n_events;              /* Responses: the stream's sequence_number */
    int index;                 /* the choice's index (n > 1) */
    mx_gen_multi *multi;       /* n > 1: the choices together (usage counts the prompt once); NULL: one */
};

/* Submits g (taken) and answers rq with fmt's reply, streamed when g->stream. */
int mx_gen_run(server *sv, mx_srv_req *rq, mx_gen_params *g, const mx_gen_format *fmt);
/* Appends "data: JSON\n\n" to x->sse (takes chunk). */
void mx_gen_sse_put(mx_gen *x, json_t *chunk);
/* The usage object of the OpenAI shape (of all choices when n > 1: the
 * prompt once, every choice's completion tokens). */
json_t *mx_gen_usage(mx_gen *x);
/* A token's text as it adds it mid-text (a byte of a character the token
 * splits becomes U+FFFD; its bytes are in mx_gen_token_bytes). */
json_t *mx_gen_token_text(server *sv, int32_t id);
/* A token's raw bytes as a list of integers (those of a split character
 * too: OpenAI's logprobs "bytes"). */
json_t *mx_gen_token_bytes(server *sv, int32_t id);

extern const mx_gen_format mx_oai_chat_format, mx_oai_completion_format;
#endif
