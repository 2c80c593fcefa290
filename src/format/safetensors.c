#define _GNU_SOURCE
#include "safetensors.h"
#include "../base/progress.h"
#include "../base/base.h"
#include "../base/half.h"
#include "json.h"
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

int mx_st_parse(const char *path, const uint8_t *buf, size_t len, mx_st_file *out) {
    memset(out, 0, sizeof *out);
    if (len < 8) return mx_set_err("%s: truncated: %zu bytes, too short for a safetensors header", path, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > MAX_HEADER) return mx_set_err("%s: header length %llu is larger than %u bytes", path, (unsigned long long)hlen, MAX_HEADER);
    if (hlen > len - 8) return mx_set_err("%s: truncated: header length %llu runs past the end of the %zu-byte file", path, (unsigned long long)hlen, len);
    json_error_t je;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mx_set_err("%s: header is not valid JSON: %s", path, je.text);
    int rc = MX_ERR;
    span *spans = NULL;
    if (!json_is_object(root)) { mx_set_err("%s: header is not a JSON object", path); goto done; }
    size_t data_len = len - 8 - (size_t)hlen;
    const uint8_t *data = buf + 8 + hlen;
    size_t n = json_object_size(root);
    out->tensors = mx_calloc(n ? n : 1, sizeof(mx_tensor));
    spans = mx_calloc(n ? n : 1, sizeof(span));
    if (!out->tensors || !spans) goto done;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) { mx_set_err("%s: __metadata__ is not an object", path); goto done; }
            json_t *fmt = json_object_get(val, "format");
            if (json_is_string(fmt)) out->metadata_format = mx_strdup(json_string_value(fmt));
            continue;
        }
        if (!json_is_object(val)) { mx_set_err("%s: tensor '%s': entry is not an object", path, key); goto done; }
        mx_tensor *t = &out->tensors[out->n_tensors];
        json_t *dt = json_object_get(val, "dtype"), *sh = json_object_get(val, "shape"),
               *off = json_object_get(val, "data_offsets");
        if (!json_is_string(dt)) { mx_set_err("%s: tensor '%s': missing dtype", path, key); goto done; }
        if (mx_dtype_parse(json_string_value(dt), &t->dtype)) {
            mx_set_err("%s: tensor '%s': unknown dtype '%s'", path, key, json_string_value(dt));
            goto done;
        }
        if (!json_is_array(sh) || json_array_size(sh) > MX_MAX_DIMS) {
            mx_set_err("%s: tensor '%s': shape must be an array of at most %d integers", path, key, MX_MAX_DIMS);
            goto done;
        }
        t->ndim = (int)json_array_size(sh);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            json_t *x = json_array_get(sh, (size_t)d);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > ((int64_t)1 << 40)) {
                mx_set_err("%s: tensor '%s': shape[%d] is not a valid dimension", path, key, d);
                goto done;
            }
            t->shape[d] = json_integer_value(x);
            if (__builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel) || numel > ((uint64_t)1 << 40)) {
                mx_set_err("%s: tensor '%s': element count overflows", path, key);
                goto done;
            }
        }
        t->numel = (int64_t)numel;
        if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
            !json_is_integer(json_array_get(off, 1))) {
            mx_set_err("%s: tensor '%s': data_offsets must be two integers", path, key);
            goto done;
        }
        int64_t a = json_integer_value(json_array_get(off, 0)), b = json_integer_value(json_array_get(off, 1));
        if (a < 0 || b < a) { mx_set_err("%s: tensor '%s': data_offsets [%lld, %lld] are invalid", path, key, (long long)a, (long long)b); goto done; }
        if ((uint64_t)b > data_len) {
            mx_set_err("%s: truncated: tensor '%s' ends at byte %lld of the data section, which has %zu bytes", path, key, (long long)b, data_len);
            goto done;
        }
        uint64_t nbytes = numel * mx_dtype_size(t->dtype);
        if ((uint64_t)(b - a) != nbytes) {
            mx_set_err("%s: tensor '%s': data_offsets span %lld bytes but shape and dtype need %llu", path, key, (long long)(b - a), (unsigned long long)nbytes);
            goto done;
        }
        t->name = mx_strdup(key);
        if (!t->name) goto done;
        t->data = data + a;
        t->nbytes = (size_t)nbytes;
        spans[out->n_tensors] = (span){(uint64_t)a, (uint64_t)b, out->n_tensors};
        out->n_tensors++;
    }
    qsort(spans, (size_t)out->n_tensors, sizeof(span), span_cmp);
    for (int i = 1; i < out->n_tensors; i++) {
        if (spans[i].a < spans[i - 1].b) {
            mx_set_err("%s: tensors '%s' and '%s' have overlapping data", path, out->tensors[spans[i - 1].idx].name, out->tensors[spans[i].idx].name);
            goto done;
        }
    }
    rc = MX_OK;
done:
    free(spans);
    json_decref(root);
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
    int fd = open(path, O_RDONLY);
    if (fd < 0) return mx_set_err("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); return mx_set_err("%s: not a regular file", path); }
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
