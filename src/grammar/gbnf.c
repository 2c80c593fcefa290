/* GBNF (llama.cpp's grammar format, grammars/README.md there) to the flat
 * byte-level form of gram_int.h.
 *
 * Accepted: rules `name ::= alternatives` separated by newlines (a newline
 * after `|` or inside parentheses continues the rule), string literals and
 * [character classes] (negated with ^) with the escapes \xHH \uHHHH
 * \UHHHHHHHH \t \r \n \\ \" \[ \] \-, `.` (any character), grouping,
 * `*` `+` `?` `{m}` `{m,}` `{m,n}`, `#` comments. Token references
 * (`<...>`, `!<...>`) are refused. Repetitions become helper rules
 * (x* -> R ::= x R | ε; x{0,n} -> nested optionals, never n independent
 * ones). Every referenced rule must be defined, `root` must exist, and
 * left recursion (also through nullable prefixes) is refused: the matcher
 * expands rules top-down. */
#include "gram_int.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ELEMS (1 << 22)
#define MAX_RULES (1 << 20)
#define MAX_REPEAT 100000
#define MAX_NEST 200

typedef struct { g_elem *v; int n, cap; } evec;
typedef struct {
    char *name; /* NULL: a helper rule */
    const char *at; /* first reference or definition (errors) */
    bool defined;
    int owner; /* a helper rule: the named rule it was written in */
    evec *alts;
    int n_alts, cap_alts;
} brule;

typedef struct {
    const char *s, *p, *end;
    brule *r;
    int n_r, cap_r;
    int32_t *nh; /* name -> rule id (open addressing) */
    uint32_t nhcap;
    g_bset *bs;
    int n_bs, cap_bs;
    int32_t *bh; /* byte set -> index */
    uint32_t bhcap;
    size_t total;
    int nest;
    int any_rule; /* rule for `.`, -1 until used */
    int cur;      /* the rule being parsed */
} gb;

static int line_of(const gb *b, const char *p) {
    int l = 1;
    for (const char *q = b->s; q < p && q < b->end; q++) l += *q == '\n';
    return l;
}

static int perr(const gb *b, const char *fmt, ...) MX_PRINTF(2, 3);
static int perr(const gb *b, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mx_set_err("grammar line %d: %s", line_of(b, b->p), msg);
}

static int ev_push(gb *b, evec *e, g_elem x) {
    if (++b->total > MAX_ELEMS) return mx_set_err("grammar: more than %d elements after expanding repetitions", MAX_ELEMS);
    if (e->n == e->cap) {
        int nc = e->cap ? e->cap * 2 : 8;
        g_elem *nv = mx_realloc(e->v, (size_t)nc * sizeof *nv);
        if (!nv) return MX_ERR;
        e->v = nv;
        e->cap = nc;
    }
    e->v[e->n++] = x;
    return MX_OK;
}

static uint64_t hash_str(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int new_rule(gb *b, const char *name, size_t nlen, const char *at) {
    if (b->n_r >= MAX_RULES) return mx_set_err("grammar: more than %d rules after expanding repetitions", MAX_RULES);
    if (b->n_r == b->cap_r) {
        int nc = b->cap_r ? b->cap_r * 2 : 64;
        brule *nr = mx_realloc(b->r, (size_t)nc * sizeof *nr);
        if (!nr) return MX_ERR;
        b->r = nr;
        b->cap_r = nc;
    }
    brule *r = &b->r[b->n_r];
    memset(r, 0, sizeof *r);
    r->at = at;
    r->owner = b->cur;
    if (name && !(r->name = mx_strndup(name, nlen))) return MX_ERR;
    return b->n_r++;
}

/* The rule named name, created (undefined) on first use. */
static int rule_by_name(gb *b, const char *name, size_t n, const char *at) {
    if ((uint32_t)b->n_r * 2 >= b->nhcap) {
        uint32_t nc = b->nhcap ? b->nhcap * 2 : 256;
        int32_t *nh = mx_malloc(nc * sizeof *nh);
        if (!nh) return MX_ERR;
        memset(nh, 0xff, nc * sizeof *nh);
        for (uint32_t i = 0; i < b->nhcap; i++) {
            int32_t id = b->nh[i];
            if (id < 0) continue;
            uint32_t k = (uint32_t)hash_str(b->r[id].name, strlen(b->r[id].name)) & (nc - 1);
            while (nh[k] >= 0) k = (k + 1) & (nc - 1);
            nh[k] = id;
        }
        free(b->nh);
        b->nh = nh;
        b->nhcap = nc;
    }
    uint32_t k = (uint32_t)hash_str(name, n) & (b->nhcap - 1);
    for (; b->nh[k] >= 0; k = (k + 1) & (b->nhcap - 1)) {
        const char *rn = b->r[b->nh[k]].name;
        if (strlen(rn) == n && !memcmp(rn, name, n)) return b->nh[k];
    }
    int id = new_rule(b, name, n, at);
    if (id >= 0) b->nh[k] = id;
    return id;
}

static int add_alt(gb *b, int rule, evec *alt) {
    brule *r = &b->r[rule];
    if (r->n_alts == r->cap_alts) {
        int nc = r->cap_alts ? r->cap_alts * 2 : 4;
        evec *na = mx_realloc(r->alts, (size_t)nc * sizeof *na);
        if (!na) return MX_ERR;
        r->alts = na;
        r->cap_alts = nc;
    }
    r->alts[r->n_alts++] = *alt;
    memset(alt, 0, sizeof *alt);
    return MX_OK;
}

static int bset_index(gb *b, const g_bset *s) {
    if ((uint32_t)b->n_bs * 2 >= b->bhcap) {
        uint32_t nc = b->bhcap ? b->bhcap * 2 : 64;
        int32_t *nh = mx_malloc(nc * sizeof *nh);
        if (!nh) return MX_ERR;
        memset(nh, 0xff, nc * sizeof *nh);
        for (int i = 0; i < b->n_bs; i++) {
            uint32_t k = (uint32_t)hash_str((const char *)&b->bs[i], sizeof(g_bset)) & (nc - 1);
            while (nh[k] >= 0) k = (k + 1) & (nc - 1);
            nh[k] = i;
        }
        free(b->bh);
        b->bh = nh;
        b->bhcap = nc;
    }
    uint32_t k = (uint32_t)hash_str((const char *)s, sizeof *s) & (b->bhcap - 1);
    for (; b->bh[k] >= 0; k = (k + 1) & (b->bhcap - 1))
        if (!memcmp(&b->bs[b->bh[k]], s, sizeof *s)) return b->bh[k];
    if (b->n_bs == b->cap_bs) {
        int nc = b->cap_bs ? b->cap_bs * 2 : 64;
        g_bset *nb = mx_realloc(b->bs, (size_t)nc * sizeof *nb);
        if (!nb) return MX_ERR;
        b->bs = nb;
        b->cap_bs = nc;
    }
    b->bs[b->n_bs] = *s;
    b->bh[k] = b->n_bs;
    return b->n_bs++;
}

static void bset_add_range(g_bset *s, unsigned lo, unsigned hi) {
    for (unsigned c = lo; c <= hi; c++) s->w[c >> 6] |= 1ull << (c & 63);
}

static int push_byteset(gb *b, evec *e, unsigned lo, unsigned hi) {
    g_bset s = {{0}};
    bset_add_range(&s, lo, hi);
    int i = bset_index(b, &s);
    return i < 0 ? MX_ERR : ev_push(b, e, (g_elem){GE_BYTES, i});
}

/* ---------- lexing ---------- */

static void skip_space(gb *b, bool newline_ok) {
    while (b->p < b->end) {
        char c = *b->p;
        if (c == '#') {
            while (b->p < b->end && *b->p != '\n' && *b->p != '\r') b->p++;
        } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newline_ok)) b->p++;
        else break;
    }
}

static bool is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character (escapes decoded) as a code point. */
static int parse_char(gb *b, uint32_t *cp) {
    if (b->p >= b->end) return perr(b, "unexpected end of grammar");
    unsigned char c = (unsigned char)*b->p;
    if (c == '\\') {
        if (b->p + 1 >= b->end) return perr(b, "unexpected end of grammar after '\\'");
        char e = b->p[1];
        int nd = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nd) {
            uint32_t v = 0;
            for (int i = 0; i < nd; i++) {
                int h = b->p + 2 + i < b->end ? hexval(b->p[2 + i]) : -1;
                if (h < 0) return perr(b, "\\%c needs hexadecimal digits", e);
                v = v * 16 + (uint32_t)h;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(b, "escape \\%c is not a Unicode scalar value", e);
            b->p += 2 + nd;
            *cp = v;
            return MX_OK;
        }
        static const char from[] = "trn\\\"[]-/", to[] = "\t\r\n\\\"[]-/";
        const char *q = strchr(from, e);
        if (!e || !q) return perr(b, "unknown escape \\%c", e ? e : '?');
        *cp = (unsigned char)to[q - from];
        b->p += 2;
        return MX_OK;
    }
    /* a literal UTF-8 character */
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || b->p + n > b->end) return perr(b, "invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; i++) {
        unsigned char d = (unsigned char)b->p[i];
        if ((d & 0xC0) != 0x80) return perr(b, "invalid UTF-8");
        v = (v << 6) | (d & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_cp[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(b, "invalid UTF-8");
    b->p += n;
    *cp = v;
    return MX_OK;
}

static int utf8_enc(uint32_t c, uint8_t *o) {
    if (c < 0x80) { o[0] = (uint8_t)c; return 1; }
    if (c < 0x800) { o[0] = (uint8_t)(0xC0 | (c >> 6)); o[1] = (uint8_t)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (c >> 12)); o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F)); o[2] = (uint8_t)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (c >> 18)); o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F)); o[3] = (uint8_t)(0x80 | (c & 0x3F));
    return 4;
}

/* ---------- character classes ---------- */

typedef struct { uint32_t lo, hi; } cprange;
typedef struct { cprange *v; int n, cap; } cpset;

static int cp_add(cpset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 8;
        cprange *nv = mx_realloc(s->v, (size_t)nc * sizeof *nv);
        if (!nv) return MX_ERR;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = (cprange){lo, hi};
    return MX_OK;
}

static int cmp_range(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorts and merges; negate: the complement within the scalar values. The
 * surrogates are always removed. */
static int cp_normalize(cpset *s, bool negate) {
    if (s->n > 1) qsort(s->v, (size_t)s->n, sizeof *s->v, cmp_range);
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        if (m && s->v[i].lo <= s->v[m - 1].hi + 1) {
            if (s->v[i].hi > s->v[m - 1].hi) s->v[m - 1].hi = s->v[i].hi;
        } else s->v[m++] = s->v[i];
    }
    s->n = m;
    cpset t = {0};
    if (negate) {
        uint32_t next = 0;
        for (int i = 0; i < s->n; i++) {
            if (s->v[i].lo > next && cp_add(&t, next, s->v[i].lo - 1)) goto fail;
            next = s->v[i].hi + 1;
        }
        if (next <= 0x10FFFF && cp_add(&t, next, 0x10FFFF)) goto fail;
    } else
        for (int i = 0; i < s->n; i++)
            if (cp_add(&t, s->v[i].lo, s->v[i].hi)) goto fail;
    /* cut out the surrogates */
    s->n = 0;
    for (int i = 0; i < t.n; i++) {
        uint32_t lo = t.v[i].lo, hi = t.v[i].hi;
        if (hi < 0xD800 || lo > 0xDFFF) { if (cp_add(s, lo, hi)) goto fail; continue; }
        if (lo < 0xD800 && cp_add(s, lo, 0xD7FF)) goto fail;
        if (hi > 0xDFFF && cp_add(s, 0xE000, hi)) goto fail;
    }
    free(t.v);
    return MX_OK;
fail:
    free(t.v);
    return MX_ERR;
}

/* UTF-8 byte-range sequences of a code point range (RE2's construction):
 * split until every continuation position spans whole 6-bit blocks. */
typedef struct { uint8_t lo[4], hi[4]; int n; } u8seq;
typedef struct { u8seq *v; int n, cap; } u8seqs;

static int seq_add(u8seqs *q, uint32_t lo, uint32_t hi) {
    static const uint32_t lim[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int k = 0; k < 3; k++)
        if (lo <= lim[k] && hi > lim[k]) return seq_add(q, lo, lim[k]) || seq_add(q, lim[k] + 1, hi) ? MX_ERR : MX_OK;
    int n = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) return seq_add(q, lo, lo | m) || seq_add(q, (lo | m) + 1, hi) ? MX_ERR : MX_OK;
            if ((hi & m) != m) return seq_add(q, lo, (hi & ~m) - 1) || seq_add(q, hi & ~m, hi) ? MX_ERR : MX_OK;
        }
    }
    if (q->n == q->cap) {
        int nc = q->cap ? q->cap * 2 : 8;
        u8seq *nv = mx_realloc(q->v, (size_t)nc * sizeof *nv);
        if (!nv) return MX_ERR;
        q->v = nv;
        q->cap = nc;
    }
    u8seq *s = &q->v[q->n++];
    s->n = utf8_enc(lo, s->lo);
    utf8_enc(hi, s->hi);
    return MX_OK;
}

/* Appends the elements matching one character of s (a BYTES element when
 * it is ASCII only, else a reference to a helper rule of byte sequences;
 * sequences that differ only in their first byte share one alternative). */
static int emit_class(gb *b, evec *e, cpset *s) {
    g_bset ascii = {{0}};
    bool has_ascii = false, has_multi = false;
    for (int i = 0; i < s->n; i++) {
        if (s->v[i].lo < 0x80) { bset_add_range(&ascii, s->v[i].lo, MX_MIN(s->v[i].hi, 0x7F)); has_ascii = true; }
        if (s->v[i].hi >= 0x80) has_multi = true;
    }
    if (!has_multi) {
        int bi = bset_index(b, &ascii);
        return bi < 0 ? MX_ERR : ev_push(b, e, (g_elem){GE_BYTES, bi});
    }
    u8seqs q = {0};
    for (int i = 0; i < s->n; i++)
        if (s->v[i].hi >= 0x80 && seq_add(&q, MX_MAX(s->v[i].lo, 0x80), s->v[i].hi)) { free(q.v); return MX_ERR; }
    int rule = new_rule(b, NULL, 0, NULL);
    if (rule < 0) { free(q.v); return MX_ERR; }
    int rc = MX_OK;
    if (has_ascii) {
        evec alt = {0};
        int bi = bset_index(b, &ascii);
        rc = bi < 0 || ev_push(b, &alt, (g_elem){GE_BYTES, bi}) || add_alt(b, rule, &alt);
        free(alt.v);
    }
    bool *done = mx_calloc((size_t)q.n + 1, 1);
    if (!done) rc = MX_ERR;
    for (int i = 0; !rc && i < q.n; i++) {
        if (done[i]) continue;
        g_bset first = {{0}};
        for (int j = i; j < q.n; j++) {
            if (done[j] || q.v[j].n != q.v[i].n || memcmp(q.v[j].lo + 1, q.v[i].lo + 1, (size_t)q.v[i].n - 1) ||
                memcmp(q.v[j].hi + 1, q.v[i].hi + 1, (size_t)q.v[i].n - 1))
                continue;
            bset_add_range(&first, q.v[j].lo[0], q.v[j].hi[0]);
            done[j] = true;
        }
        evec alt = {0};
        int bi = bset_index(b, &first);
        rc = bi < 0 || ev_push(b, &alt, (g_elem){GE_BYTES, bi});
        for (int k = 1; !rc && k < q.v[i].n; k++) rc = push_byteset(b, &alt, q.v[i].lo[k], q.v[i].hi[k]);
        if (!rc) rc = add_alt(b, rule, &alt);
        free(alt.v);
    }
    free(done);
    free(q.v);
    return rc ? MX_ERR : ev_push(b, e, (g_elem){GE_RULE, rule});
}

static int parse_class(gb *b, evec *e) {
    b->p++; /* [ */
    bool neg = b->p < b->end && *b->p == '^';
    if (neg) b->p++;
    cpset s = {0};
    while (b->p < b->end && *b->p != ']') {
        uint32_t lo, hi;
        if (parse_char(b, &lo)) goto fail;
        hi = lo;
        if (b->p + 1 < b->end && *b->p == '-' && b->p[1] != ']') {
            b->p++;
            if (parse_char(b, &hi)) goto fail;
            if (hi < lo) { perr(b, "character range end is before its start"); goto fail; }
        }
        if (cp_add(&s, lo, hi)) goto fail;
    }
    if (b->p >= b->end) { perr(b, "unterminated character class '['"); goto fail; }
    b->p++;
    if (cp_normalize(&s, neg) || emit_class(b, e, &s)) goto fail;
    free(s.v);
    return MX_OK;
fail:
    free(s.v);
    return MX_ERR;
}

static int emit_any(gb *b, evec *e) {
    if (b->any_rule < 0) {
        cpset s = {0};
        evec tmp = {0};
        int rc = cp_add(&s, 0, 0x10FFFF) || cp_normalize(&s, false) || emit_class(b, &tmp, &s);
        if (!rc) b->any_rule = tmp.v[0].arg;
        free(s.v);
        free(tmp.v);
        if (rc) return MX_ERR;
    }
    return ev_push(b, e, (g_elem){GE_RULE, b->any_rule});
}

static int parse_literal(gb *b, evec *e) {
    b->p++; /* " */
    while (b->p < b->end && *b->p != '"') {
        uint32_t cp;
        uint8_t u[4];
        if (parse_char(b, &cp)) return MX_ERR;
        int n = utf8_enc(cp, u);
        for (int i = 0; i < n; i++)
            if (push_byteset(b, e, u[i], u[i])) return MX_ERR;
    }
    if (b->p >= b->end) return perr(b, "unterminated string literal");
    b->p++;
    return MX_OK;
}

/* ---------- repetition ---------- */

static int append_copy(gb *b, evec *dst, const g_elem *src, int n) {
    for (int i = 0; i < n; i++)
        if (ev_push(b, dst, src[i])) return MX_ERR;
    return MX_OK;
}

/* R ::= item R | ε  (star) or  R ::= item | ε  (opt) or R ::= item NEXT | ε (nested optional). */
static int helper_rule(gb *b, const g_elem *item, int n, int next_rule, bool self) {
    int r = new_rule(b, NULL, 0, NULL);
    if (r < 0) return MX_ERR;
    evec a = {0}, eps = {0};
    int rc = append_copy(b, &a, item, n);
    if (!rc && self) rc = ev_push(b, &a, (g_elem){GE_RULE, r});
    else if (!rc && next_rule >= 0) rc = ev_push(b, &a, (g_elem){GE_RULE, next_rule});
    if (!rc) rc = add_alt(b, r, &a);
    if (!rc) rc = add_alt(b, r, &eps);
    free(a.v);
    return rc ? MX_ERR : r;
}

/* Replaces seq[start..] (the item) by its repetition min..max (max < 0: unbounded). */
static int repeat(gb *b, evec *seq, int start, long min, long max) {
    int n = seq->n - start;
    g_elem *item = mx_malloc((size_t)(n ? n : 1) * sizeof *item);
    if (!item) return MX_ERR;
    if (n) memcpy(item, seq->v + start, (size_t)n * sizeof *item);
    seq->n = start;
    b->total -= (size_t)n;
    int rc = MX_OK;
    for (long i = 0; !rc && i < min; i++) rc = append_copy(b, seq, item, n);
    if (!rc && max < 0) {
        int r = helper_rule(b, item, n, -1, true);
        rc = r < 0 || ev_push(b, seq, (g_elem){GE_RULE, r});
    } else if (!rc && max > min) {
        int r = -1;
        for (long i = 0; !rc && i < max - min; i++) rc = (r = helper_rule(b, item, n, r, false)) < 0;
        if (!rc) rc = ev_push(b, seq, (g_elem){GE_RULE, r});
    }
    free(item);
    return rc ? MX_ERR : MX_OK;
}

static bool parse_num(gb *b, long *out) {
    long v = 0;
    const char *s = b->p;
    while (b->p < b->end && *b->p >= '0' && *b->p <= '9') {
        v = v * 10 + (*b->p - '0');
        if (v > MAX_REPEAT) return false;
        b->p++;
    }
    *out = v;
    return b->p > s;
}

/* ---------- rules ---------- */

static int parse_alternatives(gb *b, int rule, bool nested);

static int parse_sequence(gb *b, evec *seq, bool nested) {
    int last = -1;
    while (b->p < b->end) {
        char c = *b->p;
        int start = seq->n;
        if (c == '"') {
            if (parse_literal(b, seq)) return MX_ERR;
            last = start;
        } else if (c == '[') {
            if (parse_class(b, seq)) return MX_ERR;
            last = start;
        } else if (c == '.') {
            b->p++;
            if (emit_any(b, seq)) return MX_ERR;
            last = start;
        } else if (is_word(c)) {
            const char *s = b->p;
            while (b->p < b->end && is_word(*b->p)) b->p++;
            int r = rule_by_name(b, s, (size_t)(b->p - s), s);
            if (r < 0 || ev_push(b, seq, (g_elem){GE_RULE, r})) return MX_ERR;
            last = start;
        } else if (c == '(') {
            if (++b->nest > MAX_NEST) return perr(b, "parentheses nested too deeply");
            b->p++;
            skip_space(b, true);
            int r = new_rule(b, NULL, 0, NULL);
            if (r < 0 || parse_alternatives(b, r, true)) return MX_ERR;
            if (b->p >= b->end || *b->p != ')') return perr(b, "expecting ')'");
            b->p++;
            b->nest--;
            if (ev_push(b, seq, (g_elem){GE_RULE, r})) return MX_ERR;
            last = start;
        } else if (c == '*' || c == '+' || c == '?') {
            if (last < 0) return perr(b, "'%c' must follow an item", c);
            b->p++;
            if (repeat(b, seq, last, c == '+', c == '?' ? 1 : -1)) return MX_ERR;
        } else if (c == '{') {
            if (last < 0) return perr(b, "'{' must follow an item");
            b->p++;
            skip_space(b, false);
            long min, max;
            if (!parse_num(b, &min)) return perr(b, "expecting a repetition count (at most 100000) after '{'");
            skip_space(b, false);
            max = min;
            if (b->p < b->end && *b->p == ',') {
                b->p++;
                skip_space(b, false);
                if (b->p < b->end && *b->p == '}') max = -1;
                else if (!parse_num(b, &max)) return perr(b, "expecting a repetition count (at most 100000) after ','");
                skip_space(b, false);
            }
            if (b->p >= b->end || *b->p != '}') return perr(b, "expecting '}'");
            b->p++;
            if (max >= 0 && max < min) return perr(b, "repetition {m,n} with n < m");
            if (repeat(b, seq, last, min, max)) return MX_ERR;
        } else if (c == '<' || c == '!') {
            return perr(b, "token references (<...>, !<...>) are not supported");
        } else break;
        skip_space(b, nested);
    }
    return MX_OK;
}

static int parse_alternatives(gb *b, int rule, bool nested) {
    for (;;) {
        evec seq = {0};
        if (parse_sequence(b, &seq, nested) || add_alt(b, rule, &seq)) { free(seq.v); return MX_ERR; }
        if (b->p >= b->end || *b->p != '|') return MX_OK;
        b->p++;
        skip_space(b, true);
    }
}

static int parse_rule(gb *b) {
    const char *s = b->p;
    while (b->p < b->end && is_word(*b->p)) b->p++;
    if (b->p == s) return perr(b, "expecting a rule name");
    size_t nlen = (size_t)(b->p - s);
    int r = rule_by_name(b, s, nlen, s);
    if (r < 0) return MX_ERR;
    if (b->r[r].defined) return perr(b, "rule '%s' is defined twice", b->r[r].name);
    b->r[r].defined = true;
    b->r[r].at = s;
    b->cur = r;
    skip_space(b, false);
    if (b->end - b->p < 3 || memcmp(b->p, "::=", 3)) return perr(b, "expecting '::=' after '%s'", b->r[r].name);
    b->p += 3;
    skip_space(b, true);
    if (parse_alternatives(b, r, false)) return MX_ERR;
    skip_space(b, false);
    if (b->p < b->end && *b->p == '\r') b->p++;
    if (b->p < b->end && *b->p != '\n') return perr(b, "expecting the end of the line after rule '%s'", b->r[r].name);
    return MX_OK;
}

/* ---------- checks and flattening ---------- */

static bool elem_nullable(const g_elem *x, const bool *nullable) { return x->kind == GE_RULE && nullable[x->arg]; }

static int check_left_recursion(gb *b, const bool *nullable) {
    /* iterative DFS over "r may start with s" edges; color 1 = on the path */
    uint8_t *color = mx_calloc((size_t)b->n_r, 1);
    int32_t *st_rule = mx_malloc((size_t)b->n_r * sizeof(int32_t) * 3 + 1);
    if (!color || !st_rule) { free(color); free(st_rule); return MX_ERR; }
    int32_t *st_alt = st_rule + b->n_r, *st_el = st_alt + b->n_r;
    int rc = MX_OK;
    /* from the named rules first: every helper rule is reached from the one
     * it was written in, so a cycle found has a named rule on its path */
    for (int i = 0; i < 2 * b->n_r && !rc; i++) {
        int r0 = i % b->n_r;
        if (color[r0] || (i < b->n_r && !b->r[r0].name)) continue;
        int sp = 0;
        st_rule[0] = r0; st_alt[0] = 0; st_el[0] = 0;
        color[r0] = 1;
        while (sp >= 0 && !rc) {
            brule *r = &b->r[st_rule[sp]];
            if (st_alt[sp] >= r->n_alts) { color[st_rule[sp]] = 2; sp--; continue; }
            evec *a = &r->alts[st_alt[sp]];
            int i = st_el[sp];
            if (i >= a->n || (i > 0 && !elem_nullable(&a->v[i - 1], nullable))) { st_alt[sp]++; st_el[sp] = 0; continue; }
            st_el[sp]++;
            if (a->v[i].kind != GE_RULE) { st_alt[sp]++; st_el[sp] = 0; continue; }
            int s = a->v[i].arg;
            if (color[s] == 1) {
                int named = s;
                for (int k = sp; k >= 0 && !b->r[named].name; k--) named = st_rule[k];
                if (!b->r[named].name) named = b->r[named].owner; /* a cycle of helpers only: where it was written */
                rc = mx_set_err("grammar line %d: rule '%s' is left-recursive%s (the matcher expands rules top-down: rewrite it right-recursively)",
                                line_of(b, b->r[named].at), b->r[named].name ? b->r[named].name : "?",
                                b->r[s].name ? "" : " through a repetition or group (as (x)* where x can match the empty text)");
            } else if (!color[s]) {
                color[s] = 1;
                sp++;
                st_rule[sp] = s; st_alt[sp] = 0; st_el[sp] = 0;
            }
        }
    }
    free(color);
    free(st_rule);
    return rc;
}

/* ---------- flattening ---------- */

/* Adds site to the places rule r returns to (-1 none yet, -2 several);
 * true when that changed them. */
static bool merge_site(mx_grammar *g, int r, int32_t site) {
    int32_t cur = g->ret_site[r], m = site == -1 ? cur : cur == -1 ? site : cur == site ? cur : -2;
    if (m == cur) return false;
    g->ret_site[r] = m;
    return true;
}

static mx_grammar *flatten(gb *b, int root) {
    /* only rules reachable from root */
    int32_t *newid = mx_malloc(((size_t)b->n_r + 1) * sizeof *newid), *queue = mx_malloc(((size_t)b->n_r + 1) * sizeof *queue);
    mx_grammar *g = mx_calloc(1, sizeof *g);
    if (!newid || !queue || !g) { free(newid); free(queue); free(g); return NULL; }
    for (int r = 0; r < b->n_r; r++) newid[r] = -1;
    int nq = 0, nr = 0;
    newid[root] = nr++;
    queue[nq++] = root;
    for (int q = 0; q < nq; q++)
        for (int a = 0; a < b->r[queue[q]].n_alts; a++)
            for (int i = 0; i < b->r[queue[q]].alts[a].n; i++) {
                g_elem x = b->r[queue[q]].alts[a].v[i];
                if (x.kind == GE_RULE && newid[x.arg] < 0) { newid[x.arg] = nr++; queue[nq++] = x.arg; }
            }
    atomic_init(&g->refs, 1);
    pthread_mutex_init(&g->mu, NULL);
    size_t n_el = 3, n_alt = 1;
    for (int q = 0; q < nq; q++) {
        n_alt += (size_t)b->r[queue[q]].n_alts;
        for (int a = 0; a < b->r[queue[q]].n_alts; a++) n_el += (size_t)b->r[queue[q]].alts[a].n + 1;
    }
    g->el = mx_malloc(n_el * sizeof *g->el);
    g->rule_of = mx_malloc(n_el * sizeof *g->rule_of);
    g->alt_start = mx_malloc(n_alt * sizeof *g->alt_start);
    g->rule_alt = mx_malloc(((size_t)nr + 1) * sizeof *g->rule_alt);
    g->ret_site = mx_malloc(((size_t)nr + 1) * sizeof *g->ret_site);
    g->bs = mx_malloc((size_t)(b->n_bs ? b->n_bs : 1) * sizeof *g->bs);
    if (!g->el || !g->rule_of || !g->alt_start || !g->rule_alt || !g->ret_site || !g->bs || mx_g_ctab_init(&g->pre)) goto fail;
    g->pre.dense = true;
    if (b->n_bs) memcpy(g->bs, b->bs, (size_t)b->n_bs * sizeof *g->bs);
    g->n_bs = b->n_bs;
    g->el[G_ACCEPT] = (g_elem){GE_BYTES, 0};
    g->el[G_START] = (g_elem){GE_RULE, 0};
    g->el[G_START + 1] = (g_elem){GE_END, 0};
    g->rule_of[G_ACCEPT] = g->rule_of[G_START] = g->rule_of[G_START + 1] = -1;
    int e = 3, alt = 0;
    for (int q = 0; q < nq; q++) {
        brule *r = &b->r[queue[q]];
        g->rule_alt[q] = alt;
        for (int a = 0; a < r->n_alts; a++) {
            g->alt_start[alt++] = e;
            for (int i = 0; i < r->alts[a].n; i++) {
                g_elem x = r->alts[a].v[i];
                if (x.kind == GE_RULE) x.arg = newid[x.arg];
                g->rule_of[e] = q;
                g->el[e++] = x;
            }
            g->rule_of[e] = q;
            g->el[e++] = (g_elem){GE_END, 0};
        }
    }
    g->rule_alt[nq] = alt;
    g->n_el = e;
    g->n_rules = nq;
    /* return sites: where popping past each rule continues. A reference not
     * at the end of its alternative is a site; one at the end (a tail call)
     * inherits the sites of the rule it is in. -1 none yet, -2 several. */
    for (int r = 0; r < nq; r++) g->ret_site[r] = -1;
    g->ret_site[0] = G_START + 1; /* root returns to the end of the text */
    for (int p = 3; p < e; p++)
        if (g->el[p].kind == GE_RULE && g->el[p + 1].kind != GE_END) merge_site(g, g->el[p].arg, p + 1);
    /* tail calls, by a worklist of the rules whose sites changed (each
     * changes at most twice: linear, where passes until stable are not) */
    int32_t *work = queue; /* reused: nq entries suffice when each rule is queued while not already queued */
    uint8_t *queued = mx_calloc((size_t)nq + 1, 1);
    if (!queued) goto fail;
    int nw = 0;
    for (int r = 0; r < nq; r++)
        if (g->ret_site[r] != -1) { work[nw++] = r; queued[r] = 1; }
    while (nw) {
        int r = work[--nw];
        queued[r] = 0;
        int32_t lo = g->alt_start[g->rule_alt[r]], hi = r + 1 < nq ? g->alt_start[g->rule_alt[r + 1]] : e;
        for (int p = lo; p < hi; p++)
            if (g->el[p].kind == GE_RULE && g->el[p + 1].kind == GE_END && merge_site(g, g->el[p].arg, g->ret_site[r]) && !queued[g->el[p].arg]) {
                work[nw++] = g->el[p].arg;
                queued[g->el[p].arg] = 1;
            }
    }
    free(queued);
    free(newid);
    free(queue);
    return g;
fail:
    free(newid);
    free(queue);
    mx_g_grammar_free(g);
    return NULL;
}

static void gb_free(gb *b) {
    for (int r = 0; r < b->n_r; r++) {
        for (int a = 0; a < b->r[r].n_alts; a++) free(b->r[r].alts[a].v);
        free(b->r[r].alts);
        free(b->r[r].name);
    }
    free(b->r);
    free(b->nh);
    free(b->bs);
    free(b->bh);
}

/* The rules that can match the empty text: a worklist over the references
 * (linear in the grammar's size; a pass-until-stable loop is quadratic on a
 * long chain of rules). An alternative is nullable once all of its elements
 * are nullable rule references: each counts its elements not yet known to
 * be, and a rule becoming nullable decrements the alternatives that use it. */
static bool *nullable_rules(gb *b) {
    size_t n_alt = 0, n_ref = 0;
    for (int r = 0; r < b->n_r; r++) {
        n_alt += (size_t)b->r[r].n_alts;
        for (int a = 0; a < b->r[r].n_alts; a++)
            for (int i = 0; i < b->r[r].alts[a].n; i++) n_ref += b->r[r].alts[a].v[i].kind == GE_RULE;
    }
    bool *nullable = mx_calloc((size_t)b->n_r + 1, sizeof *nullable);
    int32_t *left = mx_malloc((n_alt + 1) * sizeof *left);      /* per alternative: elements not known nullable */
    int32_t *alt_rule = mx_malloc((n_alt + 1) * sizeof *alt_rule);
    int32_t *first = mx_calloc((size_t)b->n_r + 2, sizeof *first); /* rule -> its uses: [first[r], first[r + 1]) */
    int32_t *use = mx_malloc((n_ref + 1) * sizeof *use);         /* alternative ids */
    int32_t *queue = mx_malloc(((size_t)b->n_r + 1) * sizeof *queue);
    if (!nullable || !left || !alt_rule || !first || !use || !queue) goto fail;
    for (int r = 0; r < b->n_r; r++)
        for (int a = 0; a < b->r[r].n_alts; a++)
            for (int i = 0; i < b->r[r].alts[a].n; i++)
                if (b->r[r].alts[a].v[i].kind == GE_RULE) first[b->r[r].alts[a].v[i].arg + 1]++;
    for (int r = 0; r < b->n_r; r++) first[r + 1] += first[r];
    int nq = 0;
    size_t ai = 0;
    for (int r = 0; r < b->n_r; r++)
        for (int a = 0; a < b->r[r].n_alts; a++, ai++) {
            const evec *e = &b->r[r].alts[a];
            alt_rule[ai] = r;
            left[ai] = e->n;
            for (int i = 0; i < e->n; i++)
                if (e->v[i].kind == GE_RULE) use[first[e->v[i].arg]++] = (int32_t)ai;
            if (!e->n && !nullable[r]) { nullable[r] = true; queue[nq++] = r; }
        }
    /* first[r] now ends r's uses: shift back */
    for (int r = b->n_r; r > 0; r--) first[r] = first[r - 1];
    first[0] = 0;
    for (int q = 0; q < nq; q++) {
        int s = queue[q];
        for (int32_t k = first[s]; k < first[s + 1]; k++) {
            int32_t x = use[k];
            /* a BYTES element keeps the count above 0 for good */
            if (--left[x] == 0 && !nullable[alt_rule[x]]) { nullable[alt_rule[x]] = true; queue[nq++] = alt_rule[x]; }
        }
    }
    free(left); free(alt_rule); free(first); free(use); free(queue);
    return nullable;
fail:
    free(nullable); free(left); free(alt_rule); free(first); free(use); free(queue);
    return NULL;
}

mx_grammar *mx_grammar_from_gbnf(const char *text, size_t len, const mx_gvocab *v) {
    gb b = {.s = text, .p = text, .end = text + len, .any_rule = -1};
    mx_grammar *g = NULL;
    bool *nullable = NULL;
    g_bset empty = {{0}};
    if (bset_index(&b, &empty) != 0) goto out; /* byte set 0: ACCEPT's */
    skip_space(&b, true);
    while (b.p < b.end) {
        if (parse_rule(&b)) goto out;
        skip_space(&b, true);
    }
    for (int r = 0; r < b.n_r; r++)
        if (b.r[r].name && !b.r[r].defined) {
            mx_set_err("grammar line %d: undefined rule '%s'", line_of(&b, b.r[r].at), b.r[r].name);
            goto out;
        }
    int root = -1;
    for (int r = 0; r < b.n_r; r++)
        if (b.r[r].name && !strcmp(b.r[r].name, "root")) root = r;
    if (root < 0) { mx_set_err("grammar: no 'root' rule"); goto out; }
    nullable = nullable_rules(&b);
    if (!nullable) goto out;
    if (check_left_recursion(&b, nullable)) goto out;
    g = flatten(&b, root);
    if (g) g->vocab = v;
out:
    free(nullable);
    gb_free(&b);
    return g;
}

int mx_gbnf_prefix(const char *text, size_t len, const char *prefix, mx_buf *out) {
    const char *p = text, *end = text + len;
    while (p < end) {
        char c = *p;
        if (c == '"' || c == '[') { /* a literal or a class: copied with its escapes */
            char close = c == '"' ? '"' : ']';
            const char *q = p + 1;
            while (q < end && *q != close) q += *q == '\\' && q + 1 < end ? 2 : 1;
            if (q >= end) return mx_set_err("grammar: an unterminated %s", c == '"' ? "string" : "character class");
            mx_buf_append(out, p, (size_t)(q + 1 - p));
            p = q + 1;
        } else if (c == '{' || c == '#') { /* a repetition count or a comment */
            const char *q = memchr(p, c == '{' ? '}' : '\n', (size_t)(end - p));
            q = q ? q + 1 : end;
            mx_buf_append(out, p, (size_t)(q - p));
            p = q;
        } else if (is_word(c)) {
            const char *q = p;
            while (q < end && is_word(*q)) q++;
            mx_buf_puts(out, prefix);
            mx_buf_append(out, p, (size_t)(q - p));
            p = q;
        } else {
            mx_buf_append(out, p, 1);
            p++;
        }
    }
    return MX_OK;
}
