#define _GNU_SOURCE
/* The shared-page pool of caches (kvpages.h). One memory file (memfd): a
 * chunk id is an offset in it, handed out once (ids only grow; a chunk no
 * cache maps any more has its pages punched out of the file, which gives the
 * memory back, so the file is sparse and its size means nothing). A table
 * counts the maps of each chunk that more than one cache maps; every other
 * chunk is mapped once. Chunk id 0 is never in the file: a cache's chunk
 * there is private anonymous memory (what a cache falls back to when the
 * file cannot grow), never shared. */
#include "kvpages.h"
#include "model.h"
#include "../base/base.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct mx_kv_pool {
    int fd;
    size_t chunk;
    uint64_t next, file; /* the next id handed out; the file's length in chunks */
    size_t shared;       /* maps beyond the first, over all chunks */
    uint64_t *key;       /* open addressing, linear probing: chunk id (0: empty) -> its maps (>= 2) */
    uint32_t *cnt;
    size_t cap, used;
    pthread_mutex_t mu;
};

mx_kv_pool *mx_kv_pool_new(size_t chunk) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    if (!chunk) chunk = 64 * 1024;
    if (chunk % pg) { mx_set_err("cache chunk of %zu bytes is not a multiple of the page size %zu", chunk, pg); return NULL; }
    mx_kv_pool *p = mx_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->fd = memfd_create("mlxcel-kv", MFD_CLOEXEC);
    if (p->fd < 0) { mx_set_err("cannot create the cache's memory file: %s", strerror(errno)); free(p); return NULL; }
    p->chunk = chunk;
    p->next = 1;
    p->cap = 1024;
    p->key = mx_calloc(p->cap, sizeof *p->key);
    p->cnt = mx_calloc(p->cap, sizeof *p->cnt);
    if (!p->key || !p->cnt) { mx_kv_pool_free(p); return NULL; }
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void mx_kv_pool_free(mx_kv_pool *p) {
    if (!p) return;
    if (p->fd >= 0) close(p->fd);
    free(p->key);
    free(p->cnt);
    if (p->cap) pthread_mutex_destroy(&p->mu);
    free(p);
}

size_t mx_kvp_chunk(const mx_kv_pool *p) { return p->chunk; }

size_t mx_kv_pool_shared_bytes(mx_kv_pool *p) {
    pthread_mutex_lock(&p->mu);
    size_t b = p->shared * p->chunk;
    pthread_mutex_unlock(&p->mu);
    return b;
}

size_t mx_kv_pool_resident(mx_kv_pool *p) {
    struct stat st;
    return fstat(p->fd, &st) ? 0 : (size_t)st.st_blocks * 512;
}

/* ---- the table of shared chunks (under mu) */
static size_t home(const mx_kv_pool *p, uint64_t id) { return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (p->cap - 1); }
static size_t slot_of(const mx_kv_pool *p, uint64_t id) {
    size_t i = home(p, id);
    while (p->key[i] && p->key[i] != id) i = (i + 1) & (p->cap - 1);
    return i;
}
static uint32_t maps(const mx_kv_pool *p, uint64_t id) {
    if (!id) return 1;
    size_t i = slot_of(p, id);
    return p->key[i] ? p->cnt[i] : 1;
}
static bool grow(mx_kv_pool *p) {
    size_t oc = p->cap;
    uint64_t *ok = p->key;
    uint32_t *on = p->cnt;
    uint64_t *nk = mx_calloc(oc * 2, sizeof *nk);
    uint32_t *nn = mx_calloc(oc * 2, sizeof *nn);
    if (!nk || !nn) { free(nk); free(nn); return false; }
    p->key = nk;
    p->cnt = nn;
    p->cap = oc * 2;
    for (size_t i = 0; i < oc; i++)
        if (ok[i]) {
            size_t j = slot_of(p, ok[i]);
            p->key[j] = ok[i];
            p->cnt[j] = on[i];
        }
    free(ok);
    free(on);
    return true;
}
static bool incref(mx_kv_pool *p, uint64_t id) {
    if (2 * (p->used + 1) > p->cap && !grow(p)) return false;
    size_t i = slot_of(p, id);
    if (p->key[i]) p->cnt[i]++;
    else {
        p->key[i] = id;
        p->cnt[i] = 2;
        p->used++;
    }
    p->shared++;
    return true;
}
/* one map of id less; returns the maps left (0: it was the only one) */
static uint32_t decref(mx_kv_pool *p, uint64_t id) {
    size_t i = slot_of(p, id);
    if (!p->key[i]) return 0;
    p->shared--;
    if (--p->cnt[i] > 1) return p->cnt[i];
    /* back to one map: out of the table (backward-shift deletion keeps every probe chain whole) */
    for (size_t j = i;;) {
        j = (j + 1) & (p->cap - 1);
        if (!p->key[j]) break;
        size_t k = home(p, p->key[j]);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            p->key[i] = p->key[j];
            p->cnt[i] = p->cnt[j];
            i = j;
        }
    }
    p->key[i] = 0;
    p->used--;
    return 1;
}

/* n fresh chunk ids (0: the file cannot grow) */
static uint64_t take(mx_kv_pool *p, size_t n) {
    uint64_t id = p->next;
    if (id + n > p->file) {
        uint64_t want = MX_MAX(id + n, MX_MAX(p->file * 2, (uint64_t)1 << 14));
        if (want > ((uint64_t)1 << 62) / p->chunk || ftruncate(p->fd, (off_t)(want * p->chunk))) return 0;
        p->file = want;
    }
    p->next = id + n;
    return id;
}

/* punching: runs of consecutive ids in one call */
typedef struct { uint64_t id, n; } run;
static void punch_flush(mx_kv_pool *p, run *r) {
    if (r->n) fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(r->id * p->chunk), (off_t)(r->n * p->chunk));
    r->n = 0;
}
static void punch(mx_kv_pool *p, run *r, uint64_t id) {
    if (r->n && r->id + r->n == id) { r->n++; return; }
    punch_flush(p, r);
    r->id = id;
    r->n = 1;
}
/* a cache no longer maps id: a shared chunk loses a map, any other is punched out */
static void drop(mx_kv_pool *p, run *r, uint64_t id) {
    if (id && !decref(p, id)) punch(p, r, id);
}

static bool map_at(const mx_kv_pool *p, uint8_t *at, uint64_t id, size_t n) {
    void *q = id ? mmap(at, n * p->chunk, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)(id * p->chunk))
                 : mmap(at, n * p->chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    return q != MAP_FAILED;
}

int mx_kvp_map_new(mx_kv_pool *p, mx_kvmap *m, size_t bytes) {
    size_t n = MX_MAX((bytes + p->chunk - 1) / p->chunk, 1);
    m->id = mx_malloc(n * sizeof *m->id);
    if (!m->id) return MX_ERR;
    pthread_mutex_lock(&p->mu);
    uint64_t id = take(p, n);
    pthread_mutex_unlock(&p->mu);
    void *q = id ? mmap(NULL, n * p->chunk, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, (off_t)(id * p->chunk)) : MAP_FAILED;
    if (q == MAP_FAILED) {
        free(m->id);
        m->id = NULL;
        return mx_set_err("cannot reserve %zu bytes of cache in its memory file", n * p->chunk);
    }
    for (size_t i = 0; i < n; i++) m->id[i] = id + i;
    m->base = q;
    m->n = n;
    return MX_OK;
}

size_t mx_kvp_share(mx_kv_pool *p, mx_kvmap *dst, const mx_kvmap *src, size_t a, size_t b) {
    size_t c = p->chunk, i0 = (a + c - 1) / c, i1 = MX_MIN(b / c, MX_MIN(dst->n, src->n)), shared = 0;
    run r = {0, 0};
    pthread_mutex_lock(&p->mu);
    for (size_t i = i0; i < i1;) {
        if (dst->id[i] == src->id[i] && src->id[i]) { i++, shared++; continue; }
        if (!src->id[i] || !incref(p, src->id[i])) { /* not in the file, or no room to count it: copied */
            memcpy(dst->base + i * c, src->base + i * c, c);
            i++;
            continue;
        }
        size_t j = i + 1; /* a run of src's consecutive ids maps in one call */
        while (j < i1 && src->id[j] == src->id[j - 1] + 1 && dst->id[j] != src->id[j] && incref(p, src->id[j])) j++;
        if (!map_at(p, dst->base + i * c, src->id[i], j - i)) { /* dst keeps its own chunks: copied */
            for (size_t k = i; k < j; k++) decref(p, src->id[k]);
            memcpy(dst->base + i * c, src->base + i * c, (j - i) * c);
            i = j;
            continue;
        }
        for (size_t k = i; k < j; k++) {
            drop(p, &r, dst->id[k]);
            dst->id[k] = src->id[k];
        }
        shared += j - i;
        i = j;
    }
    punch_flush(p, &r);
    pthread_mutex_unlock(&p->mu);
    return shared * c;
}

size_t mx_kvp_shared(mx_kv_pool *p, const mx_kvmap *m) {
    size_t n = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; p->used && i < m->n; i++) n += maps(p, m->id[i]) >= 2;
    pthread_mutex_unlock(&p->mu);
    return n * p->chunk;
}

/* What unsharing does with shared chunk i: 0 keeps it (wholly inside a live
 * range), 1 copies it (some of it live), 2 maps a fresh one (none live).
 * *j: the first range not wholly before the chunk (chunks come in order). */
static int unshare_kind(size_t c, size_t i, const size_t (*live)[2], size_t n_live, size_t *j) {
    if (!n_live) return 1;
    size_t a = i * c, b = a + c;
    while (*j < n_live && live[*j][1] <= a) (*j)++;
    if (*j == n_live || live[*j][0] >= b) return 2;
    return live[*j][0] <= a && live[*j][1] >= b ? 0 : 1;
}

bool mx_kvp_unshare(mx_kv_pool *p, mx_kvmap *m, const size_t (*live)[2], size_t n_live, size_t *kept) {
    size_t c = p->chunk, j = 0, nkept = 0;
    bool ok = true;
    run r = {0, 0};
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < m->n;) {
        if (maps(p, m->id[i]) < 2) { i++; continue; }
        int kind = unshare_kind(c, i, live, n_live, &j);
        size_t e = i + 1, j2 = j;
        while (e < m->n && maps(p, m->id[e]) >= 2 && unshare_kind(c, e, live, n_live, &j2) == kind) e++;
        if (kind == 0) { nkept += e - i; i = e; continue; }
        uint64_t id = take(p, e - i);
        size_t len = (e - i) * c, done = 0;
        /* a copy goes through the file (the chunks are still mapped here), then replaces them */
        while (kind == 1 && id && done < len) {
            ssize_t w = pwrite(p->fd, m->base + i * c + done, len - done, (off_t)(id * c + done));
            if (w <= 0) break;
            done += (size_t)w;
        }
        if (!id || (kind == 1 && done < len) || !map_at(p, m->base + i * c, id, e - i)) {
            if (id) fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(id * c), (off_t)len);
            /* the file cannot take them: private memory instead, chunk by chunk */
            uint8_t *tmp = kind == 1 ? mx_malloc(c) : NULL;
            for (size_t k = i; k < e && (tmp || kind == 2); k++) {
                if (tmp) memcpy(tmp, m->base + k * c, c);
                if (!map_at(p, m->base + k * c, 0, 1)) break;
                if (tmp) memcpy(m->base + k * c, tmp, c);
                drop(p, &r, m->id[k]);
                m->id[k] = 0;
            }
            free(tmp);
            for (size_t k = i; k < e; k++) ok &= maps(p, m->id[k]) < 2;
            i = e;
            continue;
        }
        for (size_t k = i; k < e; k++) {
            drop(p, &r, m->id[k]);
            m->id[k] = id + (k - i);
        }
        i = e;
    }
    punch_flush(p, &r);
    pthread_mutex_unlock(&p->mu);
    if (kept) *kept = nkept * c;
    if (!ok) mx_set_err("cannot copy the cache's shared pages (out of memory)");
    return ok;
}

void mx_kvp_release(mx_kv_pool *p, mx_kvmap *m, bool remap) {
    if (!m->id) return;
    run r = {0, 0};
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < m->n; i++) drop(p, &r, m->id[i]);
    punch_flush(p, &r);
    uint64_t id = remap ? take(p, m->n) : 0;
    pthread_mutex_unlock(&p->mu);
    if (!remap) {
        munmap(m->base, m->n * p->chunk);
        free(m->id);
        m->id = NULL;
        return;
    }
    /* fresh chunks; where the file cannot grow, private memory (never shared) */
    if (!id || !map_at(p, m->base, id, m->n)) {
        id = 0;
        map_at(p, m->base, 0, m->n);
    }
    for (size_t i = 0; i < m->n; i++) m->id[i] = id ? id + i : 0;
}
