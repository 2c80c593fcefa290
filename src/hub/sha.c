#include "sha.h"
#include "../base/base.h"
#include <openssl/evp.h>

struct mx_sha { EVP_MD_CTX *ctx; };

static mx_sha *sha_new(const EVP_MD *md) {
    mx_sha *s = malloc(sizeof *s);
    if (s && (s->ctx = EVP_MD_CTX_new()) && EVP_DigestInit_ex(s->ctx, md, NULL)) return s;
    if (s) EVP_MD_CTX_free(s->ctx);
    free(s);
    mx_set_err("cannot start a digest (out of memory)");
    return NULL;
}

mx_sha *mx_sha256_new(void) { return sha_new(EVP_sha256()); }
mx_sha *mx_sha1_new(void) { return sha_new(EVP_sha1()); }

void mx_sha_update(mx_sha *s, const void *p, size_t n) { EVP_DigestUpdate(s->ctx, p, n); }

void mx_sha_hex_free(mx_sha *s, char out[65]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!EVP_DigestFinal_ex(s->ctx, d, &n)) n = 0;
    for (unsigned int i = 0; i < n && i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
    out[2 * (n < 32 ? n : 32)] = 0;
    EVP_MD_CTX_free(s->ctx);
    free(s);
}
