/* Quantized matrix products: ISA dispatch, x preparation, threading over
 * output rows, the portable kernel, and the int8 path's switch and arena.
 * The f32 kernels match dequantize-then-multiply up to summation order. */
#define _GNU_SOURCE
#include "quant_impl.h"
#include "../base/base.h"
#include "../base/cpu.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Portable: dequantize a row chunk once, use it for every token. */
void mxq_mm_portable(const mxq_ctx *c, int r0, int r1) {
    const mx_weight *w = c->w;
    float buf[256];
    for (int r = r0; r < r1; r++) {
        for (int t = 0; t < c->n; t++) c->y[(size_t)t * c->ldy + r] = 0;
        for (int c0 = 0; c0 < w->cols; c0 += 256) {
            int len = MX_MIN(256, w->cols - c0);
            mxq_deq(w, r, c0, len, buf);
            for (int t = 0; t < c->n; t++) {
                const float *xt = c->x + (size_t)t * c->ldx + c0;
                float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                int k = 0;
                for (; k + 4 <= len; k += 4) {
                    s0 += buf[k] * xt[k];
                    s1 += buf[k + 1] * xt[k + 1];
                    s2 += buf[k + 2] * xt[k + 2];
                    s3 += buf[k + 3] * xt[k + 3];
                }
                for (; k < len; k++) s0 += buf[k] * xt[k];
                c->y[(size_t)t * c->ldy + r] += (s0 + s1) + (s2 + s3);
            }
        }
    }
}

int mxq_perm_for(const mx_weight *w, int level) {
    bool four = (w->fmt == MX_W_AFFINE && w->bits == 4) || w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4;
    if (!four || level == MX_CPU_PORTABLE) return 0;
    int p = level >= MX_CPU_AVX512 ? 16 : 8;
    return w->cols % (2 * p) == 0 ? p : 0;
}

typedef struct {
    mxq_ctx c;
    mxq_fn fn;
    mx_rowsplit rs;
    bool per_token; /* run the kernel once per token (n = 1 each) */
} qjob;

static void q_task(void *ctx, int i, int tid) {
    (void)tid;
    qjob *j = ctx;
    int r[2][2];
    mx_rowsplit_range(&j->rs, i, r);
    if (j->rs.streams == 2) { /* the one-token int8 kernel reads both at once */
        mxq_vnni_dec2(&j->c, r[0][0], r[0][1], r[1][0], r[1][1]);
        return;
    }
    int r0 = r[0][0], r1 = r[0][1];
    if (r0 >= r1) return;
    if (!j->per_token) { j->fn(&j->c, r0, r1); return; }
    /* the task's rows stay in cache while each token streams past them
     * (f32 activations only: the int8 path computes a token alike in any batch
     * and never runs per token) */
    int ng = j->c.xs ? mxq_ngroups(j->c.w) : 0;
    for (int t = 0; t < j->c.n; t++) {
        mxq_ctx c1 = j->c;
        c1.n = 1;
        if (c1.x) c1.x = j->c.x + (size_t)t * j->c.ldx;
        c1.y = j->c.y + (size_t)t * j->c.ldy;
        if (c1.xs) c1.xs = j->c.xs + (size_t)t * ng;
        j->fn(&c1, r0, r1);
    }
}

/* Per-thread buffers for the prepared activations, grown as needed and
 * kept: no allocation per call once the largest shape has been seen. */
static _Thread_local float *tl_buf[3];
static _Thread_local size_t tl_cap[3];
static float *scratch(int i, size_t n) {
    if (n > tl_cap[i]) {
        free(tl_buf[i]);
        tl_buf[i] = malloc(n * sizeof(float));
        tl_cap[i] = tl_buf[i] ? n : 0;
    }
    return tl_buf[i];
}

static _Thread_local mx_qmode tl_mode;
void mx_qmatmul_set_mode(mx_qmode m) { tl_mode = m; }

static _Atomic int g_int8 = -1; /* -1: not set, MLXCEL_INT8 decides */
static _Atomic unsigned long g_int8_calls, g_bf16_calls;
void mx_qmatmul_set_int8(bool on) { g_int8 = on; }
unsigned long mx_qmatmul_int8_calls(void) { return g_int8_calls; }
unsigned long mx_qmatmul_bf16_calls(void) { return g_bf16_calls; }

bool mx_qmatmul_int8(const mx_weight *w) {
    if (g_int8 < 0) {
        const char *e = getenv("MLXCEL_INT8");
        g_int8 = !(e && !strcmp(e, "0"));
    }
    const mx_cpu_info *ci = mx_cpu();
    bool affine = w->fmt == MX_W_AFFINE && w->bits >= 1 && w->bits <= 8 && w->bits != 7 && (w->group == 32 || w->group == 64 || w->group == 128);
    bool e2m1 = (w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4) && (w->group == 16 || w->group == 32);
    bool fp8 = ((w->fmt == MX_W_MXFP8 && w->group == 32) || (w->fmt == MX_W_FP8B && w->group == 128)) && ci->avx512_bf16; /* bf16 dots */
    return g_int8 && ci->level >= MX_CPU_AVX512 && ci->avx512_vnni && (affine || e2m1 || fp8) && w->cols % 64 == 0 &&
           w->cols % w->group == 0;
}

static _Thread_local int8_t *tl_q;
static _Thread_local size_t tl_qcap;

/* The int8 path: repack w on first use, code each token's x. */
static bool prep_int8(qjob *j, const float *x, int ldx, mx_pool *pool) {
    const mx_weight *w = j->c.w;
    int n = j->c.n, ng = mxq_ngroups(w);
    bool fp8 = mxq_is_e4m3(w);
    size_t ldq = fp8 ? 2 * mx_split_ld(w->cols) : MXQ_LDQ(w->cols), qn = (size_t)n * ldq; /* bytes per token */
    if (qn > tl_qcap) {
        free(tl_q);
        tl_q = malloc(qn);
        tl_qcap = tl_q ? qn : 0;
    }
    float *xd = scratch(0, (size_t)n * ng), *xs = scratch(1, (size_t)n * ng);
    bool wg = n >= MXQ_WG_MIN && !fp8;
    int32_t *xk = wg ? (int32_t *)(void *)scratch(2, (size_t)n * ng) : NULL;
    if (!tl_q || !xd || !xs || (wg && !xk) || !mxq_vnni_ready(w, pool)) return false;
    bool e2m1 = w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4;
    if (fp8) mx_bf16_split(x, n, ldx, w->cols, (uint16_t *)(void *)tl_q);
    else
        for (int t = 0; t < n; t++)
            mxq_vnni_prep(x + (size_t)t * ldx, w->cols, w->group, tl_q + (size_t)t * ldq, xd + (size_t)t * ng, xs + (size_t)t * ng,
                          xk ? xk + (size_t)t * ng : NULL);
    if (e2m1) /* the E2M1 group step's factors (VQ_GROUP_STEP), once per group instead of per use */
        for (size_t i = 0; i < (size_t)n * (size_t)ng; i++) {
            xd[i] *= 0.5f;
            xs[i] *= -6.0f;
        }
    j->c.xq = tl_q;
    j->c.xd = xd;
    j->c.xs = xs;
    j->c.xk = xk;
    j->c.x = NULL;
    j->c.ldx = w->cols;
    j->fn = mxq_vnni_mm;
    atomic_fetch_add_explicit(&g_int8_calls, 1, memory_order_relaxed);
    if (fp8) atomic_fetch_add_explicit(&g_bf16_calls, 1, memory_order_relaxed);
    return true;
}

/* Tasks of whole 48-row panels (the f32 prefill kernels' 3*VL rows, VL = 8
 * or 16), several per thread; a few tokens (decode) in one lane per thread,
 * and the int8 path's one-token kernel in 16-row blocks from two streams
 * per lane (see mx_rowsplit). */
static void split_rows(qjob *j, int nt) {
    bool one = j->fn == mxq_vnni_mm && j->c.n == 1;
    int lanes = j->c.n < 16 && (nt > 1 || one) ? nt : 1;
    j->rs = mx_rowsplit_make(j->c.w, nt * (j->fn == mxq_vnni_mm ? 16 : 4), one ? 16 : 48, lanes, one ? 2 : 1);
}

void mx_qmatmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, mx_pool *pool) {
    if (n <= 0) return;
    bool known = w->fmt == MX_W_AFFINE || w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4 || w->fmt == MX_W_MXFP8 || w->fmt == MX_W_FP8B;
    if (!known) {
        for (int t = 0; t < n; t++) memset(y + (size_t)t * ldy, 0, (size_t)w->rows * sizeof(float));
        return;
    }
    const mx_cpu_info *ci = mx_cpu();
    qjob j;
    memset(&j, 0, sizeof j);
    j.c.w = w;
    j.c.n = n;
    j.c.y = y;
    j.c.ldy = ldy;
    j.c.invariant = tl_mode == MX_QMODE_PANEL;
    j.per_token = tl_mode == MX_QMODE_PER_TOKEN && n > 1;
    j.fn = ci->level >= MX_CPU_AVX512 ? mxq_mm_avx512 : ci->level >= MX_CPU_AVX2 ? mxq_mm_avx2 : mxq_mm_portable;
    /* One token or many run the same integer sums and float steps, so the
     * modes need nothing more, and a batched decode step reads the weights
     * once for all its tokens instead of once per token. */
    if (mx_qmatmul_int8(w) && prep_int8(&j, x, ldx, pool)) {
        j.per_token = false;
        goto run;
    }
    int perm = mxq_perm_for(w, ci->level);
    float *xp = NULL, *xs = NULL;
    if (perm) {
        /* Within each chunk of 2*perm columns: even columns, then odd ones. */
        xp = scratch(0, (size_t)n * w->cols);
        if (!xp) { perm = 0; j.fn = mxq_mm_portable; }
        else {
            for (int t = 0; t < n; t++) {
                const float *s = x + (size_t)t * ldx;
                float *d = xp + (size_t)t * w->cols;
                for (int c0 = 0; c0 < w->cols; c0 += 2 * perm)
                    for (int i = 0; i < perm; i++) {
                        d[c0 + i] = s[c0 + 2 * i];
                        d[c0 + perm + i] = s[c0 + 2 * i + 1];
                    }
            }
        }
    }
    j.c.perm = perm;
    j.c.x = perm ? xp : x;
    j.c.ldx = perm ? w->cols : ldx;
    if (w->fmt == MX_W_AFFINE && j.fn != mxq_mm_portable) {
        int ng = mxq_ngroups(w);
        xs = scratch(1, (size_t)n * ng);
        if (!xs) j.fn = mxq_mm_portable;
        else {
            for (int t = 0; t < n; t++)
                for (int g = 0; g < ng; g++) {
                    const float *s = x + (size_t)t * ldx + (size_t)g * w->group;
                    float a = 0;
                    for (int k = 0; k < w->group; k++) a += s[k];
                    xs[(size_t)t * ng + g] = a;
                }
        }
        j.c.xs = xs;
    }
    if (j.fn == mxq_mm_portable && perm) { /* fell back: natural order */
        j.c.x = x;
        j.c.ldx = ldx;
        j.c.perm = 0;
    }
run:
    split_rows(&j, mx_pool_size(pool));
    mx_pool_run_lanes(pool, q_task, &j, mx_rowsplit_tasks(&j.rs), j.rs.lanes);
}

/* Several weights that read the same x (q/k/v, gate/up) on the int8 path:
 * x is coded once and one pool job covers every matrix, instead of one job
 * (and one wait for its slowest task) per matrix. */
#define QMULTI_MAX 4

bool mx_qmatmul_multi(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy, mx_pool *pool) {
    if (count < 2 || count > QMULTI_MAX || n <= 0) return false;
    for (int i = 0; i < count; i++)
        if (!mx_qmatmul_int8(w[i]) || w[i]->cols != w[0]->cols || w[i]->group != w[0]->group ||
            mxq_is_e4m3(w[i]) != mxq_is_e4m3(w[0]) ||
            !mxq_vnni_ready(w[i], pool))
            return false;
    qjob j[QMULTI_MAX];
    mx_task_set sets[QMULTI_MAX];
    memset(j, 0, sizeof j);
    j[0].c.w = w[0];
    j[0].c.n = n;
    if (!prep_int8(&j[0], x, ldx, pool)) return false;
    int nt = mx_pool_size(pool);
    for (int i = 0; i < count; i++) {
        if (i) {
            j[i] = j[0];
            j[i].c.w = w[i];
        }
        j[i].c.y = y[i];
        j[i].c.ldy = ldy;
        split_rows(&j[i], nt);
        sets[i] = (mx_task_set){q_task, &j[i], mx_rowsplit_tasks(&j[i].rs), j[i].rs.lanes};
    }
    mx_pool_run_sets(pool, sets, count);
    return true;
}

static pthread_mutex_t g_ril_mu = PTHREAD_MUTEX_INITIALIZER;
void mxq_ril_lock(void) { pthread_mutex_lock(&g_ril_mu); }
void mxq_ril_unlock(void) { pthread_mutex_unlock(&g_ril_mu); }

/* Repacked weights live in shared 64 MiB huge-page chunks (a model's
 * matrices are repacked one after another at its first forward): one
 * mapping per matrix would either round each up to 2 MiB (a quarter more
 * memory for a 1B model) or take 4 KiB page faults, which cost several
 * microseconds each on VMs. A chunk is unmapped when its last matrix is
 * freed. Called under mxq_ril_lock. Portable C: mx_weight_free calls
 * mxq_ril_free on every CPU. */
#define ARENA_CHUNK ((size_t)64 << 20)
typedef struct arena_chunk { uint8_t *base; size_t size, used; int live; } arena_chunk;
static arena_chunk *g_cur;

uint8_t *mxq_arena_alloc(size_t n, void **chunk) {
    n = (n + 63) & ~(size_t)63;
    if (!g_cur || g_cur->size - g_cur->used < n) {
        size_t huge = (size_t)2 << 20, size = MX_MAX(ARENA_CHUNK, (n + huge - 1) & ~(huge - 1));
        uint8_t *raw = mmap(NULL, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) return NULL;
        uint8_t *base = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
        if (base > raw) munmap(raw, (size_t)(base - raw));
        if (base + size < raw + size + huge) munmap(base + size, (size_t)(raw + size + huge - (base + size)));
#ifdef MADV_HUGEPAGE
        madvise(base, size, MADV_HUGEPAGE);
#endif
        arena_chunk *c = calloc(1, sizeof *c);
        if (!c) { munmap(base, size); return NULL; }
        c->base = base;
        c->size = size;
        if (g_cur && g_cur->live == 0) { munmap(g_cur->base, g_cur->size); free(g_cur); }
        g_cur = c;
    }
    uint8_t *p = g_cur->base + g_cur->used;
    g_cur->used += n;
    g_cur->live++;
    *chunk = g_cur;
    return p;
}

static void arena_free(void *chunk) {
    arena_chunk *c = chunk;
    if (--c->live > 0) return;
    if (c == g_cur) { c->used = 0; return; } /* empty: reuse its pages */
    munmap(c->base, c->size);
    free(c);
}

void mxq_ril_free(void *q) {
    mxq_ril *p = q;
    if (!p) return;
    mxq_ril_lock();
    arena_free(p->chunk);
    mxq_ril_unlock();
    free(p);
}
