/* template values: arena, errors, string buffers, python str()/repr(),
 * equality and ordering, iteration, JSON in and out. */
#include "tmpl_int.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- arena ---- */
struct achunk {
    achunk *next;
    size_t used, cap;
    uint8_t *shadow; /* markup bits, one per byte of data (tracking arenas) */
    max_align_t data[];
};

/* a tracking arena keeps its chunks sorted by address for mk_* lookups */
static bool by_addr_add(arena *a, achunk *k) {
    if (a->n_by_addr == a->cap_by_addr) {
        size_t cap = a->cap_by_addr ? 2 * a->cap_by_addr : 32;
        achunk **n = realloc(a->by_addr, cap * sizeof *n);
        if (!n) return false;
        a->by_addr = n;
        a->cap_by_addr = cap;
    }
    size_t i = a->n_by_addr;
    while (i > 0 && (uintptr_t)a->by_addr[i - 1] > (uintptr_t)k) { a->by_addr[i] = a->by_addr[i - 1]; i--; }
    a->by_addr[i] = k;
    a->n_by_addr++;
    return true;
}

void *tmpl_arena_alloc(arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    achunk *h = a->head;
    if (h && h->cap - h->used >= n) {
        void *p = (char *)h->data + h->used;
        h->used += n;
        return p;
    }
    size_t chunk = a->total / 8 < 65536 ? 65536 : a->total / 8 > ((size_t)8 << 20) ? ((size_t)8 << 20) : a->total / 8;
    size_t cap = n > 32768 ? n : chunk;
    if (a->limit && (a->total + cap > a->limit || cap > a->limit)) return NULL;
    achunk *k = malloc(sizeof *k + cap);
    if (!k) return NULL;
    if (a->track && !by_addr_add(a, k)) { free(k); return NULL; }
    a->total += cap;
    k->cap = cap;
    k->used = n;
    k->shadow = NULL;
    if (h && n > 32768) { /* big block: keep the current chunk on top */
        k->next = h->next;
        h->next = k;
    } else {
        k->next = h;
        a->head = k;
    }
    return k->data;
}

void tmpl_arena_free(arena *a) {
    achunk *k = a->head;
    while (k) {
        achunk *n = k->next;
        free(k->shadow);
        free(k);
        k = n;
    }
    a->head = NULL;
    a->total = 0;
    free(a->by_addr);
    a->by_addr = NULL;
    a->n_by_addr = a->cap_by_addr = 0;
}

/* ---- markup tracking ---- */
static achunk *chunk_of(arena *a, const char *p) {
    size_t lo = 0, hi = a->n_by_addr;
    while (lo < hi) { /* the last chunk whose data starts at or before p */
        size_t mid = (lo + hi) / 2;
        if ((const char *)a->by_addr[mid]->data <= p) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return NULL;
    achunk *k = a->by_addr[lo - 1];
    return p < (const char *)k->data + k->cap ? k : NULL;
}

static bool in_static(const tmarks *m, const char *p, size_t n) {
    for (size_t i = 0; i < m->nstat; i++)
        if (p >= m->stat[i].a && p + n <= m->stat[i].b) return true;
    return false;
}

void tmpl_mk_init(rctx *c, const mx_tmpl *t) {
    size_t n = 1;
    for (achunk *k = t->ar.head; k; k = k->next) n++;
    tmarks *m = tmpl_rx_alloc(c, sizeof *m);
    m->stat = tmpl_rx_alloc(c, n * sizeof *m->stat);
    m->nstat = 0;
    m->stat[m->nstat++] = (mregion){t->src, t->src + t->srclen + 1};
    for (achunk *k = t->ar.head; k; k = k->next) m->stat[m->nstat++] = (mregion){(const char *)k->data, (const char *)k->data + k->cap};
    c->mk = m;
}

/* A trusted variable's value: its strings copied into the arena as markup. */
val tmpl_mk_trusted(rctx *c, val v) {
    if (v.t == V_STR) {
        char *p = tmpl_rx_strndup(c, v.s.p, v.s.n);
        tmpl_mk_set(c, p, v.s.n);
        v.s.p = p;
    } else if (v.t == V_LIST || v.t == V_TUPLE) {
        for (size_t i = 0; i < v.l->n; i++) v.l->v[i] = tmpl_mk_trusted(c, v.l->v[i]);
    }
    return v;
}

void tmpl_mk_set(rctx *c, const char *dst, size_t n) {
    if (!c->mk || !n) return;
    achunk *k = chunk_of(c->ar, dst);
    if (!k) return;
    if (!k->shadow) {
        size_t sz = (k->cap + 7) / 8;
        if (c->ar->limit && c->ar->total + sz > c->ar->limit) tmpl_rx_fail(c, "MemoryError", "template memory limit exceeded");
        if (!(k->shadow = calloc(1, sz))) tmpl_rx_fail(c, "MemoryError", "out of memory");
        c->ar->total += sz;
    }
    size_t o = (size_t)(dst - (const char *)k->data);
    for (size_t i = o; i < o + n; i++) k->shadow[i >> 3] |= (uint8_t)(1u << (i & 7));
}

void tmpl_mk_copy(rctx *c, const char *dst, const char *src, size_t n) {
    if (!c->mk || !n) return;
    if (in_static(c->mk, src, n)) { tmpl_mk_set(c, dst, n); return; }
    achunk *sk = chunk_of(c->ar, src);
    if (!sk || !sk->shadow) return; /* not markup; fresh bytes start unmarked */
    size_t so = (size_t)(src - (const char *)sk->data);
    for (size_t i = 0; i < n;) {
        size_t b = so + i;
        if (!(sk->shadow[b >> 3] >> (b & 7) & 1)) { i++; continue; }
        size_t e = i;
        while (e < n && (sk->shadow[(so + e) >> 3] >> ((so + e) & 7) & 1)) e++;
        tmpl_mk_set(c, dst + i, e - i);
        i = e;
    }
}

void tmpl_mk_ranges(rctx *c, const char *p, size_t n, size_t base, mx_buf *out) {
    achunk *k = c->mk && n ? chunk_of(c->ar, p) : NULL;
    if (!k || !k->shadow) return;
    size_t o = (size_t)(p - (const char *)k->data);
    for (size_t i = 0; i < n;) {
        if (!(k->shadow[(o + i) >> 3] >> ((o + i) & 7) & 1)) { i++; continue; }
        size_t e = i;
        while (e < n && (k->shadow[(o + e) >> 3] >> ((o + e) & 7) & 1)) e++;
        size_t r[2] = {base + i, base + e};
        mx_buf_append(out, r, sizeof r);
        i = e;
    }
}

/* ---- errors ---- */
void tmpl_rx_raise(rctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    longjmp(c->jb, 1);
}

void tmpl_rx_fail(rctx *c, const char *exc, const char *fmt, ...) {
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "%s: %s", exc, msg);
    longjmp(c->jb, 1);
}

void *tmpl_rx_alloc(rctx *c, size_t n) {
    if (n > ((size_t)1 << 40)) tmpl_rx_fail(c, "MemoryError", "allocation too large");
    void *p = tmpl_arena_alloc(c->ar, n);
    if (!p) tmpl_rx_fail(c, "MemoryError", "template memory limit exceeded");
    return p;
}

char *tmpl_rx_strndup(rctx *c, const char *s, size_t n) {
    char *p = tmpl_rx_alloc(c, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    tmpl_mk_copy(c, p, s, n);
    return p;
}

/* ---- string buffers ---- */
void tmpl_sb_put(rctx *c, sbuf *b, const char *p, size_t n) {
    if (!n) return;
    if (b->cap - b->n < n) {
        size_t need = b->n + n;
        if (need < b->n) tmpl_rx_fail(c, "MemoryError", "string too large");
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < need) cap *= 2;
        char *q = tmpl_rx_alloc(c, cap);
        if (b->n) memcpy(q, b->p, b->n);
        tmpl_mk_copy(c, q, b->p, b->n);
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    tmpl_mk_copy(c, b->p + b->n, p, n);
    b->n += n;
}
void tmpl_sb_puts(rctx *c, sbuf *b, const char *s) { tmpl_sb_put(c, b, s, strlen(s)); }
void tmpl_sb_putc(rctx *c, sbuf *b, char ch) { tmpl_sb_put(c, b, &ch, 1); }
void tmpl_sb_printf(rctx *c, sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { tmpl_sb_put(c, b, tmp, (size_t)n); return; }
    char *big = tmpl_rx_alloc(c, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    tmpl_sb_put(c, b, big, (size_t)n);
}
val tmpl_sb_val(sbuf *b) { return v_strn(b->n ? b->p : "", b->n); }

/* ---- constructors ---- */
val tmpl_v_cstr(const char *s) { return v_strn(s, strlen(s)); }

val tmpl_v_undef_msg(rctx *c, const char *exc, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tundef *u = tmpl_rx_alloc(c, sizeof *u);
    u->msg = tmpl_rx_strndup(c, msg, strlen(msg));
    u->exc = exc;
    val v = v_undef();
    v.u = u;
    return v;
}

val tmpl_v_list(rctx *c, size_t cap) {
    tlist *l = tmpl_rx_alloc(c, sizeof *l);
    memset(l, 0, sizeof *l);
    if (cap) {
        l->v = tmpl_rx_alloc(c, cap * sizeof(val));
        l->cap = cap;
    }
    val v = v_undef();
    v.t = V_LIST;
    v.l = l;
    return v;
}

val tmpl_v_tuple2(rctx *c, val a, val b) {
    val t = tmpl_v_list(c, 2);
    tmpl_list_push(c, t.l, a);
    tmpl_list_push(c, t.l, b);
    t.t = V_TUPLE;
    return t;
}

val tmpl_v_dict(rctx *c) {
    tdict *d = tmpl_rx_alloc(c, sizeof *d);
    memset(d, 0, sizeof *d);
    val v = v_undef();
    v.t = V_DICT;
    v.d = d;
    return v;
}

val tmpl_v_func(rctx *c, builtin_fn fn, val self, const char *name) {
    tfunc *f = tmpl_rx_alloc(c, sizeof *f);
    f->fn = fn;
    f->self = self;
    f->name = name;
    val v = v_undef();
    v.t = V_FUNC;
    v.fn = f;
    return v;
}

void tmpl_list_push(rctx *c, tlist *l, val x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        val *nv = tmpl_rx_alloc(c, cap * sizeof(val));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(val));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

/* python hash equality for dict keys: 1 == 1.0 == True */
static bool key_eq(val a, val b) {
    if (a.t == V_STR && b.t == V_STR) return a.s.n == b.s.n && !memcmp(a.s.p, b.s.p, a.s.n);
    bool an = a.t == V_INT || a.t == V_BOOL || a.t == V_FLOAT;
    bool bn = b.t == V_INT || b.t == V_BOOL || b.t == V_FLOAT;
    if (an && bn) {
        double x = a.t == V_FLOAT ? a.f : (double)(a.t == V_INT ? a.i : a.b);
        double y = b.t == V_FLOAT ? b.f : (double)(b.t == V_INT ? b.i : b.b);
        if (a.t != V_FLOAT && b.t != V_FLOAT) return (a.t == V_INT ? a.i : a.b) == (b.t == V_INT ? b.i : b.b);
        return x == y;
    }
    if (a.t == V_NONE && b.t == V_NONE) return true;
    return false;
}

/* python hash of a dict key, consistent with key_eq (1 == 1.0 == True) */
static uint64_t key_hash(val k) {
    uint64_t h = 1469598103934665603ull;
    if (k.t == V_STR) {
        for (size_t i = 0; i < k.s.n; i++) h = (h ^ (unsigned char)k.s.p[i]) * 1099511628211ull;
        return h;
    }
    if (k.t == V_INT) return (uint64_t)k.i * 0x9E3779B97F4A7C15ull;
    if (k.t == V_BOOL) return (uint64_t)k.b * 0x9E3779B97F4A7C15ull;
    if (k.t == V_FLOAT) {
        double f = k.f;
        if (f >= -9.2e18 && f <= 9.2e18 && f == (double)(int64_t)f) return (uint64_t)(int64_t)f * 0x9E3779B97F4A7C15ull;
        uint64_t u;
        memcpy(&u, &f, 8);
        return u * 0x9E3779B97F4A7C15ull;
    }
    return (uint64_t)k.t;
}

#define DICT_INDEX_FROM 8

static void dict_index_put(tdict *d, size_t pos) {
    size_t m = d->icap - 1, i = (size_t)key_hash(d->k[pos]) & m;
    while (d->idx[i]) i = (i + 1) & m;
    d->idx[i] = (uint32_t)(pos + 1);
}

val *tmpl_dict_get(tdict *d, val key) {
    if (d->idx) {
        size_t m = d->icap - 1, i = (size_t)key_hash(key) & m;
        for (; d->idx[i]; i = (i + 1) & m)
            if (key_eq(d->k[d->idx[i] - 1], key)) return &d->v[d->idx[i] - 1];
        return NULL;
    }
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(d->k[i], key)) return &d->v[i];
    return NULL;
}

val *tmpl_dict_gets(tdict *d, const char *k, size_t n) { return tmpl_dict_get(d, v_strn(k, n)); }

void tmpl_dict_clear(tdict *d) {
    d->n = 0;
    if (d->idx) memset(d->idx, 0, d->icap * sizeof *d->idx);
}

void tmpl_dict_set(rctx *c, tdict *d, val key, val x) {
    val *p = tmpl_dict_get(d, key);
    if (p) { *p = x; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        if (cap > UINT32_MAX / 4) tmpl_rx_fail(c, "MemoryError", "dict too large");
        val *nk = tmpl_rx_alloc(c, cap * sizeof(val)), *nv = tmpl_rx_alloc(c, cap * sizeof(val));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(val));
            memcpy(nv, d->v, d->n * sizeof(val));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n] = x;
    d->n++;
    if (d->n > DICT_INDEX_FROM && 2 * d->n > d->icap) { /* (re)build at half load */
        d->icap = d->icap ? 2 * d->icap : 4 * DICT_INDEX_FROM;
        while (2 * d->n > d->icap) d->icap *= 2;
        d->idx = tmpl_rx_alloc(c, d->icap * sizeof *d->idx);
        memset(d->idx, 0, d->icap * sizeof *d->idx);
        for (size_t i = 0; i < d->n; i++) dict_index_put(d, i);
    } else if (d->idx) {
        dict_index_put(d, d->n - 1);
    }
}

/* ---- python semantics ---- */
const char *tmpl_type_name(val v) {
    switch (v.t) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return v.markup ? "Markup" : "str";
    case V_LIST: return "list";
    case V_TUPLE: return "tuple";
    case V_GEN: return v.l->gen_name ? v.l->gen_name : "generator";
    case V_DICT: return "dict";
    case V_NS: return "Namespace";
    case V_MACRO: return "Macro";
    case V_FUNC: return "builtin_function_or_method";
    case V_LOOP: return "LoopContext";
    }
    return "object";
}

const char *tmpl_obj_type_repr(val v) {
    switch (v.t) {
    case V_NONE: return "None";
    case V_BOOL: return "bool object";
    case V_INT: return "int object";
    case V_FLOAT: return "float object";
    case V_STR: return v.markup ? "markupsafe.Markup object" : "str object";
    case V_LIST: return "list object";
    case V_TUPLE: return "tuple object";
    case V_GEN: return "generator object";
    case V_DICT: return "dict object";
    case V_NS: return "jinja2.utils.Namespace object";
    case V_MACRO: return "jinja2.runtime.Macro object";
    case V_LOOP: return "jinja2.runtime.LoopContext object";
    case V_FUNC: return "builtin_function_or_method object";
    }
    return "object";
}

void tmpl_undef_fail(rctx *c, val u) {
    if (u.u) tmpl_rx_fail(c, u.u->exc ? u.u->exc : "UndefinedError", "%s", u.u->msg);
    tmpl_rx_fail(c, "UndefinedError", "value is undefined");
}

static bool is_view(val v) { return v.t == V_GEN && v.l->gen_name && !strncmp(v.l->gen_name, "dict_", 5) && strstr(v.l->gen_name, "iterator") == NULL; }

bool tmpl_truthy(rctx *c, val v) {
    (void)c;
    switch (v.t) {
    case V_UNDEF: case V_NONE: return false;
    case V_BOOL: return v.b;
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0.0;
    case V_STR: return v.s.n != 0;
    case V_LIST: case V_TUPLE: return v.l->n != 0;
    case V_GEN: return is_view(v) ? v.l->n != 0 : true;
    case V_DICT: return v.d->n != 0;
    default: return true;
    }
}

/* Python float repr: shortest round-tripping digits, exponent form outside [1e-4, 1e16). */
void tmpl_fmt_float(double f, char *out, size_t cap) {
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { snprintf(out, cap, signbit(f) ? "-0.0" : "0.0"); return; }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') { neg = true; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = out;
    size_t left = cap;
#define PUT(ch) do { if (left > 1) { *o++ = (ch); left--; } } while (0)
    if (neg) PUT('-');
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            PUT('0'); PUT('.');
            for (int i = 0; i < -exp - 1; i++) PUT('0');
            for (int i = 0; i < nd; i++) PUT(digits[i]);
        } else {
            for (int i = 0; i <= exp; i++) PUT(i < nd ? digits[i] : '0');
            PUT('.');
            if (nd > exp + 1) for (int i = exp + 1; i < nd; i++) PUT(digits[i]);
            else PUT('0');
        }
        *o = 0;
    } else {
        PUT(digits[0]);
        if (nd > 1) {
            PUT('.');
            for (int i = 1; i < nd; i++) PUT(digits[i]);
        }
        *o = 0;
        snprintf(o, left, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
#undef PUT
}

void tmpl_v_to_str(rctx *c, val v, sbuf *b) {
    char tmp[64];
    switch (v.t) {
    case V_UNDEF: return;
    case V_NONE: tmpl_sb_put(c, b, "None", 4); return;
    case V_BOOL: tmpl_sb_puts(c, b, v.b ? "True" : "False"); return;
    case V_INT: tmpl_sb_printf(c, b, "%lld", (long long)v.i); return;
    case V_FLOAT: tmpl_fmt_float(v.f, tmp, sizeof tmp); tmpl_sb_puts(c, b, tmp); return;
    case V_STR: tmpl_sb_put(c, b, v.s.p, v.s.n); return;
    default: tmpl_v_repr(c, v, b, 0); return;
    }
}

val tmpl_v_str(rctx *c, val v) {
    if (v.t == V_STR) return v;
    sbuf b = {0};
    tmpl_v_to_str(c, v, &b);
    return tmpl_sb_val(&b);
}

uint32_t tmpl_utf8_decode(const char *p, size_t n, size_t *adv) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &cp);
    if (k <= 0) { *adv = 1; return (unsigned char)p[0]; }
    *adv = (size_t)k;
    return (uint32_t)cp;
}

void tmpl_utf8_encode(rctx *c, sbuf *b, uint32_t cp) {
    utf8proc_uint8_t tmp[8];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, tmp);
    if (k <= 0) { tmp[0] = '?'; k = 1; }
    tmpl_sb_put(c, b, (const char *)tmp, (size_t)k);
}

size_t tmpl_utf8_count(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) k++;
    return k;
}

size_t tmpl_utf8_offset(const char *p, size_t n, int64_t cp) {
    size_t i = 0;
    int64_t k = 0;
    while (i < n) {
        if (((unsigned char)p[i] & 0xC0) != 0x80) {
            if (k == cp) return i;
            k++;
        }
        i++;
    }
    return n;
}

static bool py_isprintable(uint32_t cp) {
    if (cp == ' ') return true;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
    switch (cat) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return false;
    default: return true;
    }
}

static void repr_str(rctx *c, const char *p, size_t n, sbuf *b) {
    bool sq = memchr(p, '\'', n) != NULL, dq = memchr(p, '"', n) != NULL;
    char q = (sq && !dq) ? '"' : '\'';
    tmpl_sb_putc(c, b, q);
    size_t i = 0;
    while (i < n) {
        unsigned char ch = (unsigned char)p[i];
        if (ch < 0x80) {
            if (ch == (unsigned char)q || ch == '\\') { tmpl_sb_putc(c, b, '\\'); tmpl_sb_putc(c, b, (char)ch); }
            else if (ch == '\n') tmpl_sb_put(c, b, "\\n", 2);
            else if (ch == '\r') tmpl_sb_put(c, b, "\\r", 2);
            else if (ch == '\t') tmpl_sb_put(c, b, "\\t", 2);
            else if (ch < 0x20 || ch == 0x7f) tmpl_sb_printf(c, b, "\\x%02x", ch);
            else tmpl_sb_putc(c, b, (char)ch);
            i++;
            continue;
        }
        size_t adv;
        uint32_t cp = tmpl_utf8_decode(p + i, n - i, &adv);
        if (py_isprintable(cp)) tmpl_sb_put(c, b, p + i, adv);
        else if (cp < 0x100) tmpl_sb_printf(c, b, "\\x%02x", cp);
        else if (cp < 0x10000) tmpl_sb_printf(c, b, "\\u%04x", cp);
        else tmpl_sb_printf(c, b, "\\U%08x", cp);
        i += adv;
    }
    tmpl_sb_putc(c, b, q);
}

void tmpl_v_repr(rctx *c, val v, sbuf *b, int depth) {
    if (depth > 200) tmpl_rx_fail(c, "RecursionError", "maximum recursion depth exceeded while getting the repr of an object");
    switch (v.t) {
    case V_UNDEF: tmpl_sb_puts(c, b, "Undefined"); return;
    case V_STR:
        if (v.markup) { tmpl_sb_puts(c, b, "Markup("); repr_str(c, v.s.p, v.s.n, b); tmpl_sb_putc(c, b, ')'); }
        else repr_str(c, v.s.p, v.s.n, b);
        return;
    case V_LIST: case V_TUPLE: {
        tmpl_sb_putc(c, b, v.t == V_LIST ? '[' : '(');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) tmpl_sb_put(c, b, ", ", 2);
            tmpl_v_repr(c, v.l->v[i], b, depth + 1);
        }
        if (v.t == V_TUPLE && v.l->n == 1) tmpl_sb_putc(c, b, ',');
        tmpl_sb_putc(c, b, v.t == V_LIST ? ']' : ')');
        return;
    }
    case V_DICT: case V_NS: {
        if (v.t == V_NS) tmpl_sb_puts(c, b, "<Namespace ");
        tmpl_sb_putc(c, b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) tmpl_sb_put(c, b, ", ", 2);
            tmpl_v_repr(c, v.d->k[i], b, depth + 1);
            tmpl_sb_put(c, b, ": ", 2);
            tmpl_v_repr(c, v.d->v[i], b, depth + 1);
        }
        tmpl_sb_putc(c, b, '}');
        if (v.t == V_NS) tmpl_sb_putc(c, b, '>');
        return;
    }
    case V_GEN:
        if (is_view(v)) { /* dict_items([...]) */
            tmpl_sb_printf(c, b, "%s(", tmpl_type_name(v));
            val l = v;
            l.t = V_LIST;
            tmpl_v_repr(c, l, b, depth + 1);
            tmpl_sb_putc(c, b, ')');
        } else tmpl_sb_printf(c, b, "<%s object>", tmpl_type_name(v));
        return;
    case V_MACRO: tmpl_sb_printf(c, b, "<Macro '%s'>", v.m->name ? v.m->name : "caller"); return;
    case V_FUNC: tmpl_sb_printf(c, b, "<built-in method %s>", v.fn->name); return;
    case V_LOOP: tmpl_sb_printf(c, b, "<LoopContext %lld/%zu>", (long long)v.lp->idx + 1, v.lp->items->n); return;
    default: tmpl_v_to_str(c, v, b); return;
    }
}

static bool is_num(val v) { return v.t == V_INT || v.t == V_BOOL || v.t == V_FLOAT; }
static double num_f(val v) { return v.t == V_FLOAT ? v.f : v.t == V_INT ? (double)v.i : (double)v.b; }
static int64_t num_i(val v) { return v.t == V_INT ? v.i : (int64_t)v.b; }

bool tmpl_v_eq(rctx *c, val a, val b, int depth) {
    if (depth > 200) tmpl_rx_fail(c, "RecursionError", "maximum recursion depth exceeded in comparison");
    if (is_num(a) && is_num(b)) {
        if (a.t == V_FLOAT || b.t == V_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return true;
    case V_STR: return a.s.n == b.s.n && !memcmp(a.s.p, b.s.p, a.s.n);
    case V_LIST: case V_TUPLE:
        if (a.l->n != b.l->n) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!tmpl_v_eq(c, a.l->v[i], b.l->v[i], depth + 1)) return false;
        return true;
    case V_DICT:
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            val *o = tmpl_dict_get(b.d, a.d->k[i]);
            if (!o || !tmpl_v_eq(c, a.d->v[i], *o, depth + 1)) return false;
        }
        return true;
    case V_NS: return a.d == b.d;
    case V_GEN: return a.l == b.l;
    case V_MACRO: return a.m == b.m;
    case V_LOOP: return a.lp == b.lp;
    case V_FUNC: return a.fn == b.fn;
    }
    return false;
}

/* <0, 0, >0; TypeError for unorderable types (op names the operator). */
int tmpl_v_cmp(rctx *c, val a, val b, const char *op) {
    if (is_num(a) && is_num(b)) {
        if (a.t == V_FLOAT || b.t == V_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.t == V_STR && b.t == V_STR) {
        size_t n = MX_MIN(a.s.n, b.s.n);
        int r = n ? memcmp(a.s.p, b.s.p, n) : 0;
        if (r) return r;
        return a.s.n < b.s.n ? -1 : a.s.n > b.s.n ? 1 : 0;
    }
    if ((a.t == V_LIST && b.t == V_LIST) || (a.t == V_TUPLE && b.t == V_TUPLE)) {
        size_t n = MX_MIN(a.l->n, b.l->n);
        for (size_t i = 0; i < n; i++) {
            if (tmpl_v_eq(c, a.l->v[i], b.l->v[i], 0)) continue;
            return tmpl_v_cmp(c, a.l->v[i], b.l->v[i], op);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n ? 1 : 0;
    }
    if (a.t == V_UNDEF) tmpl_undef_fail(c, a);
    if (b.t == V_UNDEF) tmpl_undef_fail(c, b);
    tmpl_rx_fail(c, "TypeError", "'%s' not supported between instances of '%s' and '%s'", op, tmpl_type_name(a), tmpl_type_name(b));
}

tlist *tmpl_v_iter(rctx *c, val v) {
    switch (v.t) {
    case V_UNDEF: {
        if (v.u && v.u->exc) tmpl_undef_fail(c, v);
        return tmpl_v_list(c, 0).l;
    }
    case V_GEN:
        if (v.l->err) tmpl_rx_raise(c, "%s", v.l->err);
        return v.l;
    case V_LIST: case V_TUPLE: return v.l;
    case V_DICT: {
        val l = tmpl_v_list(c, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) tmpl_list_push(c, l.l, v.d->k[i]);
        return l.l;
    }
    case V_STR: {
        val l = tmpl_v_list(c, 0);
        size_t i = 0;
        while (i < v.s.n) {
            size_t adv;
            tmpl_utf8_decode(v.s.p + i, v.s.n - i, &adv);
            if (adv > v.s.n - i) adv = v.s.n - i;
            tmpl_list_push(c, l.l, v_strn(v.s.p + i, adv));
            i += adv;
        }
        return l.l;
    }
    default:
        tmpl_rx_fail(c, "TypeError", "'%s' object is not iterable", tmpl_type_name(v));
    }
}

int64_t tmpl_v_len(rctx *c, val v) {
    switch (v.t) {
    case V_UNDEF: return 0;
    case V_STR: return (int64_t)tmpl_utf8_count(v.s.p, v.s.n);
    case V_LIST: case V_TUPLE: return (int64_t)v.l->n;
    case V_DICT: return (int64_t)v.d->n;
    case V_GEN: if (is_view(v)) return (int64_t)v.l->n;
    /* fall through */
    default: tmpl_rx_fail(c, "TypeError", "object of type '%s' has no len()", tmpl_type_name(v));
    }
}

val tmpl_html_escape(rctx *c, val s) {
    if (s.t == V_STR && s.markup) return s;
    s = tmpl_v_str(c, s);
    sbuf b = {0};
    for (size_t i = 0; i < s.s.n; i++) {
        char ch = s.s.p[i];
        switch (ch) {
        case '&': tmpl_sb_put(c, &b, "&amp;", 5); break;
        case '<': tmpl_sb_put(c, &b, "&lt;", 4); break;
        case '>': tmpl_sb_put(c, &b, "&gt;", 4); break;
        case '"': tmpl_sb_put(c, &b, "&#34;", 5); break;
        case '\'': tmpl_sb_put(c, &b, "&#39;", 5); break;
        default: tmpl_sb_putc(c, &b, ch);
        }
    }
    val r = tmpl_sb_val(&b);
    r.markup = 1;
    return r;
}

/* ---- JSON ---- */
val tmpl_v_from_json(rctx *c, json_t *j, int depth) {
    if (depth > 500) tmpl_rx_fail(c, "RecursionError", "context nested too deeply");
    switch (json_typeof(j)) {
    case JSON_NULL: return v_none();
    case JSON_TRUE: return v_bool(true);
    case JSON_FALSE: return v_bool(false);
    case JSON_INTEGER: return v_int((int64_t)json_integer_value(j));
    case JSON_REAL: return v_float(json_real_value(j));
    case JSON_STRING: return v_strn(json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        val l = tmpl_v_list(c, json_array_size(j));
        size_t i;
        json_t *x;
        json_array_foreach(j, i, x) tmpl_list_push(c, l.l, tmpl_v_from_json(c, x, depth + 1));
        return l;
    }
    case JSON_OBJECT: {
        val d = tmpl_v_dict(c);
        const char *k;
        json_t *x;
        void *it;
        for (it = json_object_iter(j); it; it = json_object_iter_next(j, it)) {
            k = json_object_iter_key(it);
            x = json_object_iter_value(it);
            size_t kl = strlen(k);
#if JANSSON_VERSION_HEX >= 0x020e00
            kl = json_object_iter_key_len(it);
#endif
            tmpl_dict_set(c, d.d, v_strn(k, kl), tmpl_v_from_json(c, x, depth + 1));
        }
        return d;
    }
    }
    return v_none();
}

static void json_str(rctx *c, const char *p, size_t n, sbuf *b) {
    tmpl_sb_putc(c, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", ch); esc = tmp; }
        }
        if (esc) {
            tmpl_sb_put(c, b, p + run, i - run);
            tmpl_sb_puts(c, b, esc);
            run = i + 1;
        }
    }
    tmpl_sb_put(c, b, p + run, n - run);
    tmpl_sb_putc(c, b, '"');
}

static void json_float(rctx *c, double f, sbuf *b) {
    if (isnan(f)) { tmpl_sb_puts(c, b, "NaN"); return; }
    if (isinf(f)) { tmpl_sb_puts(c, b, f < 0 ? "-Infinity" : "Infinity"); return; }
    char tmp[64];
    tmpl_fmt_float(f, tmp, sizeof tmp);
    tmpl_sb_puts(c, b, tmp);
}

static void json_newline(rctx *c, sbuf *b, const char *indent, int level) {
    tmpl_sb_putc(c, b, '\n');
    for (int i = 0; i < level; i++) tmpl_sb_puts(c, b, indent);
}

void tmpl_v_tojson(rctx *c, val v, sbuf *b, const char *indent, int level, const char *item_sep,
              const char *key_sep, bool sort_keys, int depth) {
    if (depth > 400) tmpl_rx_fail(c, "RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
    switch (v.t) {
    case V_NONE: tmpl_sb_puts(c, b, "null"); return;
    case V_BOOL: tmpl_sb_puts(c, b, v.b ? "true" : "false"); return;
    case V_INT: tmpl_sb_printf(c, b, "%lld", (long long)v.i); return;
    case V_FLOAT: json_float(c, v.f, b); return;
    case V_STR: json_str(c, v.s.p, v.s.n, b); return;
    case V_LIST: case V_TUPLE: {
        if (!v.l->n) { tmpl_sb_puts(c, b, "[]"); return; }
        tmpl_sb_putc(c, b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) tmpl_sb_puts(c, b, item_sep);
            if (indent) json_newline(c, b, indent, level + 1);
            tmpl_v_tojson(c, v.l->v[i], b, indent, level + 1, item_sep, key_sep, sort_keys, depth + 1);
        }
        if (indent) json_newline(c, b, indent, level);
        tmpl_sb_putc(c, b, ']');
        return;
    }
    case V_DICT: {
        if (!v.d->n) { tmpl_sb_puts(c, b, "{}"); return; }
        size_t n = v.d->n;
        size_t *ord = tmpl_rx_alloc(c, n * sizeof *ord);
        for (size_t i = 0; i < n; i++) ord[i] = i;
        /* keys as strings first (python converts int/float/bool/None keys) */
        val *ks = tmpl_rx_alloc(c, n * sizeof *ks);
        for (size_t i = 0; i < n; i++) {
            val k = v.d->k[i];
            switch (k.t) {
            case V_STR: ks[i] = k; ks[i].markup = 0; break;
            case V_INT: case V_FLOAT: {
                sbuf kb = {0};
                if (k.t == V_FLOAT) json_float(c, k.f, &kb); else tmpl_sb_printf(c, &kb, "%lld", (long long)k.i);
                ks[i] = tmpl_sb_val(&kb);
                break;
            }
            case V_BOOL: ks[i] = tmpl_v_cstr(k.b ? "true" : "false"); break;
            case V_NONE: ks[i] = tmpl_v_cstr("null"); break;
            default:
                tmpl_rx_fail(c, "TypeError", "keys must be str, int, float, bool or None, not %s", tmpl_type_name(k));
            }
        }
        if (sort_keys) {
            for (size_t i = 0; i < n; i++) { /* python sorts the original keys */
                if (v.d->k[i].t != V_STR && v.d->k[0].t == V_STR)
                    tmpl_rx_fail(c, "TypeError", "'<' not supported between instances of '%s' and 'str'", tmpl_type_name(v.d->k[i]));
            }
            val *pos = tmpl_rx_alloc(c, n * sizeof *pos), *keys = tmpl_rx_alloc(c, n * sizeof *keys);
            for (size_t i = 0; i < n; i++) { pos[i] = v_int((int64_t)i); keys[i] = v.d->k[i]; }
            tmpl_v_stable_sort(c, pos, keys, n, false);
            for (size_t i = 0; i < n; i++) ord[i] = (size_t)pos[i].i;
        }
        tmpl_sb_putc(c, b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) tmpl_sb_puts(c, b, item_sep);
            if (indent) json_newline(c, b, indent, level + 1);
            json_str(c, ks[ord[i]].s.p, ks[ord[i]].s.n, b);
            tmpl_sb_puts(c, b, key_sep);
            tmpl_v_tojson(c, v.d->v[ord[i]], b, indent, level + 1, item_sep, key_sep, sort_keys, depth + 1);
        }
        if (indent) json_newline(c, b, indent, level);
        tmpl_sb_putc(c, b, '}');
        return;
    }
    default:
        tmpl_rx_fail(c, "TypeError", "Object of type %s is not JSON serializable", tmpl_type_name(v));
    }
}
