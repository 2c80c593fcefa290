/* A small, fast JSON reader for tokenizer files. jansson takes over a second
 * on the 33 MB Gemma 3 tokenizer.json; this one builds a read-only tree in an
 * arena in one pass. Strings are unescaped, checked UTF-8 and NUL-terminated;
 * nesting is limited to TK_MAX_DEPTH. */
#include "tok_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tj_doc {
    tk_arena arena;
    char *buf; /* mutable copy of the text; strings are unescaped in place */
    tj *stack; /* members of the open containers */
    size_t sn, scap;
    const char *s, *end, *name;
    int depth;
};

static int jerr(tj_doc *d, const char *p, const char *what) {
    int line = 1;
    for (const char *q = d->s; q < p && q < d->end; q++) line += *q == '\n';
    return mx_set_err("%s: line %d: invalid JSON: %s", d->name, line, what);
}

static inline const char *skip_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
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

/* Parses a string starting after the opening quote; *pp ends after the closing one. */
static int parse_str(tj_doc *d, const char **pp, const char **out, uint32_t *olen) {
    const char *p = *pp, *e = d->end;
    const char *q = p;
    bool simple = true;
    while (q < e && *q != '"') {
        unsigned char c = (unsigned char)*q;
        if (c == '\\') { simple = false; break; }
        if (c < 0x20) return jerr(d, q, "control character in string");
        q++;
    }
    if (q >= e) return jerr(d, p, "unterminated string");
    if (simple) {
        size_t n = (size_t)(q - p);
        if (n > UINT32_MAX) return jerr(d, p, "string too long");
        if (!tk_u8_valid(p, n)) return jerr(d, p, "invalid UTF-8 in string");
        char *s = (char *)p;
        s[n] = 0; /* the closing quote */
        *out = s;
        *olen = (uint32_t)n;
        *pp = q + 1;
        return MX_OK;
    }
    /* with escapes: the result is never longer than the source */
    const char *r = p;
    while (r < e && *r != '"') r += (*r == '\\' && r + 1 < e) ? 2 : 1;
    if (r >= e) return jerr(d, p, "unterminated string");
    char *s = (char *)p; /* unescaping never grows the text */
    size_t n = 0;
    q = p;
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
    if (!tk_u8_valid(s, n)) return jerr(d, p, "invalid UTF-8 in string");
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
tj *tj_parse(const char *src, size_t len, const char *name, tj_doc **docp) {
    *docp = NULL;
    char *buf = mx_malloc(len + 1);
    if (!buf) return NULL;
    memcpy(buf, src, len);
    buf[len] = 0;
    return tj_parse_owned(buf, len, name, docp);
}

tj *tj_parse_owned(char *src, size_t len, const char *name, tj_doc **docp) {
    *docp = NULL;
    tj_doc *d = mx_calloc(1, sizeof *d);
    if (!d) { free(src); return NULL; }
    d->buf = src;
    d->s = src;
    d->end = src + len;
    d->name = name ? name : "json";
    struct { size_t base; uint8_t type; const char *key; uint32_t klen; } open[TK_MAX_DEPTH + 1];
    int depth = 0;
    const char *p = skip_ws(src, d->end), *e = d->end;
    tj root;
    bool have_root = false;
    const char *key = NULL;
    uint32_t klen = 0;
    for (;;) {
        p = skip_ws(p, e);
        if (p >= e) { jerr(d, p, "unexpected end"); goto fail; }
        /* in an object, read the key first */
        if (depth && open[depth - 1].type == TJ_OBJ) {
            if (*p == '}' && d->sn == open[depth - 1].base) goto close;
            if (*p != '"') { jerr(d, p, "expected a key"); goto fail; }
            p++;
            if (parse_str(d, &p, &key, &klen)) goto fail;
            p = skip_ws(p, e);
            if (p >= e || *p != ':') { jerr(d, p, "expected ':'"); goto fail; }
            p = skip_ws(p + 1, e);
            if (p >= e) { jerr(d, p, "unexpected end"); goto fail; }
        } else if (depth && *p == ']' && d->sn == open[depth - 1].base) goto close;
        {
            tj v;
            memset(&v, 0, sizeof v);
            char c = *p;
            if (c == '{' || c == '[') {
                if (depth >= TK_MAX_DEPTH) { jerr(d, p, "nesting too deep"); goto fail; }
                open[depth].base = d->sn;
                open[depth].type = c == '{' ? TJ_OBJ : TJ_ARR;
                open[depth].key = key;
                open[depth].klen = klen;
                depth++;
                key = NULL;
                klen = 0;
                p++;
                continue;
            } else if (c == '"') {
                p++;
                v.type = TJ_STR;
                if (parse_str(d, &p, &v.v.str, &v.n)) goto fail;
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
            if (!depth) { root = v; have_root = true; goto done; }
            if (push(d, &v)) goto fail;
        }
        goto after_value;
    close : {
        depth--;
        p++;
        size_t base = open[depth].base, cnt = d->sn - base;
        tj v;
        memset(&v, 0, sizeof v);
        v.type = open[depth].type;
        if (cnt > UINT32_MAX) { jerr(d, p, "too many members"); goto fail; }
        v.n = (uint32_t)cnt;
        if (cnt) {
            tj *kids = tk_arena_alloc(&d->arena, cnt * sizeof(tj));
            if (!kids) goto fail;
            memcpy(kids, d->stack + base, cnt * sizeof(tj));
            v.v.kids = kids;
        }
        d->sn = base;
        v.key = open[depth].key;
        v.klen = open[depth].klen;
        if (!depth) { root = v; have_root = true; goto done; }
        if (push(d, &v)) goto fail;
    }
    after_value:
        p = skip_ws(p, e);
        if (p >= e) { jerr(d, p, "unexpected end"); goto fail; }
        if (*p == ',') {
            p++;
            p = skip_ws(p, e);
            if (p < e && (*p == ']' || *p == '}')) { jerr(d, p, "trailing comma"); goto fail; }
            continue;
        }
        if ((*p == ']' && open[depth - 1].type == TJ_ARR) || (*p == '}' && open[depth - 1].type == TJ_OBJ)) goto close;
        jerr(d, p, "expected ',' or a closing bracket");
        goto fail;
    }
done:
    p = skip_ws(p, e);
    if (p != e) { jerr(d, p, "trailing characters"); goto fail; }
    (void)have_root;
    free(d->stack);
    d->stack = NULL;
    tj *r = tk_arena_alloc(&d->arena, sizeof(tj));
    if (!r) goto fail;
    *r = root;
    *docp = d;
    return r;
fail:
    tj_free(d);
    return NULL;
}

void tj_free(tj_doc *d) {
    if (!d) return;
    free(d->stack);
    free(d->buf);
    tk_arena_free(&d->arena);
    free(d);
}

const tj *tj_get(const tj *obj, const char *key) {
    if (!obj || obj->type != TJ_OBJ) return NULL;
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < obj->n; i++) {
        const tj *m = &obj->v.kids[i];
        if (m->klen == kl && !memcmp(m->key, key, kl)) return m;
    }
    return NULL;
}
