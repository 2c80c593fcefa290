#include "outparse.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const TOOL_MARKERS[] = {"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"};

void mx_out_init(mx_outparse *o, bool reasoning, bool starts_in_think, bool tools, const char *const *stops, int n_stops) {
    memset(o, 0, sizeof *o);
    o->reasoning = reasoning;
    o->in_think = reasoning && starts_in_think;
    o->tools = tools;
    o->stops = stops;
    o->n_stops = n_stops;
}

void mx_out_free(mx_outparse *o) {
    mx_buf_free(&o->held);
    mx_buf_free(&o->tool_text);
}

/* Length of the longest suffix of s that is a proper prefix of m. */
static size_t partial_suffix(const char *s, size_t n, const char *m) {
    size_t ml = strlen(m);
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

static const char *find_mem(const char *h, size_t hn, const char *needle) {
    size_t nn = strlen(needle);
    if (!nn || nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == needle[0] && !memcmp(h + i, needle, nn)) return h + i;
    return NULL;
}

static void emit(mx_outparse *o, const char *p, size_t n, mx_buf *content, mx_buf *reasoning) {
    if (!n) return;
    if (o->in_think) mx_buf_append(reasoning, p, n);
    else if (o->in_tool) mx_buf_append(&o->tool_text, p, n);
    else {
        mx_buf_append(content, p, n);
        for (size_t i = 0; i < n; i++)
            if (p[i] != ' ' && p[i] != '\n' && p[i] != '\t' && p[i] != '\r') { o->any_content = true; break; }
    }
}

/* Processes held text as far as it is unambiguous. */
static void drain(mx_outparse *o, mx_buf *content, mx_buf *reasoning, bool final) {
    for (;;) {
        const char *h = o->held.data ? o->held.data : "";
        size_t n = o->held.len;
        if (!n) return;
        /* earliest marker (stop strings first: they end everything) */
        const char *best = NULL;
        size_t best_len = 0;
        int kind = 0; /* 1 stop, 2 think open, 3 think close, 4 tool */
        for (int i = 0; i < o->n_stops; i++) {
            const char *p = find_mem(h, n, o->stops[i]);
            if (p && (!best || p < best)) { best = p; best_len = strlen(o->stops[i]); kind = 1; o->stop_index = i; }
        }
        if (o->reasoning && !o->in_tool) {
            const char *m = o->in_think ? "</think>" : "<think>";
            const char *p = find_mem(h, n, m);
            /* an opening tag only counts before any content */
            if (p && (o->in_think || !o->any_content) && (!best || p < best)) { best = p; best_len = strlen(m); kind = o->in_think ? 3 : 2; }
        }
        if (o->tools && !o->in_tool && !o->in_think) {
            for (size_t i = 0; i < sizeof TOOL_MARKERS / sizeof TOOL_MARKERS[0]; i++) {
                const char *p = find_mem(h, n, TOOL_MARKERS[i]);
                if (p && (!best || p < best)) { best = p; best_len = 0; kind = 4; }
            }
            /* Llama 3 style: a JSON object with "name" as the whole reply */
            if (!o->any_content && !best) {
                size_t k = 0;
                while (k < n && (h[k] == ' ' || h[k] == '\n')) k++;
                if (k < n && h[k] == '{') { best = h + k; best_len = 0; kind = 4; }
            }
        }
        if (best) {
            emit(o, h, (size_t)(best - h), content, reasoning);
            size_t consumed = (size_t)(best - h) + best_len;
            if (kind == 1) { o->stopped = true; o->held.len = 0; return; }
            if (kind == 2) o->in_think = true;
            if (kind == 3) o->in_think = false;
            if (kind == 4) o->in_tool = true;
            memmove(o->held.data, h + consumed, n - consumed);
            o->held.len = n - consumed;
            continue;
        }
        /* keep back a tail that could still become a marker */
        size_t keep = 0;
        if (!final) {
            for (int i = 0; i < o->n_stops; i++) keep = MX_MAX(keep, partial_suffix(h, n, o->stops[i]));
            if (o->reasoning) keep = MX_MAX(keep, partial_suffix(h, n, o->in_think ? "</think>" : "<think>"));
            if (o->tools && !o->in_tool)
                for (size_t i = 0; i < sizeof TOOL_MARKERS / sizeof TOOL_MARKERS[0]; i++) keep = MX_MAX(keep, partial_suffix(h, n, TOOL_MARKERS[i]));
            if (o->tools && !o->any_content && !o->in_tool) {
                size_t k = 0;
                while (k < n && (h[k] == ' ' || h[k] == '\n')) k++;
                if (k == n) keep = n; /* only whitespace so far: a JSON call may follow */
            }
        }
        emit(o, h, n - keep, content, reasoning);
        memmove(o->held.data, h + n - keep, keep);
        o->held.len = keep;
        return;
    }
}

bool mx_out_push(mx_outparse *o, const char *txt, size_t n, mx_buf *content, mx_buf *reasoning) {
    if (o->stopped) return true;
    mx_buf_append(&o->held, txt, n);
    drain(o, content, reasoning, false);
    return o->stopped;
}

static void add_call(json_t *calls, json_t *name, json_t *args) {
    if (!json_is_string(name)) return;
    char id[32];
    snprintf(id, sizeof id, "call_%08x%04x", (unsigned)rand(), (unsigned)json_array_size(calls));
    char *a;
    if (json_is_string(args)) a = mx_strdup(json_string_value(args));
    else if (args) a = json_dumps(args, JSON_COMPACT);
    else a = mx_strdup("{}");
    json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:O,s:s}}", "id", id, "type", "function", "function", "name", name, "arguments", a ? a : "{}"));
    free(a);
}

/* Parses every JSON object in text (tool calls) into calls. */
static bool parse_calls(const char *text, size_t n, json_t *calls) {
    size_t i = 0;
    bool any = false;
    while (i < n) {
        while (i < n && text[i] != '{' && text[i] != '[') i++;
        if (i >= n) break;
        json_error_t e;
        json_t *j = json_loadb(text + i, n - i, JSON_DISABLE_EOF_CHECK, &e);
        if (!j) { i++; continue; }
        json_t *items = json_is_array(j) ? j : NULL;
        size_t cnt = items ? json_array_size(items) : 1;
        for (size_t k = 0; k < cnt; k++) {
            json_t *obj = items ? json_array_get(items, k) : j;
            if (!json_is_object(obj)) continue;
            json_t *fn = json_object_get(obj, "function");
            if (json_is_object(fn)) obj = fn;
            json_t *args = json_object_get(obj, "arguments");
            if (!args) args = json_object_get(obj, "parameters");
            json_t *name = json_object_get(obj, "name");
            if (json_is_string(name)) { add_call(calls, name, args); any = true; }
        }
        i += e.position > 0 ? (size_t)e.position : 1;
        json_decref(j);
    }
    return any;
}

void mx_out_finish(mx_outparse *o, mx_buf *content, mx_buf *reasoning, json_t **calls) {
    *calls = NULL;
    if (!o->stopped) drain(o, content, reasoning, true);
    if (!o->in_tool || !o->tool_text.len) return;
    json_t *arr = json_array();
    const char *t = o->tool_text.data;
    size_t n = o->tool_text.len;
    /* Mistral v11: [TOOL_CALLS]name[ARGS]{...} */
    const char *args_m = find_mem(t, n, "[ARGS]");
    if (args_m && !memcmp(t, "[TOOL_CALLS]", 12)) {
        const char *nm = t + 12;
        json_t *name = json_stringn(nm, (size_t)(args_m - nm));
        json_error_t e;
        json_t *a = json_loadb(args_m + 6, n - (size_t)(args_m + 6 - t), JSON_DISABLE_EOF_CHECK, &e);
        if (a) add_call(arr, name, a);
        json_decref(name);
        json_decref(a);
    } else parse_calls(t, n, arr);
    if (json_array_size(arr)) *calls = arr;
    else {
        json_decref(arr);
        mx_buf_append(content, t, n); /* not a tool call after all */
    }
}
