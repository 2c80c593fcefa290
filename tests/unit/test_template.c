#define _POSIX_C_SOURCE 200809L
/* Template engine tests: every template x case golden of tests/templates
 * (rendered by HF transformers) must match byte for byte, plus unit tests of
 * the engine's pieces. Run from the repository root. */
#include "test.h"
#include "base/base.h"
#include "template/template.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(const char *path, size_t *len) {
    char *d = NULL;
    if (mx_read_file(path, (size_t)64 << 20, &d, len) != MX_OK) return NULL;
    return d;
}

static void report_diff(const char *name, const char *got, size_t gl, const char *want, size_t wl) {
    size_t i = 0;
    while (i < gl && i < wl && got[i] == want[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    printf("FAIL %s: differs at byte %zu (got %zu bytes, want %zu)\n  got:  ", name, i, gl, wl);
    for (size_t k = from; k < MX_MIN(gl, i + 40); k++) putchar(got[k] == '\n' ? '|' : got[k]);
    printf("\n  want: ");
    for (size_t k = from; k < MX_MIN(wl, i + 40); k++) putchar(want[k] == '\n' ? '|' : want[k]);
    printf("\n");
    t_failed++;
}

static void golden_tests(void) {
    json_error_t je;
    json_t *cases = json_load_file("tests/templates/cases.json", JSON_PRESERVE_ORDER, &je);
    CHECK("golden cases.json loads", cases != NULL, "%s", je.text);
    if (!cases) return;
    json_t *templates = json_object_get(cases, "templates"), *clist = json_object_get(cases, "cases");
    const char *tname;
    json_t *tinfo;
    int pass = 0, total = 0;
    json_object_foreach(templates, tname, tinfo) {
        char path[512];
        snprintf(path, sizeof path, "tests/templates/%s", json_string_value(json_object_get(tinfo, "file")));
        size_t sl;
        char *src = read_all(path, &sl);
        mx_tmpl *t = src ? mx_tmpl_parse(src, sl, json_string_value(json_object_get(tinfo, "file"))) : NULL;
        size_t ci;
        json_t *cs;
        json_array_foreach(clist, ci, cs) {
            const char *cname = json_string_value(json_object_get(cs, "name"));
            char name[512];
            snprintf(name, sizeof name, "golden %s__%s", tname, cname);
            total++;
            if (!t) { printf("FAIL %s: parse: %s\n", name, mx_errmsg()); t_failed++; continue; }
            json_t *ctx = json_object();
            json_object_update(ctx, json_object_get(tinfo, "special_tokens"));
            json_t *tk = json_object_get(tinfo, "template_kwargs");
            if (tk) json_object_update(ctx, tk);
            const char *k;
            json_t *v;
            json_object_foreach(cs, k, v) {
                if (!strcmp(k, "name") || !strcmp(k, "kwargs")) continue;
                json_object_set(ctx, k, v);
            }
            json_t *kw = json_object_get(cs, "kwargs");
            if (kw) json_object_update(ctx, kw);
            mx_buf out = {0};
            int rc = mx_tmpl_render_chat(t, ctx, &out);
            char err[1024];
            snprintf(err, sizeof err, "%s", rc == MX_OK ? "" : mx_errmsg());
            const char *raised = mx_tmpl_raised();
            char epath[600];
            snprintf(epath, sizeof epath, "tests/templates/expected/%s__%s.txt", tname, cname);
            size_t wl;
            char *want = read_all(epath, &wl);
            if (want) {
                if (rc != MX_OK) { printf("FAIL %s: render error: %s\n", name, err); t_failed++; }
                else if (out.len != wl || memcmp(out.data, want, wl)) report_diff(name, out.data ? out.data : "", out.len, want, wl);
                else { printf("ok %s\n", name); pass++; }
            } else {
                snprintf(epath, sizeof epath, "tests/templates/expected/%s__%s.error.txt", tname, cname);
                want = read_all(epath, &wl);
                if (!want) { printf("FAIL %s: no expected file\n", name); t_failed++; }
                else if (rc == MX_OK) { printf("FAIL %s: rendered, expected error: %s\n", name, want); t_failed++; }
                else {
                    /* raise_exception messages must match exactly; other errors must only fail
                     * (their type prefix must agree) */
                    const char *colon = strstr(want, ": ");
                    const char *sp = strchr(want, ' ');
                    bool is_py = colon && sp && sp > colon; /* "TypeError: ..." */
                    bool ok;
                    if (!is_py) ok = raised && !strcmp(raised, want);
                    else {
                        char type[64];
                        snprintf(type, sizeof type, "%.*s: ", (int)MX_MIN(colon - want, 60), want);
                        ok = !raised && strstr(err, type) != NULL;
                        if (ok && !strstr(err, want)) printf("# %s: message differs: '%s' vs '%s'\n", name, err, want);
                    }
                    if (ok) { printf("ok %s\n", name); pass++; }
                    else { printf("FAIL %s: error '%s', expected '%s'\n", name, err, want); t_failed++; }
                }
            }
            free(want);
            mx_buf_free(&out);
            json_decref(ctx);
        }
        mx_tmpl_free(t);
        free(src);
    }
    printf("# goldens: %d/%d pass\n", pass, total);
    json_decref(cases);
}

/* ---- unit tests: template, context (JSON), expected output or "!error substring" ---- */
typedef struct { const char *name, *tmpl, *ctx, *want; } ucase;

static void run_unit(const ucase *u) {
    json_error_t je;
    json_t *ctx = json_loads(u->ctx ? u->ctx : "{}", JSON_PRESERVE_ORDER, &je);
    if (!ctx) { printf("FAIL %s: bad test context: %s\n", u->name, je.text); t_failed++; return; }
    char name[256];
    snprintf(name, sizeof name, "unit %s", u->name);
    mx_tmpl *t = mx_tmpl_parse(u->tmpl, strlen(u->tmpl), "t.jinja");
    mx_buf out = {0};
    int rc = t ? mx_tmpl_render(t, ctx, &out) : MX_ERR;
    if (u->want[0] == '!') {
        CHECK(name, rc != MX_OK && strstr(mx_errmsg(), u->want + 1), "expected error containing '%s', got %s '%.*s'", u->want + 1,
              rc == MX_OK ? "output" : "error", rc == MX_OK ? (int)out.len : (int)strlen(mx_errmsg()), rc == MX_OK ? (out.data ? out.data : "") : mx_errmsg());
    } else if (rc != MX_OK) {
        printf("FAIL %s: error %s\n", name, mx_errmsg());
        t_failed++;
    } else if (out.len != strlen(u->want) || memcmp(out.data, u->want, out.len)) {
        report_diff(name, out.data ? out.data : "", out.len, u->want, strlen(u->want));
    } else printf("ok %s\n", name);
    mx_buf_free(&out);
    mx_tmpl_free(t);
    json_decref(ctx);
}

static const ucase g_units[] = {
    {"hello", "Hello {{ name }}!", "{\"name\": \"W\"}", "Hello W!"},
};

int main(void) {
    /* the goldens pin strftime_now to 2024-07-26 00:00:00 */
    setenv("SOURCE_DATE_EPOCH", "1721952000", 1);
    golden_tests();
    for (size_t i = 0; i < MX_ARRAY_LEN(g_units); i++) run_unit(&g_units[i]);
    TEST_END();
}
