/* tokenizer helpers: arena, hash maps, UTF-8, Unicode classes, piece lists,
 * string/regex patterns. */
#define _GNU_SOURCE /* madvise */
#include "tok_internal.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <utf8proc.h>

/* ---- big allocations ----
 * The file and the tables of a big vocabulary (tens of MB) are filled right
 * after they are allocated. With 4 KiB pages that is one page fault per 4 KiB,
 * which dominated loading (several us each in a VM); transparent huge pages,
 * where the kernel offers them on request, take 512 times fewer. */
void *tk_alloc_big(size_t n, bool zero) {
#ifdef MADV_HUGEPAGE
    const size_t huge = (size_t)2 << 20;
    if (n >= huge && n <= SIZE_MAX - huge) {
        size_t sz = (n + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, sz);
        if (p) {
            madvise(p, sz, MADV_HUGEPAGE); /* a hint: failure is harmless */
            if (zero) memset(p, 0, n);
            return p;
        }
    }
#endif
    return zero ? mx_calloc(1, n) : mx_malloc(n);
}

/* ---- arena ---- */
struct tk_blk { tk_blk *next; size_t used, cap; _Alignas(16) char data[]; };

void *tk_arena_alloc(tk_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    tk_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        b = tk_alloc_big(sizeof *b + cap, false);
        if (!b) return NULL;
        b->used = 0;
        b->cap = cap;
        if (a->head && n > (1u << 19)) { /* keep the current block for small allocations */
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

char *tk_arena_dup(tk_arena *a, const char *s, size_t n) {
    char *p = tk_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void tk_arena_free(tk_arena *a) {
    tk_blk *b = a->head;
    while (b) { tk_blk *n = b->next; free(b); b = n; }
    a->head = NULL;
}

/* ---- hashing ---- */
uint64_t tk_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static uint32_t pow2_for(size_t expect) {
    uint32_t cap = 16;
    while (cap < expect * 2 && cap < (1u << 30)) cap <<= 1;
    return cap;
}

int tk_smap_init(tk_smap *m, size_t expect) {
    uint32_t cap = pow2_for(expect);
    m->slot = tk_alloc_big(sizeof(tk_sslot) * cap, false);
    if (!m->slot) return MX_ERR;
    for (uint32_t i = 0; i < cap; i++) m->slot[i].id = -1;
    m->mask = cap - 1;
    m->count = 0;
    return MX_OK;
}

void tk_smap_free(tk_smap *m) {
    free(m->slot);
    m->slot = NULL;
}

static inline int32_t smap_find(const tk_smap *m, const tk_str *keys, const char *s, size_t n, uint64_t h64) {
    uint32_t h = (uint32_t)h64, i = (uint32_t)(h64 >> 32) & m->mask;
    for (;;) {
        const tk_sslot *e = &m->slot[i];
        if (e->id < 0) return -1;
        if (e->hash == h && keys[e->id].len == n && !memcmp(keys[e->id].s, s, n)) return e->id;
        i = (i + 1) & m->mask;
    }
}

int32_t tk_smap_get(const tk_smap *m, const tk_str *keys, const char *s, size_t n) {
    if (!m->slot) return -1;
    return smap_find(m, keys, s, n, tk_hash(s, n));
}

/* On a big vocabulary each lookup is three dependent cache misses (slot, key,
 * string); for a batch they are prefetched stage by stage so that they
 * overlap. */
void tk_smap_get_batch(const tk_smap *m, const tk_str *keys, const tk_str *q, int n, int32_t *ids) {
    uint64_t h[TK_BATCH];
    for (int b = 0; b < n; b += TK_BATCH) {
        int k = n - b < TK_BATCH ? n - b : TK_BATCH;
        const tk_str *Q = q + b;
        if (!m->slot) {
            for (int i = 0; i < k; i++) ids[b + i] = -1;
            continue;
        }
        for (int i = 0; i < k; i++) {
            h[i] = tk_hash(Q[i].s, Q[i].len);
            __builtin_prefetch(&m->slot[(uint32_t)(h[i] >> 32) & m->mask]);
        }
        for (int i = 0; i < k; i++) {
            const tk_sslot *e = &m->slot[(uint32_t)(h[i] >> 32) & m->mask];
            if (e->id >= 0) __builtin_prefetch(&keys[e->id]);
        }
        for (int i = 0; i < k; i++) {
            const tk_sslot *e = &m->slot[(uint32_t)(h[i] >> 32) & m->mask];
            if (e->id >= 0 && e->hash == (uint32_t)h[i]) __builtin_prefetch(keys[e->id].s);
        }
        for (int i = 0; i < k; i++) ids[b + i] = smap_find(m, keys, Q[i].s, Q[i].len, h[i]);
    }
}

void tk_smap_prefetch(const tk_smap *m, const char *s, size_t n) {
    if (m->slot) __builtin_prefetch(&m->slot[(uint32_t)(tk_hash(s, n) >> 32) & m->mask]);
}

static int smap_grow(tk_smap *m, const tk_str *keys) {
    tk_smap nm;
    if (tk_smap_init(&nm, (size_t)(m->mask + 1))) return MX_ERR;
    for (uint32_t i = 0; i <= m->mask; i++) {
        if (m->slot[i].id < 0) continue;
        const tk_str *k = &keys[m->slot[i].id];
        uint32_t j = (uint32_t)(tk_hash(k->s, k->len) >> 32) & nm.mask;
        while (nm.slot[j].id >= 0) j = (j + 1) & nm.mask;
        nm.slot[j] = m->slot[i];
    }
    nm.count = m->count;
    tk_smap_free(m);
    *m = nm;
    return MX_OK;
}

int tk_smap_put(tk_smap *m, const tk_str *keys, int32_t id) {
    if ((m->count + 1) * 2 > m->mask + 1 && smap_grow(m, keys)) return MX_ERR;
    uint64_t h64 = tk_hash(keys[id].s, keys[id].len);
    uint32_t h = (uint32_t)h64, i = (uint32_t)(h64 >> 32) & m->mask;
    for (;;) {
        int32_t o = m->slot[i].id;
        if (o < 0) break;
        if (m->slot[i].hash == h && keys[o].len == keys[id].len && !memcmp(keys[o].s, keys[id].s, keys[id].len)) {
            m->slot[i].id = id;
            return MX_OK;
        }
        i = (i + 1) & m->mask;
    }
    m->slot[i].id = id;
    m->slot[i].hash = h;
    m->count++;
    return MX_OK;
}

static inline uint32_t umix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

/* u64 maps are filled up to 70% (they are large: merges, tries) */
#define UMAP_FULL(count, cap) ((uint64_t)(count) * 10 > (uint64_t)(cap) * 7)
int tk_umap_init(tk_umap *m, size_t expect) {
    uint32_t cap = 16;
    while (UMAP_FULL(expect, cap) && cap < (1u << 30)) cap <<= 1;
    m->slot = tk_alloc_big(sizeof(tk_uslot) * cap, false);
    if (!m->slot) return MX_ERR;
    for (uint32_t i = 0; i < cap; i++) m->slot[i].key = UINT64_MAX;
    m->mask = cap - 1;
    m->count = 0;
    return MX_OK;
}

void tk_umap_free(tk_umap *m) {
    free(m->slot);
    m->slot = NULL;
    m->count = 0;
}

void tk_umap_prefetch(const tk_umap *m, uint64_t k) {
    if (m->slot) __builtin_prefetch(&m->slot[umix(k) & m->mask]);
}

bool tk_umap_get(const tk_umap *m, uint64_t k, uint32_t *a, int32_t *b) {
    if (!m->slot) return false;
    uint32_t i = umix(k) & m->mask;
    for (;;) {
        const tk_uslot *e = &m->slot[i];
        if (e->key == k) {
            if (a) *a = e->a;
            if (b) *b = e->b;
            return true;
        }
        if (e->key == UINT64_MAX) return false;
        i = (i + 1) & m->mask;
    }
}

int tk_umap_put(tk_umap *m, uint64_t k, uint32_t a, int32_t b) {
    if (!m->slot && tk_umap_init(m, 16)) return MX_ERR;
    if (UMAP_FULL(m->count + 1, m->mask + 1)) {
        tk_umap nm;
        if (tk_umap_init(&nm, (size_t)(m->mask + 1) * 2 * 7 / 10)) return MX_ERR;
        for (uint32_t i = 0; i <= m->mask; i++) {
            if (m->slot[i].key == UINT64_MAX) continue;
            uint32_t j = umix(m->slot[i].key) & nm.mask;
            while (nm.slot[j].key != UINT64_MAX) j = (j + 1) & nm.mask;
            nm.slot[j] = m->slot[i];
        }
        nm.count = m->count;
        tk_umap_free(m);
        *m = nm;
    }
    uint32_t i = umix(k) & m->mask;
    while (m->slot[i].key != UINT64_MAX && m->slot[i].key != k) i = (i + 1) & m->mask;
    if (m->slot[i].key == UINT64_MAX) m->count++;
    m->slot[i].key = k;
    m->slot[i].a = a;
    m->slot[i].b = b;
    return MX_OK;
}

/* ---- UTF-8 ---- */
int tk_u8dec(const uint8_t *s, size_t n, int32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int need;
    int32_t v;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) { need = 1; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else { *cp = -1; return 1; }
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) { *cp = -1; return i; }
        uint8_t d = s[i];
        if (i == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) { *cp = -1; return i; }
        v = (v << 6) | (d & 0x3F);
    }
    *cp = v;
    return need + 1;
}

int tk_u8enc(int32_t c, char *o) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

bool tk_u8_valid(const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) { /* ASCII eight bytes at a time */
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ull)) { i += 8; continue; }
        }
        if (p[i] < 0x80) { i++; continue; }
        int32_t cp;
        int l = tk_u8dec(p + i, n - i, &cp);
        if (cp < 0) return false;
        i += (size_t)l;
    }
    return true;
}

int tk_u8_lossy(const char *s, size_t n, mx_buf *out) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0, run = 0;
    if (mx_buf_reserve(out, n)) return MX_ERR;
    while (i < n) {
        if (p[i] < 0x80) { i++; continue; }
        int32_t cp;
        int l = tk_u8dec(p + i, n - i, &cp);
        if (cp < 0) {
            if (mx_buf_append(out, s + run, i - run) || mx_buf_append(out, "\xEF\xBF\xBD", 3)) return MX_ERR;
            i += (size_t)l;
            run = i;
        } else i += (size_t)l;
    }
    return mx_buf_append(out, s + run, n - run);
}

bool tk_is_ws(int32_t c) {
    if (c <= 0x20) return c == 0x20 || (c >= 9 && c <= 13);
    if (c < 0x85) return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

static inline utf8proc_category_t cat(int32_t c) {
    return (c < 0 || c > 0x10FFFF) ? UTF8PROC_CATEGORY_CN : utf8proc_category(c);
}

bool tk_is_punct(int32_t c) {
    if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    utf8proc_category_t k = cat(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

bool tk_is_word(int32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    utf8proc_category_t k = cat(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_NO) || k == UTF8PROC_CATEGORY_PC;
}

bool tk_is_numeric(int32_t c) {
    utf8proc_category_t k = cat(c);
    return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}

bool tk_is_other(int32_t c) {
    utf8proc_category_t k = cat(c);
    return k == UTF8PROC_CATEGORY_CN || (k >= UTF8PROC_CATEGORY_CC && k <= UTF8PROC_CATEGORY_CO);
}

bool tk_is_mark(int32_t c) {
    utf8proc_category_t k = cat(c);
    return k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME;
}

bool tk_is_mn(int32_t c) { return cat(c) == UTF8PROC_CATEGORY_MN; }

bool tk_is_cjk(int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ---- pieces ---- */
int tk_pieces_add(tk_pieces *p, const char *s, size_t n, uint8_t flag) {
    if (p->text.len + n > UINT32_MAX) return mx_set_err("tokenizer: text too long");
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        uint32_t *o = mx_realloc(p->off, sizeof(uint32_t) * (size_t)cap);
        if (!o) return MX_ERR;
        p->off = o;
        uint32_t *l = mx_realloc(p->len, sizeof(uint32_t) * (size_t)cap);
        if (!l) return MX_ERR;
        p->len = l;
        uint8_t *f = mx_realloc(p->flag, (size_t)cap);
        if (!f) return MX_ERR;
        p->flag = f;
        p->cap = cap;
    }
    if (!p->text.data && mx_buf_append(&p->text, "", 0)) return MX_ERR;
    p->off[p->n] = (uint32_t)p->text.len;
    p->len[p->n] = (uint32_t)n;
    p->flag[p->n] = flag;
    if (n && mx_buf_append(&p->text, s, n)) return MX_ERR;
    p->n++;
    return MX_OK;
}

int tk_pieces_append_last(tk_pieces *p, const char *s, size_t n) {
    if (!p->n) return tk_pieces_add(p, s, n, 0);
    if (mx_buf_append(&p->text, s, n)) return MX_ERR;
    p->len[p->n - 1] += (uint32_t)n;
    return MX_OK;
}

void tk_pieces_clear(tk_pieces *p) {
    p->n = 0;
    p->text.len = 0;
}

void tk_pieces_free(tk_pieces *p) {
    mx_buf_free(&p->text);
    free(p->off);
    free(p->len);
    free(p->flag);
    memset(p, 0, sizeof *p);
}

/* ---- patterns ---- */
int tk_ctx_init(tk_ctx *c) {
    memset(c, 0, sizeof *c);
    c->md = pcre2_match_data_create(16, NULL);
    c->mc = pcre2_match_context_create(NULL);
    if (!c->md || !c->mc) { tk_ctx_free(c); return mx_set_err("tokenizer: out of memory"); }
    pcre2_set_match_limit(c->mc, 10000000);
    pcre2_set_depth_limit(c->mc, 10000);
    return MX_OK;
}

void tk_ctx_free(tk_ctx *c) {
    if (c->md) pcre2_match_data_free(c->md);
    if (c->mc) pcre2_match_context_free(c->mc);
    for (int i = 0; i < 4; i++) mx_buf_free(&c->b[i]);
    memset(c, 0, sizeof *c);
}

/* Oniguruma's \s (used by HF) is Unicode White_Space; PCRE2's differs
 * (U+180E), so \s and \S are rewritten to explicit classes. */
#define WS_CLASS "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static int rewrite_regex(const char *re, size_t len, mx_buf *out) {
    int depth = 0; /* inside [...] */
    for (size_t i = 0; i < len; i++) {
        char ch = re[i];
        if (ch == '\\' && i + 1 < len) {
            char nx = re[i + 1];
            if (nx == 's') {
                if (mx_buf_puts(out, depth ? WS_CLASS : "[" WS_CLASS "]")) return MX_ERR;
                i++;
                continue;
            }
            if (nx == 'S' && !depth) {
                if (mx_buf_puts(out, "[^" WS_CLASS "]")) return MX_ERR;
                i++;
                continue;
            }
            if (mx_buf_append(out, re + i, 2)) return MX_ERR;
            i++;
            continue;
        }
        if (ch == '[' && !depth) {
            depth = 1;
            if (mx_buf_append(out, &ch, 1)) return MX_ERR;
            /* a ']' right after '[' or '[^' is literal */
            if (i + 1 < len && re[i + 1] == '^') { if (mx_buf_append(out, "^", 1)) return MX_ERR; i++; }
            if (i + 1 < len && re[i + 1] == ']') { if (mx_buf_append(out, "]", 1)) return MX_ERR; i++; }
            continue;
        }
        if (ch == '[' && depth && i + 1 < len && re[i + 1] == ':') { /* POSIX class [:alpha:] */
            const char *e = memchr(re + i + 2, ']', len - i - 2);
            if (e) {
                if (mx_buf_append(out, re + i, (size_t)(e - (re + i)) + 1)) return MX_ERR;
                i = (size_t)(e - re);
                continue;
            }
        }
        if (ch == ']' && depth) depth = 0;
        if (mx_buf_append(out, &ch, 1)) return MX_ERR;
    }
    return MX_OK;
}

int tk_pat_compile_regex(tk_pat *p, const char *re, size_t len, const char *file, const char *what) {
    mx_buf b = {0};
    if (rewrite_regex(re, len, &b)) { mx_buf_free(&b); return MX_ERR; }
    int ec;
    PCRE2_SIZE eo;
    p->re = pcre2_compile((PCRE2_SPTR)(b.data ? b.data : ""), b.len, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &ec, &eo, NULL);
    mx_buf_free(&b);
    if (!p->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return mx_set_err("%s: %s: bad regex: %s", file, what, (const char *)msg);
    }
    pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE); /* optional speed-up */
    p->str = NULL;
    p->len = 0;
    return MX_OK;
}

int tk_pat_parse(tk_pat *p, const tj *v, const char *file, const char *what) {
    memset(p, 0, sizeof *p);
    if (v && v->type == TJ_STR) {
        p->str = mx_strndup(v->v.str, v->n);
        p->len = v->n;
        return p->str ? MX_OK : MX_ERR;
    }
    const tj *s = v && v->type == TJ_OBJ ? tk_json_get(v, "String") : NULL;
    if (s && s->type == TJ_STR) {
        p->str = mx_strndup(s->v.str, s->n);
        p->len = s->n;
        return p->str ? MX_OK : MX_ERR;
    }
    const tj *r = v && v->type == TJ_OBJ ? tk_json_get(v, "Regex") : NULL;
    if (r && r->type == TJ_STR) return tk_pat_compile_regex(p, r->v.str, r->n, file, what);
    return mx_set_err("%s: %s: expected {\"String\": ...} or {\"Regex\": ...}", file, what);
}

void tk_pat_free(tk_pat *p) {
    free(p->str);
    if (p->re) pcre2_code_free(p->re);
    memset(p, 0, sizeof *p);
}

static const char *memmem_(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0 || nn > hn) return NULL;
    const char *end = h + hn - nn;
    for (const char *p = h; p <= end; p++) {
        p = memchr(p, n[0], (size_t)(end - p) + 1);
        if (!p) return NULL;
        if (!memcmp(p, n, nn)) return p;
    }
    return NULL;
}

int tk_over_budget(tk_ctx *c) {
    if (c->deadline > 0 && !(++c->tick & 63) && mx_now() > c->deadline) return mx_set_err("tokenizer: the input took longer than its time budget");
    return MX_OK;
}

int tk_pat_find(const tk_pat *p, tk_ctx *c, const char *s, size_t n, size_t from, size_t *ms, size_t *me) {
    if (from > n) return 0;
    if (tk_over_budget(c)) return MX_ERR;
    if (!p->re) {
        const char *f = memmem_(s + from, n - from, p->str, p->len);
        if (!f) return 0;
        *ms = (size_t)(f - s);
        *me = *ms + p->len;
        return 1;
    }
    uint32_t opts = PCRE2_NO_UTF_CHECK;
    for (;;) {
        int rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, from, opts, c->md, c->mc);
        if (rc == PCRE2_ERROR_NOMATCH) return 0;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return mx_set_err("tokenizer: regex match failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        *ms = ov[0];
        *me = ov[1];
        if (*me < *ms) *me = *ms; /* \K tricks */
        return 1;
    }
}

int tk_pat_replace(const tk_pat *p, tk_ctx *c, const char *s, size_t n, const char *rep, size_t rlen, mx_buf *out) {
    size_t pos = 0, from = 0, ms, me;
    if (!p->re && p->len == 0) return mx_buf_append(out, s, n);
    for (;;) {
        int r = tk_pat_find(p, c, s, n, from, &ms, &me);
        if (r < 0) return MX_ERR;
        if (!r) break;
        if (mx_buf_append(out, s + pos, ms - pos) || mx_buf_append(out, rep, rlen)) return MX_ERR;
        pos = me;
        if (me == ms) { /* empty match: step one character */
            if (me >= n) break;
            int32_t cp;
            size_t l = (size_t)tk_u8dec((const uint8_t *)s + me, n - me, &cp);
            if (mx_buf_append(out, s + me, l)) return MX_ERR;
            pos = me + l;
        }
        from = pos;
    }
    return mx_buf_append(out, s + pos, n - pos);
}

int tk_push_id(int32_t **ids, int *n, int *cap, int32_t id) {
    if (*n == *cap) {
        if (*cap > (1 << 28)) return mx_set_err("tokenizer: too many tokens");
        int nc = *cap ? *cap * 2 : 64;
        int32_t *p = mx_realloc(*ids, sizeof(int32_t) * (size_t)nc);
        if (!p) return MX_ERR;
        *ids = p;
        *cap = nc;
    }
    (*ids)[(*n)++] = id;
    return MX_OK;
}
