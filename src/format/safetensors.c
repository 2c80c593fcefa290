#define _GNU_SOURCE
#include "safetensors.h"
#include "../base/progress.h"
#include "../base/base.h"
#include "../base/half.h"
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; size_t size; } g_dt[MX_DT_COUNT] = {
    [MX_DT_F32] = {"F32", 4},   [MX_DT_F16] = {"F16", 2},    [MX_DT_BF16] = {"BF16", 2},
    [MX_DT_F64] = {"F64", 8},   [MX_DT_I64] = {"I64", 8},    [MX_DT_I32] = {"I32", 4},
    [MX_DT_I16] = {"I16", 2},   [MX_DT_I8] = {"I8", 1},      [MX_DT_U64] = {"U64", 8},
    [MX_DT_U32] = {"U32", 4},   [MX_DT_U16] = {"U16", 2},    [MX_DT_U8] = {"U8", 1},
    [MX_DT_BOOL] = {"BOOL", 1}, [MX_DT_F8_E4M3] = {"F8_E4M3", 1}, [MX_DT_F8_E5M2] = {"F8_E5M2", 1},
};

size_t mx_dtype_size(mx_dtype t) { return t < MX_DT_COUNT ? g_dt[t].size : 0; }
const char *mx_dtype_name(mx_dtype t) { return t < MX_DT_COUNT ? g_dt[t].name : "?"; }

int mx_dtype_parse(const char *s, mx_dtype *out) {
    for (int i = 0; i < MX_DT_COUNT; i++)
        if (!strcmp(s, g_dt[i].name)) { *out = (mx_dtype)i; return MX_OK; }
    return MX_ERR;
}

#define MAX_HEADER (100u << 20)

typedef struct { uint64_t a, b; int idx; } span;
static int span_cmp(const void *x, const void *y) {
    const span *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a ? 1 : (p->b < q->b ? -1 : p->b > q->b);
}

/* Open files' memory (mapped or copied), so a caller that keeps its own
 * copy of some tensors can give their pages back (mx_st_release). A copied
 * file keeps its descriptor (fd >= 0) to map those pages from. */
typedef struct { const uint8_t *a; size_t n; int fd; } span_t;
static span_t *g_maps;
static int g_nmaps, g_capmaps;
static pthread_mutex_t g_maps_mu = PTHREAD_MUTEX_INITIALIZER;

static void maps_add(const void *a, size_t n, int fd) {
    pthread_mutex_lock(&g_maps_mu);
    if (g_nmaps == g_capmaps) {
        int cap = g_capmaps ? 2 * g_capmaps : 16;
        span_t *m = realloc(g_maps, (size_t)cap * sizeof *m);
        if (m) { g_maps = m; g_capmaps = cap; }
    }
    if (g_nmaps < g_capmaps) g_maps[g_nmaps++] = (span_t){a, n, fd};
    else if (fd >= 0) close(fd); /* not releasable then, still correct */
    pthread_mutex_unlock(&g_maps_mu);
}

static void maps_del(const void *a) {
    pthread_mutex_lock(&g_maps_mu);
    for (int i = 0; i < g_nmaps; i++)
        if (g_maps[i].a == a) {
            if (g_maps[i].fd >= 0) close(g_maps[i].fd);
            g_maps[i] = g_maps[--g_nmaps];
            break;
        }
    if (!g_nmaps) { free(g_maps); g_maps = NULL; g_capmaps = 0; }
    pthread_mutex_unlock(&g_maps_mu);
}

bool mx_st_release(const void *p, size_t n) {
    const uint8_t *q = p;
    bool ok = false;
    pthread_mutex_lock(&g_maps_mu);
    for (int i = 0; i < g_nmaps; i++) {
        span_t *m = &g_maps[i];
        if (!(q >= m->a && n <= m->n && (size_t)(q - m->a) <= m->n - n)) continue;
        uintptr_t s = ((uintptr_t)q + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)q + n) & ~(uintptr_t)4095;
        ok = true;
        if (e <= s) break;
        if (m->fd < 0) { madvise((void *)s, e - s, MADV_DONTNEED); break; }
        /* a copy starts at file offset 0: map the file's pages over it (same
         * bytes, page cache instead of anonymous memory), unless the file
         * changed size since (it could fault past its end) */
        struct stat st;
        if (fstat(m->fd, &st) || (size_t)st.st_size != m->n) { ok = false; break; }
        if (mmap((void *)s, e - s, PROT_READ, MAP_PRIVATE | MAP_FIXED, m->fd, (off_t)(s - (uintptr_t)m->a)) == MAP_FAILED) ok = false;
        break;
    }
    pthread_mutex_unlock(&g_maps_mu);
    return ok;
}

void mx_st_close(mx_st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->metadata_format);
    if (f->map && f->alloc_len) {
        maps_del(f->map);
        munmap(f->map, f->alloc_len);
    }
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* ---- header parser ----
 * A streaming reader of exactly the safetensors header shape (an object of
 * tensor entries and __metadata__), not a general JSON tree: one pass over
 * the bytes, memory for the tensors it keeps and nothing per byte of
 * header, so a 100 MB header of empty entries costs a pass, not a tree. */
typedef struct {
    const char *start, *p, *end;
    const char *path;
    mx_buf s; /* the last string read */
} hp;

#define MAX_TENSORS (1 << 20)   /* in one file; the largest MoE shards hold thousands */
#define MAX_EMPTY_TENSORS 4096  /* zero-byte tensors in one file; real checkpoints have a handful */
#define MAX_SKIP_DEPTH 64

static int hp_bad(hp *h, const char *what) {
    return mx_set_err("%s: header is not valid JSON: %s at byte %zu", h->path, what, (size_t)(h->p - h->start) + 8);
}

static void hp_ws(hp *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static bool hp_eat(hp *h, char c) {
    hp_ws(h);
    if (h->p < h->end && *h->p == c) { h->p++; return true; }
    return false;
}

static int hex4(const char *p, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return MX_ERR;
        *v = *v << 4 | (uint32_t)d;
    }
    return MX_OK;
}

static void put_utf8(mx_buf *b, uint32_t cp) {
    char u[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (n == 1) u[0] = (char)cp;
    else if (n == 2) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 63)); }
    else if (n == 3) { u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | (cp >> 6 & 63)); u[2] = (char)(0x80 | (cp & 63)); }
    else { u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | (cp >> 12 & 63)); u[2] = (char)(0x80 | (cp >> 6 & 63)); u[3] = (char)(0x80 | (cp & 63)); }
    mx_buf_append(b, u, n);
}

/* Length of the valid UTF-8 sequence at p (RFC 3629), 0 when invalid. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (k == 3 && ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F))) return 0; /* overlong, surrogate */
    if (k == 4 && ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))) return 0;
    return k;
}

/* A string into h->s (NUL-terminated); a NUL inside is refused. */
static int hp_string(hp *h) {
    h->s.len = 0;
    if (!hp_eat(h, '"')) return hp_bad(h, "expected a string");
    while (h->p < h->end && *h->p != '"') {
        const char *run = h->p; /* plain ASCII in one append */
        while (h->p < h->end && (unsigned char)*h->p >= 0x20 && (unsigned char)*h->p < 0x80 && *h->p != '"' && *h->p != '\\') h->p++;
        if (h->p > run && mx_buf_append(&h->s, run, (size_t)(h->p - run))) return MX_ERR;
        if (h->p >= h->end || *h->p == '"') break;
        unsigned char c = (unsigned char)*h->p;
        if (c < 0x20) return hp_bad(h, "control character in a string");
        if (c == '\\') {
            if (h->end - h->p < 2) break;
            char e = h->p[1];
            h->p += 2;
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char out[] = "\"\\/\b\f\n\r\t";
                mx_buf_append(&h->s, &out[simple - "\"\\/bfnrt"], 1);
                continue;
            }
            uint32_t cp, lo;
            if (e != 'u' || h->end - h->p < 4 || hex4(h->p, &cp)) return hp_bad(h, "bad escape");
            h->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (h->end - h->p < 6 || h->p[0] != '\\' || h->p[1] != 'u' || hex4(h->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return hp_bad(h, "lone surrogate");
                h->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) return hp_bad(h, "lone surrogate");
            if (!cp) return hp_bad(h, "NUL in a string");
            put_utf8(&h->s, cp);
            continue;
        }
        size_t k = utf8_len((const unsigned char *)h->p, (size_t)(h->end - h->p));
        if (!k) return hp_bad(h, "invalid UTF-8");
        mx_buf_append(&h->s, h->p, k);
        h->p += k;
    }
    if (h->p >= h->end) return hp_bad(h, "unterminated string");
    h->p++;
    if (mx_buf_append(&h->s, "", 1)) return MX_ERR;
    h->s.len--;
    return MX_OK;
}

/* A JSON number; *is_int when it is an integer that fits in int64. */
static int hp_number(hp *h, bool *is_int, int64_t *v) {
    hp_ws(h);
    const char *q = h->p;
    bool neg = q < h->end && *q == '-';
    if (neg) q++;
    if (q >= h->end || *q < '0' || *q > '9') return hp_bad(h, "expected a value");
    *is_int = true;
    uint64_t acc = 0;
    if (*q == '0') q++;
    else
        for (; q < h->end && *q >= '0' && *q <= '9'; q++) {
            if (acc > (UINT64_C(1) << 62)) *is_int = false;
            acc = acc * 10 + (uint64_t)(*q - '0');
        }
    if (q < h->end && *q == '.') {
        *is_int = false;
        if (++q >= h->end || *q < '0' || *q > '9') return hp_bad(h, "bad number");
        while (q < h->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < h->end && (*q == 'e' || *q == 'E')) {
        *is_int = false;
        q++;
        if (q < h->end && (*q == '+' || *q == '-')) q++;
        if (q >= h->end || *q < '0' || *q > '9') return hp_bad(h, "bad number");
        while (q < h->end && *q >= '0' && *q <= '9') q++;
    }
    if (acc > (uint64_t)INT64_MAX) *is_int = false;
    *v = neg ? -(int64_t)acc : (int64_t)acc;
    h->p = q;
    return MX_OK;
}

static int hp_skip(hp *h, int depth) {
    hp_ws(h);
    if (h->p >= h->end) return hp_bad(h, "unexpected end");
    if (depth > MAX_SKIP_DEPTH) return hp_bad(h, "nesting too deep");
    char c = *h->p;
    if (c == '"') return hp_string(h);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        h->p++;
        if (hp_eat(h, close)) return MX_OK;
        do {
            if (c == '{' && (hp_string(h) || !hp_eat(h, ':'))) return hp_bad(h, "bad object member");
            if (hp_skip(h, depth + 1)) return MX_ERR;
        } while (hp_eat(h, ','));
        return hp_eat(h, close) ? MX_OK : hp_bad(h, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(h->end - h->p) >= n && !memcmp(h->p, words[i], n)) { h->p += n; return MX_OK; }
    }
    bool is_int;
    int64_t v;
    return hp_number(h, &is_int, &v);
}

/* An array of integers into out[0..max): *n gets the element count (-1:
 * not an array), *bad the index of the first element that is not an
 * integer (-1: none); elements past max are counted, not stored. */
static int hp_int_array(hp *h, int64_t *out, int max, int *n, int *bad) {
    *n = 0;
    *bad = -1;
    if (!hp_eat(h, '[')) { *n = -1; return hp_skip(h, 1); }
    if (hp_eat(h, ']')) return MX_OK;
    do {
        hp_ws(h);
        bool is_int = false;
        int64_t v = 0;
        if (h->p < h->end && (*h->p == '-' || (*h->p >= '0' && *h->p <= '9'))) {
            if (hp_number(h, &is_int, &v)) return MX_ERR;
        } else if (hp_skip(h, 1)) return MX_ERR;
        if (!is_int && *bad < 0) *bad = *n;
        if (*n < max) out[*n] = v;
        if (*n < INT32_MAX) (*n)++;
    } while (hp_eat(h, ','));
    return hp_eat(h, ']') ? MX_OK : hp_bad(h, "expected ',' or ']'");
}

typedef struct { const char *name; int idx; } named;
static int name_cmp(const void *x, const void *y) { return strcmp(((const named *)x)->name, ((const named *)y)->name); }

/* One tensor entry (the name is in h->s). */
static int hp_tensor(hp *h, mx_tensor *t, const char *key, size_t data_len, int64_t off[2]) {
    hp_ws(h);
    if (h->p >= h->end || *h->p != '{') return mx_set_err("%s: tensor '%s': entry is not an object", h->path, key);
    h->p++;
    bool have_dt = false, have_sh = false, have_off = false;
    int nsh = -1, noff = -1, bad_sh = -1, bad_off = -1;
    int64_t shape[MX_MAX_DIMS];
    t->dtype = MX_DT_COUNT;
    if (!hp_eat(h, '}')) {
    do {
        if (hp_string(h) || !hp_eat(h, ':')) return hp_bad(h, "bad object member");
        bool *seen = !strcmp(h->s.data, "dtype") ? &have_dt : !strcmp(h->s.data, "shape") ? &have_sh : !strcmp(h->s.data, "data_offsets") ? &have_off : NULL;
        if (seen && *seen) return mx_set_err("%s: tensor '%s': '%s' appears twice", h->path, key, h->s.data);
        if (seen == &have_dt) {
            hp_ws(h);
            if (h->p < h->end && *h->p == '"') {
                if (hp_string(h)) return MX_ERR;
                if (mx_dtype_parse(h->s.data, &t->dtype)) return mx_set_err("%s: tensor '%s': unknown dtype '%s'", h->path, key, h->s.data);
            } else if (hp_skip(h, 1)) return MX_ERR;
        } else if (seen == &have_sh) {
            if (hp_int_array(h, shape, MX_MAX_DIMS, &nsh, &bad_sh)) return MX_ERR;
        } else if (seen == &have_off) {
            if (hp_int_array(h, off, 2, &noff, &bad_off)) return MX_ERR;
        } else if (hp_skip(h, 1)) return MX_ERR;
        if (seen) *seen = true;
    } while (hp_eat(h, ','));
    if (!hp_eat(h, '}')) return hp_bad(h, "expected ',' or '}'");
    }
    if (t->dtype == MX_DT_COUNT) return mx_set_err("%s: tensor '%s': missing dtype", h->path, key);
    if (nsh < 0 || nsh > MX_MAX_DIMS) return mx_set_err("%s: tensor '%s': shape must be an array of at most %d integers", h->path, key, MX_MAX_DIMS);
    if (bad_sh >= 0) return mx_set_err("%s: tensor '%s': shape[%d] is not a valid dimension", h->path, key, bad_sh);
    t->ndim = nsh;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)nsh);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || t->shape[d] > ((int64_t)1 << 40)) return mx_set_err("%s: tensor '%s': shape[%d] is not a valid dimension", h->path, key, d);
        if (__builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel) || numel > ((uint64_t)1 << 40))
            return mx_set_err("%s: tensor '%s': element count overflows", h->path, key);
    }
    t->numel = (int64_t)numel;
    if (noff != 2 || bad_off >= 0) return mx_set_err("%s: tensor '%s': data_offsets must be two integers", h->path, key);
    if (off[0] < 0 || off[1] < off[0])
        return mx_set_err("%s: tensor '%s': data_offsets [%lld, %lld] are invalid", h->path, key, (long long)off[0], (long long)off[1]);
    if ((uint64_t)off[1] > data_len)
        return mx_set_err("%s: truncated: tensor '%s' ends at byte %lld of the data section, which has %zu bytes", h->path, key, (long long)off[1], data_len);
    uint64_t nbytes = numel * mx_dtype_size(t->dtype);
    if ((uint64_t)(off[1] - off[0]) != nbytes)
        return mx_set_err("%s: tensor '%s': data_offsets span %lld bytes but shape and dtype need %llu", h->path, key,
                          (long long)(off[1] - off[0]), (unsigned long long)nbytes);
    t->nbytes = (size_t)nbytes;
    return MX_OK;
}

static int hp_metadata(hp *h, mx_st_file *out) {
    hp_ws(h);
    if (h->p >= h->end || *h->p != '{') return mx_set_err("%s: __metadata__ is not an object", h->path);
    h->p++;
    if (hp_eat(h, '}')) return MX_OK; /* {} */
    do {
        if (hp_string(h) || !hp_eat(h, ':')) return hp_bad(h, "bad object member");
        hp_ws(h);
        if (!strcmp(h->s.data, "format") && h->p < h->end && *h->p == '"') {
            if (hp_string(h)) return MX_ERR;
            free(out->metadata_format);
            if (!(out->metadata_format = mx_strdup(h->s.data))) return MX_ERR;
        } else if (hp_skip(h, 1)) return MX_ERR;
    } while (hp_eat(h, ','));
    return hp_eat(h, '}') ? MX_OK : hp_bad(h, "expected ',' or '}'");
}

int mx_st_parse(const char *path, const uint8_t *buf, size_t len, mx_st_file *out) {
    memset(out, 0, sizeof *out);
    if (len < 8) return mx_set_err("%s: truncated: %zu bytes, too short for a safetensors header", path, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > MAX_HEADER) return mx_set_err("%s: header length %llu is larger than %u bytes", path, (unsigned long long)hlen, MAX_HEADER);
    if (hlen > len - 8) return mx_set_err("%s: truncated: header length %llu runs past the end of the %zu-byte file", path, (unsigned long long)hlen, len);
    hp h = {(const char *)buf + 8, (const char *)buf + 8, (const char *)buf + 8 + hlen, path, {0}};
    size_t data_len = len - 8 - (size_t)hlen;
    const uint8_t *data = buf + 8 + hlen;
    int rc = MX_ERR, cap = 0, n_empty = 0;
    span *spans = NULL;
    named *names = NULL;
    bool have_meta = false;
    hp_ws(&h);
    if (h.p >= h.end || *h.p != '{') {
        if (h.p < h.end && (*h.p == '[' || *h.p == '"' || *h.p == '-' || (*h.p >= '0' && *h.p <= '9') || *h.p == 't' || *h.p == 'f' || *h.p == 'n'))
            mx_set_err("%s: header is not a JSON object", path);
        else hp_bad(&h, "expected '{'");
        goto done;
    }
    h.p++;
    if (!hp_eat(&h, '}')) {
    do {
        if (hp_string(&h)) goto done;
        if (!hp_eat(&h, ':')) { hp_bad(&h, "expected ':'"); goto done; }
        if (!strcmp(h.s.data, "__metadata__")) {
            if (have_meta) { mx_set_err("%s: '__metadata__' appears twice", path); goto done; }
            have_meta = true;
            if (hp_metadata(&h, out)) goto done;
            continue;
        }
        if (out->n_tensors == MAX_TENSORS) { mx_set_err("%s: more than %d tensors in one file", path, MAX_TENSORS); goto done; }
        if (out->n_tensors == cap) {
            cap = cap ? 2 * cap : 64;
            mx_tensor *t = mx_realloc(out->tensors, sizeof(mx_tensor) * (size_t)cap);
            span *sp = mx_realloc(spans, sizeof(span) * (size_t)cap);
            if (t) out->tensors = t;
            if (sp) spans = sp;
            if (!t || !sp) goto done;
        }
        mx_tensor *t = &out->tensors[out->n_tensors];
        memset(t, 0, sizeof *t);
        char *key = mx_strndup(h.s.data, h.s.len);
        if (!key) goto done;
        int64_t off[2] = {0, 0};
        if (hp_tensor(&h, t, key, data_len, off)) { free(key); goto done; }
        if (!t->nbytes && ++n_empty > MAX_EMPTY_TENSORS) {
            mx_set_err("%s: more than %d tensors hold no data; this is not a checkpoint", path, MAX_EMPTY_TENSORS);
            free(key);
            goto done;
        }
        t->name = key;
        t->data = data + off[0];
        spans[out->n_tensors] = (span){(uint64_t)off[0], (uint64_t)off[1], out->n_tensors};
        out->n_tensors++;
    } while (hp_eat(&h, ','));
    if (!hp_eat(&h, '}')) { hp_bad(&h, "expected ',' or '}'"); goto done; }
    }
    hp_ws(&h);
    if (h.p != h.end) { hp_bad(&h, "text after the header object"); goto done; }
    if (out->n_tensors > 1) qsort(spans, (size_t)out->n_tensors, sizeof(span), span_cmp); /* no tensors: spans may be NULL */
    for (int i = 1; i < out->n_tensors; i++) {
        if (spans[i].a < spans[i - 1].b) {
            mx_set_err("%s: tensors '%s' and '%s' have overlapping data", path, out->tensors[spans[i - 1].idx].name, out->tensors[spans[i].idx].name);
            goto done;
        }
    }
    names = mx_calloc((size_t)out->n_tensors + 1, sizeof *names);
    if (!names) goto done;
    for (int i = 0; i < out->n_tensors; i++) names[i] = (named){out->tensors[i].name, i};
    qsort(names, (size_t)out->n_tensors, sizeof *names, name_cmp);
    for (int i = 1; i < out->n_tensors; i++)
        if (!strcmp(names[i].name, names[i - 1].name)) { mx_set_err("%s: tensor '%s' appears twice", path, names[i].name); goto done; }
    if (!out->tensors && !(out->tensors = mx_calloc(1, sizeof(mx_tensor)))) goto done;
    rc = MX_OK;
done:
    free(spans);
    free(names);
    mx_buf_free(&h.s);
    if (rc) {
        for (int i = 0; i < out->n_tensors; i++) free(out->tensors[i].name);
        free(out->tensors);
        free(out->metadata_format);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

static _Atomic int g_load_mode = MX_LOAD_MMAP;
void mx_st_set_load_mode(mx_load_mode m) { g_load_mode = (int)m; }
mx_load_mode mx_st_load_mode(void) { return (mx_load_mode)g_load_mode; }

#define HUGE_SZ ((size_t)2 << 20)

/* Anonymous copy of the file on 2 MiB-aligned huge pages, read-only after. */
static void *copy_file(const char *path, int fd, size_t len, size_t *alloc_len) {
    size_t need = (len + HUGE_SZ - 1) & ~(HUGE_SZ - 1);
    uint8_t *raw = mmap(NULL, need + HUGE_SZ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { mx_set_err("%s: cannot allocate %zu bytes to load the file: %s", path, len, strerror(errno)); return NULL; }
    uint8_t *base = (uint8_t *)(((uintptr_t)raw + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
    if (base > raw) munmap(raw, (size_t)(base - raw));
    size_t tail = (size_t)(raw + need + HUGE_SZ - (base + need));
    if (tail) munmap(base + need, tail);
#ifdef MADV_HUGEPAGE
    madvise(base, need, MADV_HUGEPAGE);
#endif
    const char *slash = strrchr(path, '/');
    char label[160];
    snprintf(label, sizeof label, "reading %s", slash ? slash + 1 : path);
    void *task = mx_progress_begin(label, len, true);
    size_t got = 0;
    while (got < len) {
        size_t want = MX_MIN(len - got, (size_t)64 << 20);
        ssize_t r = pread(fd, base + got, want, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            mx_set_err("%s: read failed at byte %zu: %s", path, got, r < 0 ? strerror(errno) : "unexpected end of file");
            munmap(base, need);
            mx_progress_end(task, false);
            return NULL;
        }
        got += (size_t)r;
        mx_progress_update(task, got);
    }
    mx_progress_end(task, true);
    mprotect(base, need, PROT_READ);
    *alloc_len = need;
    return base;
}

int mx_st_open(const char *path, mx_st_file *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    int fd = mx_open_regular(path, &st);
    if (fd < 0) return MX_ERR;
    size_t len = (size_t)st.st_size, map_len = len;
    if (len < 8) { close(fd); return mx_set_err("%s: truncated: %zu bytes, too short for a safetensors header", path, len); }
    void *map;
    if (g_load_mode == MX_LOAD_COPY) {
        map = copy_file(path, fd, len, &map_len);
        if (!map) { close(fd); return MX_ERR; }
    } else {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        fd = -1;
        if (map == MAP_FAILED) return mx_set_err("%s: mmap failed: %s", path, strerror(errno));
        madvise(map, len, MADV_WILLNEED);
#ifdef MADV_HUGEPAGE
        madvise(map, len, MADV_HUGEPAGE);
#endif
    }
    if (mx_st_parse(path, map, len, out)) {
        munmap(map, map_len);
        if (fd >= 0) close(fd);
        return MX_ERR;
    }
    maps_add(map, len, fd);
    out->map = map;
    out->map_len = len;
    out->alloc_len = map_len;
    out->path = mx_strdup(path);
    return out->path ? MX_OK : MX_ERR;
}

const mx_tensor *mx_st_find(const mx_st_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

int mx_tensor_to_f32(const mx_tensor *t, float *dst) {
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case MX_DT_F32: memcpy(&dst[i], p + 4 * i, 4); break;
        case MX_DT_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = mx_f16_to_f32(h); break; }
        case MX_DT_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = mx_bf16_to_f32(h); break; }
        case MX_DT_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); dst[i] = (float)v; break; }
        default: return mx_set_err("tensor '%s': dtype %s cannot be read as float", t->name, mx_dtype_name(t->dtype));
        }
    }
    return MX_OK;
}

FILE *mx_st_create(const char *path, const mx_st_out *ts, int n, const char *metadata_json) {
    mx_buf h = {0};
    mx_buf_puts(&h, "{");
    if (metadata_json) mx_buf_printf(&h, "\"__metadata__\":%s", metadata_json);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (h.len > 1) mx_buf_puts(&h, ",");
        json_t *nm = json_string(ts[i].name);
        char *enc = json_dumps(nm, JSON_ENCODE_ANY);
        json_decref(nm);
        if (!enc) { mx_buf_free(&h); mx_set_err("%s: cannot encode tensor name", path); return NULL; }
        mx_buf_printf(&h, "%s:{\"dtype\":\"%s\",\"shape\":[", enc, mx_dtype_name(ts[i].dtype));
        free(enc);
        for (int d = 0; d < ts[i].ndim; d++) mx_buf_printf(&h, "%s%lld", d ? "," : "", (long long)ts[i].shape[d]);
        mx_buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + ts[i].nbytes));
        off += ts[i].nbytes;
    }
    mx_buf_puts(&h, "}");
    while (h.len % 8) mx_buf_puts(&h, " ");
    if (!h.data) return NULL;
    FILE *f = fopen(path, "wb");
    if (!f) { mx_buf_free(&h); mx_set_err("%s: cannot create: %s", path, strerror(errno)); return NULL; }
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    int ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(h.data, 1, h.len, f) == h.len;
    mx_buf_free(&h);
    if (!ok) { fclose(f); mx_set_err("%s: write failed", path); return NULL; }
    return f;
}

int mx_st_write(const char *path, const mx_st_out *ts, int n, const char *metadata_json) {
    FILE *f = mx_st_create(path, ts, n, metadata_json);
    if (!f) return MX_ERR;
    int ok = 1;
    for (int i = 0; ok && i < n; i++)
        if (ts[i].nbytes && fwrite(ts[i].data, 1, ts[i].nbytes, f) != ts[i].nbytes) ok = 0;
    ok = (fclose(f) == 0) && ok;
    return ok ? MX_OK : mx_set_err("%s: write failed", path);
}
