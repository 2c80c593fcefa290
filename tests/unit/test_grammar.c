/* Constrained decoding: the GBNF compiler and matcher, JSON Schema to
 * grammar, and the token mask.
 *
 * - GBNF: texts accepted and refused, error messages.
 * - JSON Schema: texts accepted and refused per schema; unsupported keywords
 *   refused with their name.
 * - The mask equals token-by-token stepping (every token of a small byte
 *   vocabulary, a sample of Llama 3's 128k) along random generations.
 * - Random schemas from a generator: generations that follow the mask
 *   always parse and validate, checked by a small validator written here
 *   independently of the converter.
 * - A real model (the tiny chat model): its free output does not parse,
 *   its constrained output does. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "grammar/grammar.h"
#include "grammar/gram_int.h" /* G_MAX_WORK, G_MAX_STACKS */
#include "runtime/constrain.h"
#include "runtime/generate.h"
#include "runtime/outparse.h"
#include "runtime/textmodel.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <ctype.h>
#include <math.h>
#include <unistd.h>

/* ---------- GBNF ---------- */

static bool gbnf_accepts(const char *g, const char *text, bool *complete) {
    mx_grammar *gr = mx_grammar_from_gbnf(g, strlen(g), NULL);
    if (!gr) return false;
    mx_gmatch *m = mx_gmatch_new(gr);
    bool ok = m && !mx_gmatch_accept_bytes(m, text, strlen(text));
    if (complete) *complete = ok && mx_gmatch_complete(m);
    mx_gmatch_free(m);
    mx_grammar_unref(gr);
    return ok;
}

static void check_gbnf(void) {
#define JSON_GBNF \
        "root   ::= object\n" \
        "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n" \
        "\n" \
        "object ::=\n" \
        "  \"{\" ws (\n" \
        "            string \":\" ws value\n" \
        "    (\",\" ws string \":\" ws value)*\n" \
        "  )? \"}\" ws\n" \
        "\n" \
        "array  ::=\n" \
        "  \"[\" ws (\n" \
        "            value\n" \
        "    (\",\" ws value)*\n" \
        "  )? \"]\" ws\n" \
        "\n" \
        "string ::=\n" \
        "  \"\\\"\" (\n" \
        "    [^\"\\\\\\x7F\\x00-\\x1F] |\n" \
        "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n" \
        "  )* \"\\\"\" ws\n" \
        "\n" \
        "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n" \
        "\n" \
        "# Optional space: by convention, applied in this grammar after literal chars when allowed\n" \
        "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    static const struct { const char *g, *text; bool ok, complete; } cases[] = {
        {"root ::= \"ab\" | \"c\"", "ab", true, true},
        {"root ::= \"ab\" | \"c\"", "a", true, false},
        {"root ::= \"ab\" | \"c\"", "ca", false, false},
        {"root ::= [a-z]+", "hello", true, true},
        {"root ::= [a-z]+", "", true, false},
        {"root ::= [a-z]*", "", true, true},
        {"root ::= [^a]*", "b\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", true, true},
        {"root ::= [^a]*", "ba", false, false},
        {"root ::= x{2,3}\nx ::= \"a\"", "aaa", true, true},
        {"root ::= x{2,3}\nx ::= \"a\"", "aaaa", false, false},
        {"root ::= x{2,3}\nx ::= \"a\"", "a", true, false},
        {"root ::= \"a\"{3}", "aaa", true, true},
        {"root ::= \"a\"{2,}", "aaaaaa", true, true},
        {"root ::= (\"a\" | \"b\")* \"c\"", "ababc", true, true},
        {"root ::= (\"a\" | \"b\")* \"c\"", "abca", false, false},
        {"root ::= .", "\xe2\x82\xac", true, true},
        {"root ::= .", "\xe2\x82", true, false},
        {"root ::= .", "\xed\xa0\x80", false, false}, /* a surrogate is not a character */
        {"root ::= [\xce\xb1-\xcf\x89]", "\xce\xb2", true, true},
        {"root ::= [\xce\xb1-\xcf\x89]", "a", false, false},
        {"root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9f\x98\x80", true, true},
        {"root ::= [\\x00-\\x7F]+", "abc", true, true},
        {"root ::= [\\x80-\\xFF]", "\xc3\xbf", true, true}, /* code points, not bytes */
        {"root ::= [\\x80-\\xFF]", "\xff", false, false},
        {"root ::= [a\\-z]", "-", true, true},
        {"root ::= [a-]", "-", true, true},
        {"root ::= [\\]]", "]", true, true},
        {"root ::= a b\na ::= \"x\"? \nb ::= \"y\"  # comment\n", "y", true, true},
        {"root ::= \"a\" |\n  \"b\"", "b", true, true},
        {"root ::= (\n \"a\"\n \"b\"\n)", "ab", true, true},
        {"root ::= [a-c]{0,2} \"d\"", "acd", true, true},
        {"root ::= [a-c]{0,2} \"d\"", "abcd", false, false},
        {JSON_GBNF, "{\"a\": [1, 2.5e3, \"x\\u00e9\\n\"], \"b\": {\"c\": null}}", true, true},
        {JSON_GBNF, "{\"a\": [1, 2,]}", false, false},
        {JSON_GBNF, "{\"a\": \"x\ny\"}", false, false},
    };
    char name[64];
    for (size_t i = 0; i < MX_ARRAY_LEN(cases); i++) {
        bool complete = false, ok = gbnf_accepts(cases[i].g, cases[i].text, &complete);
        snprintf(name, sizeof name, "gbnf/match %zu", i);
        CHECK(name, ok == cases[i].ok && complete == cases[i].complete, "'%s' on \"%s\": %s%s (%s)", cases[i].g, cases[i].text,
              ok ? "accepted" : "refused", complete ? " complete" : "", ok ? "" : mx_errmsg());
    }
    static const struct { const char *g, *err; } errs[] = {
        {"root ::= foo", "undefined rule 'foo'"},
        {"a ::= \"x\"", "no 'root' rule"},
        {"root ::= root \"a\"", "left-recursive"},
        {"root ::= a\na ::= b? root \"x\"\nb ::= \"y\"", "left-recursive"},
        {"root ::= <think>", "token references"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
        {"root ::= \"abc", "unterminated string"},
        {"root ::= [abc", "unterminated character class"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
        {"root ::= [z-a]", "before its start"},
        {"root ::= *", "must follow an item"},
        {"root ::= \"a\"{3,2}", "n < m"},
        {"root ::= \"a\"{999999}", "repetition count"},
        {"root ::= (\"a\"", "expecting ')'"},
        {"root = \"a\"", "expecting '::='"},
        {"root ::= \"a\" )", "end of the line"},
        {"root ::= \"\xff\"", "invalid UTF-8"},
        {"root ::= \"a\"{100000}{100000}", "elements"},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(errs); i++) {
        mx_grammar *g = mx_grammar_from_gbnf(errs[i].g, strlen(errs[i].g), NULL);
        snprintf(name, sizeof name, "gbnf/error %zu", i);
        CHECK(name, !g && strstr(mx_errmsg(), errs[i].err) && strstr(mx_errmsg(), "grammar"), "'%s': got %s", errs[i].g, g ? "a grammar" : mx_errmsg());
        mx_grammar_unref(g);
    }
}

/* ---------- JSON Schema: fixed cases ---------- */

static bool schema_accepts(const char *schema, const char *text, char *err, size_t errn) {
    json_error_t je;
    json_t *s = json_loads(schema, 0, &je);
    if (!s) { snprintf(err, errn, "bad test schema: %s", je.text); return false; }
    mx_grammar *g = mx_grammar_from_schema(s, NULL);
    json_decref(s);
    if (!g) { snprintf(err, errn, "%s", mx_errmsg()); return false; }
    mx_gmatch *m = mx_gmatch_new(g);
    bool ok = !mx_gmatch_accept_bytes(m, text, strlen(text)) && mx_gmatch_complete(m);
    mx_gmatch_free(m);
    mx_grammar_unref(g);
    snprintf(err, errn, "%s", ok ? "" : "refused");
    return ok;
}

static void check_schema_cases(void) {
    static const struct { const char *schema, *text; bool ok; } cases[] = {
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":130}", "130", true},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":130}", "131", false},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":130}", "-5", true},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":130}", "-6", false},
        {"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":130}", "007", false},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":10}", "10", false},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":10}", "11", true},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":10}", "123456789", true},
        {"{\"type\":\"integer\",\"maximum\":-100}", "-100", true},
        {"{\"type\":\"integer\",\"maximum\":-100}", "-99", false},
        {"{\"type\":\"integer\",\"maximum\":-100}", "5", false},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.25}", "2.25", true},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.25}", "2.26", false},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.25}", "0.5", true},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.25}", "0.49999", false},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.25}", "1", true},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2.25}", "1e3", false},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}", "0", false},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}", "0.000", false},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}", "0.001", true},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}", "1", false},
        {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}", "0.999", true},
        {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":-1.25}", "-1.3", true},
        {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":-1.25}", "-1.2", false},
        {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":-1.25}", "-1.51", false},
        {"{\"type\":\"number\"}", "-12.5e-3", true},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", true},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\"", false},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\\u00e9\\n\"", true},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", false},
        {"{\"type\":\"string\"}", "\"\\ud83d\\ude00\"", false}, /* surrogate escapes: two "characters" */
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+@x\\\\.com$\"}", "\"bob@x.com\"", true},
        {"{\"type\":\"string\",\"pattern\":\"^[a-z]+@x\\\\.com$\"}", "\"bob@xycom\"", false},
        {"{\"type\":\"string\",\"pattern\":\"^a\\\"b\\\\\\\\$\"}", "\"a\\\"b\\\\\"", true},
        {"{\"type\":\"string\",\"pattern\":\"ab\"}", "\"xxabyy\"", true},
        {"{\"type\":\"string\",\"pattern\":\"ab\"}", "\"xxbyy\"", false},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\d{2}(?:x|y)?$\"}", "\"12y\"", true},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-28\"", true},
        {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-30\"", false},
        {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", true},
        {"{\"enum\":[\"a\",1,null,{\"k\":[true]}]}", "{\"k\":[true]}", true},
        {"{\"enum\":[\"a\",1,null]}", "2", false},
        {"{\"const\":\"x\\\"y\"}", "\"x\\\"y\"", true},
        {"{\"type\":[\"string\",\"null\"]}", "null", true},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[]", false},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[true, false]", true},
        {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"minItems\":1,\"maxItems\":2}", "[true,false,true]", false},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}", "[1,\"a\"]", true},
        {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}", "[1,\"a\",2]", false},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}", "{\"b\":\"x\"}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}", "{\"b\":\"x\",\"a\":1}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}", "{\"a\":1}", false},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}", "{\"a\":1,\"zz\":[1]}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}", "{\"zz\":1,\"a\":\"x\"}", false},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}", "{\"ab\":\"s\"}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}", "{\"b\":1}", false},
        {"{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},\"required\":[\"k\"]}},\"$ref\":\"#/$defs/n\"}",
         "{\"k\":[{\"k\":[]},{\"k\":[{\"k\":[]}]}]}", true},
        {"{\"anyOf\":[{\"type\":\"integer\",\"maximum\":3},{\"type\":\"string\",\"maxLength\":1}]}", "\"z\"", true},
        {"{\"anyOf\":[{\"type\":\"integer\",\"maximum\":3},{\"type\":\"string\",\"maxLength\":1}]}", "4", false},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", "7", true},
        {"{\"title\":\"t\",\"description\":\"d\"}", "[1, {\"a\": null}]", true},
        {"{\"type\":\"object\"}", "{\"x\": {\"y\": [1, \"2\"]}}", true},
    };
    char name[64], err[512];
    for (size_t i = 0; i < MX_ARRAY_LEN(cases); i++) {
        bool ok = schema_accepts(cases[i].schema, cases[i].text, err, sizeof err);
        snprintf(name, sizeof name, "schema/match %zu", i);
        CHECK(name, ok == cases[i].ok, "%s on %s: %s", cases[i].schema, cases[i].text, ok ? "accepted" : err);
    }
    static const struct { const char *schema, *err; } errs[] = {
        {"{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems' is not supported"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"email\"}}}", "/properties/a: 'format': \"email\""},
        {"{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf' is not supported"},
        {"{\"not\":{\"type\":\"string\"}}", "'not' is not supported"},
        {"{\"if\":{},\"then\":{}}", "is not supported"},
        {"{\"type\":\"object\",\"minProperties\":1}", "'minProperties' is not supported"},
        {"{\"type\":\"object\",\"patternProperties\":{}}", "'patternProperties' is not supported"},
        {"{\"type\":\"array\",\"contains\":{}}", "'contains' is not supported"},
        {"{\"$ref\":\"https://example.com/s.json\"}", "only references into this schema"},
        {"{\"$ref\":\"#/$defs/missing\"}", "does not point into the schema"},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "'oneOf' is supported only"},
        {"{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":3}]}", "'allOf' is supported with one schema only"},
        {"{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}", "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "backreferences"},
        {"{\"type\":\"string\",\"pattern\":\"a\\\\bc\"}", "word boundaries"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "only at the start and the end"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer satisfies"},
        {"{\"type\":\"number\",\"exclusiveMinimum\":1,\"exclusiveMaximum\":1}", "no number"},
        {"{\"type\":\"integer\",\"minimum\":1e20}", "beyond the 15 digits"},
        {"{\"type\":\"object\",\"properties\":{},\"required\":[\"a\"],\"additionalProperties\":false}", "required property 'a'"},
        {"{\"enum\":[1,2],\"type\":\"string\"}", "no value of 'enum'"},
        {"{\"enum\":[\"a\"],\"maxLength\":3}", "together with 'maxLength'"},
        {"{\"type\":\"strin\"}", "unknown type \"strin\""},
        {"false", "accepts no value"},
        {"{\"type\":\"string\",\"minLength\":-1}", "non-negative integer"},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(errs); i++) {
        json_error_t je;
        json_t *s = json_loads(errs[i].schema, JSON_DECODE_ANY, &je);
        mx_buf out = {0};
        int rc = s ? mx_schema_to_gbnf(s, &out) : 0;
        snprintf(name, sizeof name, "schema/error %zu", i);
        CHECK(name, s && rc && strstr(mx_errmsg(), errs[i].err), "%s: got %s", errs[i].schema, rc ? mx_errmsg() : "a grammar");
        mx_buf_free(&out);
        json_decref(s);
    }
}

/* ---------- an independent validator for the supported subset ---------- */

static json_t *v_root;

static json_t *v_resolve(const char *ref) {
    json_t *cur = v_root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char tok[128];
        size_t n = 0;
        while (*p && *p != '/' && n < sizeof tok - 1) tok[n++] = *p++;
        tok[n] = 0;
        cur = json_object_get(cur, tok);
    }
    return cur;
}

static size_t u8_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static bool is_type(json_t *v, const char *t) {
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    return false;
}

static bool digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

static bool valid_date(const char *s) {
    if (strlen(s) < 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2)) return false;
    int y = atoi(s), m = atoi(s + 5), d = atoi(s + 8);
    static const int dm[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m >= 1 && m <= 12 && d >= 1 && d <= (m == 2 && !leap ? 28 : dm[m - 1]);
}

static bool valid_time(const char *s) {
    if (strlen(s) < 9 || !digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || s[5] != ':' || !digits(s + 6, 2)) return false;
    if (atoi(s) > 23 || atoi(s + 3) > 59 || atoi(s + 6) > 59) return false;
    s += 8;
    if (*s == '.') { s++; int n = 0; while (*s >= '0' && *s <= '9') { s++; n++; } if (!n) return false; }
    if (!strcmp(s, "Z")) return true;
    return (s[0] == '+' || s[0] == '-') && strlen(s) == 6 && digits(s + 1, 2) && s[3] == ':' && digits(s + 4, 2) && atoi(s + 1) <= 23 && atoi(s + 4) <= 59;
}

static bool v_check(json_t *s, json_t *v, char *why, size_t wn);

static bool v_number(json_t *s, json_t *v, char *why, size_t wn) {
    double x = json_number_value(v);
    json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    json_t *emn = json_object_get(s, "exclusiveMinimum"), *emx = json_object_get(s, "exclusiveMaximum");
    if ((mn && x < json_number_value(mn)) || (mx && x > json_number_value(mx)) || (emn && x <= json_number_value(emn)) ||
        (emx && x >= json_number_value(emx))) {
        snprintf(why, wn, "%.17g outside the bounds", x);
        return false;
    }
    return true;
}

static bool v_check(json_t *s, json_t *v, char *why, size_t wn) {
    if (json_is_true(s)) return true;
    json_t *x;
    if ((x = json_object_get(s, "$ref"))) return v_check(v_resolve(json_string_value(x)), v, why, wn);
    if ((x = json_object_get(s, "anyOf")) || (x = json_object_get(s, "oneOf"))) {
        int n = 0;
        for (size_t i = 0; i < json_array_size(x); i++) n += v_check(json_array_get(x, i), v, why, wn);
        bool one = json_object_get(s, "oneOf") != NULL;
        if (one ? n != 1 : n < 1) { snprintf(why, wn, "%d alternatives match", n); return false; }
        return true;
    }
    if ((x = json_object_get(s, "allOf")))
        for (size_t i = 0; i < json_array_size(x); i++)
            if (!v_check(json_array_get(x, i), v, why, wn)) return false;
    if ((x = json_object_get(s, "const")) && !json_equal(x, v)) { snprintf(why, wn, "not the const"); return false; }
    if ((x = json_object_get(s, "enum"))) {
        bool in = false;
        for (size_t i = 0; i < json_array_size(x); i++) in = in || json_equal(json_array_get(x, i), v);
        if (!in) { snprintf(why, wn, "not in the enum"); return false; }
    }
    if ((x = json_object_get(s, "type"))) {
        bool ok = false;
        if (json_is_string(x)) ok = is_type(v, json_string_value(x));
        else for (size_t i = 0; i < json_array_size(x); i++) ok = ok || is_type(v, json_string_value(json_array_get(x, i)));
        if (!ok) { snprintf(why, wn, "wrong type"); return false; }
    }
    if (json_is_number(v) && !v_number(s, v, why, wn)) return false;
    if (json_is_string(v)) {
        size_t n = u8_count(json_string_value(v), json_string_length(v));
        if ((x = json_object_get(s, "minLength")) && n < (size_t)json_integer_value(x)) { snprintf(why, wn, "shorter than minLength"); return false; }
        if ((x = json_object_get(s, "maxLength")) && n > (size_t)json_integer_value(x)) { snprintf(why, wn, "longer than maxLength"); return false; }
        if ((x = json_object_get(s, "pattern"))) {
            int ec;
            PCRE2_SIZE eo;
            pcre2_code *re = pcre2_compile((PCRE2_SPTR)json_string_value(x), PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
            pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
            int r = md ? pcre2_match(re, (PCRE2_SPTR)json_string_value(v), json_string_length(v), 0, 0, md, NULL) : -1;
            pcre2_match_data_free(md);
            pcre2_code_free(re);
            if (r < 0) { snprintf(why, wn, "does not match the pattern"); return false; }
        }
        if ((x = json_object_get(s, "format"))) {
            const char *f = json_string_value(x), *t = json_string_value(v);
            bool ok = true;
            if (!strcmp(f, "date")) ok = strlen(t) == 10 && valid_date(t);
            else if (!strcmp(f, "time")) ok = valid_time(t);
            else if (!strcmp(f, "date-time")) ok = strlen(t) > 11 && t[10] == 'T' && valid_date(t) && valid_time(t + 11);
            else if (!strcmp(f, "uuid")) {
                ok = strlen(t) == 36;
                for (int i = 0; ok && i < 36; i++) ok = (i == 8 || i == 13 || i == 18 || i == 23) ? t[i] == '-' : isxdigit((unsigned char)t[i]) != 0;
            }
            if (!ok) { snprintf(why, wn, "not a %s", f); return false; }
        }
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v), k = 0;
        if ((x = json_object_get(s, "minItems")) && n < (size_t)json_integer_value(x)) { snprintf(why, wn, "fewer than minItems"); return false; }
        if ((x = json_object_get(s, "maxItems")) && n > (size_t)json_integer_value(x)) { snprintf(why, wn, "more than maxItems"); return false; }
        if ((x = json_object_get(s, "prefixItems")))
            for (; k < json_array_size(x) && k < n; k++)
                if (!v_check(json_array_get(x, k), json_array_get(v, k), why, wn)) return false;
        json_t *it = json_object_get(s, "items");
        for (; it && k < n; k++) {
            if (json_is_false(it)) { snprintf(why, wn, "items: false"); return false; }
            if (!v_check(it, json_array_get(v, k), why, wn)) return false;
        }
    }
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required"), *add = json_object_get(s, "additionalProperties");
        for (size_t i = 0; i < json_array_size(req); i++)
            if (!json_object_get(v, json_string_value(json_array_get(req, i)))) { snprintf(why, wn, "missing %s", json_string_value(json_array_get(req, i))); return false; }
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val) {
            json_t *ps = json_object_get(props, k);
            if (ps) { if (!v_check(ps, val, why, wn)) return false; }
            else if (json_is_false(add)) { snprintf(why, wn, "additional property %s", k); return false; }
            else if (json_is_object(add) && !v_check(add, val, why, wn)) return false;
        }
    }
    return true;
}

/* ---------- random schemas ---------- */

static unsigned rs;
static int rnd(int n) { return (int)(t_rng(&rs) % (unsigned)n); }

/* each can be completed by a random walk the mask guides (an unanchored
 * "ab+c" rarely is: the fixed cases test those) */
static const char *const PATTERNS[] = {"^[a-z]+$", "^\\d{3}-\\d{2}$", "^(foo|bar)[0-9]*$", "^[A-Z][a-z]{0,5}$", "^\\w{1,4}@\\w{1,3}\\.com$",
                                       "^[^\"\\\\]{2,4}$", "^.{1,3}$", "^x\\.y$", "^[0-9a-f]{2}$", "^[\"]a\\\\$", "^\\n?x$",
                                       "^(?:ab|c)+$", "^\xc3\xa9[\xce\xb1-\xcf\x89]?$", "^a"};
static const char *const NAMES[] = {"id", "name", "a b", "q\"x", "tags", "\xc3\xa9t\xc3\xa9", "value", "x", "items", "n-1"};

static json_t *rand_schema(int depth, json_t *defs);

static json_t *rand_number_bound(bool integer) {
    if (integer) return json_integer(rnd(400) - 200);
    static const double vals[] = {-12.5, -3, -0.25, 0, 0.001, 0.5, 1, 2.75, 10, 99.99, 1234.5678};
    return json_real(vals[rnd(MX_ARRAY_LEN(vals))]);
}

static json_t *rand_leaf(void) {
    json_t *s = json_object();
    switch (rnd(12)) {
    case 0: case 1: json_object_set_new(s, "type", json_string("string")); break;
    case 2: {
        json_object_set_new(s, "type", json_string("string"));
        int a = rnd(4);
        if (rnd(2)) json_object_set_new(s, "minLength", json_integer(a));
        if (rnd(2)) json_object_set_new(s, "maxLength", json_integer(a + rnd(6)));
        break;
    }
    case 3:
        json_object_set_new(s, "type", json_string("string"));
        json_object_set_new(s, "pattern", json_string(PATTERNS[rnd(MX_ARRAY_LEN(PATTERNS))]));
        break;
    case 4: {
        static const char *const F[] = {"date", "time", "date-time", "uuid"};
        json_object_set_new(s, "type", json_string("string"));
        json_object_set_new(s, "format", json_string(F[rnd(4)]));
        break;
    }
    case 5: case 6: {
        bool integer = rnd(2);
        json_object_set_new(s, "type", json_string(integer ? "integer" : "number"));
        json_t *lo = rnd(3) ? rand_number_bound(integer) : NULL, *hi = rnd(3) ? rand_number_bound(integer) : NULL;
        if (lo && hi && json_number_value(lo) > json_number_value(hi)) { json_t *t = lo; lo = hi; hi = t; }
        if (lo && hi && json_number_value(lo) == json_number_value(hi)) { json_decref(hi); hi = NULL; }
        if (lo) json_object_set_new(s, rnd(3) ? "minimum" : "exclusiveMinimum", lo);
        if (hi) json_object_set_new(s, rnd(3) ? "maximum" : "exclusiveMaximum", hi);
        break;
    }
    case 7: json_object_set_new(s, "type", json_string("boolean")); break;
    case 8: json_object_set_new(s, "type", json_string("null")); break;
    case 9: {
        json_t *e = json_array();
        int n = 1 + rnd(3);
        for (int i = 0; i < n; i++) {
            int k = rnd(4);
            json_array_append_new(e, k == 0 ? json_string(NAMES[rnd(MX_ARRAY_LEN(NAMES))]) : k == 1 ? json_integer(rnd(50)) : k == 2 ? json_null() : json_pack("[i,s]", rnd(9), "z"));
        }
        json_object_set_new(s, "enum", e);
        break;
    }
    case 10: json_object_set_new(s, "const", json_pack("{s:[b,n]}", "k", rnd(2))); break;
    default: json_object_set_new(s, "type", json_string("integer")); break;
    }
    return s;
}

static json_t *rand_schema(int depth, json_t *defs) {
    int k = depth >= 3 ? 0 : rnd(10);
    if (k < 4) return rand_leaf();
    json_t *s = json_object();
    if (k < 6) {
        json_object_set_new(s, "type", json_string("object"));
        json_t *props = json_object(), *req = json_array();
        int n = rnd(4);
        for (int i = 0; i < n; i++) {
            const char *nm = NAMES[rnd(MX_ARRAY_LEN(NAMES))];
            if (json_object_get(props, nm)) continue;
            json_object_set_new(props, nm, rand_schema(depth + 1, defs));
            if (rnd(2)) json_array_append_new(req, json_string(nm));
        }
        json_object_set_new(s, "properties", props);
        json_object_set_new(s, "required", req);
        int a = rnd(4);
        if (a == 1) json_object_set_new(s, "additionalProperties", json_false());
        else if (a == 2) json_object_set_new(s, "additionalProperties", json_true());
        else if (a == 3) json_object_set_new(s, "additionalProperties", rand_leaf());
    } else if (k < 8) {
        json_object_set_new(s, "type", json_string("array"));
        if (rnd(4) == 0) {
            json_t *p = json_array();
            int n = 1 + rnd(2);
            for (int i = 0; i < n; i++) json_array_append_new(p, rand_schema(depth + 1, defs));
            json_object_set_new(s, "prefixItems", p);
            if (rnd(2)) json_object_set_new(s, "items", json_false());
        } else json_object_set_new(s, "items", rand_schema(depth + 1, defs));
        int mn = rnd(3);
        if (rnd(2)) json_object_set_new(s, "minItems", json_integer(mn));
        if (rnd(2)) json_object_set_new(s, "maxItems", json_integer(mn + rnd(3)));
    } else if (k == 8) {
        json_t *alts = json_array();
        int n = 2 + rnd(2);
        for (int i = 0; i < n; i++) json_array_append_new(alts, rand_schema(depth + 1, defs));
        json_object_set_new(s, "anyOf", alts);
    } else {
        char nm[16];
        snprintf(nm, sizeof nm, "d%zu", json_object_size(defs));
        json_object_set_new(defs, nm, json_true()); /* reserve the name */
        json_object_set_new(defs, nm, rand_schema(depth + 1, defs));
        char ref[32];
        snprintf(ref, sizeof ref, "#/$defs/%s", nm);
        json_object_set_new(s, "$ref", json_string(ref));
        json_object_set_new(s, "description", json_string("a reference"));
    }
    return s;
}

/* ---------- generation over a vocabulary ---------- */

typedef struct {
    mx_tokenizer *tok;
    mx_gvocab *v;
    int V;
    int32_t eos;
    char **bytes; /* per token: its bytes (NULL: never allowed) */
    size_t *len;
} vocab_t;

static bool vocab_open(vocab_t *vt, const char *dir) {
    memset(vt, 0, sizeof *vt);
    if (!(vt->tok = mx_tok_load(dir))) return false;
    vt->V = mx_tok_vocab_size(vt->tok);
    vt->eos = mx_tok_eos(vt->tok);
    if (!(vt->v = mx_gvocab_new(vt->tok, vt->V, &vt->eos, 1))) return false;
    vt->bytes = calloc((size_t)vt->V, sizeof *vt->bytes);
    vt->len = calloc((size_t)vt->V, sizeof *vt->len);
    for (int i = 0; i < vt->V; i++) {
        if (mx_tok_is_special(vt->tok, i)) continue;
        mx_buf b = {0};
        mx_tok_token_bytes(vt->tok, i, &b);
        if (b.len) { vt->bytes[i] = b.data; vt->len[i] = b.len; }
        else mx_buf_free(&b);
    }
    return true;
}

static void vocab_close(vocab_t *vt) {
    for (int i = 0; i < vt->V; i++) free(vt->bytes[i]);
    free(vt->bytes);
    free(vt->len);
    mx_gvocab_free(vt->v);
    mx_tok_free(vt->tok);
}

/* Picks among allowed tokens: random, or (closing) one that ends a
 * structure when one is allowed: the end token, then '"', ']', '}'. */
static int32_t pick(const vocab_t *vt, const uint32_t *bits, bool closing) {
    int32_t best = -1, n = 0, close = -1, rank = 99;
    for (int i = 0; i < vt->V; i++) {
        if (!((bits[i >> 5] >> (i & 31)) & 1)) continue;
        if (closing) {
            const char *c = i == vt->eos ? NULL : vt->len[i] == 1 ? strchr("\"]}", vt->bytes[i][0]) : NULL;
            int r = i == vt->eos ? 0 : c ? 1 + (int)(c - "\"]}") : 99;
            if (r < rank) { rank = r; close = i; }
        }
        if (rnd(++n) == 0) best = i;
    }
    /* sometimes random even then: a closing character may also be text (inside a string) */
    return close >= 0 && (rank < 2 || rnd(3)) ? close : best;
}

/* One generation: follows the mask, checking it against token-by-token
 * stepping on `check` tokens per step (all when check >= V). Returns the text. */
static bool generate(const vocab_t *vt, mx_grammar *g, int max_steps, int check, mx_buf *text, char *why, size_t wn) {
    mx_gmatch *m = mx_gmatch_new(g);
    uint32_t *bits = calloc((size_t)(vt->V + 31) / 32, 4);
    bool ok = m && bits, done = false;
    for (int step = 0; ok && step < max_steps && !done; step++) {
        int n = mx_gmatch_mask(m, bits);
        if (n <= 0) { snprintf(why, wn, "mask: %d (%s)", n, n < 0 ? mx_errmsg() : "dead end"); ok = false; break; }
        /* the mask against stepping each token */
        for (int c = 0; c < MX_MIN(check, vt->V); c++) {
            int32_t t = check >= vt->V ? c : rnd(vt->V);
            bool in = (bits[t >> 5] >> (t & 31)) & 1;
            bool can = !mx_gmatch_accept_token(m, t);
            if (can) mx_gmatch_rollback(m, 1);
            if (in != can) { snprintf(why, wn, "step %d: token %d is %s by the mask but %s by stepping", step, t, in ? "allowed" : "refused", can ? "accepted" : "refused"); ok = false; break; }
        }
        if (!ok) break;
        int32_t t = pick(vt, bits, step > max_steps / 3 || rnd(4) == 0);
        if (t == vt->eos) { done = true; break; }
        if (mx_gmatch_accept_token(m, t)) { snprintf(why, wn, "step %d: allowed token %d refused: %s", step, t, mx_errmsg()); ok = false; break; }
        mx_buf_append(text, vt->bytes[t], vt->len[t]);
        done = mx_gmatch_finished(m);
    }
    if (ok && !done) { snprintf(why, wn, "did not finish in %d steps", max_steps); ok = false; }
    mx_gmatch_free(m);
    free(bits);
    return ok;
}

static void check_random(const char *label, const char *tokdir, int n_schemas, int check, unsigned seed) {
    vocab_t vt;
    char name[96];
    snprintf(name, sizeof name, "random/%s/vocab", label);
    if (!vocab_open(&vt, tokdir)) { CHECK(name, 0, "%s", mx_errmsg()); return; }
    rs = seed;
    int passed = 0, bad = 0;
    char why[512] = "";
    for (int i = 0; i < n_schemas && !bad; i++) {
        json_t *defs = json_object();
        json_t *s = rand_schema(0, defs);
        if (json_object_size(defs)) json_object_set(s, "$defs", defs);
        json_decref(defs);
        v_root = s;
        mx_grammar *g = mx_grammar_from_schema(s, vt.v);
        char *st = json_dumps(s, JSON_COMPACT);
        if (!g) {
            /* the generator only makes supported schemas, except ones whose bounds leave nothing */
            if (!strstr(mx_errmsg(), "satisf")) { snprintf(why, sizeof why, "schema %s: %s", st, mx_errmsg()); bad = 1; }
            free(st);
            json_decref(s);
            continue;
        }
        for (int rep = 0; rep < 2 && !bad; rep++) {
            mx_buf text = {0};
            if (!generate(&vt, g, 400, check, &text, why, sizeof why)) {
                size_t l = strlen(why);
                snprintf(why + l, sizeof why - l, " [schema %s, text %.*s]", st, (int)MX_MIN(text.len, 200), text.data ? text.data : "");
                bad = 1;
            } else {
                json_error_t je;
                json_t *v = json_loadb(text.data, text.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
                char vwhy[128] = "";
                if (!v || !v_check(s, v, vwhy, sizeof vwhy)) {
                    snprintf(why, sizeof why, "output %.*s %s %s for schema %s", (int)MX_MIN(text.len, 300), text.data, v ? "does not validate:" : "does not parse:", v ? vwhy : je.text, st);
                    bad = 1;
                } else passed++;
                json_decref(v);
            }
            mx_buf_free(&text);
        }
        free(st);
        mx_grammar_unref(g);
        json_decref(s);
    }
    snprintf(name, sizeof name, "random/%s/%d generations parse and validate", label, passed);
    CHECK(name, !bad, "%s", why);
    vocab_close(&vt);
}

/* ---------- a real model ---------- */

static int setup_tinymodel(char *dir, size_t n) {
    snprintf(dir, n, "/tmp/mlxcel-grammar-test-%d", (int)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/server/tinymodel/*.json tests/fixtures/llama/model.safetensors %s/", dir, dir);
    return system(cmd);
}

static void check_model(void) {
    char dir[256];
    if (setup_tinymodel(dir, sizeof dir)) { CHECK("model/setup", 0, "cannot copy the tiny model"); return; }
    mx_textmodel tm;
    if (mx_textmodel_open(dir, &tm)) { CHECK("model/open", 0, "%s", mx_errmsg()); return; }
    int V = tm.e.model.arch.vocab;
    int32_t eos[8];
    int ne = 0;
    for (int i = 0; i < tm.e.model.n_eos && ne < 8; i++) eos[ne++] = tm.e.model.eos[i];
    mx_gvocab *gv = mx_gvocab_new(tm.tok, V, eos, ne);
    const char *schema_text = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99},"
                              "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"n\",\"ok\"]}";
    json_t *schema = json_loads(schema_text, 0, NULL);
    v_root = schema;
    mx_grammar *g = gv ? mx_grammar_from_schema(schema, gv) : NULL;
    mx_pool *pool = mx_pool_new(2);
    float *logits = malloc(sizeof(float) * (size_t)V);
    uint32_t *bits = malloc(sizeof(uint32_t) * (size_t)(V + 31) / 32);
    int32_t prompt[] = {1, 72, 101, 108, 108, 111};
    for (int constrained = 0; constrained < 2 && g; constrained++) {
        mx_session s;
        if (mx_session_init(&s, &tm.e, 128, 8, pool)) { CHECK("model/session", 0, "%s", mx_errmsg()); break; }
        mx_gmatch *m = constrained ? mx_gmatch_new(g) : NULL;
        mx_buf text = {0};
        int32_t out[128];
        int n_out = 0;
        mx_session_feed(&s, prompt, 6, NULL, logits);
        bool finished = false;
        for (int i = 0; i < 100 && !finished; i++) {
            if (m) {
                if (mx_gmatch_mask(m, bits) <= 0) break;
                mx_gmask_apply(bits, logits, V);
            }
            int32_t t = mx_argmax(logits, V);
            if (mx_textmodel_is_eos(&tm, t)) { finished = true; break; }
            if (m && mx_gmatch_accept_token(m, t)) break;
            out[n_out++] = t;
            if (m && mx_gmatch_finished(m)) { finished = true; break; }
            if (mx_session_feed(&s, &t, 1, NULL, logits)) break;
        }
        mx_tok_decode(tm.tok, out, n_out, false, &text);
        json_t *v = json_loadb(text.data ? text.data : "", text.len, JSON_DECODE_ANY, NULL);
        char why[128] = "";
        bool valid = v && v_check(schema, v, why, sizeof why);
        if (!constrained) CHECK("model/free output does not parse", !v, "it parsed: %.*s", (int)text.len, text.data);
        else CHECK("model/constrained output parses and validates", finished && valid, "%s: %.*s", why, (int)text.len, text.data ? text.data : "");
        json_decref(v);
        mx_buf_free(&text);
        mx_gmatch_free(m);
        mx_session_free(&s);
    }
    if (!g) CHECK("model/grammar", 0, "%s", mx_errmsg());
    free(logits);
    free(bits);
    mx_pool_free(pool);
    mx_grammar_unref(g);
    json_decref(schema);
    mx_gvocab_free(gv);
    mx_textmodel_close(&tm);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
}

/* ---------- tool calls ---------- */

/* The call grammar of each template format accepts exactly a call the
 * output parser reads back, with arguments held to the parameters. */
static void check_tool_calls(void) {
    mx_buf p = {0};
    const char *g = "root ::= a \"root\" [r-t] x{2} # root\nx ::= \"a\" | root-2\nroot-2 ::= \"b\"\n";
    CHECK("tools/gbnf_prefix", !mx_gbnf_prefix(g, strlen(g), "t0-", &p) &&
          !strcmp(p.data, "t0-root ::= t0-a \"root\" [r-t] t0-x{2} # root\nt0-x ::= \"a\" | t0-root-2\nt0-root-2 ::= \"b\"\n"), "%s", p.data);
    mx_buf_free(&p);
    json_t *fns = json_loads("[{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"},"
                             " \"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}}, \"required\": [\"city\", \"days\"]}},"
                             " {\"name\": \"now\"}]", 0, NULL);
    static const struct { mx_tool_format f; const char *text; bool ok; } cases[] = {
        {MX_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 3}}\n</tool_call>", true},
        {MX_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>", true},
        {MX_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 9}}\n</tool_call>", false},
        {MX_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x\": 1}}\n</tool_call>", false},
        {MX_TOOLFMT_HERMES, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>", false},
        {MX_TOOLFMT_MISTRAL, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\", \"days\": 1}}]", true},
        {MX_TOOLFMT_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"A\", \"days\": 7}", true},
        {MX_TOOLFMT_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]{\"days\": 7}", false},
        {MX_TOOLFMT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"A\", \"days\": 2}}", true},
        {MX_TOOLFMT_LLAMA3, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\", \"days\": 2}}", false},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(cases); i++) {
        char name[64];
        snprintf(name, sizeof name, "tools/format%d_case%zu", (int)cases[i].f, i);
        mx_grammar *gr = mx_tool_call_grammar(cases[i].f, fns, NULL);
        mx_gmatch *m = gr ? mx_gmatch_new(gr) : NULL;
        bool ok = m && !mx_gmatch_accept_bytes(m, cases[i].text, strlen(cases[i].text)) && mx_gmatch_complete(m);
        /* what the grammar accepts comes back from the output parser as that call */
        bool parsed = true;
        if (ok) {
            mx_outparse op;
            mx_buf c = {0}, r = {0};
            json_t *calls = NULL;
            mx_out_init(&op, false, false, true, NULL, 0);
            mx_out_push(&op, cases[i].text, strlen(cases[i].text), &c, &r);
            mx_out_finish(&op, &c, &r, &calls);
            const char *fn = json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "name"));
            parsed = json_array_size(calls) == 1 && fn && strstr(cases[i].text, fn) && !c.len;
            json_decref(calls);
            mx_out_free(&op);
            mx_buf_free(&c);
            mx_buf_free(&r);
        }
        CHECK(name, gr && ok == cases[i].ok && parsed, "%s: %s%s", cases[i].text, gr ? (ok ? "accepted" : "refused") : mx_errmsg(), parsed ? "" : ", not parsed back");
        mx_gmatch_free(m);
        mx_grammar_unref(gr);
    }
    json_t *bad = json_loads("[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"not\": {}}}}}]", 0, NULL);
    mx_grammar *gr = mx_tool_call_grammar(MX_TOOLFMT_HERMES, bad, NULL);
    CHECK("tools/unsupported_keyword_named", !gr && strstr(mx_errmsg(), "tool 'f'") && strstr(mx_errmsg(), "'not'"), "%s", gr ? "a grammar" : mx_errmsg());
    mx_grammar_unref(gr);
    json_decref(bad);
    json_decref(fns);
}

/* ---------- pathological grammars: refused, or bounded ---------- */

static void check_bounds(void) {
    char name[80];
    /* refused at compile, naming the construct */
    static const struct { const char *g, *err; } refused[] = {
        {"root ::= (\"a\" | \"\")*", "rule 'root' is left-recursive through a repetition"}, /* star of a nullable item */
        {"root ::= a \"x\"\na ::= b \"y\" | \"z\"\nb ::= a", "left-recursive"}, /* mutual */
        {"root ::= [a-z]{100000} [a-z]{100000} x\nx ::= \"ab\"{50000}{50}", "elements"},
        {"root ::= \"a\"{0,100001}", "repetition count"},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(refused); i++) {
        mx_grammar *g = mx_grammar_from_gbnf(refused[i].g, strlen(refused[i].g), NULL);
        snprintf(name, sizeof name, "bounds/refused %zu", i);
        CHECK(name, !g && strstr(mx_errmsg(), refused[i].err), "got %s", g ? "a grammar" : mx_errmsg());
        mx_grammar_unref(g);
    }
    {
        mx_buf b = {0};
        mx_buf_puts(&b, "root ::= ");
        for (int i = 0; i < 201; i++) mx_buf_puts(&b, "(");
        mx_buf_puts(&b, "\"a\"");
        for (int i = 0; i < 201; i++) mx_buf_puts(&b, ")");
        mx_grammar *g = mx_grammar_from_gbnf(b.data, b.len, NULL);
        CHECK("bounds/nesting", !g && strstr(mx_errmsg(), "nested too deeply"), "got %s", g ? "a grammar" : mx_errmsg());
        mx_grammar_unref(g);
        mx_buf_free(&b);
    }
    /* the same from a schema: the message names the limit or the pattern, not a bug */
    {
        static const struct { const char *schema, *err; } sch[] = {
            {"{\"type\":\"string\",\"pattern\":\"^((a*)*)*b$\"}", "'pattern' repeats a group"},
            {"{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\","
             "\"maxItems\":100000,\"items\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\",\"maxItems\":100000,"
             "\"items\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":"
             "\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{\"type\":\"array\",\"maxItems\":"
             "100000,\"items\":{\"type\":\"array\",\"maxItems\":100000,\"items\":{}}}}}}}}}}}}", "schema: too large for the grammar limits: grammar: more than"},
        };
        for (size_t i = 0; i < MX_ARRAY_LEN(sch); i++) {
            json_t *j = json_loads(sch[i].schema, 0, NULL);
            mx_grammar *g = j ? mx_grammar_from_schema(j, NULL) : NULL;
            snprintf(name, sizeof name, "bounds/schema %zu", i);
            CHECK(name, j && !g && strstr(mx_errmsg(), sch[i].err) && !strstr(mx_errmsg(), "a bug"), "got %s", g ? "a grammar" : mx_errmsg());
            mx_grammar_unref(g);
            json_decref(j);
        }
    }
    /* a chain of 100000 rules (nullable, tail calls) compiles: the analyses are linear */
    {
        mx_buf b = {0};
        mx_buf_puts(&b, "root ::= r0 \"z\"\n");
        for (int i = 0; i < 100000; i++) mx_buf_printf(&b, "r%d ::= r%d\n", i, i + 1);
        mx_buf_puts(&b, "r100000 ::= \"b\"?\n");
        mx_grammar *g = mx_grammar_from_gbnf(b.data, b.len, NULL);
        mx_gmatch *m = g ? mx_gmatch_new(g) : NULL, *m2 = g ? mx_gmatch_new(g) : NULL;
        bool ok = m && m2 && !mx_gmatch_accept_bytes(m, "b", 1) && !mx_gmatch_complete(m) && !mx_gmatch_accept_bytes(m, "z", 1) &&
                  mx_gmatch_complete(m) && !mx_gmatch_accept_bytes(m2, "z", 1) && mx_gmatch_complete(m2) && mx_gmatch_accept_bytes(m2, "b", 1);
        mx_gmatch_free(m2);
        CHECK("bounds/long_chain", ok, "%s", g ? "wrong matches" : mx_errmsg());
        mx_gmatch_free(m);
        mx_grammar_unref(g);
        mx_buf_free(&b);
    }
    /* too many parser stacks: refused when the matcher starts */
    {
        const char *t = "root ::= (\"a\"{0,2}){0,5000}";
        mx_grammar *g = mx_grammar_from_gbnf(t, strlen(t), NULL);
        mx_gmatch *m = g ? mx_gmatch_new(g) : NULL;
        CHECK("bounds/stacks", g && !m && strstr(mx_errmsg(), "stacks"), "%s", m ? "a matcher" : mx_errmsg());
        mx_gmatch_free(m);
        mx_grammar_unref(g);
    }
    /* a non-tail recursion that keeps ~3n stacks after n bytes, over Llama 3's
     * vocabulary: each mask checks most tokens against every stack. Masks
     * succeed while their work fits the budget, then one fails cleanly, just
     * past it (one charge is at most a state's stacks or a rule's alternatives). */
    {
        mx_tokenizer *tok = mx_tok_load("tests/tokenizers/llama3");
        int V = tok ? mx_tok_vocab_size(tok) : 0;
        int32_t eos = tok ? mx_tok_eos(tok) : -1;
        mx_gvocab *v = tok ? mx_gvocab_new(tok, V, &eos, 1) : NULL;
        const char *t = "root ::= x\nx ::= [ -~] x [ -~] | [ -~] x | \"\"";
        mx_grammar *g = v ? mx_grammar_from_gbnf(t, strlen(t), v) : NULL;
        mx_gmatch *m = g ? mx_gmatch_new(g) : NULL;
        uint32_t *bits = calloc(((size_t)V + 31) / 32 + 1, sizeof *bits);
        int n_ok = -1, n_late = -1;
        uint64_t w_ok = 0, w_late = 0;
        char why[160] = "";
        if (m && bits) {
            n_ok = mx_gmatch_mask(m, bits);
            w_ok = mx_gmatch_work(m) > mx_grammar_precompute_work(g) ? mx_gmatch_work(m) : mx_grammar_precompute_work(g);
            for (int i = 0; i < 1000 && !mx_gmatch_accept_bytes(m, "a", 1); i++) {}
            n_late = mx_gmatch_mask(m, bits);
            w_late = mx_gmatch_work(m);
            snprintf(why, sizeof why, "%s", n_late < 0 ? mx_errmsg() : "");
        }
        CHECK("bounds/mask_work", n_ok > 0 && w_ok <= G_MAX_WORK && n_late == MX_ERR && strstr(why, "parser work") &&
                                      w_late > G_MAX_WORK && w_late <= G_MAX_WORK + 2 * G_MAX_STACKS,
              "first mask %d (work %llu), after 1000 bytes %d (work %llu): %s", n_ok, (unsigned long long)w_ok, n_late,
              (unsigned long long)w_late, v ? why : mx_errmsg());
        free(bits);
        mx_gmatch_free(m);
        mx_grammar_unref(g);
        mx_gvocab_free(v);
        mx_tok_free(tok);
    }
}

int main(void) {
    check_gbnf();
    check_bounds();
    check_tool_calls();
    check_schema_cases();
    /* a byte-level vocabulary of 314 tokens: the mask checked against every token at every step */
    check_random("tiny", "tests/server/tinymodel", 150, 1 << 20, 7);
    /* Llama 3's 128k vocabulary: a sample of tokens checked per step */
    check_random("llama3", "tests/tokenizers/llama3", 12, 300, 11);
    check_model();
    TEST_END();
}
