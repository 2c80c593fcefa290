/* base: errors, checked allocation, small file and string helpers.
 * Library code never exits: it returns MX_ERR after mx_set_err(), and the
 * caller prints mx_errmsg(). The message is per thread. */
#ifndef MX_BASE_H
#define MX_BASE_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#define MX_OK 0
#define MX_ERR (-1)

#if defined(__GNUC__)
#define MX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MX_PRINTF(a, b)
#endif

/* Sets the thread's error message; always returns MX_ERR so callers can
 * `return mx_set_err(...)`. */
int mx_set_err(const char *fmt, ...) MX_PRINTF(1, 2);
/* Prefixes the current message with "prefix: " (context while unwinding). */
int mx_err_prefix(const char *fmt, ...) MX_PRINTF(1, 2);
const char *mx_errmsg(void);

/* Allocation that reports failure through mx_set_err (never aborts). */
void *mx_malloc(size_t n);
void *mx_calloc(size_t count, size_t size);
void *mx_realloc(void *p, size_t n);
void *mx_aligned_alloc(size_t n); /* 64-byte aligned, zeroed; free with mx_aligned_free */
void mx_aligned_free(void *p);
char *mx_strdup(const char *s);
char *mx_strndup(const char *s, size_t n);
char *mx_asprintf(const char *fmt, ...) MX_PRINTF(1, 2);

/* n*m with overflow check: false when it overflows. */
static inline bool mx_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* Reads a whole file (NUL-terminated copy; *len excludes the NUL). max caps the size. */
int mx_read_file(const char *path, size_t max, char **data, size_t *len);
/* The same into memory from alloc (which sets the error when it fails), freed with free(). */
int mx_read_file_with(const char *path, size_t max, void *(*alloc)(size_t), char **data, size_t *len);
bool mx_file_exists(const char *path);
/* Opens a regular file for reading, checked before anything can block (a
 * FIFO or device is refused, not waited on). Returns the descriptor (st
 * gets its fstat), or MX_ERR (-1) with the error set. */
struct stat;
int mx_open_regular(const char *path, struct stat *st);
char *mx_path_join(const char *dir, const char *name);

double mx_now(void); /* monotonic seconds */

/* Base64, standard or URL-safe alphabet, padding optional (decoding stops at
 * the first '='); MX_ERR with the error set on any other character. *out is
 * freed with free(). */
int mx_b64_decode(const char *s, size_t n, uint8_t **out, size_t *olen);

/* Growable byte buffer used for building strings and JSON output. */
typedef struct {
    char *data;
    size_t len, cap;
} mx_buf;
int mx_buf_reserve(mx_buf *b, size_t extra);
int mx_buf_append(mx_buf *b, const void *p, size_t n);
int mx_buf_puts(mx_buf *b, const char *s);
int mx_buf_printf(mx_buf *b, const char *fmt, ...) MX_PRINTF(2, 3);
void mx_buf_free(mx_buf *b);

#define MX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MX_MAX(a, b) ((a) > (b) ? (a) : (b))
#define MX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#endif
