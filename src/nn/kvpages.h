/* Caches whose pages more than one cache can map (docs/kv-cache.md, "Shared
 * prefix pages"): every cache of a pool lies in one memory file, chunk by
 * chunk; a cache taking another's prompt prefix maps the chunks that lie
 * wholly inside the prefix's rows instead of copying them, and a chunk mapped
 * by several caches is copied back into a chunk of the cache's own (copy on
 * write, by the cache that is about to write it) before any of them writes
 * it again. The caches' own layout is unchanged: the attention kernels read
 * through the mapping as before. Used by nn/decoder.c (mx_kv_new_in,
 * mx_kv_share_prefix). */
#ifndef MX_KVPAGES_H
#define MX_KVPAGES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mx_kv_pool mx_kv_pool;

/* A cache's mapping: its chunks' ids in the pool's file */
typedef struct {
    uint8_t *base;
    uint64_t *id;
    size_t n; /* chunks */
} mx_kvmap;

size_t mx_kvp_chunk(const mx_kv_pool *p);
/* Maps `bytes` of fresh (zero) chunks at m->base. */
int mx_kvp_map_new(mx_kv_pool *p, mx_kvmap *m, size_t bytes);
/* dst maps src's chunks for the bytes [a, b) of both (whole chunks only;
 * the caller copies the rest). Returns the bytes now shared. */
size_t mx_kvp_share(mx_kv_pool *p, mx_kvmap *dst, const mx_kvmap *src, size_t a, size_t b);
/* Every chunk m maps that another cache maps too is replaced by a copy of its
 * own (false: no memory for it; m is unchanged). With live byte ranges
 * (sorted, disjoint; n_live 0: all of m is live) a shared chunk wholly inside
 * one of them stays shared and one meeting none is replaced by a fresh chunk,
 * not a copy (its bytes are dead). *kept (NULL: not asked) gets the bytes of
 * the chunks left shared. */
bool mx_kvp_unshare(mx_kv_pool *p, mx_kvmap *m, const size_t (*live)[2], size_t n_live, size_t *kept);
/* Bytes of m's chunks that another cache maps too. */
size_t mx_kvp_shared(mx_kv_pool *p, const mx_kvmap *m);
/* Gives m's chunks back (shared ones to the others) and, with remap, maps
 * fresh zero ones in their place; without, unmaps. */
void mx_kvp_release(mx_kv_pool *p, mx_kvmap *m, bool remap);
#endif
