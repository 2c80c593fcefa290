/* sha: SHA-256 and SHA-1, streaming (OpenSSL's EVP), to check downloads
 * against the hub's ETags: an LFS file's is the sha256 of its content, a
 * git-stored file's the git blob id, sha1("blob <size>\0" + content). */
#ifndef MX_SHA_H
#define MX_SHA_H
#include <stddef.h>

typedef struct mx_sha mx_sha;

/* NULL (with mx_set_err) when out of memory. */
mx_sha *mx_sha256_new(void);
mx_sha *mx_sha1_new(void);
void mx_sha_update(mx_sha *s, const void *p, size_t n);
/* Lowercase hex digest: 64 (SHA-256) or 40 (SHA-1) characters plus NUL;
 * frees s. */
void mx_sha_hex_free(mx_sha *s, char out[65]);
#endif
