/* outparse: splits generated text into what an OpenAI client sees —
 * content, reasoning_content (<think>...</think>), tool calls (Hermes/Qwen
 * <tool_call>, Mistral [TOOL_CALLS], Llama 3 JSON) — and applies stop
 * strings. Text is pushed as it is generated; deltas come out as soon as
 * they cannot be part of a marker or a stop string. */
#ifndef MX_OUTPARSE_H
#define MX_OUTPARSE_H
#include "../base/base.h"
#include <jansson.h>

typedef struct {
    bool reasoning;        /* the model may open a <think> block */
    bool in_think;         /* currently inside it */
    bool tools;            /* the request offered tools */
    bool in_tool;          /* a tool-call section started: buffered to the end */
    bool stopped;          /* a stop string was seen */
    int stop_index;        /* which one (stops[stop_index]) */
    bool any_content;      /* content emitted so far (llama3 JSON calls must lead) */
    const char *const *stops;
    int n_stops;
    mx_buf held;           /* pending text: may be the start of a marker */
    mx_buf tool_text;
} mx_outparse;

void mx_out_init(mx_outparse *o, bool reasoning, bool starts_in_think, bool tools, const char *const *stops, int n_stops);
void mx_out_free(mx_outparse *o);
/* Appends visible deltas; returns true once a stop string ended the text. */
bool mx_out_push(mx_outparse *o, const char *txt, size_t n, mx_buf *content, mx_buf *reasoning);
/* End of generation: flushes held text; *calls gets a JSON array of OpenAI
 * tool calls (or NULL when there are none). */
void mx_out_finish(mx_outparse *o, mx_buf *content, mx_buf *reasoning, json_t **calls);
#endif
