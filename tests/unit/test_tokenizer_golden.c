/* Golden runner: every line of tests/tokenizers/NAME/golden.jsonl (ids,
 * tokens, decoded; with and without special tokens), llama.cpp's
 * upstream_vectors, streaming detokenization on every golden, and the llama2
 * tokenizer.model alone. One ok/FAIL line per tokenizer x mode. The data dir
 * is $MX_TOK_DATA or tests/tokenizers (run from the repo root).
 * Slow formats: the multimodal fixtures' tokenizers (tests/tokenizers/slow/NAME:
 * vocab.json + merges.txt or tokenizer.model, cases.jsonl = the processor's text
 * and the reference input_ids), and the gpt2 / qwen3 goldens once more from a
 * vocab.json + merges.txt written out of their tokenizer.json. */
#define _GNU_SOURCE
#include "test.h"
#include "tokenizer/tokenizer.h"
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *g_data;

static void show(mx_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n && i < 200; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '\\') mx_buf_printf(b, "\\x%02x", c);
        else mx_buf_append(b, &s[i], 1);
    }
}

static void show_ids(mx_buf *b, const int32_t *ids, int n) {
    mx_buf_puts(b, "[");
    for (int i = 0; i < n && i < 40; i++) mx_buf_printf(b, "%s%d", i ? "," : "", ids[i]);
    if (n > 40) mx_buf_puts(b, ",...");
    mx_buf_puts(b, "]");
}

/* Runs one golden file against tokenizer t; label e.g. "llama3". */
static void run_golden(mx_tokenizer *t, const char *label, const char *path, bool check_tokens) {
    FILE *f = fopen(path, "rb");
    if (!f) { printf("FAIL golden/%s: cannot open %s\n", label, path); t_failed++; return; }
    char *line = NULL;
    size_t cap = 0;
    ssize_t r;
    int lines[2] = {0, 0}, bad[2] = {0, 0}, sbad = 0, slines = 0;
    mx_buf first[2] = {{0}, {0}}, sfirst = {0};
    int lineno = 0;
    while ((r = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_error_t e;
        json_t *j = json_loadb(line, (size_t)r, JSON_ALLOW_NUL, &e);
        if (!j) continue;
        json_t *jt = json_object_get(j, "text");
        const char *text = json_string_value(jt);
        size_t tl = json_string_length(jt);
        bool sp = json_is_true(json_object_get(j, "add_special_tokens"));
        json_t *jids = json_object_get(j, "ids"), *jtok = json_object_get(j, "tokens"), *jdec = json_object_get(j, "decoded");
        int m = sp ? 0 : 1;
        lines[m]++;
        int32_t *ids = NULL;
        int n = 0;
        mx_buf why = {0};
        if (mx_tok_encode(t, text, tl, sp, &ids, &n)) {
            mx_buf_printf(&why, "encode error %s", mx_errmsg());
        } else {
            int gn = (int)json_array_size(jids);
            int32_t *g = malloc(sizeof(int32_t) * (size_t)(gn + 1));
            for (int i = 0; i < gn; i++) g[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            if (gn != n || (n && memcmp(g, ids, sizeof(int32_t) * (size_t)n))) {
                mx_buf_puts(&why, "ids ");
                show_ids(&why, ids, n);
                mx_buf_puts(&why, " want ");
                show_ids(&why, g, gn);
            } else {
                for (int i = 0; check_tokens && i < n && !why.len; i++) {
                    size_t l;
                    const char *s = mx_tok_token_str(t, ids[i], &l);
                    json_t *x = json_array_get(jtok, (size_t)i);
                    if (!s || l != json_string_length(x) || memcmp(s, json_string_value(x), l)) mx_buf_printf(&why, "token %d differs", i);
                }
                mx_buf d = {0};
                if (!why.len && mx_tok_decode(t, ids, n, false, &d)) mx_buf_printf(&why, "decode error %s", mx_errmsg());
                else if (!why.len && (d.len != json_string_length(jdec) || memcmp(d.data, json_string_value(jdec), d.len))) {
                    mx_buf_puts(&why, "decoded \"");
                    show(&why, d.data, d.len);
                    mx_buf_puts(&why, "\" want \"");
                    show(&why, json_string_value(jdec), json_string_length(jdec));
                    mx_buf_puts(&why, "\"");
                }
                mx_buf_free(&d);
                /* streaming */
                slines++;
                mx_detok *dt = mx_detok_new(t, false);
                mx_buf s = {0};
                for (int i = 0; dt && i < n; i++) mx_detok_push(dt, g[i], &s);
                if (dt) mx_detok_flush(dt, &s);
                mx_detok_free(dt);
                if (s.len != json_string_length(jdec) || (s.len && memcmp(s.data, json_string_value(jdec), s.len))) {
                    if (!sbad++) {
                        mx_buf_printf(&sfirst, "line %d: streamed \"", lineno);
                        show(&sfirst, s.data ? s.data : "", s.len);
                        mx_buf_puts(&sfirst, "\" want \"");
                        show(&sfirst, json_string_value(jdec), json_string_length(jdec));
                        mx_buf_puts(&sfirst, "\"");
                    }
                }
                mx_buf_free(&s);
            }
            free(g);
        }
        if (why.len) {
            if (!bad[m]++) {
                mx_buf_printf(&first[m], "line %d text \"", lineno);
                show(&first[m], text, tl);
                mx_buf_printf(&first[m], "\": %s", why.data);
            }
        }
        mx_buf_free(&why);
        free(ids);
        json_decref(j);
    }
    free(line);
    fclose(f);
    for (int m = 0; m < 2; m++) {
        if (!bad[m] && lines[m]) printf("ok golden/%s/%s (%d lines)\n", label, m ? "plain" : "special", lines[m]);
        else { printf("FAIL golden/%s/%s: %d/%d lines differ; first: %s\n", label, m ? "plain" : "special", bad[m], lines[m], first[m].data ? first[m].data : "no lines"); t_failed++; }
        mx_buf_free(&first[m]);
    }
    if (!sbad) printf("ok stream/%s (%d lines)\n", label, slines);
    else { printf("FAIL stream/%s: %d/%d lines differ; first: %s\n", label, sbad, slines, sfirst.data); t_failed++; }
    mx_buf_free(&sfirst);
}

static void run_upstream(mx_tokenizer *t, const char *label, const char *inp, const char *outp) {
    char *a, *b;
    size_t al, bl;
    if (mx_read_file(inp, 1 << 24, &a, &al) || mx_read_file(outp, 1 << 24, &b, &bl)) {
        printf("FAIL upstream/%s: %s\n", label, mx_errmsg());
        t_failed++;
        return;
    }
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    char *p = a, *q = b;
    int cnt = 0, bad = 0;
    mx_buf first = {0};
    while (p < a + al) {
        char *e = strstr(p, sep);
        if (!e) break;
        char *qe = strchr(q, '\n');
        if (!qe) qe = b + bl;
        int32_t *ids = NULL;
        int n = 0;
        mx_buf got = {0};
        if (mx_tok_encode(t, p, (size_t)(e - p), false, &ids, &n)) mx_buf_printf(&got, "error %s", mx_errmsg());
        for (int i = 0; i < n; i++) mx_buf_printf(&got, " %d", ids[i]);
        size_t wl = (size_t)(qe - q);
        if (got.len != wl || (wl && memcmp(got.data, q, wl))) {
            if (!bad++) {
                mx_buf_printf(&first, "vector %d \"", cnt);
                show(&first, p, (size_t)(e - p));
                mx_buf_printf(&first, "\": got%s want %.*s", got.data ? got.data : "", (int)MX_MIN(wl, 300u), q);
            }
        }
        mx_buf_free(&got);
        free(ids);
        cnt++;
        p = e + sl;
        q = qe + 1;
    }
    if (!bad && cnt) printf("ok upstream/%s (%d vectors)\n", label, cnt);
    else { printf("FAIL upstream/%s: %d/%d differ; first: %s\n", label, bad, cnt, first.data ? first.data : "none"); t_failed++; }
    mx_buf_free(&first);
    free(a);
    free(b);
}

/* tests/tokenizers/slow/NAME/cases.jsonl: {"text", "add_special_tokens", "ids"} */
static void run_slow_cases(const char *name) {
    char *dir = mx_asprintf("%s/slow/%s", g_data, name), *cases = mx_asprintf("%s/cases.jsonl", dir);
    mx_tokenizer *t = mx_tok_load(dir);
    if (!t) { printf("FAIL slow/%s: load: %s\n", name, mx_errmsg()); t_failed++; }
    FILE *f = t ? fopen(cases, "rb") : NULL;
    char *line = NULL;
    size_t cap = 0;
    int n_ok = 0, n_bad = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        json_t *jt = json_object_get(j, "text"), *jids = json_object_get(j, "ids");
        int32_t *ids = NULL;
        int n = 0;
        mx_buf why = {0};
        if (mx_tok_encode(t, json_string_value(jt), json_string_length(jt), json_is_true(json_object_get(j, "add_special_tokens")), &ids, &n))
            mx_buf_printf(&why, "encode error %s", mx_errmsg());
        else {
            int gn = (int)json_array_size(jids);
            bool same = gn == n;
            for (int i = 0; same && i < n; i++) same = ids[i] == (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
            if (!same) {
                int32_t *g = malloc(sizeof(int32_t) * (size_t)(gn + 1));
                for (int i = 0; i < gn; i++) g[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
                mx_buf_puts(&why, "ids ");
                show_ids(&why, ids, n);
                mx_buf_puts(&why, " want ");
                show_ids(&why, g, gn);
                free(g);
            }
            /* the stream equals the decode */
            mx_buf d = {0}, s = {0};
            mx_tok_decode(t, ids, n, false, &d);
            mx_detok *dt = mx_detok_new(t, false);
            for (int i = 0; dt && i < n; i++) mx_detok_push(dt, ids[i], &s);
            if (dt) mx_detok_flush(dt, &s);
            mx_detok_free(dt);
            if (!why.len && (d.len != s.len || (d.len && memcmp(d.data, s.data, d.len)))) mx_buf_puts(&why, "streamed text differs from the decode");
            mx_buf_free(&d);
            mx_buf_free(&s);
        }
        if (why.len) { n_bad++; printf("FAIL slow/%s: %s\n", name, why.data); t_failed++; }
        else n_ok++;
        mx_buf_free(&why);
        free(ids);
        json_decref(j);
    }
    if (t && !n_bad) printf("ok slow/%s (%d prompt%s)\n", name, n_ok, n_ok == 1 ? "" : "s");
    if (t && !f) { printf("FAIL slow/%s: cannot open %s\n", name, cases); t_failed++; }
    if (f) fclose(f);
    free(line);
    mx_tok_free(t);
    free(dir);
    free(cases);
}

/* NAME's tokenizer.json (BPE) written as vocab.json + merges.txt +
 * tokenizer_config.json (added_tokens_decoder) of class CLS, then its golden. */
static void run_slow_golden(const char *name, const char *cls) {
    char *src = mx_asprintf("%s/%s/tokenizer.json", g_data, name), *gold = mx_asprintf("%s/%s/golden.jsonl", g_data, name);
    char *csrc = mx_asprintf("%s/%s/tokenizer_config.json", g_data, name);
    char tmpl[] = "/tmp/mxslowXXXXXX";
    char *td = mkdtemp(tmpl);
    char *vp = mx_asprintf("%s/vocab.json", td), *mp = mx_asprintf("%s/merges.txt", td), *cp = mx_asprintf("%s/tokenizer_config.json", td);
    json_error_t e;
    json_t *tj = json_load_file(src, 0, &e), *cfg = json_load_file(csrc, 0, &e);
    json_t *model = json_object_get(tj, "model"), *merges = json_object_get(model, "merges");
    if (!tj || !cfg || !merges) { printf("FAIL slow-golden/%s: cannot read %s\n", name, src); t_failed++; goto done; }
    json_dump_file(json_object_get(model, "vocab"), vp, 0);
    FILE *f = fopen(mp, "wb");
    fputs("#version: 0.2\n", f);
    for (size_t i = 0; i < json_array_size(merges); i++) {
        json_t *m = json_array_get(merges, i);
        if (json_is_string(m)) fprintf(f, "%s\n", json_string_value(m));
        else fprintf(f, "%s %s\n", json_string_value(json_array_get(m, 0)), json_string_value(json_array_get(m, 1)));
    }
    fclose(f);
    json_t *dec = json_object();
    json_t *added = json_object_get(tj, "added_tokens");
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i), *o = json_object();
        const char *keys[] = {"content", "special", "lstrip", "rstrip", "normalized", "single_word"};
        for (int k = 0; k < 6; k++) json_object_set(o, keys[k], json_object_get(a, keys[k]));
        char id[16];
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(a, "id")));
        json_object_set_new(dec, id, o);
    }
    json_object_set_new(cfg, "added_tokens_decoder", dec);
    json_object_set_new(cfg, "tokenizer_class", json_string(cls));
    json_dump_file(cfg, cp, 0);
    mx_tokenizer *t = mx_tok_load(td);
    char *lab = mx_asprintf("%s-slow", name);
    if (!t) { printf("FAIL load/%s: %s\n", lab, mx_errmsg()); t_failed++; }
    else { printf("ok load/%s\n", lab); run_golden(t, lab, gold, true); mx_tok_free(t); }
    free(lab);
done:
    json_decref(tj);
    json_decref(cfg);
    unlink(vp); unlink(mp); unlink(cp); rmdir(td);
    free(vp); free(mp); free(cp); free(src); free(gold); free(csrc);
}

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    g_data = getenv("MX_TOK_DATA");
    if (!g_data) g_data = "tests/tokenizers";
    DIR *d = opendir(g_data);
    if (!d) { printf("FAIL golden: cannot open %s (run from the repo root or set MX_TOK_DATA)\n", g_data); return 1; }
    char *names[64];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nn < 64) {
        if (de->d_name[0] == '.' || de->d_name[0] == '_') continue;
        char *p = mx_asprintf("%s/%s/golden.jsonl", g_data, de->d_name);
        if (mx_file_exists(p)) names[nn++] = mx_strdup(de->d_name);
        free(p);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof(char *), cmpstr);
    for (int i = 0; i < nn; i++) {
        char *dir = mx_asprintf("%s/%s", g_data, names[i]);
        char *tj = mx_asprintf("%s/tokenizer.json", dir);
        char *gold = mx_asprintf("%s/golden.jsonl", dir);
        mx_tokenizer *t = NULL;
        if (!mx_file_exists(tj)) {
            /* large files are fetched by tests/tokenizers/fetch.sh into tests/cache */
            free(dir);
            dir = mx_asprintf("tests/cache/tokenizers/%s", names[i]);
            char *altj = mx_asprintf("%s/tokenizer.json", dir);
            bool have = mx_file_exists(altj);
            free(altj);
            if (!have) {
                printf("FAIL golden/%s: tokenizer.json not present (tests/tokenizers/fetch.sh fetches it)\n", names[i]);
                t_failed++;
                free(dir); free(tj); free(gold); free(names[i]);
                continue;
            }
        }
        double t0 = mx_now();
        t = mx_tok_load(dir);
        double t1 = mx_now();
        if (!t) { printf("FAIL load/%s: %s\n", names[i], mx_errmsg()); t_failed++; }
        else {
            printf("ok load/%s (%.0f ms)\n", names[i], (t1 - t0) * 1e3);
            run_golden(t, names[i], gold, true);
            const char *ups[] = {"upstream_vectors", "upstream_vectors_phi-3"};
            for (int k = 0; k < 2; k++) {
                char *inp = mx_asprintf("%s/%s/%s.inp", g_data, names[i], ups[k]);
                char *outp = mx_asprintf("%s/%s/%s.out", g_data, names[i], ups[k]);
                char *lab = mx_asprintf("%s/%s", names[i], ups[k]);
                if (mx_file_exists(inp)) run_upstream(t, lab, inp, outp);
                free(inp); free(outp); free(lab);
            }
            mx_tok_free(t);
        }
        /* tokenizer.model alone (copied into a temp dir without tokenizer.json) */
        char *model = mx_asprintf("%s/%s/tokenizer.model", g_data, names[i]);
        if (mx_file_exists(model)) {
            char tmpl[] = "/tmp/mxtokXXXXXX";
            char *td = mkdtemp(tmpl);
            char *dst = mx_asprintf("%s/tokenizer.model", td), *cdst = mx_asprintf("%s/tokenizer_config.json", td);
            char *csrc = mx_asprintf("%s/%s/tokenizer_config.json", g_data, names[i]);
            char *data; size_t len;
            if (!mx_read_file(model, 1 << 28, &data, &len)) { FILE *o = fopen(dst, "wb"); fwrite(data, 1, len, o); fclose(o); free(data); }
            if (!mx_read_file(csrc, 1 << 26, &data, &len)) { FILE *o = fopen(cdst, "wb"); fwrite(data, 1, len, o); fclose(o); free(data); }
            mx_tokenizer *tm = mx_tok_load(td);
            char *lab = mx_asprintf("%s-model", names[i]);
            if (!tm) { printf("FAIL load/%s: %s\n", lab, mx_errmsg()); t_failed++; }
            else { printf("ok load/%s\n", lab); run_golden(tm, lab, gold, true); mx_tok_free(tm); }
            unlink(dst); unlink(cdst); rmdir(td);
            free(dst); free(cdst); free(csrc); free(lab);
        }
        free(model);
        free(dir); free(tj); free(gold); free(names[i]);
    }
    run_slow_golden("gpt2", "GPT2Tokenizer");
    run_slow_golden("qwen3", "Qwen2Tokenizer");
    char *sd = mx_asprintf("%s/slow", g_data);
    DIR *ds = opendir(sd);
    char *snames[64];
    int ns = 0;
    while (ds && (de = readdir(ds)) && ns < 64) {
        char *p = mx_asprintf("%s/%s/cases.jsonl", sd, de->d_name);
        if (de->d_name[0] != '.' && mx_file_exists(p)) snames[ns++] = mx_strdup(de->d_name);
        free(p);
    }
    if (ds) closedir(ds);
    if (!ns) { printf("FAIL slow: no cases under %s\n", sd); t_failed++; }
    qsort(snames, (size_t)ns, sizeof(char *), cmpstr);
    for (int i = 0; i < ns; i++) { run_slow_cases(snames[i]); free(snames[i]); }
    free(sd);
    TEST_END();
}
