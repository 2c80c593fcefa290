/* A small, fast JSON reader for tokenizer files. jansson takes over a second
 * on the 33 MB Gemma 3 tokenizer.json; this one builds a read-only tree in an
 * arena in one pass. Strings are unescaped, checked UTF-8 and NUL-terminated;
 * nesting is limited to TK_MAX_DEPTH.
 *
 * The vocab and merges of a big tokenizer are ~1.8 M values; building nodes
 * for them cost more than everything else, so tk_json_parse_lazy only checks
 * chosen containers (same errors at the same places) and leaves them as
 * TJ_LAZY spans of text that tj_iter reads later, member by member. */
#include "tok_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tj_doc {
    tk_arena arena;
    char *buf; /* mutable copy of the text; strings are unescaped in place */
    tj *stack; /* members of the open containers */
    size_t sn, scap;
    char *tmp; /* escaped strings of lazy containers are checked here: their text must stay intact */
    size_t tmpcap;
    size_t nl; /* newlines passed; counting them in the (unescaped) text would count "\n" escapes */
    const char *end, *name;
};

static int jerr(tj_doc *d, const char *p, const char *what) {
    (void)p; /* every newline before p has been passed: strings cannot hold raw ones */
    return mx_set_err("%s: line %zu: invalid JSON: %s", d->name, d->nl + 1, what);
}

static inline uint64_t ld64(const char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline const char *skip_ws(const char *p, const char *e, size_t *nl) {
    for (;;) {
        while (e - p >= 8 && ld64(p) == 0x2020202020202020ull) p += 8; /* indentation */
        if (p >= e) return p;
        char c = *p;
        if (c == ' ' || c == '\t' || c == '\r') p++;
        else if (c == '\n') { ++*nl; p++; }
        else return p;
    }
}

static int push(tj_doc *d, const tj *v) {
    if (d->sn == d->scap) {
        size_t cap = d->scap ? d->scap * 2 : 1024;
        tj *s = mx_realloc(d->stack, cap * sizeof(tj));
        if (!s) return MX_ERR;
        d->stack = s;
        d->scap = cap;
    }
    d->stack[d->sn++] = *v;
    return MX_OK;
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(const char *p, const char *e) {
    if (e - p < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexv(p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* First '"', '\\' or control character at or after q (or e); *hi tells
 * whether a byte >= 0x80 came before it. Eight bytes at a time where the
 * byte order allows: the lowest flagged byte of each zero-byte test is exact. */
static inline const char *scan_str(const char *q, const char *e, bool *hi) {
    uint64_t acc = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t ones = 0x0101010101010101ull, high = ones << 7;
    while (e - q >= 8) {
        uint64_t w = ld64(q), x = w ^ (ones * '"'), y = w ^ (ones * '\\');
        uint64_t m = (((x - ones) & ~x) | ((y - ones) & ~y) | ((w - ones * 0x20) & ~w)) & high;
        if (m) {
            unsigned k = (unsigned)__builtin_ctzll(m) >> 3;
            *hi = acc || (w & high & ((1ull << (8 * k)) - 1));
            return q + k;
        }
        acc |= w & high;
        q += 8;
    }
#endif
    while (q < e) {
        unsigned char c = (unsigned char)*q;
        if (c == '"' || c == '\\' || c < 0x20) break;
        acc |= c & 0x80;
        q++;
    }
    *hi = acc != 0;
    return q;
}

/* S_BUILD unescapes in place and checks; S_CHECK only checks (the text stays
 * as it is, for a later read); S_READ unescapes text that was checked. */
enum { S_BUILD, S_CHECK, S_READ };

/* Parses a string starting after the opening quote; *pp ends after the closing one. */
static int parse_str(tj_doc *d, const char **pp, const char **out, uint32_t *olen, int mode) {
    const char *p = *pp, *e = d->end;
    bool hi;
    const char *q = scan_str(p, e, &hi);
    if (q >= e) return jerr(d, p, "unterminated string");
    if (*q != '"' && *q != '\\') return jerr(d, q, "control character in string");
    if (*q == '"') {
        size_t n = (size_t)(q - p);
        if (n > UINT32_MAX) return jerr(d, p, "string too long");
        if (hi && mode != S_READ && !tk_u8_valid(p, n)) return jerr(d, p, "invalid UTF-8 in string");
        if (mode != S_CHECK) ((char *)p)[n] = 0; /* the closing quote */
        *out = p;
        *olen = (uint32_t)n;
        *pp = q + 1;
        return MX_OK;
    }
    /* with escapes: the result is never longer than the source */
    const char *r = q;
    while (r < e && *r != '"') r += (*r == '\\' && r + 1 < e) ? 2 : 1;
    if (r >= e) return jerr(d, p, "unterminated string");
    char *s = (char *)p;
    size_t n = (size_t)(q - p); /* the part before the first escape is in place already */
    if (mode == S_CHECK) {
        size_t need = (size_t)(r - p) + 1;
        if (need > d->tmpcap) {
            char *t = mx_realloc(d->tmp, need);
            if (!t) return MX_ERR;
            d->tmp = t;
            d->tmpcap = need;
        }
        s = d->tmp;
        memcpy(s, p, n);
    }
    while (q < e && *q != '"') {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20) return jerr(d, q, "control character in string");
        if (c != '\\') { s[n++] = (char)c; q++; continue; }
        if (q + 1 >= e) return jerr(d, q, "bad escape");
        char x = q[1];
        q += 2;
        switch (x) {
        case '"': s[n++] = '"'; break;
        case '\\': s[n++] = '\\'; break;
        case '/': s[n++] = '/'; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u': {
            int v = read_hex4(q, e);
            if (v < 0) return jerr(d, q, "bad \\u escape");
            q += 4;
            if (v >= 0xD800 && v <= 0xDBFF) {
                int lo = (e - q >= 6 && q[0] == '\\' && q[1] == 'u') ? read_hex4(q + 2, e) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return jerr(d, q, "lone surrogate in \\u escape");
                q += 6;
                v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            } else if (v >= 0xDC00 && v <= 0xDFFF) return jerr(d, q, "lone surrogate in \\u escape");
            n += (size_t)tk_u8enc(v, s + n);
            break;
        }
        default: return jerr(d, q - 1, "bad escape");
        }
    }
    if (q >= e) return jerr(d, p, "unterminated string");
    const char *close = q;
    s[n] = 0;
    if (mode != S_READ && !tk_u8_valid(s, n)) return jerr(d, p, "invalid UTF-8 in string");
    *out = s;
    *olen = (uint32_t)n;
    *pp = close + 1;
    return MX_OK;
}

static int parse_num(tj_doc *d, const char **pp, double *out) {
    const char *p = *pp, *e = d->end, *q = p;
    bool neg = false;
    if (q < e && *q == '-') { neg = true; q++; }
    if (q >= e || *q < '0' || *q > '9') return jerr(d, p, "bad number");
    uint64_t iv = 0;
    int nd = 0;
    if (*q == '0') { q++; nd = 1; }
    else while (q < e && *q >= '0' && *q <= '9') { if (nd < 18) iv = iv * 10 + (uint64_t)(*q - '0'); nd++; q++; }
    if (q < e && (*q == '.' || *q == 'e' || *q == 'E') ) {
        if (*q == '.') {
            q++;
            if (q >= e || *q < '0' || *q > '9') return jerr(d, p, "bad number");
            while (q < e && *q >= '0' && *q <= '9') q++;
        }
        if (q < e && (*q == 'e' || *q == 'E')) {
            q++;
            if (q < e && (*q == '+' || *q == '-')) q++;
            if (q >= e || *q < '0' || *q > '9') return jerr(d, p, "bad number");
            while (q < e && *q >= '0' && *q <= '9') q++;
        }
        char tmp[64];
        size_t n = (size_t)(q - p);
        if (n >= sizeof tmp) {
            char *t = mx_strndup(p, n);
            if (!t) return MX_ERR;
            *out = strtod(t, NULL);
            free(t);
        } else {
            memcpy(tmp, p, n);
            tmp[n] = 0;
            *out = strtod(tmp, NULL);
        }
    } else if (nd <= 18) {
        *out = neg ? -(double)iv : (double)iv;
    } else {
        char *t = mx_strndup(p, (size_t)(q - p));
        if (!t) return MX_ERR;
        *out = strtod(t, NULL);
        free(t);
    }
    if (!isfinite(*out)) return jerr(d, p, "number out of range");
    *pp = q;
    return MX_OK;
}

/* Iterative parser with an explicit stack of open containers. */
tj *tk_json_parse(const char *src, size_t len, const char *name, tj_doc **docp) {
    *docp = NULL;
    char *buf = mx_malloc(len + 1);
    if (!buf) return NULL;
    memcpy(buf, src, len);
    buf[len] = 0;
    return tk_json_parse_owned(buf, len, name, docp);
}

tj *tk_json_parse_owned(char *src, size_t len, const char *name, tj_doc **docp) {
    return tk_json_parse_lazy(src, len, name, NULL, NULL, docp);
}

static bool key_is(const char *k, uint32_t kl, const char *s) { return k && kl == strlen(s) && !memcmp(k, s, kl); }

tj *tk_json_parse_lazy(char *src, size_t len, const char *name, const char *outer, const char *const *inner, tj_doc **docp) {
    *docp = NULL;
    tj_doc *d = mx_calloc(1, sizeof *d);
    if (!d) { free(src); return NULL; }
    d->buf = src;
    d->end = src + len;
    d->name = name ? name : "json";
    /* n: members so far; start: the bracket (lazy containers) */
    struct { size_t base, n; uint8_t type; const char *key, *start; uint32_t klen; } open[TK_MAX_DEPTH + 1];
    int depth = 0, lazy = -1; /* lazy: depth of the open lazy container; inside it nothing is built */
    size_t *nl = &d->nl;
    const char *p = skip_ws(src, d->end, nl), *e = d->end;
    tj root;
    const char *key = NULL;
    uint32_t klen = 0;
    for (;;) {
        p = skip_ws(p, e, nl);
        if (p >= e) { jerr(d, p, "unexpected end"); goto fail; }
        int mode = lazy >= 0 ? S_CHECK : S_BUILD;
        /* in an object, read the key first */
        if (depth && open[depth - 1].type == TJ_OBJ) {
            if (*p == '}' && !open[depth - 1].n) goto close;
            if (*p != '"') { jerr(d, p, "expected a key"); goto fail; }
            p++;
            if (parse_str(d, &p, &key, &klen, mode)) goto fail;
            p = skip_ws(p, e, nl);
            if (p >= e || *p != ':') { jerr(d, p, "expected ':'"); goto fail; }
            p = skip_ws(p + 1, e, nl);
            if (p >= e) { jerr(d, p, "unexpected end"); goto fail; }
        } else if (depth && *p == ']' && !open[depth - 1].n) goto close;
        {
            tj v;
            memset(&v, 0, sizeof v);
            char c = *p;
            if (c == '{' || c == '[') {
                if (depth >= TK_MAX_DEPTH) { jerr(d, p, "nesting too deep"); goto fail; }
                open[depth].base = d->sn;
                open[depth].n = 0;
                open[depth].type = c == '{' ? TJ_OBJ : TJ_ARR;
                open[depth].key = key;
                open[depth].klen = klen;
                open[depth].start = p;
                /* root.OUTER.INNER: key is set in objects only, so open[0] is the root object */
                if (lazy < 0 && inner && outer && depth == 2 && key && open[1].type == TJ_OBJ && key_is(open[1].key, open[1].klen, outer))
                    for (const char *const *k = inner; *k; k++)
                        if (key_is(key, klen, *k)) lazy = depth;
                depth++;
                key = NULL;
                klen = 0;
                p++;
                continue;
            } else if (c == '"') {
                p++;
                v.type = TJ_STR;
                if (parse_str(d, &p, &v.v.str, &v.n, mode)) goto fail;
            } else if (c == 't' && e - p >= 4 && !memcmp(p, "true", 4)) { v.type = TJ_TRUE; p += 4; }
            else if (c == 'f' && e - p >= 5 && !memcmp(p, "false", 5)) { v.type = TJ_FALSE; p += 5; }
            else if (c == 'n' && e - p >= 4 && !memcmp(p, "null", 4)) { v.type = TJ_NULL; p += 4; }
            else if (c == '-' || (c >= '0' && c <= '9')) {
                v.type = TJ_NUM;
                if (parse_num(d, &p, &v.v.num)) goto fail;
            } else { jerr(d, p, "unexpected character"); goto fail; }
            v.key = key;
            v.klen = klen;
            key = NULL;
            klen = 0;
            if (!depth) { root = v; goto done; }
            open[depth - 1].n++;
            if (lazy < 0 && push(d, &v)) goto fail;
        }
        goto after_value;
    close : {
        depth--;
        p++;
        size_t cnt = open[depth].n;
        if (cnt > UINT32_MAX) { jerr(d, p, "too many members"); goto fail; }
        if (lazy >= 0 && depth > lazy) { open[depth - 1].n++; goto after_value; }
        tj v;
        memset(&v, 0, sizeof v);
        v.type = open[depth].type;
        v.n = (uint32_t)cnt;
        if (depth == lazy) {
            v.lazy_type = v.type;
            v.type = TJ_LAZY;
            v.v.str = open[depth].start;
            v.span = (uint32_t)(p - open[depth].start); /* files are < 4 GB (TK_MAX_FILE) */
            lazy = -1;
        } else if (cnt) {
            tj *kids = tk_arena_alloc(&d->arena, cnt * sizeof(tj));
            if (!kids) goto fail;
            memcpy(kids, d->stack + open[depth].base, cnt * sizeof(tj));
            v.v.kids = kids;
        }
        d->sn = open[depth].base;
        v.key = open[depth].key;
        v.klen = open[depth].klen;
        if (!depth) { root = v; goto done; }
        open[depth - 1].n++;
        if (push(d, &v)) goto fail;
    }
    after_value:
        p = skip_ws(p, e, nl);
        if (p >= e) { jerr(d, p, "unexpected end"); goto fail; }
        if (*p == ',') {
            p++;
            p = skip_ws(p, e, nl);
            if (p < e && (*p == ']' || *p == '}')) { jerr(d, p, "trailing comma"); goto fail; }
            continue;
        }
        if ((*p == ']' && open[depth - 1].type == TJ_ARR) || (*p == '}' && open[depth - 1].type == TJ_OBJ)) goto close;
        jerr(d, p, "expected ',' or a closing bracket");
        goto fail;
    }
done:
    p = skip_ws(p, e, nl);
    if (p != e) { jerr(d, p, "trailing characters"); goto fail; }
    free(d->stack);
    d->stack = NULL;
    tj *r = tk_arena_alloc(&d->arena, sizeof(tj));
    if (!r) goto fail;
    *r = root;
    *docp = d;
    return r;
fail:
    tk_json_free(d);
    return NULL;
}

void tk_json_free(tj_doc *d) {
    if (!d) return;
    free(d->stack);
    free(d->tmp);
    free(d->buf);
    tk_arena_free(&d->arena);
    free(d);
}

const tj *tk_json_get(const tj *obj, const char *key) {
    if (!obj || obj->type != TJ_OBJ) return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < obj->n; i++) {
        const tj *m = &obj->v.kids[i];
        if (m->klen == kl && !memcmp(m->key, key, kl)) return m;
    }
    return NULL;
}

/* ---- reading lazy containers (text checked by the parser) ---- */

static int lazy_bad(tj_doc *d) { return mx_set_err("%s: invalid JSON in a container read twice", d->name); }

/* End of the checked container at p, and its member count. */
static const char *skip_container(const char *p, const char *e, uint32_t *count) {
    int depth = 0;
    size_t n = 0, nl = 0;
    bool empty = true, hi;
    while ((p = skip_ws(p, e, &nl)) < e) {
        char c = *p++;
        if (c == '"') {
            while ((p = scan_str(p, e, &hi)) < e && *p == '\\') p += 2;
            if (p >= e || *p != '"') return NULL;
            p++;
            empty = false;
        } else if (c == '[' || c == '{') {
            if (depth) empty = false;
            depth++;
        } else if (c == ']' || c == '}') {
            if (--depth == 0) {
                if (n >= UINT32_MAX) return NULL;
                *count = empty ? 0 : (uint32_t)n + 1;
                return p;
            }
        } else if (c == ',') {
            if (depth == 1) n++;
        } else empty = false;
    }
    return NULL;
}

int tk_json_iter_init(tj_iter *it, tj_doc *d, const tj *v) {
    memset(it, 0, sizeof *it);
    it->d = d;
    it->v = v;
    if (v->type == TJ_OBJ || v->type == TJ_ARR) return MX_OK;
    if (v->type != TJ_LAZY) return mx_set_err("%s: not a container", d->name);
    /* reading unescapes strings in place, so a lazy container is read once;
     * its opening bracket is cleared to catch a second reading */
    char *b = (char *)v->v.str;
    if (b[0] != '[' && b[0] != '{') return lazy_bad(d);
    b[0] = 0;
    it->p = b + 1;
    return MX_OK;
}

int tk_json_iter_next(tj_iter *it, tj *out) {
    const tj *v = it->v;
    if (v->type != TJ_LAZY) {
        if (it->i >= v->n) return 0;
        *out = v->v.kids[it->i++];
        return 1;
    }
    tj_doc *d = it->d;
    size_t nl = 0;
    const char *p = skip_ws(it->p, v->v.str + v->span, &nl), *e = v->v.str + v->span;
    if (p >= e) return lazy_bad(d);
    if (*p == ']' || *p == '}') return 0;
    if (it->i) {
        if (*p != ',') return lazy_bad(d);
        p = skip_ws(p + 1, e, &nl);
    }
    memset(out, 0, sizeof *out);
    if (v->lazy_type == TJ_OBJ) {
        if (p >= e || *p != '"') return lazy_bad(d);
        p++;
        if (parse_str(d, &p, &out->key, &out->klen, S_READ)) return MX_ERR;
        p = skip_ws(p, e, &nl);
        if (p >= e || *p != ':') return lazy_bad(d);
        p = skip_ws(p + 1, e, &nl);
    }
    if (p >= e) return lazy_bad(d);
    char c = *p;
    if (c == '"') {
        p++;
        out->type = TJ_STR;
        if (parse_str(d, &p, &out->v.str, &out->n, S_READ)) return MX_ERR;
    } else if (c == '{' || c == '[') {
        const char *q = skip_container(p, e, &out->n);
        if (!q) return lazy_bad(d);
        out->type = TJ_LAZY;
        out->lazy_type = c == '{' ? TJ_OBJ : TJ_ARR;
        out->v.str = p;
        out->span = (uint32_t)(q - p);
        p = q;
    } else if (c == 't' && e - p >= 4 && !memcmp(p, "true", 4)) { out->type = TJ_TRUE; p += 4; }
    else if (c == 'f' && e - p >= 5 && !memcmp(p, "false", 5)) { out->type = TJ_FALSE; p += 5; }
    else if (c == 'n' && e - p >= 4 && !memcmp(p, "null", 4)) { out->type = TJ_NULL; p += 4; }
    else if (c == '-' || (c >= '0' && c <= '9')) {
        out->type = TJ_NUM;
        if (parse_num(d, &p, &out->v.num)) return MX_ERR;
    } else return lazy_bad(d);
    if (p > e) return lazy_bad(d);
    it->p = p;
    it->i++;
    return 1;
}
