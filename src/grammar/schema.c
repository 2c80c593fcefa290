/* JSON Schema to GBNF.
 *
 * Soundness first: every text the grammar allows must validate against the
 * schema. A grammar may allow less than the schema (objects get no
 * properties beyond `properties` unless additionalProperties says so,
 * numbers with bounds are written without exponent, strings for `pattern`
 * use raw characters where JSON allows), but a constraint is never dropped:
 * a keyword that is not handled is an error naming it and its place.
 *
 * Supported: type (string or list), enum, const, anyOf, oneOf when its
 * alternatives have distinct types, allOf of one schema, $ref to "#..."
 * pointers ($defs, definitions, recursion), properties / required /
 * additionalProperties, items / prefixItems / minItems / maxItems,
 * minLength / maxLength, pattern (ECMA-262 subset: no lookaround,
 * backreference or \b), format date / time / date-time / uuid, minimum /
 * maximum / exclusiveMinimum / exclusiveMaximum for integer and number.
 * Annotations (title, description, default, examples, ...) are ignored.
 *
 * Whitespace between tokens is bounded (`space`), numbers have at most 15
 * integral digits, so generation cannot run away inside a value. */
#include "gram_int.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_GRAMMAR (4u << 20)
#define INT_DIGITS 15

typedef struct {
    json_t *root;
    json_t *rules; /* name -> body, in creation order */
    json_t *refs;  /* "#/..." -> rule name */
    char path[512];
    int depth;
    size_t size;
} sc;

static int sc_err(const sc *s, const char *fmt, ...) MX_PRINTF(2, 3);
static int sc_err(const sc *s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mx_set_err("schema at %s: %s", s->path[0] ? s->path : "/", msg);
}

/* ---------- rules ---------- */

static void sanitize(const char *in, char *out, size_t n) {
    size_t j = 0;
    for (size_t i = 0; in[i] && j + 1 < n; i++) {
        char c = in[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (ok) out[j++] = c;
        else if (j && out[j - 1] != '-') out[j++] = '-';
    }
    while (j && out[j - 1] == '-') j--;
    if (!j) out[j++] = 'r';
    out[j] = 0;
}

static const char *const PRIMS[][3] = {
    /* name, body, dependencies (space separated) */
    {"space", "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}", ""},
    {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))", ""},
    {"string", "\"\\\"\" char* \"\\\"\" space", "char space"},
    {"integral-part", "[0] | [1-9] [0-9]{0,14}", ""},
    {"decimal-part", "[0-9]{1,15}", ""},
    {"number", "\"-\"? integral-part (\".\" decimal-part)? ([eE] [-+]? [0-9]{1,2})? space", "integral-part decimal-part space"},
    {"integer", "\"-\"? integral-part space", "integral-part space"},
    {"boolean", "(\"true\" | \"false\") space", "space"},
    {"null", "\"null\" space", "space"},
    {"value", "object | array | string | number | boolean | null", "object array string number boolean null"},
    {"object", "\"{\" space ( string \":\" space value ( \",\" space string \":\" space value )* )? \"}\" space", "string value space"},
    {"array", "\"[\" space ( value ( \",\" space value )* )? \"]\" space", "value space"},
    {"key-char", "[^\"\\\\\\x7F\\x00-\\x1F]", ""},
    {"hex", "[0-9a-fA-F]", ""},
    {"date", "[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | ( \"0\" [469] | \"11\" ) \"-\" "
             "( \"0\" [1-9] | [12] [0-9] | \"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )", ""},
    {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", ""},
    {"date-string", "\"\\\"\" date \"\\\"\" space", "date space"},
    {"time-string", "\"\\\"\" time \"\\\"\" space", "time space"},
    {"date-time-string", "\"\\\"\" date \"T\" time \"\\\"\" space", "date time space"},
    {"uuid-string", "\"\\\"\" hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12} \"\\\"\" space", "hex space"},
};

static int prim_index(const char *name) {
    for (size_t i = 0; i < MX_ARRAY_LEN(PRIMS); i++)
        if (!strcmp(PRIMS[i][0], name)) return (int)i;
    return -1;
}

static int set_rule(sc *s, const char *name, const char *body) {
    s->size += strlen(name) + strlen(body) + 8;
    if (s->size > MAX_GRAMMAR) return sc_err(s, "the schema makes a grammar larger than %u bytes", MAX_GRAMMAR);
    return json_object_set_new(s->rules, name, json_string(body)) ? mx_set_err("schema: out of memory") : MX_OK;
}

/* Adds a primitive (and what it uses) once; returns its name. */
static const char *prim(sc *s, const char *name) {
    int i = prim_index(name);
    if (json_object_get(s->rules, name)) return PRIMS[i][0];
    if (set_rule(s, name, PRIMS[i][1])) return NULL;
    for (const char *d = PRIMS[i][2]; *d;) {
        char dep[32];
        size_t n = strcspn(d, " ");
        snprintf(dep, sizeof dep, "%.*s", (int)n, d);
        if (!prim(s, dep)) return NULL;
        d += n + (d[n] == ' ');
    }
    return PRIMS[i][0];
}

static void rule_name(const char *hint, char *name, size_t n) {
    char base[200];
    sanitize(hint, base, sizeof base);
    if (!strcmp(hint, "root")) snprintf(name, n, "root");
    else if (prim_index(base) >= 0 || !strcmp(base, "root")) snprintf(name, n, "%s-", base);
    else snprintf(name, n, "%s", base);
}

/* Adds name ::= body under a unique name (an identical rule is shared);
 * returns the name (malloc'ed). */
static char *add_rule(sc *s, const char *hint, const char *body) {
    char name[220], cand[240];
    rule_name(hint, name, sizeof name);
    snprintf(cand, sizeof cand, "%s", name);
    for (int i = 1;; i++) {
        json_t *have = json_object_get(s->rules, cand);
        if (!have) break;
        if (!strcmp(json_string_value(have), body)) return mx_strdup(cand);
        snprintf(cand, sizeof cand, "%s%d", name, i);
    }
    if (set_rule(s, cand, body)) return NULL;
    return mx_strdup(cand);
}

/* Reserves a fresh name for a rule whose body comes later (a $ref, which
 * may be recursive); the placeholder body matches no real one. */
static char *reserve_rule(sc *s, const char *hint) {
    char name[220], cand[240], ph[32];
    rule_name(hint, name, sizeof name);
    snprintf(cand, sizeof cand, "%s", name);
    for (int i = 1; json_object_get(s->rules, cand); i++) snprintf(cand, sizeof cand, "%s%d", name, i);
    snprintf(ph, sizeof ph, "\x01%zu", json_object_size(s->rules));
    if (set_rule(s, cand, ph)) return NULL;
    return mx_strdup(cand);
}

/* ---------- text helpers ---------- */

/* GBNF string literal of raw bytes. */
static void lit(mx_buf *o, const char *p, size_t n) {
    mx_buf_puts(o, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"') mx_buf_puts(o, "\\\"");
        else if (c == '\\') mx_buf_puts(o, "\\\\");
        else if (c == '\n') mx_buf_puts(o, "\\n");
        else if (c == '\r') mx_buf_puts(o, "\\r");
        else if (c == '\t') mx_buf_puts(o, "\\t");
        else if (c < 0x20 || c == 0x7F) mx_buf_printf(o, "\\x%02X", c);
        else mx_buf_append(o, &p[i], 1);
    }
    mx_buf_puts(o, "\"");
}

static void lit_s(mx_buf *o, const char *p) { lit(o, p, strlen(p)); }

/* The JSON text of a value (compact) as a GBNF literal. */
static int json_lit(mx_buf *o, json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) return mx_set_err("schema: cannot serialize a value");
    lit_s(o, t);
    free(t);
    return MX_OK;
}

static void push_path(sc *s, const char *part, size_t *saved) {
    *saved = strlen(s->path);
    size_t n = *saved;
    if (n + 2 >= sizeof s->path) return;
    s->path[n++] = '/';
    for (const char *p = part; *p && n + 3 < sizeof s->path; p++) {
        if (*p == '~' || *p == '/') { s->path[n++] = '~'; s->path[n++] = *p == '~' ? '0' : '1'; }
        else s->path[n++] = *p;
    }
    s->path[n] = 0;
}

static void pop_path(sc *s, size_t saved) { s->path[saved] = 0; }

/* ---------- keywords ---------- */

static const char *const ANNOTATIONS[] = {"$schema", "$id", "$comment", "$anchor", "title", "description", "default", "examples",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
static const char *const KNOWN[] = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
                                    "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "minLength",
                                    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                    "uniqueItems"};

static bool in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

static bool is_annotation(const char *k) { return in_list(k, ANNOTATIONS, MX_ARRAY_LEN(ANNOTATIONS)); }

static char *visit(sc *s, json_t *schema, const char *name);

/* ---------- numbers ---------- */

/* Non-negative integers as digit strings, without leading zeros. */
static void rep_digits(mx_buf *o, int n) {
    if (n == 1) mx_buf_puts(o, "[0-9]");
    else if (n > 1) mx_buf_printf(o, "[0-9]{%d}", n);
}

static bool all_char(const char *s, int n, char c) {
    for (int i = 0; i < n; i++)
        if (s[i] != c) return false;
    return true;
}

/* n-digit strings x with a <= x <= b (a <= b, same length). */
static void same_len(mx_buf *o, const char *a, const char *b, int n) {
    int i = 0;
    while (i < n && a[i] == b[i]) i++;
    if (i == n) { lit(o, a, (size_t)n); return; }
    if (i) { lit(o, a, (size_t)i); mx_buf_puts(o, " "); }
    int rest = n - i - 1;
    if (!rest) { mx_buf_printf(o, "[%c-%c]", a[i], b[i]); return; }
    bool lo0 = all_char(a + i + 1, rest, '0'), hi9 = all_char(b + i + 1, rest, '9');
    char dlo = lo0 ? a[i] : (char)(a[i] + 1), dhi = hi9 ? b[i] : (char)(b[i] - 1);
    const char *sep = "";
    mx_buf_puts(o, "(");
    if (!lo0) {
        char nines[INT_DIGITS + 1];
        memset(nines, '9', (size_t)rest);
        mx_buf_printf(o, "[%c] (", a[i]);
        same_len(o, a + i + 1, nines, rest);
        mx_buf_puts(o, ")");
        sep = " | ";
    }
    if (dlo <= dhi) {
        mx_buf_printf(o, "%s[%c-%c] ", sep, dlo, dhi);
        rep_digits(o, rest);
        sep = " | ";
    }
    if (!hi9) {
        char zeros[INT_DIGITS + 1];
        memset(zeros, '0', (size_t)rest);
        mx_buf_printf(o, "%s[%c] (", sep, b[i]);
        same_len(o, zeros, b + i + 1, rest);
        mx_buf_puts(o, ")");
    }
    mx_buf_puts(o, ")");
}

/* lo <= x <= hi (hi NULL: up to INT_DIGITS digits) as alternatives. */
static void uint_range(mx_buf *o, const char *lo, const char *hi) {
    int llo = (int)strlen(lo), lhi = hi ? (int)strlen(hi) : INT_DIGITS;
    char low[INT_DIGITS + 2], high[INT_DIGITS + 2];
    const char *sep = "";
    mx_buf_puts(o, "(");
    for (int L = llo; L <= lhi; L++) {
        if (!hi && L > llo) {
            /* every longer number */
            mx_buf_printf(o, "%s[1-9] [0-9]{%d,%d}", sep, L - 1, INT_DIGITS - 1);
            break;
        }
        if (L == llo) snprintf(low, sizeof low, "%s", lo);
        else { memset(low, '0', (size_t)L); low[0] = '1'; low[L] = 0; }
        if (hi && L == lhi) snprintf(high, sizeof high, "%s", hi);
        else { memset(high, '9', (size_t)L); high[L] = 0; }
        mx_buf_puts(o, sep);
        same_len(o, low, high, L);
        sep = " | ";
    }
    mx_buf_puts(o, ")");
}

static void int_range(mx_buf *o, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
    char a[32], b[32];
    const char *sep = "";
    mx_buf_puts(o, "(");
    if (!has_lo || lo < 0) { /* negative: magnitudes */
        int64_t mlo = has_hi && hi < 0 ? -hi : 1;
        snprintf(a, sizeof a, "%lld", (long long)mlo);
        if (has_lo) snprintf(b, sizeof b, "%lld", (long long)-lo);
        mx_buf_puts(o, "\"-\" ");
        uint_range(o, a, has_lo ? b : NULL);
        sep = " | ";
    }
    if (!has_hi || hi >= 0) {
        snprintf(a, sizeof a, "%lld", (long long)(has_lo && lo > 0 ? lo : 0));
        if (has_hi) snprintf(b, sizeof b, "%lld", (long long)hi);
        mx_buf_puts(o, sep);
        uint_range(o, a, has_hi ? b : NULL);
    }
    mx_buf_puts(o, ")");
}

/* A decimal bound: |value| = ip.fp (ip without leading zeros, fp without
 * trailing zeros), strict for an exclusive bound. */
typedef struct {
    bool neg, strict;
    char ip[INT_DIGITS + 2], fp[400];
} dbound;

/* The shortest decimal that reads back as d, as a plain (no exponent) bound;
 * false when |d| needs more than INT_DIGITS integral digits. */
static bool to_bound(double d, bool strict, dbound *b) {
    memset(b, 0, sizeof *b);
    b->strict = strict;
    b->neg = d < 0;
    if (b->neg) d = -d;
    if (!(d < 1e15)) return false;
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e = "D.DDDDe[+-]XX": value = 0.DDDDD * 10^(exp + 1) */
    char digits[24];
    int nd = 0;
    const char *p = e;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
    int point = atoi(p + 1) + 1, ni = 0, nf = 0;
    if (point > 0) {
        for (int i = 0; i < point; i++) b->ip[ni++] = i < nd ? digits[i] : '0';
        for (int i = point; i < nd; i++) b->fp[nf++] = digits[i];
    } else {
        b->ip[ni++] = '0';
        for (int i = 0; i < -point; i++) b->fp[nf++] = '0';
        for (int i = 0; i < nd; i++) b->fp[nf++] = digits[i];
    }
    b->ip[ni] = 0;
    b->fp[nf] = 0;
    int k = 0;
    while (b->ip[k] == '0' && b->ip[k + 1]) k++;
    memmove(b->ip, b->ip + k, strlen(b->ip + k) + 1);
    if (!b->ip[0]) snprintf(b->ip, sizeof b->ip, "0");
    while (nf && b->fp[nf - 1] == '0') b->fp[--nf] = 0;
    if (!strcmp(b->ip, "0") && !nf) b->neg = false;
    return true;
}

/* ip + 1 (digit string); false on overflow past INT_DIGITS. */
static bool inc_digits(char *ip) {
    int n = (int)strlen(ip);
    for (int i = n - 1; i >= 0; i--) {
        if (ip[i] != '9') { ip[i]++; return true; }
        ip[i] = '0';
    }
    if (n >= INT_DIGITS) return false;
    memmove(ip + 1, ip, (size_t)n + 1);
    ip[0] = '1';
    return true;
}

/* ip - 1 (ip > 0) */
static void dec_digits(char *ip) {
    int n = (int)strlen(ip);
    for (int i = n - 1; i >= 0; i--) {
        if (ip[i] != '0') { ip[i]--; break; }
        ip[i] = '9';
    }
    if (n > 1 && ip[0] == '0') memmove(ip, ip + 1, (size_t)n);
}

/* Cuts fp to f digits, rounding the bound inward (up for a lower bound of
 * a non-negative range, down for an upper one); a cut bound becomes
 * inclusive (the grid value is strictly inside). */
static bool round_inward(dbound *b, int f, bool up) {
    if ((int)strlen(b->fp) <= f) return true;
    b->fp[f] = 0;
    b->strict = false;
    if (up) {
        int i = f - 1;
        for (; i >= 0; i--) {
            if (b->fp[i] != '9') { b->fp[i]++; break; }
            b->fp[i] = '0';
        }
        if (i < 0 && !inc_digits(b->ip)) return false;
    }
    int n = (int)strlen(b->fp);
    while (n && b->fp[n - 1] == '0') b->fp[--n] = 0;
    return true;
}

static int cmp_ip(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb) return la < lb ? -1 : 1;
    int c = strcmp(a, b);
    return c < 0 ? -1 : c > 0;
}

/* |a| vs |b| for non-negative bounds */
static int cmp_bound(const dbound *a, const dbound *b) {
    int c = cmp_ip(a->ip, b->ip);
    if (c) return c;
    c = strcmp(a->fp, b->fp);
    return c < 0 ? -1 : c > 0;
}

static char digit_at(const char *fp, int i) { return i < (int)strlen(fp) ? fp[i] : '0'; }
static bool zero_from(const char *fp, int i) { return (int)strlen(fp) <= i; }

/* Fraction digits d_i d_{i+1}... (at most f in all) with 0.d >= 0.lo (ge),
 * 0.d <= 0.hi (le), both, or neither; the first digit is required. Returns
 * false when no digit string qualifies. */
static bool frac_digits(mx_buf *o, const dbound *lo, const dbound *hi, int i, int f) {
    if (i >= f) return false;
    int rest = f - i - 1;
    char a = lo ? digit_at(lo->fp, i) : '0', z = hi ? digit_at(hi->fp, i) : '9';
    mx_buf alts = {0};
    const char *sep = "";
    /* strictly between: anything may follow */
    char from = lo ? (char)(a + 1) : '0', to = hi ? (char)(z - 1) : '9';
    if (!lo && !hi) from = '0', to = '9';
    if (from <= to) {
        mx_buf_printf(&alts, "[%c-%c]", from, to);
        if (rest) mx_buf_printf(&alts, " [0-9]{0,%d}", rest);
        sep = " | ";
    }
    /* on a bound's digit: the rest is compared further */
    for (int side = 0; side < 2; side++) {
        const dbound *b = side ? hi : lo;
        if (!b) continue;
        char d = side ? z : a;
        if (side && lo && a == z) continue; /* both bounds share the digit: handled below */
        const dbound *l2 = side ? NULL : lo, *h2 = side ? hi : NULL;
        if (!side && hi && a == z) h2 = hi;
        /* ending here: the rest of x is zero */
        bool end_ok = true;
        if (l2) end_ok = end_ok && zero_from(l2->fp, i + 1) && !l2->strict;
        if (h2) end_ok = end_ok && !(h2->strict && zero_from(h2->fp, i + 1));
        mx_buf sub = {0};
        bool more = frac_digits(&sub, l2, h2, i + 1, f);
        if (end_ok || more) {
            mx_buf_printf(&alts, "%s[%c]", sep, d);
            if (more) {
                mx_buf_printf(&alts, " (%s)", sub.data);
                if (end_ok) mx_buf_puts(&alts, "?");
            }
            sep = " | ";
        }
        mx_buf_free(&sub);
    }
    bool any = alts.len > 0;
    if (any) mx_buf_printf(o, "(%s)", alts.data);
    mx_buf_free(&alts);
    return any;
}

/* The optional fraction of a number whose integral part equals the bounds'
 * (lo / hi may be NULL); false when nothing qualifies. */
static bool frac_part(mx_buf *o, const dbound *lo, const dbound *hi, int f) {
    bool none_ok = true; /* no fraction: the value's fraction is 0 */
    if (lo) none_ok = none_ok && !lo->fp[0] && !lo->strict;
    if (hi) none_ok = none_ok && !(hi->strict && !hi->fp[0]);
    mx_buf d = {0};
    bool frac = frac_digits(&d, lo, hi, 0, f);
    if (frac) {
        mx_buf_printf(o, "(\".\" %s)", d.data);
        if (none_ok) mx_buf_puts(o, "?");
    } else if (none_ok) mx_buf_puts(o, "\"\"");
    mx_buf_free(&d);
    return frac || none_ok;
}

/* Non-negative numbers between lo and hi (either may be NULL). */
static bool unum_range(mx_buf *o, const dbound *lo, const dbound *hi, int f) {
    mx_buf alts = {0};
    const char *sep = "";
    char any_frac[48];
    if (f > 0) snprintf(any_frac, sizeof any_frac, " (\".\" [0-9]{1,%d})?", f);
    else any_frac[0] = 0;
    /* integral parts strictly between the bounds' */
    char a[INT_DIGITS + 2], b[INT_DIGITS + 2];
    bool has_mid = true;
    if (lo) { snprintf(a, sizeof a, "%s", lo->ip); has_mid = inc_digits(a); }
    else snprintf(a, sizeof a, "0");
    if (hi) {
        if (!strcmp(hi->ip, "0")) has_mid = false;
        else { snprintf(b, sizeof b, "%s", hi->ip); dec_digits(b); }
    }
    if (has_mid && (!hi || cmp_ip(a, b) <= 0)) {
        mx_buf_puts(&alts, "");
        uint_range(&alts, a, hi ? b : NULL);
        mx_buf_puts(&alts, any_frac);
        sep = " | ";
    }
    bool same = lo && hi && !strcmp(lo->ip, hi->ip);
    for (int side = 0; side < 2; side++) {
        const dbound *x = side ? hi : lo;
        if (!x || (side && same)) continue;
        mx_buf fr = {0};
        if (frac_part(&fr, side ? NULL : lo, side ? hi : (same ? hi : NULL), f)) {
            mx_buf_puts(&alts, sep);
            lit_s(&alts, x->ip);
            mx_buf_printf(&alts, " %s", fr.data);
            sep = " | ";
        }
        mx_buf_free(&fr);
    }
    if (!lo && hi == NULL) { /* unbounded */
        mx_buf_printf(&alts, "%s([0] | [1-9] [0-9]{0,%d})%s", sep, INT_DIGITS - 1, any_frac);
    }
    bool any = alts.len > 0;
    if (any) mx_buf_printf(o, "(%s)", alts.data);
    mx_buf_free(&alts);
    return any;
}

/* A number (no exponent) in the range; false when the range is empty. */
static bool num_range(mx_buf *o, const dbound *lo, const dbound *hi) {
    /* fraction digits: total significant digits stay within 15 so that
     * distinct decimals stay distinct doubles (exclusive bounds hold) */
    int idig = 1;
    if (lo) idig = MX_MAX(idig, (int)strlen(lo->ip));
    if (hi) idig = MX_MAX(idig, (int)strlen(hi->ip));
    int f = MX_MAX(15 - idig, 0);
    dbound l = lo ? *lo : (dbound){0}, h = hi ? *hi : (dbound){0};
    /* round inward: a lower bound up in value, an upper bound down */
    if (lo && !round_inward(&l, f, !l.neg)) return false;
    if (hi && !round_inward(&h, f, h.neg)) return false;
    mx_buf alts = {0};
    const char *sep = "";
    /* negative part: x = -y, y > 0 */
    if (!lo || l.neg) {
        dbound ylo, yhi = l;
        if (hi && h.neg) { ylo = h; }
        else { memset(&ylo, 0, sizeof ylo); snprintf(ylo.ip, sizeof ylo.ip, "0"); ylo.strict = true; }
        ylo.neg = yhi.neg = false;
        int c = lo ? cmp_bound(&ylo, &yhi) : -1;
        if (c < 0 || (c == 0 && !ylo.strict && !yhi.strict)) {
            mx_buf y = {0};
            if (unum_range(&y, &ylo, lo ? &yhi : NULL, f)) {
                mx_buf_printf(&alts, "\"-\" %s", y.data);
                sep = " | ";
            }
            mx_buf_free(&y);
        }
    }
    /* non-negative part */
    if (!hi || !h.neg) {
        dbound xlo;
        if (lo && !l.neg) xlo = l;
        else { memset(&xlo, 0, sizeof xlo); snprintf(xlo.ip, sizeof xlo.ip, "0"); }
        int c = hi ? cmp_bound(&xlo, &h) : -1;
        if (c < 0 || (c == 0 && !xlo.strict && !h.strict)) {
            mx_buf x = {0};
            if (unum_range(&x, &xlo, hi ? &h : NULL, f)) {
                mx_buf_printf(&alts, "%s%s", sep, x.data);
            }
            mx_buf_free(&x);
        }
    }
    bool any = alts.len > 0;
    if (any) mx_buf_printf(o, "(%s)", alts.data);
    mx_buf_free(&alts);
    return any;
}

/* Reads minimum / maximum / exclusive* (draft 4 booleans too). */
static int read_bounds(sc *s, json_t *sch, bool *has_lo, double *lo, bool *lo_strict, bool *has_hi, double *hi, bool *hi_strict) {
    json_t *mn = json_object_get(sch, "minimum"), *mxv = json_object_get(sch, "maximum");
    json_t *emn = json_object_get(sch, "exclusiveMinimum"), *emx = json_object_get(sch, "exclusiveMaximum");
    *has_lo = *has_hi = *lo_strict = *hi_strict = false;
    if (mn) {
        if (!json_is_number(mn)) return sc_err(s, "'minimum' must be a number");
        *has_lo = true;
        *lo = json_number_value(mn);
    }
    if (mxv) {
        if (!json_is_number(mxv)) return sc_err(s, "'maximum' must be a number");
        *has_hi = true;
        *hi = json_number_value(mxv);
    }
    if (emn) {
        if (json_is_boolean(emn)) {
            if (json_is_true(emn) && !mn) return sc_err(s, "'exclusiveMinimum': true needs 'minimum'");
            *lo_strict = json_is_true(emn);
        } else if (json_is_number(emn)) {
            double v = json_number_value(emn);
            if (!*has_lo || v >= *lo) { *has_lo = true; *lo = v; *lo_strict = true; }
        } else return sc_err(s, "'exclusiveMinimum' must be a number");
    }
    if (emx) {
        if (json_is_boolean(emx)) {
            if (json_is_true(emx) && !mxv) return sc_err(s, "'exclusiveMaximum': true needs 'maximum'");
            *hi_strict = json_is_true(emx);
        } else if (json_is_number(emx)) {
            double v = json_number_value(emx);
            if (!*has_hi || v <= *hi) { *has_hi = true; *hi = v; *hi_strict = true; }
        } else return sc_err(s, "'exclusiveMaximum' must be a number");
    }
    if ((*has_lo && !isfinite(*lo)) || (*has_hi && !isfinite(*hi))) return sc_err(s, "numeric bounds must be finite");
    return MX_OK;
}

static char *visit_integer(sc *s, json_t *sch, const char *name) {
    bool hl, hh, ls, hs;
    double lo, hi;
    if (read_bounds(s, sch, &hl, &lo, &ls, &hh, &hi, &hs)) return NULL;
    if (!hl && !hh) return prim(s, "integer") ? mx_strdup("integer") : NULL;
    const double cap = 999999999999999.0;
    int64_t a = 0, b = 0;
    if (hl) {
        double v = ls ? floor(lo) + 1 : ceil(lo);
        if (v > cap) { sc_err(s, "'minimum' %g is beyond the %d digits integers are generated with", lo, INT_DIGITS); return NULL; }
        if (v < -cap) hl = false;
        else a = (int64_t)v;
    }
    if (hh) {
        double v = hs ? ceil(hi) - 1 : floor(hi);
        if (v < -cap) { sc_err(s, "'maximum' %g is beyond the %d digits integers are generated with", hi, INT_DIGITS); return NULL; }
        if (v > cap) hh = false;
        else b = (int64_t)v;
    }
    if (hl && hh && a > b) { sc_err(s, "no integer satisfies the bounds"); return NULL; }
    mx_buf o = {0};
    if (!hl && !hh) mx_buf_puts(&o, "\"-\"? integral-part");
    else int_range(&o, hl, a, hh, b);
    mx_buf_puts(&o, " space");
    char *r = prim(s, "space") && (hl || hh || prim(s, "integral-part")) ? add_rule(s, name, o.data) : NULL;
    mx_buf_free(&o);
    return r;
}

static char *visit_number(sc *s, json_t *sch, const char *name) {
    bool hl, hh, ls, hs;
    double lo, hi;
    if (read_bounds(s, sch, &hl, &lo, &ls, &hh, &hi, &hs)) return NULL;
    if (!hl && !hh) return prim(s, "number") ? mx_strdup("number") : NULL;
    dbound l, h;
    if (hl && !to_bound(lo, ls, &l)) {
        if (lo > 0) { sc_err(s, "'minimum' %g is beyond the %d digits numbers are generated with", lo, INT_DIGITS); return NULL; }
        hl = false;
    }
    if (hh && !to_bound(hi, hs, &h)) {
        if (hi < 0) { sc_err(s, "'maximum' %g is beyond the %d digits numbers are generated with", hi, INT_DIGITS); return NULL; }
        hh = false;
    }
    if (!hl && !hh) return prim(s, "number") ? mx_strdup("number") : NULL;
    mx_buf o = {0};
    if (!num_range(&o, hl ? &l : NULL, hh ? &h : NULL)) {
        mx_buf_free(&o);
        sc_err(s, "no number with at most 15 significant digits satisfies the bounds");
        return NULL;
    }
    mx_buf_puts(&o, " space");
    char *r = prim(s, "space") ? add_rule(s, name, o.data) : NULL;
    mx_buf_free(&o);
    return r;
}

/* ---------- strings ---------- */

typedef struct { uint32_t lo, hi; } crange;
typedef struct { crange v[256]; int n; bool overflow; } cset;

static void cs_add(cset *c, uint32_t lo, uint32_t hi) {
    if (c->n == (int)MX_ARRAY_LEN(c->v)) { c->overflow = true; return; }
    c->v[c->n++] = (crange){lo, hi};
}

static int cmp_cr(const void *a, const void *b) {
    const crange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void cs_norm(cset *c, bool negate) {
    if (c->n > 1) qsort(c->v, (size_t)c->n, sizeof *c->v, cmp_cr);
    int m = 0;
    for (int i = 0; i < c->n; i++) {
        if (m && c->v[i].lo <= c->v[m - 1].hi + 1) { if (c->v[i].hi > c->v[m - 1].hi) c->v[m - 1].hi = c->v[i].hi; }
        else c->v[m++] = c->v[i];
    }
    c->n = m;
    if (!negate) return;
    cset t = {.n = 0};
    uint32_t next = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->v[i].lo > next) cs_add(&t, next, c->v[i].lo - 1);
        next = c->v[i].hi + 1;
    }
    if (next <= 0x10FFFF) cs_add(&t, next, 0x10FFFF);
    t.overflow |= c->overflow;
    *c = t;
}

static bool cs_has(const cset *c, uint32_t x) {
    for (int i = 0; i < c->n; i++)
        if (x >= c->v[i].lo && x <= c->v[i].hi) return true;
    return false;
}

static void class_cp(mx_buf *o, uint32_t c) {
    if (c < 0x80 && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) mx_buf_printf(o, "%c", (char)c);
    else if (c < 0x100) mx_buf_printf(o, "\\x%02X", c);
    else if (c < 0x10000) mx_buf_printf(o, "\\u%04X", c);
    else mx_buf_printf(o, "\\U%08X", c);
}

/* The JSON-string text of one character of c: raw where JSON allows it,
 * an escape where it must be one. Appends an expression; false when c is
 * empty. */
static bool json_char_expr(mx_buf *o, const cset *c) {
    mx_buf cls = {0};
    for (int i = 0; i < c->n; i++) {
        /* raw-writable part: >= 0x20, not '"', '\\', 0x7F, not a surrogate */
        static const crange allowed[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}, {0x80, 0xD7FF}, {0xE000, 0x10FFFF}};
        for (size_t k = 0; k < MX_ARRAY_LEN(allowed); k++) {
            uint32_t lo = MX_MAX(c->v[i].lo, allowed[k].lo), hi = MX_MIN(c->v[i].hi, allowed[k].hi);
            if (lo > hi) continue;
            class_cp(&cls, lo);
            if (hi > lo) { mx_buf_puts(&cls, "-"); class_cp(&cls, hi); }
        }
    }
    mx_buf alts = {0};
    const char *sep = "";
    if (cls.len) { mx_buf_printf(&alts, "[%s]", cls.data); sep = " | "; }
    if (cs_has(c, '"')) { mx_buf_printf(&alts, "%s\"\\\\\\\"\"", sep); sep = " | "; }
    if (cs_has(c, '\\')) { mx_buf_printf(&alts, "%s\"\\\\\\\\\"", sep); sep = " | "; }
    /* control characters: the short escapes, else \u00XX (lowercase hex) */
    static const char shorts[][2] = {{'\b', 'b'}, {'\f', 'f'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}};
    bool is_short[0x20] = {0};
    for (size_t k = 0; k < MX_ARRAY_LEN(shorts); k++) {
        uint32_t ch = (unsigned char)shorts[k][0];
        is_short[ch] = true;
        if (cs_has(c, ch)) { mx_buf_printf(&alts, "%s\"\\\\%c\"", sep, shorts[k][1]); sep = " | "; }
    }
    for (int hiN = 0; hiN < 2; hiN++) {
        mx_buf lows = {0};
        for (int lo = 0; lo < 16; lo++) {
            uint32_t ch = (uint32_t)(hiN * 16 + lo);
            if (!is_short[ch] && cs_has(c, ch)) mx_buf_printf(&lows, "%x", lo);
        }
        if (lows.len) mx_buf_printf(&alts, "%s\"\\\\u00%d\" [%s]", sep, hiN, lows.data);
        if (lows.len) sep = " | ";
        mx_buf_free(&lows);
    }
    bool any = alts.len > 0;
    if (any) mx_buf_printf(o, "(%s)", alts.data);
    mx_buf_free(&cls);
    mx_buf_free(&alts);
    return any;
}

/* ECMA-262 regular expressions (the subset JSON Schema patterns use) to a
 * GBNF expression over the JSON text of the string's characters. */
typedef struct {
    sc *s;
    const char *p, *end;
    int depth;
} rx;

static int rx_err(rx *r, const char *what) { return sc_err(r->s, "'pattern': %s", what); }

static int hex_n(rx *r, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        char c = r->p < r->end ? *r->p : 0;
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return rx_err(r, "bad hexadecimal escape");
        v = v * 16 + (uint32_t)h;
        r->p++;
    }
    *out = v;
    return MX_OK;
}

static void add_class_escape(cset *c, char e) {
    bool neg = e == 'D' || e == 'W' || e == 'S';
    cset t = {.n = 0};
    switch (e | 0x20) {
    case 'd': cs_add(&t, '0', '9'); break;
    case 'w': cs_add(&t, '0', '9'); cs_add(&t, 'A', 'Z'); cs_add(&t, '_', '_'); cs_add(&t, 'a', 'z'); break;
    case 's':
        cs_add(&t, 0x09, 0x0D); cs_add(&t, 0x20, 0x20); cs_add(&t, 0xA0, 0xA0); cs_add(&t, 0x1680, 0x1680);
        cs_add(&t, 0x2000, 0x200A); cs_add(&t, 0x2028, 0x2029); cs_add(&t, 0x202F, 0x202F); cs_add(&t, 0x205F, 0x205F);
        cs_add(&t, 0x3000, 0x3000); cs_add(&t, 0xFEFF, 0xFEFF);
        break;
    }
    cs_norm(&t, neg);
    for (int i = 0; i < t.n; i++) cs_add(c, t.v[i].lo, t.v[i].hi);
}

/* One escaped character after '\' (not a class escape): its code point. */
static int rx_escape_char(rx *r, uint32_t *cp) {
    char e = *r->p++;
    switch (e) {
    case 'n': *cp = '\n'; return MX_OK;
    case 'r': *cp = '\r'; return MX_OK;
    case 't': *cp = '\t'; return MX_OK;
    case 'f': *cp = '\f'; return MX_OK;
    case 'v': *cp = '\v'; return MX_OK;
    case '0': *cp = 0; return MX_OK;
    case 'x': return hex_n(r, 2, cp);
    case 'u':
        if (r->p < r->end && *r->p == '{') return rx_err(r, "\\u{...} escapes are not supported");
        if (hex_n(r, 4, cp)) return MX_ERR;
        if (*cp >= 0xD800 && *cp <= 0xDFFF) return rx_err(r, "surrogate escapes are not supported");
        return MX_OK;
    case 'b': case 'B': return rx_err(r, "word boundaries (\\b, \\B) are not supported");
    case 'p': case 'P': return rx_err(r, "Unicode property escapes (\\p{...}) are not supported");
    case 'k': return rx_err(r, "named backreferences are not supported");
    case 'c': return rx_err(r, "control escapes (\\cX) are not supported");
    default:
        if (e >= '1' && e <= '9') return rx_err(r, "backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return rx_err(r, "unknown escape");
        *cp = (unsigned char)e;
        return MX_OK;
    }
}

static int rx_utf8(rx *r, uint32_t *cp) {
    unsigned char c = (unsigned char)*r->p;
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || r->p + n > r->end) return rx_err(r, "invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (int i = 1; i < n; i++) v = (v << 6) | ((unsigned char)r->p[i] & 0x3Fu);
    r->p += n;
    *cp = v;
    return MX_OK;
}

static int rx_class(rx *r, cset *c) {
    r->p++; /* [ */
    bool neg = r->p < r->end && *r->p == '^';
    if (neg) r->p++;
    c->n = 0;
    bool first = true;
    while (r->p < r->end && (*r->p != ']' || first)) {
        first = false;
        uint32_t lo;
        if (*r->p == '\\') {
            r->p++;
            if (r->p >= r->end) return rx_err(r, "unterminated escape");
            char e = *r->p;
            if (strchr("dDwWsS", e)) { r->p++; add_class_escape(c, e); continue; }
            if (e == 'b') { r->p++; lo = '\b'; }
            else if (rx_escape_char(r, &lo)) return MX_ERR;
        } else if (rx_utf8(r, &lo)) return MX_ERR;
        uint32_t hi = lo;
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                if (r->p >= r->end) return rx_err(r, "unterminated escape");
                if (strchr("dDwWsS", *r->p)) return rx_err(r, "a class escape cannot end a range");
                if (rx_escape_char(r, &hi)) return MX_ERR;
            } else if (rx_utf8(r, &hi)) return MX_ERR;
            if (hi < lo) return rx_err(r, "character range out of order");
        }
        cs_add(c, lo, hi);
    }
    if (r->p >= r->end) return rx_err(r, "unterminated character class");
    r->p++;
    cs_norm(c, neg);
    if (c->overflow) return rx_err(r, "character class too large");
    return MX_OK;
}

static int rx_alt(rx *r, mx_buf *o);

/* One atom with its quantifier. */
static int rx_piece(rx *r, mx_buf *o) {
    mx_buf atom = {0};
    char c = *r->p;
    int rc = MX_OK;
    cset cs = {.n = 0};
    bool is_set = false;
    if (c == '(') {
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            if (r->p + 1 < r->end && r->p[1] == ':') r->p += 2;
            else if (r->p + 1 < r->end && r->p[1] == '<' && r->p + 2 < r->end && r->p[2] != '=' && r->p[2] != '!') {
                while (r->p < r->end && *r->p != '>') r->p++; /* named group */
                if (r->p < r->end) r->p++;
            } else { rc = rx_err(r, "lookaround groups are not supported"); goto out; }
        }
        if (++r->depth > 100) { rc = rx_err(r, "groups nested too deeply"); goto out; }
        mx_buf_puts(&atom, "(");
        if (rx_alt(r, &atom)) { rc = MX_ERR; goto out; }
        r->depth--;
        if (r->p >= r->end || *r->p != ')') { rc = rx_err(r, "unbalanced parenthesis"); goto out; }
        r->p++;
        mx_buf_puts(&atom, ")");
    } else if (c == '[') {
        if (rx_class(r, &cs)) { rc = MX_ERR; goto out; }
        is_set = true;
    } else if (c == '.') {
        r->p++;
        cs_add(&cs, '\n', '\n'); cs_add(&cs, '\r', '\r'); cs_add(&cs, 0x2028, 0x2029);
        cs_norm(&cs, true);
        is_set = true;
    } else if (c == '\\') {
        r->p++;
        if (r->p >= r->end) { rc = rx_err(r, "unterminated escape"); goto out; }
        if (strchr("dDwWsS", *r->p)) { add_class_escape(&cs, *r->p++); cs_norm(&cs, false); }
        else {
            uint32_t cp;
            if (rx_escape_char(r, &cp)) { rc = MX_ERR; goto out; }
            cs_add(&cs, cp, cp);
        }
        is_set = true;
    } else if (c == '^' || c == '$') {
        rc = rx_err(r, "'^' and '$' are supported only at the start and the end");
        goto out;
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        rc = rx_err(r, "a quantifier must follow an item");
        goto out;
    } else {
        uint32_t cp;
        if (rx_utf8(r, &cp)) { rc = MX_ERR; goto out; }
        cs_add(&cs, cp, cp);
        is_set = true;
    }
    if (is_set && !json_char_expr(&atom, &cs)) mx_buf_puts(&atom, "[^\\x00-\\U0010FFFF]"); /* matches nothing */
    /* quantifier */
    long mn = 1, mxq = 1;
    if (r->p < r->end) {
        char q = *r->p;
        if (q == '*') { mn = 0; mxq = -1; r->p++; }
        else if (q == '+') { mn = 1; mxq = -1; r->p++; }
        else if (q == '?') { mn = 0; mxq = 1; r->p++; }
        else if (q == '{') {
            const char *save = r->p++;
            char *end;
            long a = strtol(r->p, &end, 10), b;
            if (end == r->p) { r->p = save; goto literal_brace; }
            r->p = end;
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                if (r->p < r->end && *r->p == '}') b = -1;
                else { b = strtol(r->p, &end, 10); if (end == r->p) { rc = rx_err(r, "bad {m,n}"); goto out; } r->p = end; }
            } else b = a;
            if (r->p >= r->end || *r->p != '}') { rc = rx_err(r, "bad {m,n}"); goto out; }
            r->p++;
            if (a > 10000 || b > 10000 || (b >= 0 && b < a)) { rc = rx_err(r, "bad or too large repetition count"); goto out; }
            mn = a;
            mxq = b;
        }
        if (mn != 1 || mxq != 1) {
            if (r->p < r->end && *r->p == '?') r->p++; /* lazy: same language */
        }
    }
literal_brace:
    if (mn == 1 && mxq == 1) mx_buf_append(o, atom.data, atom.len);
    else if (mn == 0 && mxq == -1) mx_buf_printf(o, "%s*", atom.data);
    else if (mn == 1 && mxq == -1) mx_buf_printf(o, "%s+", atom.data);
    else if (mn == 0 && mxq == 1) mx_buf_printf(o, "%s?", atom.data);
    else if (mxq < 0) mx_buf_printf(o, "%s{%ld,}", atom.data, mn);
    else if (mn == mxq) mx_buf_printf(o, "%s{%ld}", atom.data, mn);
    else mx_buf_printf(o, "%s{%ld,%ld}", atom.data, mn, mxq);
out:
    mx_buf_free(&atom);
    return rc;
}

static int rx_alt(rx *r, mx_buf *o) {
    for (;;) {
        bool empty = true;
        while (r->p < r->end && *r->p != '|' && *r->p != ')') {
            if (*r->p == '$' && r->p + 1 == r->end) break;
            if (!empty) mx_buf_puts(o, " ");
            if (rx_piece(r, o)) return MX_ERR;
            empty = false;
        }
        if (empty) mx_buf_puts(o, "\"\"");
        if (r->p < r->end && *r->p == '|') { r->p++; mx_buf_puts(o, " | "); continue; }
        return MX_OK;
    }
}

static char *visit_pattern(sc *s, const char *pat, size_t n, const char *name) {
    rx r = {s, pat, pat + n, 0};
    bool start = n && pat[0] == '^';
    if (start) r.p++;
    mx_buf body = {0};
    mx_buf_puts(&body, "\"\\\"\" ");
    if (!start) mx_buf_puts(&body, "char* ");
    mx_buf_puts(&body, "(");
    if (rx_alt(&r, &body)) { mx_buf_free(&body); return NULL; }
    bool end = r.p < r.end && *r.p == '$' && r.p + 1 == r.end;
    if (end) r.p++;
    if (r.p != r.end) { mx_buf_free(&body); rx_err(&r, "unbalanced parenthesis"); return NULL; }
    mx_buf_puts(&body, ")");
    if (!end) mx_buf_puts(&body, " char*");
    mx_buf_puts(&body, " \"\\\"\" space");
    char *ret = prim(s, "char") && prim(s, "space") ? add_rule(s, name, body.data) : NULL;
    mx_buf_free(&body);
    return ret;
}

static int get_count(sc *s, json_t *sch, const char *key, long *out) {
    json_t *v = json_object_get(sch, key);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0) return sc_err(s, "'%s' must be a non-negative integer", key);
    *out = json_integer_value(v) > 100000 ? 100000 : (long)json_integer_value(v);
    return 1;
}

/* item{min,max} separated by sep (max < 0: unbounded). */
static void repetition(mx_buf *o, const char *item, long min, long max, const char *sep) {
    if (max == 0) { mx_buf_puts(o, "\"\""); return; }
    mx_buf_printf(o, "( %s", item);
    long m2 = min ? min - 1 : 0, x2 = max < 0 ? -1 : max - 1;
    if (x2 != 0) {
        mx_buf_printf(o, " ( %s %s )", sep, item);
        if (m2 == 0 && x2 < 0) mx_buf_puts(o, "*");
        else if (x2 < 0) mx_buf_printf(o, "{%ld,}", m2);
        else if (m2 == x2) mx_buf_printf(o, "{%ld}", m2);
        else mx_buf_printf(o, "{%ld,%ld}", m2, x2);
    }
    mx_buf_puts(o, " )");
    if (!min) mx_buf_puts(o, "?");
}

static char *visit_string(sc *s, json_t *sch, const char *name) {
    json_t *pat = json_object_get(sch, "pattern"), *fmt = json_object_get(sch, "format");
    long mn = 0, mxl = -1;
    int h1 = get_count(s, sch, "minLength", &mn), h2 = get_count(s, sch, "maxLength", &mxl);
    if (h1 < 0 || h2 < 0) return NULL;
    if ((pat || fmt) && (h1 || h2)) { sc_err(s, "'%s' together with minLength/maxLength is not supported", pat ? "pattern" : "format"); return NULL; }
    if (pat && fmt) { sc_err(s, "'pattern' together with 'format' is not supported"); return NULL; }
    if (pat) {
        if (!json_is_string(pat)) { sc_err(s, "'pattern' must be a string"); return NULL; }
        return visit_pattern(s, json_string_value(pat), json_string_length(pat), name);
    }
    if (fmt) {
        if (!json_is_string(fmt)) { sc_err(s, "'format' must be a string"); return NULL; }
        const char *f = json_string_value(fmt);
        char pn[32];
        if (!strcmp(f, "date") || !strcmp(f, "time") || !strcmp(f, "date-time") || !strcmp(f, "uuid")) {
            snprintf(pn, sizeof pn, "%s-string", f);
            return prim(s, pn) ? mx_strdup(pn) : NULL;
        }
        sc_err(s, "'format': \"%s\" is not supported (date, time, date-time and uuid are)", f);
        return NULL;
    }
    if (!h1 && !h2) return prim(s, "string") ? mx_strdup("string") : NULL;
    if (h2 && mxl < mn) { sc_err(s, "no string satisfies maxLength below minLength"); return NULL; }
    mx_buf o = {0};
    mx_buf_puts(&o, "\"\\\"\" ");
    if (mxl == 0) mx_buf_puts(&o, "\"\"");
    else if (mn == 0 && mxl < 0) mx_buf_puts(&o, "char*");
    else if (mxl < 0) mx_buf_printf(&o, "char{%ld,}", mn);
    else if (mn == mxl) mx_buf_printf(&o, "char{%ld}", mn);
    else mx_buf_printf(&o, "char{%ld,%ld}", mn, mxl);
    mx_buf_puts(&o, " \"\\\"\" space");
    char *r = prim(s, "char") && prim(s, "space") ? add_rule(s, name, o.data) : NULL;
    mx_buf_free(&o);
    return r;
}

/* ---------- arrays ---------- */

static char *visit_array(sc *s, json_t *sch, const char *name) {
    json_t *items = json_object_get(sch, "items"), *prefix = json_object_get(sch, "prefixItems");
    json_t *uniq = json_object_get(sch, "uniqueItems");
    if (uniq && !json_is_false(uniq)) { sc_err(s, "'uniqueItems' is not supported"); return NULL; }
    long mn = 0, mxi = -1;
    int h1 = get_count(s, sch, "minItems", &mn), h2 = get_count(s, sch, "maxItems", &mxi);
    if (h1 < 0 || h2 < 0) return NULL;
    if (h2 && mxi < mn) { sc_err(s, "no array satisfies maxItems below minItems"); return NULL; }
    if (prefix && (!json_is_array(prefix))) { sc_err(s, "'prefixItems' must be a list of schemas"); return NULL; }
    if (items && json_is_array(items)) { sc_err(s, "'items' as a list (draft 4 tuples) is not supported: use prefixItems"); return NULL; }
    mx_buf o = {0};
    char *ret = NULL, *item = NULL;
    char sub[256];
    mx_buf_puts(&o, "\"[\" space ");
    long k = prefix ? (long)json_array_size(prefix) : 0;
    if (mxi >= 0 && k > mxi) k = mxi;
    bool rest_allowed = !(items && json_is_false(items));
    if (k < mn && !rest_allowed) { sc_err(s, "no array satisfies 'minItems' when 'items' is false after 'prefixItems'"); goto out; }
    for (long i = 0; i < k; i++) {
        char idx[24];
        size_t sv;
        snprintf(idx, sizeof idx, "%ld", i);
        push_path(s, "prefixItems", &sv);
        size_t sv2;
        push_path(s, idx, &sv2);
        snprintf(sub, sizeof sub, "%s-tuple-%ld", name, i);
        char *r = visit(s, json_array_get(prefix, (size_t)i), sub);
        pop_path(s, sv);
        if (!r) goto out;
        mx_buf_printf(&o, "%s%s", i ? "\",\" space " : "", r);
        mx_buf_puts(&o, " ");
        free(r);
    }
    long rmin = MX_MAX(mn - k, 0), rmax = mxi < 0 ? -1 : mxi - k;
    if (rest_allowed && rmax != 0) {
        size_t sv;
        push_path(s, "items", &sv);
        snprintf(sub, sizeof sub, "%s-item", name);
        item = items && !json_is_true(items) ? visit(s, items, sub) : (prim(s, "value") ? mx_strdup("value") : NULL);
        pop_path(s, sv);
        if (!item) goto out;
        if (k) {
            /* each further item follows a comma */
            char sep_item[300];
            snprintf(sep_item, sizeof sep_item, "\",\" space %s", item);
            if (rmax < 0 && rmin == 0) mx_buf_printf(&o, "( %s )*", sep_item);
            else if (rmax < 0) mx_buf_printf(&o, "( %s ){%ld,}", sep_item, rmin);
            else if (rmin == rmax) mx_buf_printf(&o, "( %s ){%ld}", sep_item, rmin);
            else mx_buf_printf(&o, "( %s ){%ld,%ld}", sep_item, rmin, rmax);
        } else repetition(&o, item, rmin, rmax, "\",\" space");
    }
    mx_buf_puts(&o, " \"]\" space");
    ret = prim(s, "space") ? add_rule(s, name, o.data) : NULL;
out:
    free(item);
    mx_buf_free(&o);
    return ret;
}

/* ---------- objects ---------- */

/* A key string that is none of names (raw characters, no escapes: its
 * text is its value, so the comparison is exact; a name with a character
 * that must be escaped cannot be written this way and is left out). */
typedef struct knode { uint32_t cp; bool end; struct knode *kids; int n; } knode;

static bool raw_key(const char *s) {
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20 || *s == 0x7F) return false;
    return true;
}

static void knode_free(knode *k) {
    for (int i = 0; i < k->n; i++) knode_free(&k->kids[i]);
    free(k->kids);
}

static int knode_add(knode *k, const char *s) {
    while (*s) {
        uint32_t cp;
        const unsigned char *u = (const unsigned char *)s;
        int n = u[0] < 0x80 ? 1 : (u[0] >> 5) == 6 ? 2 : (u[0] >> 4) == 14 ? 3 : 4;
        cp = n == 1 ? u[0] : n == 2 ? (u[0] & 0x1Fu) : n == 3 ? (u[0] & 0x0Fu) : (u[0] & 0x07u);
        for (int i = 1; i < n; i++) {
            if (!u[i]) return mx_set_err("schema: invalid UTF-8 in a property name");
            cp = (cp << 6) | (u[i] & 0x3Fu);
        }
        s += n;
        int j = 0;
        while (j < k->n && k->kids[j].cp != cp) j++;
        if (j == k->n) {
            knode *nk = mx_realloc(k->kids, (size_t)(k->n + 1) * sizeof *nk);
            if (!nk) return MX_ERR;
            k->kids = nk;
            memset(&k->kids[k->n], 0, sizeof *nk);
            k->kids[k->n++].cp = cp;
        }
        k = &k->kids[j];
    }
    k->end = true;
    return MX_OK;
}

static void not_strings(mx_buf *o, const knode *k) {
    /* at this node: continue along a child, or leave the trie with another character */
    mx_buf_puts(o, "(");
    const char *sep = "";
    for (int i = 0; i < k->n; i++) {
        mx_buf_puts(o, sep);
        mx_buf_puts(o, "[");
        class_cp(o, k->kids[i].cp);
        mx_buf_puts(o, "] ");
        if (k->kids[i].n) {
            not_strings(o, &k->kids[i]);
            if (!k->kids[i].end) { /* may also stop here */ }
        } else mx_buf_puts(o, "key-char+");
        sep = " | ";
    }
    mx_buf_printf(o, "%s[^\"\\\\\\x7F\\x00-\\x1F", sep);
    for (int i = 0; i < k->n; i++) class_cp(o, k->kids[i].cp);
    mx_buf_puts(o, "] key-char*)");
    if (!k->end) mx_buf_puts(o, "?");
}

static char *visit_object(sc *s, json_t *sch, const char *name) {
    json_t *props = json_object_get(sch, "properties"), *req = json_object_get(sch, "required");
    json_t *addl = json_object_get(sch, "additionalProperties");
    if (props && !json_is_object(props)) { sc_err(s, "'properties' must be an object"); return NULL; }
    if (req && !json_is_array(req)) { sc_err(s, "'required' must be a list of names"); return NULL; }
    if (addl && !json_is_boolean(addl) && !json_is_object(addl)) { sc_err(s, "'additionalProperties' must be a boolean or a schema"); return NULL; }
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
    bool extra = addl && !json_is_false(addl);
    /* required names first (in the order of properties, then the rest), then optional ones */
    char **kv = mx_calloc(np + nr + 2, sizeof *kv);
    bool *is_req = mx_calloc(np + nr + 2, sizeof *is_req);
    mx_buf o = {0};
    char *ret = NULL, *extra_kv = NULL, *extra_val = NULL;
    int nkv = 0;
    if (!kv || !is_req) goto out;
    for (size_t i = 0; i < nr; i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) { sc_err(s, "'required' must be a list of names"); goto out; }
        if (!json_object_get(props, json_string_value(r)) && !extra) {
            sc_err(s, "required property '%s' is not in 'properties' and additionalProperties does not allow it", json_string_value(r));
            goto out;
        }
    }
    char sub[300];
    /* one kv rule per property (declared order), then required ones that only additionalProperties allows */
    const char *key;
    json_t *ps;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0 && props) {
            json_object_foreach(props, key, ps) {
                bool r = false;
                for (size_t i = 0; i < nr; i++)
                    if (!strcmp(json_string_value(json_array_get(req, i)), key)) r = true;
                size_t sv, sv2;
                push_path(s, "properties", &sv);
                push_path(s, key, &sv2);
                snprintf(sub, sizeof sub, "%s%s%s", strcmp(name, "root") ? name : "", strcmp(name, "root") ? "-" : "", key);
                char *val = visit(s, ps, sub);
                pop_path(s, sv);
                if (!val) goto out;
                mx_buf b = {0};
                json_t *ks = json_string(key);
                char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
                json_decref(ks);
                if (kt) { lit_s(&b, kt); mx_buf_printf(&b, " space \":\" space %s", val); }
                free(kt);
                free(val);
                size_t sl = strlen(sub);
                snprintf(sub + sl, sizeof sub - sl, "-kv");
                kv[nkv] = b.data ? add_rule(s, sub, b.data) : NULL;
                mx_buf_free(&b);
                if (!kv[nkv]) goto out;
                is_req[nkv++] = r;
            }
        } else if (pass == 1) {
            for (size_t i = 0; i < nr; i++) {
                const char *rn = json_string_value(json_array_get(req, i));
                if (props && json_object_get(props, rn)) continue;
                size_t sv;
                push_path(s, "additionalProperties", &sv);
                snprintf(sub, sizeof sub, "%s-%s", name, rn);
                char *val = json_is_object(addl) ? visit(s, addl, sub) : (prim(s, "value") ? mx_strdup("value") : NULL);
                pop_path(s, sv);
                if (!val) goto out;
                mx_buf b = {0};
                json_t *ks = json_string(rn);
                char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
                json_decref(ks);
                if (kt) { lit_s(&b, kt); mx_buf_printf(&b, " space \":\" space %s", val); }
                free(kt);
                free(val);
                snprintf(sub, sizeof sub, "%s-%s-kv", name, rn);
                kv[nkv] = b.data ? add_rule(s, sub, b.data) : NULL;
                mx_buf_free(&b);
                if (!kv[nkv]) goto out;
                is_req[nkv++] = true;
            }
        }
    }
    if (extra) {
        knode trie = {0};
        if (props) json_object_foreach(props, key, ps) if (raw_key(key) && knode_add(&trie, key)) { knode_free(&trie); goto out; }
        for (size_t i = 0; i < nr; i++) {
            const char *rn = json_string_value(json_array_get(req, i));
            if (raw_key(rn) && knode_add(&trie, rn)) { knode_free(&trie); goto out; }
        }
        mx_buf k = {0};
        mx_buf_puts(&k, "\"\\\"\" ");
        if (trie.n) not_strings(&k, &trie);
        else mx_buf_puts(&k, "key-char*");
        mx_buf_puts(&k, " \"\\\"\" space");
        knode_free(&trie);
        snprintf(sub, sizeof sub, "%s-additional-k", name);
        char *kn = prim(s, "key-char") && prim(s, "space") ? add_rule(s, sub, k.data) : NULL;
        mx_buf_free(&k);
        if (!kn) goto out;
        size_t sv;
        push_path(s, "additionalProperties", &sv);
        snprintf(sub, sizeof sub, "%s-additional-value", name);
        extra_val = json_is_object(addl) ? visit(s, addl, sub) : (prim(s, "value") ? mx_strdup("value") : NULL);
        pop_path(s, sv);
        if (!extra_val) { free(kn); goto out; }
        mx_buf b = {0};
        mx_buf_printf(&b, "%s \":\" space %s", kn, extra_val);
        free(kn);
        snprintf(sub, sizeof sub, "%s-additional-kv", name);
        extra_kv = add_rule(s, sub, b.data);
        mx_buf_free(&b);
        if (!extra_kv) goto out;
    }
    mx_buf_puts(&o, "\"{\" space ");
    int n_req = 0;
    for (int i = 0; i < nkv; i++)
        if (is_req[i]) mx_buf_printf(&o, "%s%s", n_req++ ? " \",\" space " : "", kv[i]);
    /* optional ones, in order, any subset: alt_i = kv_i rest_{i+1}; rest_j = ("," kv_j)? rest_{j+1} */
    int nopt = 0;
    for (int i = 0; i < nkv; i++) nopt += !is_req[i];
    if (nopt || extra) {
        char **opt = mx_calloc((size_t)nopt + 2, sizeof *opt);
        if (!opt) goto out;
        int m = 0;
        for (int i = 0; i < nkv; i++)
            if (!is_req[i]) opt[m++] = kv[i];
        /* rest rules from the back */
        char **rest = mx_calloc((size_t)m + 2, sizeof *rest);
        if (!rest) { free(opt); goto out; }
        bool ok = true;
        for (int j = m; j >= 1 && ok; j--) {
            mx_buf b = {0};
            if (j < m) mx_buf_printf(&b, "( \",\" space %s )?", opt[j]);
            if (j + 1 <= m && rest[j + 1]) mx_buf_printf(&b, "%s%s", b.len ? " " : "", rest[j + 1]);
            if (j == m && extra) mx_buf_printf(&b, "( \",\" space %s )*", extra_kv);
            if (b.len) {
                snprintf(sub, sizeof sub, "%s-rest", name);
                rest[j] = add_rule(s, sub, b.data);
                ok = rest[j] != NULL;
            }
            mx_buf_free(&b);
        }
        if (ok) {
            mx_buf_puts(&o, n_req ? " ( \",\" space ( " : " ( ");
            const char *sep = "";
            for (int i = 0; i < m; i++) {
                mx_buf_printf(&o, "%s%s", sep, opt[i]);
                if (rest[i + 1]) mx_buf_printf(&o, " %s", rest[i + 1]);
                sep = " | ";
            }
            if (extra) mx_buf_printf(&o, "%s%s ( \",\" space %s )*", sep, extra_kv, extra_kv);
            mx_buf_puts(&o, n_req ? " ) )?" : " )?");
        }
        for (int j = 0; j <= m; j++) free(rest[j]);
        free(rest);
        free(opt);
        if (!ok) goto out;
    }
    mx_buf_puts(&o, " \"}\" space");
    ret = prim(s, "space") ? add_rule(s, name, o.data) : NULL;
out:
    for (int i = 0; i < nkv; i++) free(kv[i]);
    free(kv);
    free(is_req);
    free(extra_kv);
    free(extra_val);
    mx_buf_free(&o);
    return ret;
}

/* ---------- dispatch ---------- */

static json_t *resolve_ref(sc *s, const char *ref) {
    if (ref[0] != '#') { sc_err(s, "'$ref': only references into this schema (\"#...\") are supported, not \"%s\"", ref); return NULL; }
    json_t *cur = s->root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') { sc_err(s, "'$ref': \"%s\" is not a JSON pointer", ref); return NULL; }
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) { tok[n++] = p[1] == '0' ? '~' : '/'; p += 2; }
            else if (p[0] == '%' && p[1] && p[2]) {
                char h[3] = {p[1], p[2], 0};
                tok[n++] = (char)strtol(h, NULL, 16);
                p += 3;
            } else tok[n++] = *p++;
        }
        tok[n] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            cur = *end || end == tok || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else cur = NULL;
        if (!cur) { sc_err(s, "'$ref': \"%s\" does not point into the schema", ref); return NULL; }
    }
    return cur;
}

/* Keys other than annotations and `allowed`. */
static const char *other_keyword(json_t *sch, const char *const *allowed, size_t n) {
    const char *k;
    json_t *v;
    json_object_foreach(sch, k, v) {
        (void)v;
        if (!is_annotation(k) && !in_list(k, allowed, n)) return k;
    }
    return NULL;
}

static char *visit_union(sc *s, json_t *alts, const char *kw, const char *name) {
    if (!json_is_array(alts) || !json_array_size(alts)) { sc_err(s, "'%s' must be a non-empty list of schemas", kw); return NULL; }
    mx_buf o = {0};
    char *ret = NULL;
    size_t sv;
    push_path(s, kw, &sv);
    for (size_t i = 0; i < json_array_size(alts); i++) {
        char idx[24], sub[300];
        size_t sv2;
        snprintf(idx, sizeof idx, "%zu", i);
        push_path(s, idx, &sv2);
        snprintf(sub, sizeof sub, "%s-%zu", name, i);
        char *r = visit(s, json_array_get(alts, i), sub);
        pop_path(s, sv2);
        if (!r) { pop_path(s, sv); goto out; }
        mx_buf_printf(&o, "%s%s", i ? " | " : "", r);
        free(r);
    }
    pop_path(s, sv);
    ret = add_rule(s, name, o.data);
out:
    mx_buf_free(&o);
    return ret;
}

/* oneOf is anyOf when no value can match two alternatives: each has one
 * distinct type (integer and number overlap). */
static bool disjoint_types(json_t *alts) {
    unsigned seen = 0;
    static const char *const T[] = {"string", "number", "integer", "boolean", "null", "array", "object"};
    for (size_t i = 0; i < json_array_size(alts); i++) {
        json_t *t = json_object_get(json_array_get(alts, i), "type");
        if (!json_is_string(t)) return false;
        unsigned bit = 0;
        for (size_t k = 0; k < MX_ARRAY_LEN(T); k++)
            if (!strcmp(json_string_value(t), T[k])) bit = 1u << k;
        if (bit == 2 || bit == 4) bit = 6; /* number and integer */
        if (!bit || (seen & bit)) return false;
        seen |= bit;
    }
    return true;
}

static bool value_has_type(json_t *v, const char *t) {
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    return false;
}

static char *visit_enum(sc *s, json_t *sch, const char *name) {
    json_t *en = json_object_get(sch, "enum"), *cn = json_object_get(sch, "const"), *ty = json_object_get(sch, "type");
    static const char *const ok[] = {"enum", "const", "type"};
    const char *other = other_keyword(sch, ok, MX_ARRAY_LEN(ok));
    if (other) { sc_err(s, "'%s' together with '%s' is not supported", en ? "enum" : "const", other); return NULL; }
    if (en && (!json_is_array(en) || !json_array_size(en))) { sc_err(s, "'enum' must be a non-empty list"); return NULL; }
    if (ty && !json_is_string(ty) && !json_is_array(ty)) { sc_err(s, "'type' must be a string or a list of strings"); return NULL; }
    mx_buf o = {0};
    int n = 0;
    size_t cnt = cn ? 1 : json_array_size(en);
    for (size_t i = 0; i < cnt; i++) {
        json_t *v = cn ? cn : json_array_get(en, i);
        if (cn && en) {
            bool in = false;
            for (size_t k = 0; k < json_array_size(en); k++) in = in || json_equal(json_array_get(en, k), cn);
            if (!in) continue;
        }
        if (ty) {
            bool match = false;
            if (json_is_string(ty)) match = value_has_type(v, json_string_value(ty));
            else for (size_t k = 0; k < json_array_size(ty); k++) match = match || (json_is_string(json_array_get(ty, k)) && value_has_type(v, json_string_value(json_array_get(ty, k))));
            if (!match) continue;
        }
        mx_buf_puts(&o, n++ ? " | " : "(");
        if (json_lit(&o, v)) { mx_buf_free(&o); return NULL; }
    }
    if (!n) { mx_buf_free(&o); sc_err(s, "no value of 'enum'/'const' satisfies the schema"); return NULL; }
    mx_buf_puts(&o, ") space");
    char *r = prim(s, "space") ? add_rule(s, name, o.data) : NULL;
    mx_buf_free(&o);
    return r;
}

static const char *const OBJ_KW[] = {"type", "properties", "required", "additionalProperties"};
static const char *const ARR_KW[] = {"type", "items", "prefixItems", "minItems", "maxItems", "uniqueItems"};
static const char *const STR_KW[] = {"type", "minLength", "maxLength", "pattern", "format"};
static const char *const NUM_KW[] = {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

/* Keywords of one type; those of other types do not apply to it (JSON
 * Schema semantics) and are ignored, unknown ones are refused earlier. */
static char *visit_type(sc *s, json_t *sch, const char *t, const char *name) {
    /* an object with no properties and nothing said about others: any object */
    if (!strcmp(t, "object") && !json_object_get(sch, "properties") && !json_object_get(sch, "additionalProperties") && !json_object_get(sch, "required"))
        return prim(s, "object") ? mx_strdup("object") : NULL;
    if (!strcmp(t, "object")) return visit_object(s, sch, name);
    if (!strcmp(t, "array")) return visit_array(s, sch, name);
    if (!strcmp(t, "string")) return visit_string(s, sch, name);
    if (!strcmp(t, "integer")) return visit_integer(s, sch, name);
    if (!strcmp(t, "number")) return visit_number(s, sch, name);
    if (!strcmp(t, "boolean")) return prim(s, "boolean") ? mx_strdup("boolean") : NULL;
    if (!strcmp(t, "null")) return prim(s, "null") ? mx_strdup("null") : NULL;
    sc_err(s, "unknown type \"%s\"", t);
    return NULL;
}

static bool has_any(json_t *sch, const char *const *kw, size_t n) {
    for (size_t i = 1; i < n; i++) /* [0] is "type" */
        if (json_object_get(sch, kw[i])) return true;
    return false;
}

static char *visit(sc *s, json_t *sch, const char *name) {
    if (json_is_true(sch)) return prim(s, "value") ? mx_strdup("value") : NULL;
    if (json_is_false(sch)) { sc_err(s, "schema false accepts no value"); return NULL; }
    if (!json_is_object(sch)) { sc_err(s, "a schema must be an object or a boolean"); return NULL; }
    if (++s->depth > MAX_DEPTH) { s->depth--; sc_err(s, "schema nested more than %d levels", MAX_DEPTH); return NULL; }
    char *ret = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(sch, k, v) {
        if (!is_annotation(k) && !in_list(k, KNOWN, MX_ARRAY_LEN(KNOWN))) { sc_err(s, "'%s' is not supported", k); goto out; }
    }
    json_t *ref = json_object_get(sch, "$ref");
    if (ref) {
        static const char *const ok[] = {"$ref"};
        const char *other = other_keyword(sch, ok, 1);
        if (other) { sc_err(s, "'$ref' together with '%s' is not supported", other); goto out; }
        if (!json_is_string(ref)) { sc_err(s, "'$ref' must be a string"); goto out; }
        const char *r = json_string_value(ref);
        json_t *have = json_object_get(s->refs, r);
        if (have) { ret = mx_strdup(json_string_value(have)); goto out; }
        json_t *target = resolve_ref(s, r);
        if (!target) goto out;
        char hint[300];
        snprintf(hint, sizeof hint, "ref%s", r + 1);
        char *rn = reserve_rule(s, hint);
        if (!rn) goto out;
        json_object_set_new(s->refs, r, json_string(rn));
        char saved[sizeof s->path];
        memcpy(saved, s->path, sizeof saved);
        snprintf(s->path, sizeof s->path, "%s", r + 1);
        char *body = visit(s, target, hint);
        memcpy(s->path, saved, sizeof saved);
        if (!body) { free(rn); goto out; }
        int rc = set_rule(s, rn, body);
        free(body);
        if (rc) { free(rn); goto out; }
        ret = rn;
        goto out;
    }
    json_t *any = json_object_get(sch, "anyOf"), *one = json_object_get(sch, "oneOf"), *all = json_object_get(sch, "allOf");
    if (any || one || all) {
        const char *kw = any ? "anyOf" : one ? "oneOf" : "allOf";
        const char *const ok[] = {kw};
        const char *other = other_keyword(sch, ok, 1);
        if (other) { sc_err(s, "'%s' together with '%s' is not supported", kw, other); goto out; }
        json_t *list = any ? any : one ? one : all;
        if (all) {
            if (!json_is_array(all) || json_array_size(all) != 1) { sc_err(s, "'allOf' is supported with one schema only"); goto out; }
            size_t sv;
            push_path(s, "allOf", &sv);
            size_t sv2;
            push_path(s, "0", &sv2);
            ret = visit(s, json_array_get(all, 0), name);
            pop_path(s, sv);
            goto out;
        }
        if (one && !disjoint_types(one)) { sc_err(s, "'oneOf' is supported only when each alternative has its own 'type' (use anyOf)"); goto out; }
        ret = visit_union(s, list, kw, name);
        goto out;
    }
    if (json_object_get(sch, "enum") || json_object_get(sch, "const")) { ret = visit_enum(s, sch, name); goto out; }
    json_t *ty = json_object_get(sch, "type");
    if (json_is_array(ty)) {
        if (!json_array_size(ty)) { sc_err(s, "'type' must not be an empty list"); goto out; }
        mx_buf o = {0};
        for (size_t i = 0; i < json_array_size(ty); i++) {
            json_t *t = json_array_get(ty, i);
            if (!json_is_string(t)) { mx_buf_free(&o); sc_err(s, "'type' must be a string or a list of strings"); goto out; }
            char sub[300];
            snprintf(sub, sizeof sub, "%s-%s", name, json_string_value(t));
            char *r = visit_type(s, sch, json_string_value(t), sub);
            if (!r) { mx_buf_free(&o); goto out; }
            mx_buf_printf(&o, "%s%s", i ? " | " : "", r);
            free(r);
        }
        ret = add_rule(s, name, o.data);
        mx_buf_free(&o);
        goto out;
    }
    if (ty && !json_is_string(ty)) { sc_err(s, "'type' must be a string or a list of strings"); goto out; }
    if (ty) { ret = visit_type(s, sch, json_string_value(ty), name); goto out; }
    /* no type: the keywords present say which one (generating only that type is sound) */
    int kinds = has_any(sch, OBJ_KW, MX_ARRAY_LEN(OBJ_KW)) + has_any(sch, ARR_KW, MX_ARRAY_LEN(ARR_KW)) +
                has_any(sch, STR_KW, MX_ARRAY_LEN(STR_KW)) + has_any(sch, NUM_KW, MX_ARRAY_LEN(NUM_KW));
    if (kinds > 1) { sc_err(s, "keywords of several types without 'type' are not supported"); goto out; }
    if (has_any(sch, OBJ_KW, MX_ARRAY_LEN(OBJ_KW))) ret = visit_object(s, sch, name);
    else if (has_any(sch, ARR_KW, MX_ARRAY_LEN(ARR_KW))) ret = visit_array(s, sch, name);
    else if (has_any(sch, STR_KW, MX_ARRAY_LEN(STR_KW))) ret = visit_string(s, sch, name);
    else if (has_any(sch, NUM_KW, MX_ARRAY_LEN(NUM_KW))) ret = visit_number(s, sch, name);
    else ret = prim(s, "value") ? mx_strdup("value") : NULL;
out:
    s->depth--;
    return ret;
}

int mx_schema_to_gbnf(json_t *schema, mx_buf *out) {
    sc s = {.root = schema, .rules = json_object(), .refs = json_object()};
    int rc = MX_ERR;
    if (!s.rules || !s.refs) { mx_set_err("schema: out of memory"); goto out; }
    char *r;
    if (!schema) r = prim(&s, "object") ? mx_strdup("object") : NULL;
    else r = visit(&s, schema, "root");
    if (!r) goto out;
    if (strcmp(r, "root") && set_rule(&s, "root", r)) { free(r); goto out; }
    free(r);
    const char *k;
    json_t *v;
    json_object_foreach(s.rules, k, v) mx_buf_printf(out, "%s ::= %s\n", k, json_string_value(v));
    rc = MX_OK;
out:
    json_decref(s.rules);
    json_decref(s.refs);
    return rc;
}

mx_grammar *mx_grammar_from_schema(json_t *schema, const mx_gvocab *v) {
    mx_buf g = {0};
    if (mx_schema_to_gbnf(schema, &g)) { mx_buf_free(&g); return NULL; }
    mx_grammar *gr = mx_grammar_from_gbnf(g.data, g.len, v);
    if (!gr && strstr(mx_errmsg(), "left-recursive"))
        mx_set_err("schema: a '$ref' leads back to itself before any object, array or string, or a 'pattern' repeats a group "
                   "that can match the empty string (as (a*)*)");
    else if (!gr && strstr(mx_errmsg(), "more than")) mx_err_prefix("schema: too large for the grammar limits");
    else if (!gr) mx_err_prefix("schema to grammar (a bug: please report the schema)");
    mx_buf_free(&g);
    return gr;
}
