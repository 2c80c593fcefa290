/* The float formats (f32, f16, bf16): their records, threading over output
 * rows, and the portable path. SIMD paths live in matmul_avx2.c /
 * matmul_avx512.c. */
#include "kernels.h"
#include "matmul_impl.h"
#include "../base/base.h"
#include "../base/cpu.h"
#include "../format/safetensors.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Portable: dequantize-free dot products over float rows. */
void mx_mm_float_portable(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    float row[256];
    for (int r = r0; r < r1; r++) {
        const uint8_t *p = w->data + (size_t)r * w->row_bytes;
        for (int t = 0; t < n; t++) y[(size_t)t * ldy + r] = 0;
        for (int c0 = 0; c0 < w->cols; c0 += 256) {
            int len = MX_MIN(256, w->cols - c0);
            if (w->fmt == MX_W_F32) memcpy(row, p + (size_t)c0 * 4, (size_t)len * 4);
            else {
                for (int c = 0; c < len; c++) {
                    uint16_t h;
                    memcpy(&h, p + 2 * (size_t)(c0 + c), 2);
                    row[c] = w->fmt == MX_W_F16 ? mx_f16_to_f32_fn(h) : mx_bf16_to_f32_fn(h);
                }
            }
            for (int t = 0; t < n; t++) {
                const float *xt = x + (size_t)t * ldx + c0;
                float s = 0;
                for (int c = 0; c < len; c++) s += row[c] * xt[c];
                y[(size_t)t * ldy + r] += s;
            }
        }
    }
}

typedef struct {
    const mx_weight *w;
    const float *x;
    int n, ldx, ldy, toks_per_task;
    mx_rowsplit rs;
    float *y;
    mx_mm_fn fn;
    bool split; /* the kernel reads x as mx_bf16_split writes it (BF16 weights) */
} mm_job;

/* Task i covers row chunk i % tasks and token chunk i / tasks. */
static void mm_task(void *ctx, int i, int tid) {
    (void)tid;
    mm_job *j = ctx;
    int tasks = mx_rowsplit_tasks(&j->rs), rt = i % tasks, tt = i / tasks, r[2][2];
    mx_rowsplit_range(&j->rs, rt, r);
    int t0 = tt * j->toks_per_task, t1 = MX_MIN(j->n, t0 + j->toks_per_task);
    if (r[0][0] >= r[0][1] || t0 >= t1) return;
    j->fn(j->w, j->x + (size_t)t0 * j->ldx, t1 - t0, j->ldx, j->y + (size_t)t0 * j->ldy, j->ldy, r[0][0], r[0][1]);
}

/* The kernel for w over n tokens under kp, and whether it reads x split.
 * The bf16 dot path (kp->bf16_dot) serves 24 tokens or more: below, the
 * exact dot form is as fast (packing dominates); the fast mode takes it for
 * every n (one product per pair in decode too). */
static bool bfr_ok(const mx_weight *w, const mx_cpu_info *c);
static mx_mm_fn pick_float(const mx_weight *w, int n, const mx_kpolicy *kp, bool *split) {
    mx_cpu_info c = mx_kpolicy_cpu(kp);
    *split = false;
    if (c.level >= MX_CPU_AVX512) {
        bool dot = ((kp->bf16_dot && n >= 24) || kp->fast) && c.avx512_bf16 && w->fmt == MX_W_BF16;
        if (w->prep && bfr_ok(w, &c)) { /* repacked at load: rows in lanes */
            *split = true;
            return dot ? mx_mm_bfr1_avx512 : mx_mm_bfr2_avx512;
        }
        if (dot) {
            *split = true;
            return mx_mm_bf16_dot_avx512;
        }
        if (w->fmt == MX_W_BF16 && c.avx512_bf16) {
            *split = true;
            return mx_mm_bf2_avx512;
        }
        return mx_mm_float_avx512;
    }
    if (c.level >= MX_CPU_AVX2) return mx_mm_float_avx2;
    return mx_mm_float_portable;
}

void mx_bf16_split(const float *x, int n, int ldx, int K, uint16_t *xb) {
    const mx_cpu_info *c = mx_cpu();
    if (c->level >= MX_CPU_AVX512 && c->avx512_bf16) {
        mx_bf16_split_avx512(x, n, ldx, K, xb);
        return;
    }
    size_t ld = mx_split_ld(K), q2 = mx_split_q2(K);
    for (int t = 0; t < n; t++)
        for (int k = 0; k < K; k++) {
            float v = x[(size_t)t * ldx + k];
            uint16_t h = mx_f32_to_bf16(v);
            xb[(size_t)t * ld + k] = h;
            xb[(size_t)t * ld + q2 + k] = mx_f32_to_bf16(v - mx_bf16_to_f32(h));
        }
}

/* x split for the bf2 kernels in the calling thread's buffer (grown, never
 * shrunk: no allocation per token); the pool shares long prompts. */
static _Atomic unsigned long g_bf2_calls, g_bf16dot_calls;
unsigned long mx_matmul_bf2_calls(void) { return g_bf2_calls; }
unsigned long mx_matmul_bf16dot_calls(void) { return g_bf16dot_calls; }
static _Thread_local uint16_t *tl_xb;
static _Thread_local size_t tl_xbcap;
typedef struct { const float *x; int n, ldx, K, per; uint16_t *xb; } split_job;
static void split_task(void *ctx, int i, int tid) {
    (void)tid;
    const split_job *p = ctx;
    int t0 = i * p->per, t1 = MX_MIN(p->n, t0 + p->per);
    mx_bf16_split(p->x + (size_t)t0 * p->ldx, t1 - t0, p->ldx, p->K, p->xb + (size_t)t0 * mx_split_ld(p->K));
}
static const uint16_t *split_x(const float *x, int n, int ldx, int K, mx_pool *pool) {
    size_t need = (size_t)n * mx_split_ld(K);
    if (need > tl_xbcap) {
        mx_aligned_free(tl_xb);
        tl_xb = mx_aligned_alloc(need * sizeof(uint16_t));
        tl_xbcap = tl_xb ? need : 0;
        if (!tl_xb) return NULL;
    }
    split_job p = {x, n, ldx, K, 16, tl_xb};
    if (n >= 32) mx_pool_run(pool, split_task, &p, (n + p.per - 1) / p.per);
    else mx_bf16_split(x, n, ldx, K, tl_xb);
    return tl_xb;
}

/* Points j at its split x (*xb: already made from this x, or NULL). Out of
 * memory: the exact kernel, which reads x as it is. */
static void mm_use_split(mm_job *j, const uint16_t **xb, mx_pool *pool) {
    if (!j->split) return;
    if (!*xb) *xb = split_x(j->x, j->n, j->ldx, j->w->cols, pool);
    if (*xb) {
        j->x = (const float *)(const void *)*xb;
        j->ldx = (int)(mx_split_ld(j->w->cols) / 2);
        bool one = j->fn == mx_mm_bf16_dot_avx512 || j->fn == mx_mm_bfr1_avx512;
        atomic_fetch_add_explicit(one ? &g_bf16dot_calls : &g_bf2_calls, 1, memory_order_relaxed);
    } else j->fn = mx_mm_float_avx512;
}

/* Splits w x n tokens into row (and token) chunks for the pool. */
static int mm_setup(mm_job *j, const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp) {
    int nt = mx_pool_size(kp->pool);
    *j = (mm_job){w, x, n, ldx, ldy, n, {0}, y, NULL, false};
    j->fn = pick_float(w, n, kp, &j->split);
    /* Contiguous row chunks of >= 16 rows (whole cache lines of y, and the
     * kernels' 16-row panels), 12 per thread for balance on this noisy VM
     * (a tile re-reads its token block from L2 whatever the chunk size; 1B
     * bf16 pp512 against 4 per thread: -0.3..+4.7 %, median +2 %); lanes for
     * a decode step. */
    int want = nt > 1 ? nt * 12 : 1;
    /* The rows-in-lanes kernels: tasks of whole tiles, 3 blocks of 16 rows
     * (prefill), 4 (decode: each block's sum is one chain over its pairs,
     * so a task of one block, 256 KiB of a 1B down projection, ran on one
     * chain's latency: 36 GB/s against gate/up's 73). */
    bool bfr = j->fn == mx_mm_bfr1_avx512 || j->fn == mx_mm_bfr2_avx512;
    j->rs = mx_rowsplit_make(w, want, bfr ? (n == 1 ? 64 : 48) : 16, nt > 1 && n < 16 ? nt : 1, 1);
    int tasks = mx_rowsplit_tasks(&j->rs);
    /* Few rows but many tokens (small projections in a long prefill): split
     * the tokens too, in chunks of >= 48 so the packed weights are reused. */
    if (nt > 1 && j->rs.lanes == 1 && tasks < want && n >= 96) {
        int tt = MX_MIN((want + tasks - 1) / tasks, n / 48);
        if (tt > 1) j->toks_per_task = (n + tt - 1) / tt;
    }
    return tasks * ((n + j->toks_per_task - 1) / j->toks_per_task);
}

/* Several float weights that read the same x (q/k/v, gate/up) run as one
 * pool job: one wait for the slowest task instead of one per matrix. */
#define MM_MULTI_MAX 4

static bool is_float(const mx_weight *w) { return w->fmt == MX_W_F32 || w->fmt == MX_W_F16 || w->fmt == MX_W_BF16; }

static bool float_matmul_multi(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy,
                               const mx_kpolicy *kp) {
    bool flt = count >= 2 && count <= MM_MULTI_MAX && n > 0;
    for (int i = 0; i < count && flt; i++) flt = is_float(w[i]) && w[i]->rows > 0 && w[i]->cols == w[0]->cols;
    if (!flt) return false;
    mm_job j[MM_MULTI_MAX];
    mx_task_set sets[MM_MULTI_MAX];
    const uint16_t *xb = NULL; /* one split serves every BF16 weight (same cols) */
    for (int i = 0; i < count; i++) {
        int tasks = mm_setup(&j[i], w[i], x, n, ldx, y[i], ldy, kp);
        mm_use_split(&j[i], &xb, kp->pool);
        sets[i] = (mx_task_set){mm_task, &j[i], tasks, j[i].rs.lanes};
    }
    mx_pool_run_sets(kp->pool, sets, count);
    return true;
}

static void float_matmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp) {
    if (n <= 0 || w->rows <= 0) return;
    mm_job j;
    const uint16_t *xb = NULL;
    int tasks = mm_setup(&j, w, x, n, ldx, y, ldy, kp);
    mm_use_split(&j, &xb, kp->pool);
    mx_pool_run_lanes(kp->pool, mm_task, &j, tasks, j.rs.lanes);
}

static size_t float_bytes(const mx_weight *w) { return (size_t)w->rows * w->row_bytes; }

static void float_row(const mx_weight *w, int r, float *out) {
    const uint8_t *p = w->data + (size_t)r * w->row_bytes;
    if (w->fmt == MX_W_F32) { memcpy(out, p, (size_t)w->cols * 4); return; }
    for (int c = 0; c < w->cols; c++) {
        uint16_t h;
        memcpy(&h, p + 2 * c, 2);
        out[c] = w->fmt == MX_W_F16 ? mx_f16_to_f32(h) : mx_bf16_to_f32(h);
    }
}

/* ---- BF16 rows in lanes: the copy made at load (matmul_impl.h mx_bfr) ----
 * Made on AVX-512 BF16 CPUs for weights mapped from the checkpoint (their
 * pages go back to the page cache as the copy is made, so memory holds one
 * copy; a row lookup, the tied embedding's, faults its page back in). A
 * weight that owns its storage (transposed or converted at load) keeps the
 * dot tiles: a copy would double it. */
static bool bfr_ok(const mx_weight *w, const mx_cpu_info *c) {
    return w->fmt == MX_W_BF16 && c->level >= MX_CPU_AVX512 && c->avx512_bf16 && w->rows > 0 && w->cols > 0;
}

#define BFR_TASK_BLOCKS 32 /* blocks per task: the source pages are dropped per task */
typedef struct { const mx_weight *w; mx_bfr *p; int nb; bool drop; } bfr_job;

static void bfr_task(void *ctx, int t, int tid) {
    (void)tid;
    const bfr_job *j = ctx;
    int b0 = t * BFR_TASK_BLOCKS, b1 = MX_MIN(j->nb, b0 + BFR_TASK_BLOCKS);
    mx_bfr_pack_avx512(j->w, b0, b1, j->p->base, j->p->blk);
    int r0 = b0 * 16, r1 = MX_MIN(j->w->rows, b1 * 16);
    if (j->drop) mx_st_release(j->w->data + (size_t)r0 * j->w->row_bytes, (size_t)(r1 - r0) * j->w->row_bytes);
}

static mx_bfr *bfr_make(const mx_weight *w, mx_pool *pool) {
    mx_bfr *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    int nb = (w->rows + 15) / 16;
    p->np = (w->cols + 1) / 2;
    p->blk = (size_t)p->np * 64;
    p->base = mx_arena_alloc((size_t)nb * p->blk, &p->chunk);
    if (!p->base) { free(p); return NULL; }
    size_t bytes = (size_t)w->rows * w->row_bytes;
    bfr_job j = {w, p, nb, bytes > ((size_t)32 << 20)}; /* large ones drop as they go, small ones once */
    mx_pool_run(pool, bfr_task, &j, (nb + BFR_TASK_BLOCKS - 1) / BFR_TASK_BLOCKS);
    mx_st_release(w->data, bytes); /* the pages the tasks' edges shared */
    return p;
}

static int bf16_prepare(mx_weight *w, const mx_kpolicy *kp) {
    mx_cpu_info c = mx_kpolicy_cpu(kp);
    if (w->prep || !kp->bf16_repack || w->owned || !bfr_ok(w, &c)) return MX_OK;
    w->prep = bfr_make(w, kp->pool); /* NULL (out of memory): the dot tiles serve it */
    return MX_OK;
}

static void bf16_release(mx_weight *w) {
    mx_bfr *p = w->prep;
    w->prep = NULL;
    if (!p) return;
    if (p->chunk) mx_arena_free(p->chunk);
    free(p);
}

static int float_slice(const mx_weight *w, int r0, int n, mx_weight *out) {
    mx_weight_view_rows(w, r0, n, out);
    const mx_bfr *p = w->fmt == MX_W_BF16 ? w->prep : NULL;
    if (!p) return MX_OK;
    if (r0 % 16) { /* not on a block: the view's own copy */
        out->prep = bfr_make(out, NULL);
        return MX_OK;
    }
    mx_bfr *v = malloc(sizeof *v);
    if (!v) return MX_OK; /* the dot tiles serve it */
    *v = *p;
    v->base += (size_t)(r0 / 16) * p->blk;
    v->chunk = NULL; /* w's */
    out->prep = v;
    return MX_OK;
}

#define FLOAT_FORMAT(id, FMT, NAME, ...)                                                                                    \
    MX_WFORMAT(id, FMT, .name = NAME, .bytes = float_bytes, .row = float_row, .slice = float_slice, .matmul = float_matmul, \
               .matmul_multi = float_matmul_multi, __VA_ARGS__)
FLOAT_FORMAT(f32, MX_W_F32, "f32", .prepare = NULL)
FLOAT_FORMAT(f16, MX_W_F16, "f16", .prepare = NULL)
FLOAT_FORMAT(bf16, MX_W_BF16, "bf16", .prepare = bf16_prepare, .release = bf16_release)
