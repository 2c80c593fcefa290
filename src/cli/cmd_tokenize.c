/* mlxcel tokenize -m DIR (-p TEXT | --jsonl FILE) [--no-special]
 * Prints one JSON line per input: {"ids": [...], "tokens": [...], "decoded": "..."}
 * where decoded is the decode of ids with special tokens kept. JSONL input
 * lines are objects with "text" and optional "add_special_tokens" (default
 * true, or false with --no-special). */
#define _GNU_SOURCE
#include "cli.h"
#include "../base/base.h"
#include "../tokenizer/tokenizer.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int json_str(mx_buf *b, const char *s, size_t n) {
    if (mx_buf_append(b, "\"", 1)) return MX_ERR;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20 || c == 0x7f) { snprintf(tmp, sizeof tmp, "\\u%04x", c); esc = tmp; }
        if (!esc) continue;
        if (mx_buf_append(b, s + run, i - run) || mx_buf_puts(b, esc)) return MX_ERR;
        run = i + 1;
    }
    if (mx_buf_append(b, s + run, n - run)) return MX_ERR;
    return mx_buf_append(b, "\"", 1);
}

static int one(const mx_tokenizer *t, const char *text, size_t len, bool special) {
    int32_t *ids = NULL;
    int n = 0;
    if (mx_tok_encode(t, text, len, special, &ids, &n)) return MX_ERR;
    mx_buf b = {0}, d = {0};
    int rc = mx_buf_puts(&b, "{\"ids\": [");
    for (int i = 0; !rc && i < n; i++) rc = mx_buf_printf(&b, "%s%d", i ? ", " : "", ids[i]);
    if (!rc) rc = mx_buf_puts(&b, "], \"tokens\": [");
    for (int i = 0; !rc && i < n; i++) {
        size_t l = 0;
        const char *s = mx_tok_token_str(t, ids[i], &l);
        if (i) rc = mx_buf_puts(&b, ", ");
        if (!rc) rc = json_str(&b, s ? s : "", s ? l : 0);
    }
    if (!rc) rc = mx_buf_puts(&b, "], \"decoded\": ");
    if (!rc) rc = mx_tok_decode(t, ids, n, false, &d);
    if (!rc) rc = json_str(&b, d.data ? d.data : "", d.len);
    if (!rc) rc = mx_buf_puts(&b, "}\n");
    if (!rc) fwrite(b.data, 1, b.len, stdout);
    mx_buf_free(&b);
    mx_buf_free(&d);
    free(ids);
    return rc;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --bench FILE: load time, then encode throughput on the file's text (first
 * pass with an empty word cache, then a second pass). */
static int bench(const char *dir, const char *file) {
    char *text;
    size_t len;
    if (mx_read_file(file, 1u << 30, &text, &len)) { fprintf(stderr, "mlxcel tokenize: %s\n", mx_errmsg()); return 1; }
    double w0 = mx_now(), c0 = cpu_now();
    mx_tokenizer *t = mx_tok_load(dir);
    double w1 = mx_now(), c1 = cpu_now();
    if (!t) { fprintf(stderr, "mlxcel tokenize: %s\n", mx_errmsg()); free(text); return 1; }
    printf("load %s: %.3f s wall, %.3f s cpu\n", dir, w1 - w0, c1 - c0);
    for (int pass = 0; pass < 2; pass++) {
        int32_t *ids = NULL;
        int n = 0;
        double a = mx_now(), ca = cpu_now();
        if (mx_tok_encode(t, text, len, false, &ids, &n)) { fprintf(stderr, "mlxcel tokenize: %s\n", mx_errmsg()); break; }
        double b = mx_now(), cb = cpu_now();
        printf("encode pass %d: %zu bytes -> %d tokens in %.3f s wall (%.2f MB/s), %.3f s cpu (%.2f MB/s)\n", pass + 1, len, n, b - a,
               (double)len / 1e6 / (b - a), cb - ca, (double)len / 1e6 / (cb - ca));
        mx_buf d = {0};
        a = mx_now();
        mx_tok_decode(t, ids, n, false, &d);
        b = mx_now();
        if (pass == 0) printf("decode: %.3f s wall (%.2f MB/s)\n", b - a, (double)d.len / 1e6 / (b - a));
        mx_buf_free(&d);
        free(ids);
    }
    mx_tok_free(t);
    free(text);
    return 0;
}

typedef struct {
    const char *model, *prompt, *jsonl, *bench;
    bool no_special;
} tok_opts;

static const mx_opt tok_tab[] = {
    OPT_MODEL(tok_opts, model),
    {"-p", "--prompt", NULL, OPT_STR, "TEXT", 0, 0, offsetof(tok_opts, prompt), "the text to tokenize", NULL, 0},
    {NULL, "--jsonl", NULL, OPT_STR, "FILE", 0, 0, offsetof(tok_opts, jsonl),
     "one {\"text\": ..., \"add_special_tokens\": bool} object per line ('-': standard input)", NULL, 0},
    {NULL, "--no-special", NULL, OPT_FLAG, NULL, 0, 0, offsetof(tok_opts, no_special), "do not add the special tokens (BOS/EOS)", NULL, 0},
    {NULL, "--bench", NULL, OPT_STR, "FILE", 0, 0, offsetof(tok_opts, bench), "load time and encode MB/s on FILE's text", NULL, 0},
    {0},
};

static int tok_main(const tok_opts *o, const char *dir);

static int tok_run(void *p) {
    const tok_opts *o = p;
    if (!o->model) { fprintf(stderr, "mlxcel tokenize: -m MODEL is required\n"); return 2; }
    if (!o->bench && !o->prompt == !o->jsonl) { fprintf(stderr, "mlxcel tokenize: give -p TEXT or --jsonl FILE (one of them)\n"); return 2; }
    char *dir = cli_model_dir("tokenize", o->model);
    if (!dir) return 1;
    int rc = o->bench && !o->prompt && !o->jsonl ? bench(dir, o->bench) : tok_main(o, dir);
    free(dir);
    return rc;
}

const mx_cmd mx_cmd_tokenize = {
    .name = "tokenize",
    .summary = "tokenize text with a tokenizer.json / tokenizer.model (ids, tokens, decoded)",
    .usage = "-m MODEL (-p TEXT | --jsonl FILE | --bench FILE) [--no-special]",
    .details = "Prints one JSON line per input with ids, tokens and decoded (the decode of ids with special tokens kept); "
               "the folder may hold only tokenizer files.",
    .opts = tok_tab,
    .size = sizeof(tok_opts),
    .samp_off = OPT_NO_SAMPLING,
    .run = tok_run,
};

static int tok_main(const tok_opts *o, const char *dir) {
    const char *prompt = o->prompt, *jsonl = o->jsonl;
    bool special = !o->no_special;
    mx_tokenizer *t = mx_tok_load(dir);
    if (!t) { fprintf(stderr, "mlxcel tokenize: %s\n", mx_errmsg()); return 1; }
    int rc = 0;
    if (prompt) {
        if (one(t, prompt, strlen(prompt), special)) { fprintf(stderr, "mlxcel tokenize: %s\n", mx_errmsg()); rc = 1; }
    } else {
        FILE *f = strcmp(jsonl, "-") ? fopen(jsonl, "rb") : stdin;
        if (!f) { fprintf(stderr, "mlxcel tokenize: %s: cannot open\n", jsonl); mx_tok_free(t); return 1; }
        char *line = NULL;
        size_t cap = 0;
        ssize_t r;
        int lineno = 0;
        while ((r = getline(&line, &cap, f)) > 0) {
            lineno++;
            size_t l = (size_t)r;
            while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) l--;
            if (!l) continue;
            json_error_t e;
            json_t *j = json_loadb(line, l, JSON_ALLOW_NUL, &e);
            json_t *tx = j ? json_object_get(j, "text") : NULL;
            if (!json_is_string(tx)) {
                fprintf(stderr, "mlxcel tokenize: %s: line %d: expected {\"text\": ...}\n", jsonl, lineno);
                json_decref(j);
                rc = 1;
                break;
            }
            json_t *sp = json_object_get(j, "add_special_tokens");
            bool s = sp ? json_is_true(sp) : special;
            if (one(t, json_string_value(tx), json_string_length(tx), s)) {
                fprintf(stderr, "mlxcel tokenize: %s: line %d: %s\n", jsonl, lineno, mx_errmsg());
                rc = 1;
            }
            json_decref(j);
            if (rc) break;
        }
        free(line);
        if (f != stdin) fclose(f);
    }
    fflush(stdout);
    mx_tok_free(t);
    return rc;
}
