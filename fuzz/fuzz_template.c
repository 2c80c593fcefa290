/* libFuzzer target: parse and render fuzzed template text with a fixed chat
 * context. Limits are lowered so each input stays fast; any crash, leak,
 * sanitizer report or hang is a bug. A render with markup tracking (the
 * special tokens given as trusted variables instead) must give the same
 * text, with well-formed markup ranges. Build: see docs/fuzzing-template.md. */
#include "template/template.h"
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static json_t *g_ctx, *g_ctx2, *g_trusted; /* g_ctx2 + g_trusted = g_ctx */

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
    if (!g_ctx) {
        g_ctx = json_loads(g_ctx_json, JSON_PRESERVE_ORDER, NULL);
        g_ctx2 = json_copy(g_ctx);
        json_object_del(g_ctx2, "bos_token");
        json_object_del(g_ctx2, "eos_token");
        g_trusted = json_pack("{s:s,s:s}", "bos_token", "<s>", "eos_token", "</s>");
    }
    if (size > 1 << 16) return 0;
    mx_tmpl *t = mx_tmpl_parse((const char *)data, size, "fuzz.jinja");
    if (!t) return 0;
    mx_tmpl_limits lim = {.max_output = 1 << 20, .max_memory = 64 << 20, .max_steps = 200000, .max_depth = 200};
    mx_tmpl_set_limits(t, &lim);
    mx_buf out = {0};
    mx_tmpl_render(t, g_ctx, &out);
    mx_buf_free(&out);
    mx_tmpl_render_chat(t, g_ctx, &out);
    /* markup tracking never changes the output; its ranges are sorted, apart and inside it */
    mx_buf out2 = {0}, marks = {0};
    mx_tmpl_opts o = {.trusted = g_trusted, .markup = &marks};
    int rc = mx_tmpl_render_chat_ex(t, g_ctx2, &o, &out2);
    if (!rc) {
        if (out2.len != out.len || (out.len && memcmp(out.data, out2.data, out.len))) abort();
        const size_t *r = (const size_t *)(const void *)marks.data;
        size_t nr = marks.len / (2 * sizeof(size_t));
        for (size_t i = 0; i < nr; i++)
            if (r[2 * i] >= r[2 * i + 1] || r[2 * i + 1] > out2.len || (i && r[2 * i] <= r[2 * i - 1])) abort();
    }
    mx_buf_free(&out2);
    mx_buf_free(&marks);
    mx_buf_free(&out);
    mx_tmpl_free(t);
    return 0;
}
