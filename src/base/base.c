#define _GNU_SOURCE
#include "base.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char g_err[1024];

/* Errors are one line: names and texts from untrusted input (a tensor name,
 * the bytes a JSON parser quotes "near" its error) may hold control
 * characters, shown as '?'. */
static void one_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

int mx_set_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    one_line(g_err);
    return MX_ERR;
}

int mx_err_prefix(const char *fmt, ...) {
    char old[sizeof g_err];
    memcpy(old, g_err, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n + 2 < sizeof g_err) {
        size_t room = sizeof g_err - (size_t)n - 2;
        size_t ol = strlen(old);
        if (ol > room - 1) ol = room - 1;
        g_err[n] = ':';
        g_err[n + 1] = ' ';
        memcpy(g_err + n + 2, old, ol);
        g_err[n + 2 + ol] = 0;
    }
    one_line(g_err);
    return MX_ERR;
}

const char *mx_errmsg(void) { return g_err[0] ? g_err : "unknown error"; }

void *mx_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) mx_set_err("out of memory allocating %zu bytes", n);
    return p;
}

void *mx_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) mx_set_err("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *mx_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) mx_set_err("out of memory reallocating %zu bytes", n);
    return q;
}

void *mx_aligned_alloc(size_t n) {
    size_t sz = (n + 63) & ~(size_t)63;
    if (sz < n) { mx_set_err("allocation size overflow"); return NULL; }
    void *p = aligned_alloc(64, sz ? sz : 64);
    if (!p) { mx_set_err("out of memory allocating %zu bytes", n); return NULL; }
    memset(p, 0, sz ? sz : 64);
    return p;
}

void mx_aligned_free(void *p) { free(p); }

char *mx_strdup(const char *s) { return mx_strndup(s, strlen(s)); }

char *mx_strndup(const char *s, size_t n) {
    char *p = mx_malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *mx_asprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int r = vasprintf(&out, fmt, ap);
    va_end(ap);
    if (r < 0) { mx_set_err("out of memory formatting a string"); return NULL; }
    return out;
}

int mx_read_file(const char *path, size_t max, char **data, size_t *len) { return mx_read_file_with(path, max, mx_malloc, data, len); }

int mx_open_regular(const char *path, struct stat *st) {
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return mx_set_err("%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return mx_set_err("%s: not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int mx_read_file_with(const char *path, size_t max, void *(*alloc)(size_t), char **data, size_t *len) {
    *data = NULL;
    if (len) *len = 0;
    struct stat st;
    int fd = mx_open_regular(path, &st);
    if (fd < 0) return MX_ERR;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return mx_set_err("%s: cannot open: %s", path, strerror(errno)); }
    if ((uint64_t)st.st_size > max) {
        fclose(f);
        return mx_set_err("%s: file is %lld bytes, more than the %zu allowed", path, (long long)st.st_size, max);
    }
    size_t n = (size_t)st.st_size;
    char *buf = alloc(n + 1);
    if (!buf) { fclose(f); return MX_ERR; }
    size_t got = n ? fread(buf, 1, n, f) : 0;
    fclose(f);
    if (got != n) { free(buf); return mx_set_err("%s: short read", path); }
    buf[n] = 0;
    *data = buf;
    if (len) *len = n;
    return MX_OK;
}

bool mx_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *mx_path_join(const char *dir, const char *name) {
    size_t dl = strlen(dir);
    return mx_asprintf("%s%s%s", dir, (dl && dir[dl - 1] == '/') ? "" : "/", name);
}

double mx_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int mx_buf_reserve(mx_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return MX_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = mx_realloc(b->data, cap);
    if (!p) return MX_ERR;
    b->data = p;
    b->cap = cap;
    return MX_OK;
}

int mx_buf_append(mx_buf *b, const void *p, size_t n) {
    if (mx_buf_reserve(b, n)) return MX_ERR;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return MX_OK;
}

int mx_buf_puts(mx_buf *b, const char *s) { return mx_buf_append(b, s, strlen(s)); }

int mx_buf_printf(mx_buf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || mx_buf_reserve(b, (size_t)n)) { va_end(ap2); return MX_ERR; }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
    return MX_OK;
}

void mx_buf_free(mx_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int mx_b64_decode(const char *s, size_t n, uint8_t **out, size_t *olen) {
    uint8_t *o = mx_malloc(n / 4 * 3 + 4);
    if (!o) return MX_ERR;
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int v;
        if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
        else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
        else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
        else if (ch == '+' || ch == '-') v = 62;
        else if (ch == '/' || ch == '_') v = 63;
        else if (ch == '=') break;
        else {
            free(o);
            return mx_set_err("invalid base64 character at offset %zu", i);
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (uint8_t)(acc >> bits);
        }
    }
    *out = o;
    *olen = k;
    return MX_OK;
}
