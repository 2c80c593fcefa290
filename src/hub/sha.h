/* sha: SHA-256 and SHA-1 (FIPS 180-4), streaming, to check downloads
 * against the hub's ETags: an LFS file's is the sha256 of its content, a
 * git-stored file's the git blob id, sha1("blob <size>\0" + content). */
#ifndef MX_SHA_H
#define MX_SHA_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
    int sha1; /* 1: SHA-1 (5 words of h), 0: SHA-256 */
} mx_sha;

void mx_sha256_init(mx_sha *s);
void mx_sha1_init(mx_sha *s);
void mx_sha_update(mx_sha *s, const void *p, size_t n);
/* Lowercase hex digest: 64 (SHA-256) or 40 (SHA-1) characters plus NUL. */
void mx_sha_hex(mx_sha *s, char out[65]);
#endif
