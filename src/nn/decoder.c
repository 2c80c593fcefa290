#define _GNU_SOURCE
/* The generic decoder forward pass: executes an arch description over a
 * stack of sequences. Each layer is norm -> mixer block -> (norm) -> residual
 * -> norm -> ffn block -> (norm) -> residual, sequential or parallel; the
 * blocks (nn/block.h) do the layer-kind-specific work. */
#include "model.h"
#include "kvpages.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct mx_ctx {
    const mx_model *m;
    mx_pool *pool;
    int max_tokens, max_ctx;
    mx_fwd_bufs b;
    int *max_len;
    mx_kpolicy kp;
    mx_prof *prof;
    /* pipeline micro-batches (mx_shard.micro): a run's sequences, their tokens' sequence within the run,
     * and each sequence's cache length when the pass began */
    mx_seq_in *mseqs;
    int *mseq_of, *mlen;
    float *hidden_out; /* mx_ctx_set_hidden_out */
};

/* block b's state in a cache of `cap` positions whose K/V rows are `type` */
static size_t block_state(const mx_model *m, const mx_block_ops *b, int layer, int cap, const mx_kv_type type[2]) {
    if (!b) return 0;
    if (b->cache_floats) return b->cache_floats(m, layer, cap, type);
    return b->state_floats ? b->state_floats(m, layer, cap) : 0;
}

/* floats of layer l's state in a cache of cap positions with rows `type` */
static size_t layer_state(const mx_model *m, int l, int cap, const mx_kv_type type[2]) {
    const mx_layer_spec *ls = &m->arch.layers[l];
    size_t n = block_state(m, ls->mixer, l, cap, type) + block_state(m, ls->mixer2, l, cap, type) + block_state(m, ls->xattn, l, cap, type) +
               block_state(m, ls->ffn, l, cap, type) + block_state(m, ls->shortcut, l, cap, type);
    return (n + 15) & ~(size_t)15;
}

size_t mx_kv_new_bytes(const mx_model *m, int cap) {
    if (cap < 1 || cap > (1 << 28)) return 0;
    size_t total = 0;
    for (int l = 0; l < m->arch.n_layers; l++) total += layer_state(m, l, cap, m->kp.kv_type);
    return total * sizeof(float);
}

/* block b's state that positions [0, n) write */
static size_t block_used(const mx_model *m, const mx_block_ops *b, int layer, int cap, int n, const mx_kv_type type[2]) {
    if (!b) return 0;
    return b->used_floats ? b->used_floats(m, layer, cap, n, type) : block_state(m, b, layer, cap, type);
}

size_t mx_kv_used_bytes(const mx_model *m, int cap, int n) {
    if (cap < 1 || cap > (1 << 28) || n <= 0) return 0;
    size_t total = 0, pg = (size_t)sysconf(_SC_PAGESIZE);
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    for (int l = lo; l < hi; l++) {
        const mx_layer_spec *ls = &m->arch.layers[l];
        const mx_kv_type *t = m->kp.kv_type;
        size_t f = block_used(m, ls->mixer, l, cap, n, t) + block_used(m, ls->mixer2, l, cap, n, t) + block_used(m, ls->xattn, l, cap, n, t) +
                   block_used(m, ls->ffn, l, cap, n, t) + block_used(m, ls->shortcut, l, cap, n, t);
        if (f) total += f * sizeof(float) + 4 * pg; /* each written region (K, V, a ring's second half) may start and end inside a page */
    }
    return total;
}

mx_kv *mx_kv_new(const mx_model *m, int cap) { return mx_kv_new_in(m, cap, NULL); }

mx_kv *mx_kv_new_in(const mx_model *m, int cap, mx_kv_pool *pool) {
    const mx_arch *a = &m->arch;
    if (cap < 1 || cap > (1 << 28)) { mx_set_err("cache of %d positions is out of range", cap); return NULL; }
    mx_kv *kv = mx_calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->type[0] = m->kp.kv_type[0];
    kv->type[1] = m->kp.kv_type[1];
    kv->offset = mx_calloc((size_t)a->n_layers + 1, sizeof(size_t));
    if (!kv->offset) { free(kv); return NULL; }
    size_t total = 0;
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    for (int l = 0; l < a->n_layers; l++) {
        kv->offset[l] = total;
        if (l < lo || l >= hi) continue; /* another process's layer */
        size_t n = layer_state(m, l, cap, kv->type);
        if (total + n < total || (total + n) > ((size_t)1 << 40) / sizeof(float)) {
            mx_set_err("cache of %d positions is too large", cap);
            free(kv->offset); free(kv);
            return NULL;
        }
        total += n;
    }
    kv->offset[a->n_layers] = total;
    /* reserved, not committed: anonymous pages (or a pool's file) read as
     * zeros and take memory once written, so a cache costs the positions its
     * sequences have used (mx_kv_release gives them back), not its capacity */
    if (pool) {
        mx_kvmap km;
        if (mx_kvp_map_new(pool, &km, total * sizeof(float))) { free(kv->offset); free(kv); return NULL; }
        kv->data = (float *)(void *)km.base;
        kv->pool = pool;
        kv->chunks = km.id;
        kv->n_chunks = km.n;
    } else {
        void *p = mmap(NULL, MX_MAX(total * sizeof(float), 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            mx_set_err("cannot reserve %zu bytes of cache", total * sizeof(float));
            free(kv->offset); free(kv);
            return NULL;
        }
        kv->data = p;
    }
    kv->cap = cap;
    kv->n_layers = a->n_layers;
    kv->shard = m->shard;
    return kv;
}

static mx_kvmap kv_map(const mx_kv *kv) { return (mx_kvmap){(uint8_t *)(void *)kv->data, kv->chunks, kv->n_chunks}; }

size_t mx_kv_shared_bytes(const mx_kv *kv) {
    if (!kv->pool || !kv->share_len) return 0;
    mx_kvmap km = kv_map(kv);
    return mx_kvp_shared(kv->pool, &km);
}

static bool rows_alone(const mx_model *m, int l, const mx_kv *kv);
static int cmp_range(const void *a, const void *b) {
    const size_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Layer l's rows of positions [0, n) as byte ranges of kv's data (up to 4),
 * or -1 where its blocks cannot say where they are (the layer's state then
 * goes whole). */
static int prefix_bytes(const mx_model *m, int l, const mx_kv *kv, int n, size_t r[4][2]) {
    const mx_block_ops *b = m->arch.layers[l].mixer;
    int k = rows_alone(m, l, kv) && b->prefix_ranges ? b->prefix_ranges(m, l, kv->cap, n, kv->type, r) : -1;
    for (int i = 0; i < k; i++) {
        r[i][0] += kv->offset[l] * sizeof(float);
        r[i][1] += kv->offset[l] * sizeof(float);
    }
    return k;
}

/* A cache's pages come on demand (mx_kv_new), one fault per page as its rows
 * are written: a trap of ~20 us on this machine's hypervisor, ~6 % of a
 * 16-stream decode step. A pass that starts a window of KV_POP_ROWS
 * positions asks for the window's pages of every layer in one call each
 * (MADV_POPULATE_WRITE; no data is written, so shared chunks stay as they
 * are); where the kernel lacks it, the faults come as before. 1B 4-bit,
 * `bench -b 16 --profile`: rope+qk-norm+kv (where rows are written) 0.33-0.42
 * -> 0.17-0.22 ms per token, the calls 0.02 of it. */
#define KV_POP_ROWS 16
static void kv_populate(const mx_model *m, const mx_kv *kv, int from, int to) {
#ifdef MADV_POPULATE_WRITE
    if (from % KV_POP_ROWS && from / KV_POP_ROWS == (to - 1) / KV_POP_ROWS) return; /* inside a window asked for already */
    int end = MX_MIN(kv->cap, (to + KV_POP_ROWS - 1) / KV_POP_ROWS * KV_POP_ROWS);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    for (int l = lo; l < hi; l++) {
        size_t ra[4][2], rb[4][2];
        int ka = prefix_bytes(m, l, kv, from, ra), kb = prefix_bytes(m, l, kv, end, rb);
        for (int i = 0; i < kb && ka == kb; i++) {
            uintptr_t b0 = ((uintptr_t)kv->data + ra[i][1]) & ~(uintptr_t)(pg - 1), b1 = (uintptr_t)kv->data + rb[i][1];
            if (b1 > b0) (void)madvise((void *)b0, b1 - b0, MADV_POPULATE_WRITE);
        }
    }
#else
    (void)m; (void)kv; (void)from; (void)to;
#endif
}

int mx_kv_unshare(const mx_model *m, mx_kv *kv) {
    if (!kv->pool || !kv->share_len) return MX_OK;
    mx_kvmap km = kv_map(kv);
    /* the rows of positions [0, len) are live: a shared chunk wholly inside
     * them stays shared, one past them is dead (written before it is read) */
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    size_t (*live)[2] = mx_malloc(sizeof *live * 4 * (size_t)MX_MAX(hi - lo, 1)), n = 0, kept = 0;
    for (int l = lo; live && l < hi; l++) {
        size_t r[4][2];
        int k = prefix_bytes(m, l, kv, kv->len, r);
        for (int i = 0; i < k; i++)
            if (r[i][1] > r[i][0]) { live[n][0] = r[i][0]; live[n][1] = r[i][1]; n++; }
    }
    if (live && !n) live[n][0] = live[n][1] = 0, n++; /* nothing live: one empty range */
    if (live) qsort(live, n, sizeof *live, cmp_range);
    /* without the ranges (no memory for them) every shared chunk is copied */
    bool ok = live ? mx_kvp_unshare(kv->pool, &km, (const size_t(*)[2])live, n, &kept) : mx_kvp_unshare(kv->pool, &km, NULL, 0, NULL);
    free(live);
    if (!ok) return MX_ERR;
    kv->share_len = kept ? kv->len : 0;
    return MX_OK;
}

/* dst is about to be written over from 0: the chunks it shares are let go
 * (fresh ones mapped), not copied as mx_kv_unshare would */
static void drop_shared(mx_kv *dst) {
    if (dst->pool && dst->share_len) mx_kv_release(dst);
}

void mx_kv_copy(mx_kv *dst, const mx_kv *src) { /* every page: commits dst's whole capacity */
    drop_shared(dst);
    memcpy(dst->data, src->data, src->offset[src->n_layers] * sizeof(float));
    dst->len = src->len;
}

/* the mixer keeps layer l's only state and can say where its rows are */
static bool rows_alone(const mx_model *m, int l, const mx_kv *kv) {
    const mx_layer_spec *ls = &m->arch.layers[l];
    return ls->mixer && ls->mixer->copy_prefix && !ls->mixer2 && !block_state(m, ls->xattn, l, kv->cap, kv->type) &&
           !block_state(m, ls->ffn, l, kv->cap, kv->type) && !block_state(m, ls->shortcut, l, kv->cap, kv->type);
}

static void copy_layer(const mx_model *m, int l, mx_kv *dst, const mx_kv *src, int n) {
    uint8_t *d = (uint8_t *)mx_kv_layer(dst, l);
    const uint8_t *s = (const uint8_t *)mx_kv_layer(src, l);
    if (rows_alone(m, l, src)) m->arch.layers[l].mixer->copy_prefix(m, l, d, s, src->cap, n, src->type);
    else memcpy(d, s, (src->offset[l + 1] - src->offset[l]) * sizeof(float));
}

void mx_kv_copy_prefix(const mx_model *m, mx_kv *dst, const mx_kv *src, int n) {
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    drop_shared(dst);
    for (int l = lo; l < hi; l++) copy_layer(m, l, dst, src, n);
    dst->len = n;
}

size_t mx_kv_share_prefix(const mx_model *m, mx_kv *dst, mx_kv *src, int n) {
    if (!dst->pool || dst->pool != src->pool || dst->cap != src->cap || dst->type[0] != src->type[0] || dst->type[1] != src->type[1]) {
        mx_kv_copy_prefix(m, dst, src, n);
        return 0;
    }
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    drop_shared(dst); /* its edges are written below (a chunk it still shares would be written for all) */
    mx_kvmap dm = kv_map(dst), sm = kv_map(src);
    size_t c = mx_kvp_chunk(dst->pool), shared = 0;
    for (int l = lo; l < hi; l++) {
        size_t r[4][2];
        int k = prefix_bytes(m, l, src, n, r);
        if (k < 0) { copy_layer(m, l, dst, src, n); continue; }
        for (int i = 0; i < k; i++) { /* whole chunks mapped, the ends of the range copied */
            size_t a = r[i][0], e = r[i][1], a1 = MX_MIN((a + c - 1) / c * c, e), e0 = MX_MAX(e / c * c, a1);
            memcpy(dm.base + a, sm.base + a, a1 - a);
            memcpy(dm.base + e0, sm.base + e0, e - e0);
            if (a1 < e0) shared += mx_kvp_share(dst->pool, &dm, &sm, a1, e0);
        }
    }
    dst->len = n;
    if (shared) {
        dst->share_len = MX_MAX(dst->share_len, n);
        src->share_len = MX_MAX(src->share_len, n);
    }
    return shared;
}

size_t mx_kv_dedupe_prefix(const mx_model *m, mx_kv *dst, mx_kv *src, int n) {
    if (!dst->pool || dst->pool != src->pool || dst == src || dst->cap != src->cap || dst->type[0] != src->type[0] ||
        dst->type[1] != src->type[1] || n < 1 || n > dst->len || n > src->len)
        return 0;
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    mx_kvmap dm = kv_map(dst), sm = kv_map(src);
    size_t c = mx_kvp_chunk(dst->pool), shared = 0;
    for (int l = lo; l < hi; l++) {
        size_t r[4][2];
        int k = prefix_bytes(m, l, src, n, r);
        for (int i = 0; i < k; i++) /* the whole chunks of the range whose bytes agree (those already one chunk: not read) */
            for (size_t x = (r[i][0] + c - 1) / c * c; x + c <= r[i][1]; x += c)
                if ((dm.id[x / c] != sm.id[x / c] || !sm.id[x / c]) && !memcmp(dm.base + x, sm.base + x, c))
                    shared += mx_kvp_share(dst->pool, &dm, &sm, x, x + c);
    }
    if (shared) {
        dst->share_len = MX_MAX(dst->share_len, n);
        src->share_len = MX_MAX(src->share_len, n);
    }
    return shared;
}

/* A snapshot holds the state of every block that cannot say where its
 * per-position rows are (copy_prefix): recurrent state, conv windows, ...;
 * the blocks with rows keep theirs in the cache, where positions below the
 * snapshot's are not written again. Copies them to or from buf (NULL: only
 * counts) and returns their floats. */
static size_t snapshot_walk(const mx_model *m, const mx_kv *kv, int cap, float *buf, bool restore) {
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    size_t at = 0;
    for (int l = lo; l < hi; l++) {
        const mx_layer_spec *ls = &m->arch.layers[l];
        const mx_block_ops *bs[5] = {ls->mixer, ls->mixer2, ls->xattn, ls->ffn, ls->shortcut};
        float *p = kv ? mx_kv_layer(kv, l) : NULL;
        for (int i = 0; i < 5; i++) {
            size_t n = block_state(m, bs[i], l, cap, kv ? kv->type : m->kp.kv_type);
            if (n && !bs[i]->copy_prefix) {
                if (buf) memcpy(restore ? p : buf + at, restore ? buf + at : p, n * sizeof(float));
                at += n;
            }
            if (p) p += n;
        }
    }
    return at;
}

size_t mx_kv_snapshot_floats(const mx_model *m, int cap) { return snapshot_walk(m, NULL, cap, NULL, false); }
void mx_kv_snapshot(const mx_model *m, const mx_kv *kv, float *out) { snapshot_walk(m, kv, kv->cap, out, false); }
void mx_kv_restore(const mx_model *m, mx_kv *kv, const float *in, int len) {
    snapshot_walk(m, kv, kv->cap, (float *)in, true);
    kv->len = len;
}

int mx_kv_min_len(const mx_model *m, const mx_kv *kv) {
    int k = 0;
    for (int l = 0; l < m->arch.n_layers; l++) { /* every process's layers: the rule is the description's */
        const mx_block_ops *b = m->arch.layers[l].mixer;
        if (b && b->keep_min) k = MX_MAX(k, b->keep_min(m, l, kv->cap, kv->len));
    }
    return k;
}

bool mx_model_has_kv_rows(const mx_model *m) {
    for (int l = 0; l < m->arch.n_layers; l++) {
        const mx_layer_spec *ls = &m->arch.layers[l];
        if ((ls->mixer && ls->mixer->cache_floats) || (ls->mixer2 && ls->mixer2->cache_floats)) return true;
    }
    return false;
}

void mx_kv_fill_random(const mx_model *m, mx_kv *kv, uint64_t seed) {
    (void)m;
    if (kv->shard && kv->shard->ops->kv_fill) kv->shard->ops->kv_fill(kv->shard->ctx, kv, seed); /* the other processes' parts */
    uint64_t rng = seed;
    if (kv->type[0] == MX_KV_F32 && kv->type[1] == MX_KV_F32) { /* unit variance, as a prefill leaves normed keys */
        for (size_t i = kv->offset[0]; i < kv->offset[kv->n_layers]; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            kv->data[i] = (float)((double)(rng >> 40) / (double)(1ull << 24) * 3.4641016 - 1.7320508);
        }
        return;
    }
    /* typed rows: every 16-bit word a sign and 11 random bits under 0x3800,
     * a normal number read as f16 ([0.5, 2)), bf16 or either half of an f32,
     * so f32 rows and the scales of q8_0 / q4_0 blocks hold ordinary values */
    uint16_t *w = (uint16_t *)(void *)(kv->data + kv->offset[0]);
    for (size_t i = 0, n = (kv->offset[kv->n_layers] - kv->offset[0]) * 2; i < n; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (uint16_t)(((rng >> 48) & 0x8000) | 0x3800 | ((rng >> 33) & 0x7ff));
    }
}

void mx_kv_free(mx_kv *kv) {
    if (!kv) return;
    if (kv->dist_id && kv->shard) kv->shard->ops->kv_free(kv->shard->ctx, kv->dist_id);
    mx_kvmap km = kv_map(kv);
    if (kv->pool) mx_kvp_release(kv->pool, &km, false);
    else munmap(kv->data, MX_MAX(mx_kv_bytes(kv), 1));
    free(kv->offset);
    free(kv);
}

void mx_kv_release(mx_kv *kv) {
    mx_kvmap km = kv_map(kv);
    if (kv->pool) mx_kvp_release(kv->pool, &km, true); /* shared chunks stay with the other caches */
    else madvise(kv->data, MX_MAX(mx_kv_bytes(kv), 1), MADV_DONTNEED);
    kv->share_len = 0;
    kv->len = 0;
}

size_t mx_kv_resident(const mx_kv *kv) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (mx_kv_bytes(kv) + pg - 1) / pg, res = 0;
    unsigned char vec[1024];
    for (size_t i = 0; i < n; i += sizeof vec) {
        size_t m = MX_MIN(n - i, sizeof vec);
        if (mincore((uint8_t *)kv->data + i * pg, m * pg, vec)) return 0;
        for (size_t j = 0; j < m; j++) res += vec[j] & 1;
    }
    return res * pg;
}

size_t mx_blocks_scratch_floats(const mx_model *m, int max_tokens, int max_ctx, int n_threads) {
    const mx_arch *a = &m->arch;
    size_t scratch = 0;
    for (int l = 0; l < a->n_layers; l++) {
        const mx_block_ops *bs[7] = {a->layers[l].mixer, a->layers[l].ffn, a->layers[l].mixer2, a->layers[l].post, a->layers[l].shortcut,
                                     a->layers[l].xattn, a->layers[l].branch};
        for (int k = 0; k < 7; k++)
            if (bs[k] && bs[k]->scratch_floats) scratch = MX_MAX(scratch, bs[k]->scratch_floats(m, l, max_tokens, max_ctx, n_threads));
    }
    return scratch;
}

int mx_fwd_bufs_alloc(mx_fwd_bufs *b, const mx_model *m, int max_tokens, int max_ctx, int n_threads) {
    const mx_arch *a = &m->arch;
    size_t N = (size_t)max_tokens, H = (size_t)a->hidden;
    size_t rd = 0, scratch = mx_blocks_scratch_floats(m, max_tokens, max_ctx, n_threads);
    for (int r = 0; r < a->n_rope; r++) rd += (size_t)a->rope[r].dim;
    b->x = mx_aligned_alloc(N * H * 4);
    b->xn = mx_aligned_alloc(N * H * 4);
    b->tmp = mx_aligned_alloc(N * H * 4);
    b->tmp2 = mx_aligned_alloc(N * H * 4);
    b->cs = mx_aligned_alloc(N * (rd ? rd : 1) * 4);
    b->scratch = mx_aligned_alloc((scratch ? scratch : 1) * 4);
    b->pos = mx_calloc(N, sizeof(int));
    b->seq_of = mx_calloc(N, sizeof(int));
    b->span = mx_calloc(2 * N, sizeof(int));
    b->apos = mx_calloc(MX_ROPE_MAX_AXES * N, sizeof(int));
    if (a->ple.dim) b->ple = mx_aligned_alloc((N + 1) * (size_t)a->n_layers * a->ple.dim * 4);
    bool shortcut = false;
    for (int l = 0; l < a->n_layers; l++) shortcut |= a->layers[l].shortcut != NULL;
    if (shortcut) b->carry = mx_aligned_alloc(N * H * 4);
    if (a->altup.n) b->altup = mx_aligned_alloc(mx_altup_floats(a, max_tokens) * 4);
    if (a->mtp.on) b->mtp = mx_aligned_alloc(N * 2 * H * 4);
    size_t vn = m->shard && m->shard->head ? (size_t)m->shard->vocab_n : 0;
    if (vn) b->head = mx_aligned_alloc(N * vn * 4);
    if (!b->x || !b->xn || !b->tmp || !b->tmp2 || !b->cs || !b->scratch || !b->pos || !b->seq_of || !b->span || !b->apos ||
        (a->ple.dim && !b->ple) || (shortcut && !b->carry) || (a->altup.n && !b->altup) || (vn && !b->head) || (a->mtp.on && !b->mtp)) {
        mx_fwd_bufs_free(b);
        return MX_ERR;
    }
    return MX_OK;
}

void mx_fwd_bufs_free(mx_fwd_bufs *b) {
    float *bufs[] = {b->x, b->xn, b->tmp, b->tmp2, b->cs, b->scratch, b->ple, b->carry, b->altup, b->head, b->mtp};
    for (size_t i = 0; i < MX_ARRAY_LEN(bufs); i++) mx_aligned_free(bufs[i]);
    free(b->pos);
    free(b->seq_of);
    free(b->span);
    free(b->apos);
    memset(b, 0, sizeof *b);
}

mx_ctx *mx_ctx_new(const mx_model *m, int max_tokens, int max_ctx, mx_pool *pool) {
    mx_ctx *c = mx_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->m = m;
    c->pool = pool;
    c->kp = m->kp;
    c->kp.pool = pool;
    c->max_tokens = max_tokens;
    c->max_ctx = max_ctx;
    c->max_len = mx_calloc((size_t)max_tokens, sizeof(int));
    if (m->shard && (m->shard->micro > 1 || m->shard->micro_long > 1)) {
        c->mseqs = mx_calloc((size_t)max_tokens, sizeof *c->mseqs);
        c->mseq_of = mx_calloc((size_t)max_tokens, sizeof(int));
        c->mlen = mx_calloc((size_t)max_tokens, sizeof(int));
        if (!c->mseqs || !c->mseq_of || !c->mlen) {
            mx_ctx_free(c);
            return NULL;
        }
    }
    if (!c->max_len || mx_fwd_bufs_alloc(&c->b, m, max_tokens, max_ctx, mx_pool_size(pool))) {
        mx_ctx_free(c);
        return NULL;
    }
    return c;
}

void mx_ctx_free(mx_ctx *c) {
    if (!c) return;
    mx_fwd_bufs_free(&c->b);
    free(c->max_len);
    free(c->mseqs);
    free(c->mseq_of);
    free(c->mlen);
    free(c);
}

int mx_ctx_max_tokens(const mx_ctx *c) { return c->max_tokens; }

mx_kpolicy *mx_ctx_policy(mx_ctx *c) { return &c->kp; }
void mx_ctx_set_prof(mx_ctx *c, mx_prof *p) { c->prof = p; }
void mx_ctx_set_hidden_out(mx_ctx *c, float *rows) { c->hidden_out = rows; }

void mx_model_layers(const mx_model *m, int *lo, int *hi) {
    *lo = m->shard ? m->shard->layer_lo : 0;
    *hi = m->shard ? m->shard->layer_hi : m->arch.n_layers;
}

bool mx_model_recurrent(const mx_model *m) {
    for (int l = 0; l < m->arch.n_layers; l++) {
        const mx_layer_spec *ls = &m->arch.layers[l];
        if ((ls->mixer && ls->mixer->recurrent) || (ls->mixer2 && ls->mixer2->recurrent) || (ls->ffn && ls->ffn->recurrent) ||
            (ls->shortcut && ls->shortcut->recurrent))
            return true;
    }
    return false;
}

float *mx_kv_block(const mx_model *m, const mx_kv *kv, int layer, const mx_block_ops *b) {
    const mx_layer_spec *ls = &m->arch.layers[layer];
    float *p = mx_kv_layer(kv, layer);
    if (b == ls->mixer) return p;
    p += block_state(m, ls->mixer, layer, kv->cap, kv->type);
    if (b == ls->mixer2) return p;
    p += block_state(m, ls->mixer2, layer, kv->cap, kv->type);
    if (b == ls->xattn) return p;
    p += block_state(m, ls->xattn, layer, kv->cap, kv->type);
    return p;
}

void mx_rope_positions(const mx_rope *r, const mx_seq_in *s, const int *pos, int *apos, int stride) {
    for (int k = 0; k < MX_ROPE_MAX_AXES; k++)
        for (int i = 0; i < s->n; i++)
            apos[(size_t)k * stride + i] = s->mpos && k < r->n_axes ? s->mpos[(size_t)k * s->n + i] : pos[i] + s->rope_shift;
}

void mx_norm_rows(const mx_norm_spec *s, const mx_normw *w, float *y, const float *x, int n, int d, int ld) {
    if (s->kind == MX_NORM_RMS) mx_rmsnorm(y, x, w->w, s->offset, n, d, ld, s->eps);
    else mx_layernorm(y, x, w->w, s->bias ? w->b : NULL, s->offset, n, d, ld, s->eps);
}

static const mx_kpolicy *fwd_kp(const mx_fwd *f, mx_kpolicy *tmp) {
    if (f->kp) return f->kp;
    *tmp = f->m->kp;
    tmp->pool = f->pool;
    return tmp;
}

/* the op timer's counts of a product of w on n rows */
static void prof_matmul(mx_prof *p, mx_op op, const mx_weight *w, int n, double t0) {
    mx_prof_add(p, op, t0);
    p->bytes[op] += (double)mx_weight_bytes(w);
    p->flops[op] += 2.0 * w->rows * w->cols * n;
}

/* The policy of one product: under the fast mode the dense MLP's gate and
 * up take one 8-bit code per activation. The other projections keep the
 * 12-bit codes: on the quantized fixtures 8-bit codes everywhere move the
 * mean KL to 1.1e-3..8e-3 nats, over the mode's 1e-3 (attention's q/k/v,
 * then o, down and the head carry most of it; docs/fast-mode.md). */
/* The fast mode's 8-bit activation codes go to the dense MLP's gate/up, and
 * to its down projection where the weight's groups (which the codes' scales
 * follow) are 64 columns or fewer: every fixture then stays within the
 * mode's KL bound (docs/fast-mode.md); down with groups of 128 did not. */
static const mx_kpolicy *op_kp(const mx_fwd *f, mx_op op, const mx_weight *w, mx_kpolicy *tmp) {
    const mx_kpolicy *kp = fwd_kp(f, tmp);
    bool act8 = kp->fast && (op == MX_OP_GATE_UP || (op == MX_OP_DOWN && w->group <= 64));
    if (act8 == kp->act8) return kp;
    if (kp != tmp) *tmp = *kp;
    tmp->act8 = act8;
    return tmp;
}

void mx_linear_as(const mx_fwd *f, mx_op op, const mx_weight *w, const float *b, const float *x, int n, int ldx, float *y, int ldy) {
    mx_kpolicy tmp;
    double t0 = f->prof ? mx_now() : 0;
    mx_matmul(w, x, n, ldx, y, ldy, op_kp(f, op, w, &tmp));
    if (b)
        for (int t = 0; t < n; t++) mx_add(y + (size_t)t * ldy, b, w->rows);
    if (f->prof) prof_matmul(f->prof, op, w, n, t0);
}

void mx_linear(const mx_fwd *f, const mx_weight *w, const float *b, const float *x, int n, int ldx, float *y, int ldy) {
    mx_linear_as(f, MX_OP_MATMUL, w, b, x, n, ldx, y, ldy);
}

void mx_linear_multi_as(const mx_fwd *f, mx_op op, int count, const mx_weight *const *w, float *const *b, const float *x, int n, int ldx,
                        float *const *y, int ldy) {
    mx_kpolicy tmp;
    double t0 = f->prof ? mx_now() : 0;
    mx_matmul_multi(count, w, x, n, ldx, y, ldy, op_kp(f, op, w[0], &tmp));
    for (int i = 0; i < count; i++)
        if (b[i])
            for (int t = 0; t < n; t++) mx_add(y[i] + (size_t)t * ldy, b[i], w[i]->rows);
    if (f->prof) {
        prof_matmul(f->prof, op, w[0], n, t0);
        for (int i = 1; i < count; i++) {
            f->prof->bytes[op] += (double)mx_weight_bytes(w[i]);
            f->prof->flops[op] += 2.0 * w[i]->rows * w[i]->cols * n;
        }
    }
}

void mx_linear_multi(const mx_fwd *f, int count, const mx_weight *const *w, float *const *b, const float *x, int n, int ldx, float *const *y, int ldy) {
    mx_linear_multi_as(f, MX_OP_MATMUL, count, w, b, x, n, ldx, y, ldy);
}

void mx_norm_rows_f(const mx_fwd *f, const mx_norm_spec *s, const mx_normw *w, float *y, const float *x, int n, int d, int ld) {
    double t0 = f->prof ? mx_now() : 0;
    mx_norm_rows(s, w, y, x, n, d, ld);
    if (f->prof) mx_prof_add(f->prof, MX_OP_NORM, t0);
}

static void add_scaled(float *x, const float *y, float s, size_t n) {
    if (s == 1.0f) for (size_t i = 0; i < n; i++) x[i] += y[i];
    else for (size_t i = 0; i < n; i++) x[i] += y[i] * s;
}

/* each of n rows of x times the vector v[h] (layer scale) */
static void scale_rows(float *x, const float *v, int n, int h) {
    for (int r = 0; r < n; r++)
        for (int i = 0; i < h; i++) x[(size_t)r * h + i] *= v[i];
}

/* x = xn * alpha + y * beta: the residual is the normed input (MiniMax) */
static void deep_residual(float *x, const float *xn, float alpha, const float *y, float beta, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = xn[i] * alpha + y[i] * beta;
}

/* Tensor parallelism: a block's output is this process's part of the sum
 * (its heads through its columns of o, its width through its columns of
 * down); the whole output is the sum over the group. */
static void tp_sum(const mx_fwd *f, float *y, size_t n) {
    const mx_shard *sh = f->m->shard;
    if (sh && sh->tp > 1) sh->ops->reduce(sh->ctx, y, n);
}

void mx_layer_forward(mx_fwd *f, int l, float *x, float *xn, float *tmp, float *tmp2) {
    const mx_model *m = f->m;
    const mx_arch *a = &m->arch;
    const mx_layer_w *L = &m->layers[l];
    const mx_layer_spec *ls = &a->layers[l];
    int N = f->N, H = a->hidden;
    size_t NH = (size_t)N * H;
    bool res_norm = a->norm_after_residual; /* post norms act on the residual sum */
    if (a->names.attn_norm && !ls->no_attn_norm) mx_norm_rows_f(f, &a->norm, &L->attn_norm, xn, x, N, H, H);
    else memcpy(xn, x, NH * 4);
    if (ls->mixer) {
        ls->mixer->forward(f, l, L->mixer_w, xn, tmp);
        tp_sum(f, tmp, NH);
        if (ls->mixer2) { /* tmp2 is free until the ffn */
            ls->mixer2->forward(f, l, L->mixer2_w, xn, tmp2);
            tp_sum(f, tmp2, NH);
            float s1 = a->mixer_scale ? a->mixer_scale : 1, s2 = a->mixer2_scale ? a->mixer2_scale : 1;
            for (size_t i = 0; i < NH; i++) tmp[i] = tmp[i] * s1 + tmp2[i] * s2;
        } else if (a->mixer_scale && a->mixer_scale != 1.0f) mx_scale(tmp, a->mixer_scale, (int)NH);
        if (a->names.post_attn_norm && !res_norm) mx_norm_rows_f(f, &a->norm, &L->post_attn_norm, tmp, tmp, N, H, H);
        if (L->attn_scale) scale_rows(tmp, L->attn_scale, N, H);
        if (ls->branch) { /* x = (x + mixer + branch) * branch_scale; tmp2 is free until the ffn */
            ls->branch->forward(f, l, L->branch_w, xn, tmp2);
            float bs = a->branch_scale ? a->branch_scale : 1;
            for (size_t i = 0; i < NH; i++) x[i] = (x[i] + tmp[i] + tmp2[i]) * bs;
            memset(tmp, 0, NH * 4); /* joined: the residual below adds nothing */
        }
    } else memset(tmp, 0, NH * 4);
    if (!ls->ffn) {
        add_scaled(x, tmp, a->residual_scale, NH);
        if (a->names.post_attn_norm && res_norm) mx_norm_rows_f(f, &a->norm, &L->post_attn_norm, x, x, N, H, H);
    } else if (a->residual == MX_RES_PARALLEL) {
        if (a->parallel_two_norms) mx_norm_rows_f(f, &a->norm, &L->ffn_norm, xn, x, N, H, H);
        ls->ffn->forward(f, l, L->ffn_w, xn, tmp2);
        tp_sum(f, tmp2, NH);
        if (L->ffn_scale) scale_rows(tmp2, L->ffn_scale, N, H);
        add_scaled(x, tmp, a->residual_scale, NH);
        add_scaled(x, tmp2, a->residual_scale, NH);
    } else {
        if (ls->res_alpha[0]) deep_residual(x, xn, ls->res_alpha[0], tmp, ls->res_beta[0], NH);
        else add_scaled(x, tmp, a->residual_scale, NH);
        if (a->names.post_attn_norm && res_norm) mx_norm_rows_f(f, &a->norm, &L->post_attn_norm, x, x, N, H, H);
        if (ls->xattn) { /* encoder-decoders: attend to the encoder memory */
            mx_norm_rows_f(f, &a->norm, &L->xattn_norm, xn, x, N, H, H);
            ls->xattn->forward(f, l, L->xattn_w, xn, tmp);
            add_scaled(x, tmp, a->residual_scale, NH);
        }
        if (a->names.ffn_norm) mx_norm_rows_f(f, &a->norm, &L->ffn_norm, xn, x, N, H, H);
        else memcpy(xn, x, NH * 4);
        if (ls->shortcut) ls->shortcut->forward(f, l, L->shortcut_w, xn, f->carry); /* joins at the next layer's end */
        ls->ffn->forward(f, l, L->ffn_w, xn, tmp2);
        tp_sum(f, tmp2, NH);
        if (a->names.post_ffn_norm && !res_norm) mx_norm_rows_f(f, &a->norm, &L->post_ffn_norm, tmp2, tmp2, N, H, H);
        if (L->ffn_scale) scale_rows(tmp2, L->ffn_scale, N, H);
        if (ls->res_alpha[1]) deep_residual(x, xn, ls->res_alpha[1], tmp2, ls->res_beta[1], NH);
        else add_scaled(x, tmp2, a->residual_scale, NH);
        if (a->names.post_ffn_norm && res_norm) mx_norm_rows_f(f, &a->norm, &L->post_ffn_norm, x, x, N, H, H);
        if (l > 0 && a->layers[l - 1].shortcut) add_scaled(x, f->carry, 1.0f, NH);
    }
    if (ls->post && !a->altup.n) { /* reads the layer's output, adds to it (AltUp: mx_altup_correct runs it) */
        ls->post->forward(f, l, L->post_w, x, tmp);
        add_scaled(x, tmp, 1.0f, NH);
    }
    if (L->out_scale) mx_scale(x, L->out_scale, (int)NH);
}

/* DeepStack: after layer l, the image tokens' part l + 1 of their rows */
static void add_deep(const mx_fwd *f, int l, float *x) {
    int H = f->m->arch.hidden;
    for (int t = 0; t < f->N; t++) {
        const mx_seq_in *s = &f->seqs[f->seq_of[t]];
        int i = f->pos[t] - s->kv->len, er = s->embed_row ? s->embed_row[i] : -1;
        if (er >= 0 && l < s->n_deep) mx_add(x + (size_t)t * H, s->embeds + ((size_t)er * (1 + s->n_deep) + 1 + l) * H, H);
    }
}

/* The rows of tokens [t0, t1) that get logits: every token (all), else the last token of each sequence
 * ending there; *row0: the first one's row of the pass's logits. */
static int head_count(const mx_fwd *f, int t0, int t1, bool all, int *row0) {
    if (all) {
        if (row0) *row0 = t0;
        return t1 - t0;
    }
    int rows = 0;
    for (int t = t0; t < t1; t++)
        if (t + 1 == f->N || f->seq_of[t + 1] != f->seq_of[t]) {
            if (!rows && row0) *row0 = f->seq_of[t];
            rows++;
        }
    return rows;
}

/* The final norm and the head on the rows of tokens [t0, t1) that need logits (head_count); split by
 * vocabulary, this part's share, gathered on the driver. */
static void head_rows(mx_ctx *c, const mx_fwd *f, int t0, int t1, bool all, float *logits) {
    const mx_model *m = c->m;
    const mx_arch *a = &m->arch;
    const mx_shard *sh = m->shard;
    int H = a->hidden, row0 = 0, rows = head_count(f, t0, t1, all, &row0);
    if (!rows) return;
    if (all) {
        if (a->names.final_norm) mx_norm_rows_f(f, &a->norm, &m->final_norm, c->b.xn, c->b.x + (size_t)t0 * H, rows, H, H);
        else memcpy(c->b.xn, c->b.x + (size_t)t0 * H, (size_t)rows * H * 4);
    } else {
        for (int t = t0, r = 0; t < t1; t++)
            if (t + 1 == f->N || f->seq_of[t + 1] != f->seq_of[t]) memcpy(c->b.xn + (size_t)r++ * H, c->b.x + (size_t)t * H, (size_t)H * 4);
        if (a->names.final_norm) mx_norm_rows_f(f, &a->norm, &m->final_norm, c->b.xn, c->b.xn, rows, H, H);
    }
    bool split = sh && sh->vocab_n;
    const mx_weight *head = a->tied && !split ? &m->embed : &m->lm_head; /* split: this part's rows (a view when tied) */
    int V = split ? sh->vocab_n : a->vocab;
    float *out = split ? c->b.head : logits + (size_t)row0 * a->vocab;
    mx_linear_as(f, MX_OP_HEAD, head, m->lm_head_b, c->b.xn, rows, H, out, V);
    size_t nl = (size_t)rows * V;
    if (a->logit_scale != 1.0f) mx_scale(out, a->logit_scale, (int)nl);
    if (a->final_softcap > 0) {
        float cap = a->final_softcap;
        for (size_t i = 0; i < nl; i++) out[i] = tanhf(out[i] / cap) * cap;
    }
    if (split) sh->ops->gather_logits(sh->ctx, out, rows, sh->driver ? logits + (size_t)row0 * a->vocab : NULL);
}

/* How many micro-batches a pipelined pass takes (mx_shard.micro): decided from what every process
 * knows of the pass, so all split it alike. One when the rows cannot be cut apart: a span read both
 * ways must be in the cache before any of its tokens looks, and multi-axis positions, DeepStack rows,
 * per-layer inputs and AltUp streams are laid out by the whole pass. */
static int n_micro(const mx_ctx *c, const mx_seq_in *seqs, int n_seqs, int N, bool whole) {
    const mx_shard *sh = c->m->shard;
    if (!sh || whole || !c->mseqs) return 1;
    for (int s = 0; s < n_seqs; s++)
        if (seqs[s].mpos) return 1;
    for (int l = 0; l < c->m->arch.n_layers; l++)
        if (c->m->arch.layers[l].shortcut) return 1;
    return MX_MIN(N >= MX_MICRO_LONG ? sh->micro_long : sh->micro, N);
}

/* A pipelined pass in M micro-batches of tokens (a sequence may be cut between two: its second part
 * then sees the first's keys in each layer's cache, as a chunked prompt does). Each stage runs a
 * micro-batch's layers and sends it on, then the next, so stage s + 1 works on batch k while stage s
 * works on batch k + 1; the driver takes each batch's output back and runs the head on it while the
 * last stage works on the next. */
static int forward_micro(mx_ctx *c, const mx_fwd *f, int M, bool all, float *logits) {
    const mx_model *m = c->m;
    const mx_arch *a = &m->arch;
    const mx_shard *sh = m->shard;
    const mx_seq_in *seqs = f->seqs;
    int lo, hi, H = a->hidden, N = f->N;
    mx_model_layers(m, &lo, &hi);
    bool split = sh->vocab_n, has_head = sh->head;
    for (int s = 0; s < f->n_seqs; s++) c->mlen[s] = seqs[s].kv->len;
    int sc = 0, start = 0; /* sequence sc begins at token start */
    for (int k = 0; k < M; k++) {
        int t0 = (int)((long)N * k / M), t1 = (int)((long)N * (k + 1) / M), s0 = f->seq_of[t0], s1 = f->seq_of[t1 - 1] + 1;
        while (sc < s0) start += seqs[sc++].n;
        mx_fwd fm = *f;
        fm.seqs = c->mseqs;
        fm.n_seqs = s1 - s0;
        fm.N = t1 - t0;
        fm.pos = f->pos + t0;
        fm.seq_of = c->mseq_of;
        for (int r = 0; r < a->n_rope; r++) fm.cs[r] = f->cs[r] + (size_t)t0 * a->rope[r].dim;
        for (int s = s0, b = start; s < s1; b += seqs[s].n, s++) { /* b: sequence s's first token */
            int i0 = MX_MAX(t0, b) - b, i1 = MX_MIN(t1, b + seqs[s].n) - b;
            mx_seq_in *q = &c->mseqs[s - s0];
            *q = seqs[s];
            q->tokens += i0;
            q->n = i1 - i0;
            if (q->embed_row) q->embed_row += i0;
            q->kv->len = c->mlen[s] + i0; /* the part before this run is in the cache */
            for (int i = i0; i < i1; i++) c->mseq_of[b + i - t0] = s - s0;
        }
        float *x = c->b.x + (size_t)t0 * H;
        size_t n = (size_t)fm.N * H;
        if (lo > 0) sh->ops->recv_hidden(sh->ctx, x, n);
        for (int l = lo; l < hi; l++) {
            mx_layer_forward(&fm, l, x, c->b.xn, c->b.tmp, c->b.tmp2);
            sh->ops->progress(sh->ctx);
        }
        if (hi < a->n_layers) sh->ops->send_hidden(sh->ctx, x, n);
        else if (!has_head && !split) sh->ops->final_hidden(sh->ctx, x, n, true);
        else if (has_head) head_rows(c, f, t0, t1, all, logits); /* the last stage holds (its part of) the head */
    }
    for (int s = 0; s < f->n_seqs; s++) seqs[s].kv->len = c->mlen[s] + seqs[s].n;
    /* the driver, before the last stage: each micro-batch's output, then its logits */
    if (sh->driver && hi < a->n_layers) {
        /* x's rows were sent on: received into only once those sends are done. (Split logits go elsewhere
         * and must not wait: the last stage's parts send them before taking the next run's rows.) */
        if (!split) sh->ops->flush(sh->ctx);
        for (int k = 0; k < M; k++) {
            int t0 = (int)((long)N * k / M), t1 = (int)((long)N * (k + 1) / M);
            int row0 = 0, rows = head_count(f, t0, t1, all, &row0);
            if (split && rows) sh->ops->gather_logits(sh->ctx, NULL, rows, logits + (size_t)row0 * a->vocab);
            else if (!split) {
                sh->ops->final_hidden(sh->ctx, c->b.x + (size_t)t0 * H, (size_t)(t1 - t0) * H, false);
                head_rows(c, f, t0, t1, all, logits);
            }
        }
    }
    sh->ops->flush(sh->ctx);
    return MX_OK;
}

int mx_forward(mx_ctx *c, const mx_seq_in *seqs, int n_seqs, float *logits, bool all) {
    const mx_model *m = c->m;
    const mx_arch *a = &m->arch;
    const mx_shard *sh = m->shard;
    bool embeds = !sh || sh->embeds, has_head = !sh || sh->head;
    if (has_head && !a->tied && !m->lm_head.fmt) return mx_set_err("the checkpoint has no output head (lm_head): the model can embed (mlxcel embed) but not generate");
    bool bidir = a->shortconv.centered; /* a step would need tokens that come later */
    for (int k = 0; k < a->n_attn_specs; k++) bidir |= a->attn_specs[k]->bidirectional;
    if (bidir) return mx_set_err("the model attends bidirectionally (an embedding model): it can embed (mlxcel embed) but not generate");
    if (c->hidden_out && sh) return mx_set_err("a model split over processes does not give its hidden states (a next-n draft needs them)");
    int N = 0, H = a->hidden;
    for (int s = 0; s < n_seqs; s++) {
        const mx_kv *kv = seqs[s].kv;
        if (seqs[s].n < 1) return mx_set_err("empty sequence in forward pass");
        if (a->mtp.on && !seqs[s].hidden) return mx_set_err("a next-n draft module takes each token with a hidden state of its target");
        if (kv->len + seqs[s].n > kv->cap || kv->len + seqs[s].n > c->max_ctx)
            return mx_set_err("context is full: %d + %d tokens exceed the context size %d", kv->len, seqs[s].n, MX_MIN(kv->cap, c->max_ctx));
        if (N + seqs[s].n > c->max_tokens) return mx_set_err("batch of %d tokens exceeds the forward capacity %d", N + seqs[s].n, c->max_tokens);
        for (int i = 0; i < seqs[s].n; i++) {
            int32_t tok = seqs[s].tokens[i];
            if (tok < 0 || tok >= a->vocab) return mx_set_err("token id %d is outside the vocabulary (size %d)", tok, a->vocab);
            if (seqs[s].span_lo && seqs[s].span_hi[i] > seqs[s].span_lo[i] &&
                (seqs[s].span_lo[i] < 0 || seqs[s].span_hi[i] > kv->len + seqs[s].n))
                return mx_set_err("a bidirectional span [%d, %d) reaches past this pass (positions %d..%d)", seqs[s].span_lo[i],
                                  seqs[s].span_hi[i], kv->len, kv->len + seqs[s].n - 1);
            c->b.pos[N] = kv->len + i;
            c->b.seq_of[N] = s;
            c->max_len[N] = MX_MAX(kv->len + seqs[s].n, seqs[s].seg_end);
            N++;
        }
    }
    for (int s = 0; s < n_seqs; s++) /* rows below a shared prefix's end are about to be written again */
        if (seqs[s].kv->len < seqs[s].kv->share_len && mx_kv_unshare(m, seqs[s].kv)) return MX_ERR;
    for (int s = 0; s < n_seqs; s++) kv_populate(m, seqs[s].kv, seqs[s].kv->len, seqs[s].kv->len + seqs[s].n);
    if (a->pos == MX_POS_LEARNED) {
        for (int t = 0; t < N; t++)
            if (c->b.pos[t] + a->pos_offset >= a->max_pos + a->pos_offset)
                return mx_set_err("position %d exceeds max_position_embeddings %d", c->b.pos[t], a->max_pos);
    }
    if (sh) sh->ops->begin(sh->ctx, seqs, n_seqs, all);
    /* embeddings (image rows where a sequence gives them) */
    double t_op = c->prof ? mx_now() : 0;
    bool spans = false, esplit = embeds && sh && sh->vocab_n; /* the table split by vocabulary: a sum over the parts */
    for (int t = 0; t < N; t++) {
        const mx_seq_in *s = &seqs[c->b.seq_of[t]];
        int i = c->b.pos[t] - s->kv->len, er = s->embed_row ? s->embed_row[i] : -1;
        int32_t tok = s->tokens[i];
        float *row = c->b.x + (size_t)t * H;
        c->b.span[t] = s->span_lo ? s->span_lo[i] : 0;
        c->b.span[N + t] = s->span_hi ? s->span_hi[i] : 0;
        spans |= s->span_lo != NULL;
        if (!embeds) continue; /* a later pipeline stage: x comes from the previous one */
        if (er >= 0 && esplit && sh->tp_rank) memset(row, 0, (size_t)H * 4); /* summed over the parts: part 0's alone */
        else if (er >= 0) memcpy(row, s->embeds + (size_t)er * (1 + s->n_deep) * H, (size_t)H * 4);
        else if (!esplit) mx_weight_row(&m->embed, tok, row);
        else if (tok >= sh->vocab_lo && tok < sh->vocab_lo + sh->vocab_n) mx_weight_row(&m->embed, tok - sh->vocab_lo, row);
        else memset(row, 0, (size_t)H * 4); /* another part's token */
    }
    /* split: each token's row is one part's, the others add zeros (exact); scaled and positioned once */
    if (esplit) sh->ops->reduce(sh->ctx, c->b.x, (size_t)N * H);
    for (int t = 0; embeds && t < N; t++) {
        const mx_seq_in *s = &seqs[c->b.seq_of[t]];
        int i = c->b.pos[t] - s->kv->len, er = s->embed_row ? s->embed_row[i] : -1;
        float *row = c->b.x + (size_t)t * H;
        if (a->embed_scale != 1.0f && (er < 0 || s->embeds_scaled)) mx_scale(row, a->embed_scale, H);
        if (a->pos == MX_POS_LEARNED) {
            mx_weight_row(&m->pos_embed, c->b.pos[t] + a->pos_offset, c->b.tmp);
            mx_add(row, c->b.tmp, H);
        }
    }
    if (c->prof) mx_prof_add(c->prof, MX_OP_EMBED, t_op);
    if (a->names.embed_norm && embeds) mx_norm_rows(&a->norm, &m->embed_norm, c->b.x, c->b.x, N, H, H); /* NanoChat */
    int deep = 0;
    for (int s = 0; s < n_seqs; s++) deep = MX_MAX(deep, seqs[s].embed_row ? seqs[s].n_deep : 0);
    /* rope tables per spec, per sequence (dynamic variants depend on length) */
    if (c->prof) t_op = mx_now();
    if (a->pos == MX_POS_ROPE) {
        size_t off = 0;
        for (int r = 0; r < a->n_rope; r++) {
            int t = 0;
            for (int s = 0; s < n_seqs; s++) {
                mx_rope_positions(&a->rope[r], &seqs[s], c->b.pos + t, c->b.apos + t, c->max_tokens);
                const int *axes[MX_ROPE_MAX_AXES];
                for (int k = 0; k < MX_ROPE_MAX_AXES; k++) axes[k] = c->b.apos + (size_t)k * c->max_tokens + t;
                mx_rope_table_axes(&a->rope[r], axes, seqs[s].n, c->max_len[t], c->b.cs + off + (size_t)t * a->rope[r].dim);
                t += seqs[s].n;
            }
            off += (size_t)N * a->rope[r].dim;
        }
    }
    if (c->prof && a->pos == MX_POS_ROPE) mx_prof_add(c->prof, MX_OP_ROPE, t_op);
    mx_fwd f = {.m = m, .pool = c->pool, .seqs = seqs, .n_seqs = n_seqs, .N = N, .pos = c->b.pos, .seq_of = c->b.seq_of,
                .scratch = c->b.scratch, .max_tokens = c->max_tokens, .max_ctx = c->max_ctx, .carry = c->b.carry,
                .kp = &c->kp, .prof = c->prof, .span_lo = spans ? c->b.span : NULL, .span_hi = spans ? c->b.span + N : NULL};
    for (int r = 0, off = 0; r < a->n_rope; off += N * a->rope[r].dim, r++) f.cs[r] = c->b.cs + off;
    if (a->ple.dim && embeds) mx_ple_inputs(&f, c->b.x, c->b.ple);
    if (a->altup.n && embeds) mx_altup_embed(&f, c->b.x, c->b.altup);
    if (a->mtp.on) mx_mtp_inputs(&f, c->b.x, c->b.mtp);
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    size_t NH = (size_t)N * H, nple = (size_t)N * a->n_layers * a->ple.dim, nalt = mx_altup_floats(a, N);
    bool split = sh && sh->vocab_n;
    int M = n_micro(c, seqs, n_seqs, N, spans || deep || nple || nalt);
    if (M > 1) return forward_micro(c, &f, M, all, logits);
    /* a pipeline stage after the first: the hidden states (and a shortcut's carry, the per-layer inputs,
     * the AltUp streams) from the previous one */
    if (lo > 0) {
        sh->ops->recv_hidden(sh->ctx, c->b.x, NH);
        if (a->layers[lo - 1].shortcut) sh->ops->recv_hidden(sh->ctx, c->b.carry, NH);
        if (nple) {
            sh->ops->recv_hidden(sh->ctx, c->b.ple, nple);
            f.ple = c->b.ple;
        }
        if (nalt) sh->ops->recv_hidden(sh->ctx, c->b.altup, nalt);
    }
    for (int l = lo; l < hi; l++) {
        if (a->altup.n) mx_altup_predict(&f, l, c->b.altup, c->b.x);
        mx_layer_forward(&f, l, c->b.x, c->b.xn, c->b.tmp, c->b.tmp2);
        if (a->altup.n) mx_altup_correct(&f, l, c->b.altup, c->b.x, c->b.tmp);
        if (deep > l) add_deep(&f, l, c->b.x);
    }
    if (hi < a->n_layers) {
        sh->ops->send_hidden(sh->ctx, c->b.x, NH);
        if (a->layers[hi - 1].shortcut) sh->ops->send_hidden(sh->ctx, c->b.carry, NH);
        if (nple) sh->ops->send_hidden(sh->ctx, c->b.ple, nple);
        if (nalt) sh->ops->send_hidden(sh->ctx, c->b.altup, nalt);
    }
    if (a->altup.n && hi == a->n_layers) mx_altup_unembed(&f, c->b.altup, c->b.x, c->b.tmp); /* before the head */
    for (int s = 0; s < n_seqs; s++) seqs[s].kv->len += seqs[s].n;
    /* the head whole: the driver's, the last stage sends it its output; split by vocabulary: each part
     * of the last stage computes its share and the driver gathers them */
    if (!has_head) {
        if (split && sh->driver) sh->ops->gather_logits(sh->ctx, NULL, head_count(&f, 0, N, all, NULL), logits);
        else if (!split && hi == a->n_layers) sh->ops->final_hidden(sh->ctx, c->b.x, NH, true);
        if (sh) sh->ops->flush(sh->ctx);
        return MX_OK;
    }
    if (sh) sh->ops->flush(sh->ctx); /* before x takes the last stage's output */
    if (!split && hi < a->n_layers) sh->ops->final_hidden(sh->ctx, c->b.x, NH, false);
    if (c->hidden_out) { /* every token's, for a next-n draft (one process: refused above otherwise) */
        if (a->names.final_norm) mx_norm_rows_f(&f, &a->norm, &m->final_norm, c->hidden_out, c->b.x, N, H, H);
        else memcpy(c->hidden_out, c->b.x, NH * 4);
    }
    head_rows(c, &f, 0, N, all, logits);
    return MX_OK;
}
