/* libFuzzer target: parse and render fuzzed template text with a fixed chat
 * context. Limits are lowered so each input stays fast; any crash, leak,
 * sanitizer report or hang is a bug. Build: see docs/fuzzing-template.md. */
#include "template/template.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

static json_t *g_ctx;

static const char *const g_ctx_json =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"You are terse.\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \\u00e9\\u65e5\"}]},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"abc123def\", \"type\": \"function\","
    "   \"function\": {\"name\": \"get\", \"arguments\": {\"city\": \"Paris\", \"n\": 3, \"f\": 1.5}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"abc123def\", \"content\": \"{\\\"t\\\": 21}\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nDone.\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"description\": \"d\","
    "   \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 7, \"f\": 0.25, \"nul\": null}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_ctx) g_ctx = json_loads(g_ctx_json, JSON_PRESERVE_ORDER, NULL);
    if (size > 1 << 16) return 0;
    mx_tmpl *t = mx_tmpl_parse((const char *)data, size, "fuzz.jinja");
    if (!t) return 0;
    mx_tmpl_limits lim = {.max_output = 1 << 20, .max_memory = 64 << 20, .max_steps = 200000, .max_depth = 200};
    mx_tmpl_set_limits(t, &lim);
    mx_buf out = {0};
    mx_tmpl_render(t, g_ctx, &out);
    mx_buf_free(&out);
    mx_tmpl_render_chat(t, g_ctx, &out);
    mx_buf_free(&out);
    mx_tmpl_free(t);
    return 0;
}
