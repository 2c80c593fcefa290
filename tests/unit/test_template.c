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

/* Expected outputs were produced by jinja2 3.1 with the environment HF transformers builds
 * (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson,
 * strftime_now pinned to 2024-07-26); "!" marks an expected error and the text it contains. */
static const ucase g_units[] = {
    {"ws_trim_blocks", "{% if true %}\n  yes\n{% endif %}\nend", "{}", "  yes\nend"},
    {"ws_lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", "{}", "a\n    b\nc"},
    {"ws_minus", "a   {%- if true -%}   b   {%- endif -%}   c", "{}", "abc"},
    {"ws_plus_lstrip", "a\n    {%+ if true %}b{% endif %}", "{}", "a\n    b"},
    {"ws_plus_trim", "{% if true +%}\nb{% endif %}", "{}", "\nb"},
    {"ws_var_minus", "a \n {{- x -}} \n b", "{\"x\": 1}", "a1b"},
    {"ws_comment", "a\n  {# c #}\nb {#- c -#} d", "{}", "a\nbd"},
    {"ws_raw", "{% raw %}{{ x }}{% if %}{% endraw %}!", "{}", "{{ x }}{% if %}!"},
    {"ws_raw_minus", "a  {%- raw -%}  {{x}}  {%- endraw -%}  b", "{}", "a{{x}}b"},
    {"ws_var_no_lstrip", "a\n    {{ 'x' }}\n", "{}", "a\n    x"},
    {"ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", "{}", "a\nb\n"},
    {"trailing_newline", "x\n", "{}", "x"},
    {"loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", "{\"xs\": [\"a\", \"b\", \"c\"]}", "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"loop_prev_next", "{% for x in xs %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]{% endfor %}", "{\"xs\": [1, 2, 3]}", "[<1>2][1<2>3][2<3>]"},
    {"loop_else", "{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", "{\"xs\": []}", "empty"},
    {"loop_filter", "{% for x in xs if x % 2 %}{{ x }}{{ loop.length }}{% endfor %}", "{\"xs\": [1, 2, 3, 4, 5]}", "133353"},
    {"loop_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1;a=2;"},
    {"loop_break_continue", "{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{\"xs\": [1, 2, 3, 4, 5]}", "13"},
    {"loop_cycle", "{% for x in xs %}{{ loop.cycle('a','b') }}{% endfor %}", "{\"xs\": [1, 2, 3]}", "aba"},
    {"loop_scope", "{% set y = 0 %}{% for x in xs %}{% set y = x %}{% endfor %}{{ y }}", "{\"xs\": [1, 2]}", "0"},
    {"loop_dict_str", "{% for k in d %}{{ k }}{% endfor %}{% for ch in 'h\303\251llo' %}[{{ ch }}]{% endfor %}", "{\"d\": {\"x\": 1, \"y\": 2}}", "xy[h][\303\251][l][l][o]"},
    {"loop_recursive", "{% for n in tree recursive %}{{ n.name }}{% if n.children %}({{ loop(n.children) }}){% endif %}{% endfor %}", "{\"tree\": [{\"name\": \"a\", \"children\": [{\"name\": \"b\"}, {\"name\": \"c\", \"children\": [{\"name\": \"d\"}]}]}]}", "a(bc(d))"},
    {"loop_nested", "{% for a in [1,2] %}{% for b in [3,4] %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }} {% endfor %}", "{}", "1311421 2312422 "},
    {"namespace", "{% set ns = namespace(n=0, s='') %}{% for x in [1,2,3] %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", "{}", "6 123"},
    {"set_block", "{% set x %}Hello {{ name }}{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}", "{\"name\": \"W\"}", "[Hello W]ABC"},
    {"set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, %}{{ t }}", "{}", "12(1,)"},
    {"macro_defaults", "{% macro m(a, b='B', c=none) %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2, 3) }}|{{ m(1, c=5) }}", "{}", "1-B-None|1-2-3|1-B-5"},
    {"macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", "{}", "1(2, 3){'x': 4}"},
    {"macro_caller", "{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}inner {{ v }}{% endcall %}", "{\"v\": 7}", "<b>inner 7</b>"},
    {"macro_caller_args", "{% macro l(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(i) l([1,2]) %}[{{ i }}]{% endcall %}", "{}", "[1][2]"},
    {"macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}", "{}", "4321"},
    {"macro_late_global", "{% macro m() %}{{ z }}{% endmacro %}{% set z = 3 %}{{ m() }}", "{}", "3"},
    {"filter_block", "{% filter upper %}abc {{ x }}{% endfilter %}", "{\"x\": \"d\"}", "ABC D"},
    {"with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}", "{}", "3"},
    {"generation", "{% generation %}gen {{ 1 }}{% endgeneration %}", "{}", "gen 1"},
    {"arith", "{{ 1 + 2 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 - 0.9 }}", "{}", "7 3.5 3 -4 2 1024 0.5 3.0 0.5 0.09999999999999998"},
    {"float_repr", "{{ 1.0 }} {{ 0.1 }} {{ 1e-5 }} {{ 1e16 }} {{ 1.5e15 }} {{ 123456789.125 }} {{ 0.0001 }} {{ 2.5e-7 }} {{ 1/3 }} {{ 3.0 * 1e300 * 1e10 }}", "{}", "1.0 0.1 1e-05 1e+16 1500000000000000.0 123456789.125 0.0001 2.5e-07 0.3333333333333333 inf"},
    {"py_repr", "{{ [1, 'a', none, true, 1.5, {'k': [2]}] }} {{ ('x',) }} {{ (1, 2) }} {{ {} }} {{ [] }} {{ \"it's\" }} {{ [\"it's\", 'a\"b', 'x\\ny', '\\t\\\\'] }}", "{}", "[1, 'a', None, True, 1.5, {'k': [2]}] ('x',) (1, 2) {} [] it's [\"it's\", 'a\"b', 'x\\ny', '\\t\\\\']"},
    {"py_repr_unicode", "{{ ['h\303\251llo', '\346\227\245\346\234\254', 'a\\x01b', '\\u200b'] }}", "{}", "['h\303\251llo', '\346\227\245\346\234\254', 'a\\x01b', '\\u200b']"},
    {"str_concat", "{{ 'a' ~ 1 ~ none ~ undefined_var ~ [1] }}{{ 'x' + 'y' }}{{ 'ab' * 3 }}{{ [1] + [2] }}", "{}", "a1None[1]xyababab[1, 2]"},
    {"compare", "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 2 in [1,2] }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ none == none }}", "{}", "True True True True True True True True True"},
    {"logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ [] or {} }} {{ 'a' if false }}|{{ 'a' if 0 else 'b' }} {{ not 1 == 2 }}", "{}", "x y True {} |b True"},
    {"tests", "{{ x is defined }}{{ y is defined }}{{ x is string }}{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ none is none }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ 4 is divisibleby 2 }}{{ 3 is odd }}{{ 2 is even }}{{ 'ab' is lower }}{{ x is sameas x }}{{ 2 is eq 2 }}{{ 1 is in [1] }}{{ true is true }}{{ 0 is false }}{{ y is undefined }}", "{\"x\": \"s\"}", "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrue"},
    {"test_not", "{{ x is not none }}{{ x is not string }}{{ none is not none }}", "{\"x\": 1}", "TrueTrueFalse"},
    {"attr_item", "{{ d.a }}{{ d['a'] }}{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.z }}|{{ l[0] }}{{ l[-1] }}{{ l.0 }}{{ l[9] }}|{{ s[1] }}{{ s[-1] }}", "{\"d\": {\"a\": 1}, \"l\": [1, 2, 3], \"s\": \"h\303\251llo\"}", "111dflt|131|\303\251o"},
    {"slicing", "{{ l[1:] }}{{ l[:-1] }}{{ l[::2] }}{{ l[::-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ l[5:] }}{{ s[-2:] }}", "{\"l\": [1, 2, 3, 4], \"s\": \"h\303\251llo\"}", "[2, 3, 4][1, 2, 3][1, 3][4, 3, 2, 1]\303\251loll\303\251h[]lo"},
    {"dict_methods", "{{ d.items() | list }}{{ d.keys() | list }}{{ d.values() | list }}{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}", "{\"d\": {\"b\": 2, \"a\": 1}}", "[('b', 2), ('a', 1)]['b', 'a'][2, 1]a1b2"},
    {"str_methods", "{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\na'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Hello World'.upper() }}{{ 'ABC'.lower() }}{{ 'hello wORLD'.title() }}{{ 'hELLO'.capitalize() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'hello'.find('l') }}{{ 'hello'.rfind('l') }}{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}|{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ 'a</think>b'.split('</think>')[-1] }}", "{}", "a b|a|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|TrueTrue|HELLO WORLDabcHello WorldHello|bba|232|a-b|TrueTrue|['a', 'b', 'c']|b"},
    {"str_format", "{{ '{} {}'.format(1, 'a') }}|{{ '{0}{1}{0}'.format('x', 'y') }}|{{ '{name}!'.format(name='n') }}|{{ '{:>5}|{:<4}|{:^5}|{:.2f}|{:05d}'.format('a', 'b', 'c', 3.14159, 42) }}", "{}", "1 a|xyx|n!|    a|b   |  c  |3.14|00042"},
    {"percent_format", "{{ '%s-%d-%.2f-%5s-%-5s|%x%%' % ('a', 3, 2.5, 'r', 'l', 255) }}{{ '%s' % 'x' }}{{ '%(a)s' % {'a': 1} }}{{ '%s and %s' | format('x', 'y') }}", "{}", "a-3-2.50-    r-l    |ff%x1x and y"},
    {"filters_basic", "{{ 'abc' | length }}{{ [1,2] | count }}{{ [3,4] | first }}{{ [3,4] | last }}{{ [1,2,3] | join('-') }}{{ 'ab' | upper }}{{ 'AB' | lower }}{{ 'hello world-foo(bar' | title }}{{ 'hello' | capitalize }}{{ '  x  ' | trim }}{{ 'xxyxx' | trim('x') }}{{ 'aXbX' | replace('X', '-') }}", "{}", "32341-2-3ABabHello World-Foo(BarHelloxya-b-"},
    {"filters_default", "{{ u | default('d') }}{{ none | default('d') }}{{ '' | default('d', true) }}{{ 0 | d('z', boolean=true) }}{{ x | default('no') }}", "{\"x\": \"yes\"}", "dNonedzyes"},
    {"filters_conv", "{{ '42' | int }}{{ '4.7' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ 3.9 | int }}{{ '2.5' | float }}{{ 'x' | float }}{{ 3 | float }}{{ 1 | string }}{{ [1] | string }}{{ -3 | abs }}{{ 2.5 | round }}{{ 3.5 | round }}{{ 2.675 | round(2) }}{{ 3.14159 | round(2, 'floor') }}{{ 5 | round }}", "{}", "4240732.50.03.01[1]32.04.02.673.145"},
    {"filters_list", "{{ 'abc' | list }}{{ {'a': 1} | list }}{{ [3,1,2] | sort }}{{ [3,1,2] | sort(reverse=true) }}{{ ['b','A','c'] | sort }}{{ [1,2,1,3] | unique | list }}{{ [1,2,3] | reverse | list }}{{ 'abc' | reverse }}{{ [1,2,3] | sum }}{{ [1,5,3] | max }}{{ [4,2,8] | min }}", "{}", "['a', 'b', 'c']['a'][1, 2, 3][3, 2, 1]['A', 'b', 'c'][1, 2, 3][3, 2, 1]cba652"},
    {"filters_select", "{{ xs | selectattr('a') | list }}{{ xs | rejectattr('a') | list }}{{ xs | selectattr('b', 'equalto', 2) | list }}{{ xs | map(attribute='b') | list }}{{ [1,2,3,4] | select('odd') | list }}{{ [1,2,3,4] | reject('even') | list }}{{ ['a','b'] | map('upper') | join }}{{ none | selectattr('x') | list }}{{ xs | map(attribute='zz', default='D') | list }}", "{\"xs\": [{\"a\": true, \"b\": 1}, {\"a\": false, \"b\": 2}]}", "[{'a': True, 'b': 1}][{'a': False, 'b': 2}][{'a': False, 'b': 2}][1, 2][1, 3][1, 3]AB[]['D', 'D']"},
    {"filters_sort_attr", "{{ xs | sort(attribute='n') | map(attribute='n') | list }}{{ xs | map(attribute='n') | max }}", "{\"xs\": [{\"n\": 3}, {\"n\": 1}, {\"n\": 2}]}", "[1, 2, 3]3"},
    {"filters_items", "{% for k, v in d | items %}{{ k }}:{{ v }},{% endfor %}{% for k, v in u | items %}x{% endfor %}", "{\"d\": {\"a\": 1, \"b\": [2]}}", "a:1,b:[2],"},
    {"filters_misc", "{{ [1,2,3,4,5] | batch(2) | list }}{{ [1,2,3,4,5] | slice(2) | list }}{{ 'a b  c' | wordcount }}{{ 'abc' | center(7) }}|{{ 'hello world foo' | truncate(9, leeway=0) }}{{ '<a&b>' | escape }}{{ '<x>' | e }}{{ 'x<b>y</b>z' | striptags }}", "{}", "[[1, 2], [3, 4], [5]][[1, 2, 3], [4, 5]]3  abc  |hello...&lt;a&amp;b&gt;&lt;x&gt;xyz"},
    {"filter_indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'a\\nb' | indent('> ') }}", "{}", "a\n  b\n\n  c|  a\n  b|a\n  \n  b|a\n> b"},
    {"tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ '\303\251\"\\n' | tojson }}|{{ [1.0, 2.5, none, true] | tojson }}|{{ {} | tojson }}{{ [] | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ {1: 'x'} | tojson }}|{{ '\303\251' | tojson(ensure_ascii=true) }}", "{\"d\": {\"z\": 1, \"a\": [1, {\"x\": \"y\"}], \"u\": \"\303\274\"}}", "{\"z\": 1, \"a\": [1, {\"x\": \"y\"}], \"u\": \"\303\274\"}|{\n  \"z\": 1,\n  \"a\": [\n    1,\n    {\n      \"x\": \"y\"\n    }\n  ],\n  \"u\": \"\303\274\"\n}|\"\303\251\\\"\\n\"|[1.0, 2.5, null, true]|{}[]|{\"a\": 2, \"b\": 1}|{\"1\": \"x\"}|\"\\u00e9\""},
    {"markup", "{{ 'a<b'|safe + '<i>' }}|{{ '<x>' + 'y'|safe }}|{{ ('<'|safe) ~ '<' }}", "{}", "a<b&lt;i&gt;|&lt;x&gt;y|<<"},
    {"namespace_list", "{% set ns = namespace(items=[]) %}{% for x in [1,2] %}{% set ns.items = ns.items + [x * 10] %}{% endfor %}{{ ns.items }}", "{}", "[10, 20]"},
    {"strftime", "{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ strftime_now('%d %b %Y') }}", "{}", "2024-07-26 00:00|26 Jul 2024"},
    {"range", "{{ range(3) | list }}{{ range(1, 10, 3) | list }}{% for i in range(2) %}{{ i }}{% endfor %}", "{}", "[0, 1, 2][1, 4, 7]01"},
    {"int_keys", "{% set d = {16384: 'a', 1: 'b'} %}{{ d[16384] }}{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}{{ d }}", "{}", "a1b16384a{16384: 'a', 1: 'b'}"},
    {"string_escapes", "{{ 'a\\tb\\\\c\\'d\\u00e9\\x41' }}|{{ \"q\\\"q\" }}|{{ 'a' 'b' }}", "{}", "a\tb\\c'd\303\251A|q\"q|ab"},
    {"dict_literal_nested", "{{ {'a': {'b': [1, {'c': 2}]}} }}", "{}", "{'a': {'b': [1, {'c': 2}]}}"},
    {"undefined_print", "[{{ nope }}][{{ d.nope }}][{{ nope | length }}]", "{\"d\": {}}", "[][][0]"},
    {"message_content_list", "{{ m.content | trim }}|{{ m.content | string }}", "{\"m\": {\"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}}", "[{'type': 'text', 'text': 'hi'}]|[{'type': 'text', 'text': 'hi'}]"},
    {"bool_arith", "{{ true + 1 }}{{ 10 - true }}{{ [1, 2][true] }}", "{}", "292"},
    {"lazy_gen_error", "{% set g = 5 | batch(2) %}{% set h = none | map('upper') %}ok{{ h | list }}", "{}", "ok[]"},
    {"dict_views", "{{ d.items() }}{{ d.keys() | length }}{% if d.values() %}y{% endif %}{{ 'a' in d.keys() }}", "{\"d\": {\"a\": 1}}", "dict_items([('a', 1)])1yTrue"},
    {"odd_float", "{{ 1e-7 is odd }}{{ 3.0 is odd }}{{ 4 is even }}", "{}", "FalseTrueTrue"},
    {"percent_list", "{{ 'x' % [1] }}{{ '%s' % [1] }}", "{}", "x[1]"},
    {"e_lazy_gen_iter", "{% set g = 5 | batch(2) %}{{ g | list }}", "{}", "!TypeError: 'int' object is not iterable"},
    {"e_undefined_attr", "{{ nope.x }}", "{}", "!UndefinedError: 'nope' is undefined"},
    {"e_concat_list", "{{ 'a' + [1] }}", "{}", "!TypeError: can only concatenate str (not \"list\") to str"},
    {"e_none_iter", "{% for x in none %}{% endfor %}", "{}", "!TypeError: 'NoneType' object is not iterable"},
    {"e_raise", "{{ raise_exception('boom here') }}", "{}", "!t.jinja:1: boom here"},
    {"e_syntax_endfor", "{% if x %}\n{% endfor %}", "{}", "!t.jinja:2: unexpected 'endfor'"},
    {"e_syntax_unclosed", "a\n{% for x in y %}\nb", "{}", "!t.jinja:2: unexpected end of template"},
    {"e_unknown_tag", "{% frobnicate %}", "{}", "!t.jinja:1: unknown tag 'frobnicate'"},
    {"e_append_unsafe", "{% set l = [1] %}{% set _ = l.append(2) %}{{ l }}", "{}", "!SecurityError: access to attribute 'append' of 'list' object is unsafe."},
    {"e_map_tojson", "{{ [1] | map('string') | tojson }}", "{}", "!TypeError: Object of type generator is not JSON serializable"},
    {"e_items_list", "{{ [1] | items | list }}", "{}", "!TypeError: Can only get item pairs from a mapping."},
    {"e_div_zero", "{{ 1 / 0 }}", "{}", "!ZeroDivisionError: division by zero"},
    {"e_compare_types", "{{ 1 < 'a' }}", "{}", "!TypeError: '<' not supported between instances of 'int' and 'str'"},
    {"e_call_undefined", "{{ x.replace('a', 'b') }}", "{\"x\": [1]}", "!UndefinedError: 'list object' has no attribute 'replace'"},
    {"e_syntax_expr", "{{ 1 + }}", "{}", "!t.jinja:1: unexpected"},
    {"e_unclosed_var", "{{ x ", "{}", "!t.jinja:1: unexpected end of template"},

};

int main(void) {
    /* the goldens pin strftime_now to 2024-07-26 00:00:00 */
    setenv("SOURCE_DATE_EPOCH", "1721952000", 1);
    golden_tests();
    for (size_t i = 0; i < MX_ARRAY_LEN(g_units); i++) run_unit(&g_units[i]);
    TEST_END();
}
