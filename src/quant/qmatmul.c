/* Quantized matrix products, the records' matmul, matmul_multi, prepare and
 * release: ISA dispatch under the policy, x preparation, threading over
 * output rows, the portable kernel, and the int8 path's repacked copies.
 * The f32 kernels match dequantize-then-multiply up to summation order. */
#define _GNU_SOURCE
#include "quant_impl.h"
#include "../base/base.h"
#include "../base/cpu.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

static _Atomic unsigned long g_int8_calls, g_bf16_calls, g_one_calls;
unsigned long mx_qmatmul_int8_calls(void) { return g_int8_calls; }
unsigned long mx_qmatmul_one_calls(void) { return g_one_calls; }
unsigned long mx_qmatmul_bf16_calls(void) { return g_bf16_calls; }

/* w takes the int8 path on a CPU with ci's features (once prepared) */
bool mxq_int8_ok(const mx_weight *w, const mx_cpu_info *ci) {
    bool affine = w->fmt == MX_W_AFFINE && w->bits >= 1 && w->bits <= 8 && w->bits != 7 && (w->group == 32 || w->group == 64 || w->group == 128);
    bool e2m1 = (w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4) && (w->group == 16 || w->group == 32);
    bool fp8 = ((w->fmt == MX_W_MXFP8 && w->group == 32) || (w->fmt == MX_W_FP8B && w->group == 128)) && ci->avx512_bf16; /* bf16 dots */
    return ci->level >= MX_CPU_AVX512 && ci->avx512_vnni && (affine || e2m1 || fp8) && w->cols % 64 == 0 && w->cols % w->group == 0;
}

/* the policy codes activations as integers (12-bit, or 8-bit under the fast mode) */
static bool int8_on(const mx_kpolicy *kp) { return kp->act12 || kp->act8 || kp->fast; }

/* w's repacked copy serves this product */
static bool takes_int8(const mx_weight *w, const mx_kpolicy *kp, const mx_cpu_info *ci) {
    return int8_on(kp) && w->prep && mxq_int8_ok(w, ci);
}

static _Thread_local int8_t *tl_q;
static _Thread_local size_t tl_qcap;

/* The int8 path: code each token's x (w is prepared), as one 8-bit code
 * per value where the policy says act8 (E4M3 weights keep their exact bf16
 * split). */
static bool prep_int8(qjob *j, const float *x, int ldx, bool act8) {
    const mx_weight *w = j->c.w;
    int n = j->c.n, ng = mxq_ngroups(w);
    bool fp8 = mxq_is_e4m3(w), one = act8 && !fp8;
    size_t ldq = fp8 ? 2 * mx_split_ld(w->cols) : MXQ_LDQ(w->cols), qn = (size_t)n * ldq; /* bytes per token */
    if (qn > tl_qcap) {
        free(tl_q);
        tl_q = malloc(qn);
        tl_qcap = tl_q ? qn : 0;
    }
    float *xd = scratch(0, (size_t)n * ng), *xs = scratch(1, (size_t)n * ng);
    bool wg = !fp8 && mxq_vnni_wg(w, n, one);
    int32_t *xk = wg ? (int32_t *)(void *)scratch(2, (size_t)n * ng) : NULL;
    if (!tl_q || !xd || !xs || (wg && !xk)) return false;
    bool e2m1 = w->fmt == MX_W_MXFP4 || w->fmt == MX_W_NVFP4;
    if (fp8) mx_bf16_split(x, n, ldx, w->cols, (uint16_t *)(void *)tl_q);
    else if (one)
        for (int t = 0; t < n; t++) mxq_vnni_prep8(x + (size_t)t * ldx, w->cols, w->group, tl_q + (size_t)t * ldq, xd + (size_t)t * ng, xs + (size_t)t * ng);
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
    j->c.one = one;
    j->c.x = NULL;
    j->c.ldx = w->cols;
    j->fn = mxq_vnni_mm;
    atomic_fetch_add_explicit(&g_int8_calls, 1, memory_order_relaxed);
    if (fp8) atomic_fetch_add_explicit(&g_bf16_calls, 1, memory_order_relaxed);
    if (one) atomic_fetch_add_explicit(&g_one_calls, 1, memory_order_relaxed);
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

void mxq_matmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp) {
    if (n <= 0) return;
    mx_cpu_info ci = mx_kpolicy_cpu(kp);
    qjob j;
    memset(&j, 0, sizeof j);
    j.c.w = w;
    j.c.n = n;
    j.c.y = y;
    j.c.ldy = ldy;
    j.c.invariant = kp->qmode == MX_QMODE_PANEL;
    j.c.vbmi = ci.avx512_vbmi;
    j.per_token = kp->qmode == MX_QMODE_PER_TOKEN && n > 1;
    j.fn = ci.level >= MX_CPU_AVX512 ? mxq_mm_avx512 : ci.level >= MX_CPU_AVX2 ? mxq_mm_avx2 : mxq_mm_portable;
    /* One token or many run the same integer sums and float steps, so the
     * modes need nothing more, and a batched decode step reads the weights
     * once for all its tokens instead of once per token. */
    if (takes_int8(w, kp, &ci) && prep_int8(&j, x, ldx, kp->act8)) {
        j.per_token = false;
        goto run;
    }
    int perm = mxq_perm_for(w, ci.level);
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
    split_rows(&j, mx_pool_size(kp->pool));
    mx_pool_run_lanes(kp->pool, q_task, &j, mx_rowsplit_tasks(&j.rs), j.rs.lanes);
}

/* Several weights that read the same x (q/k/v, gate/up) on the int8 path:
 * x is coded once and one pool job covers every matrix, instead of one job
 * (and one wait for its slowest task) per matrix. */
#define QMULTI_MAX 4

bool mxq_matmul_multi(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy, const mx_kpolicy *kp) {
    if (count < 2 || count > QMULTI_MAX || n <= 0) return false;
    mx_cpu_info ci = mx_kpolicy_cpu(kp);
    for (int i = 0; i < count; i++)
        if (!takes_int8(w[i], kp, &ci) || w[i]->cols != w[0]->cols || w[i]->group != w[0]->group || mxq_is_e4m3(w[i]) != mxq_is_e4m3(w[0]))
            return false;
    qjob j[QMULTI_MAX];
    mx_task_set sets[QMULTI_MAX];
    memset(j, 0, sizeof j);
    j[0].c.w = w[0];
    j[0].c.n = n;
    j[0].c.vbmi = ci.avx512_vbmi;
    if (!prep_int8(&j[0], x, ldx, kp->act8)) return false;
    int nt = mx_pool_size(kp->pool);
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
    mx_pool_run_sets(kp->pool, sets, count);
    return true;
}

/* ---- prepare: the int8 kernels' repacked copies ---- */

int mxq_prepare(mx_weight *w, const mx_kpolicy *kp) {
    mx_cpu_info ci = mx_kpolicy_cpu(kp);
    if (w->prep || !int8_on(kp) || !mxq_int8_ok(w, &ci)) return MX_OK;
    w->prep = mxq_repack(w, kp->pool); /* NULL (out of memory): the f32 kernels serve it */
    return MX_OK;
}

void mxq_slice_prep(const mx_weight *w, int r0, mx_weight *out) {
    const mxq_ril *p = w->prep;
    if (!p) return;
    if (r0 % 16) { /* not on a block: a copy of its own rows */
        out->prep = mxq_repack(out, NULL);
        return;
    }
    mxq_ril *v = malloc(sizeof *v);
    if (!v) return; /* the f32 kernels serve it */
    *v = *p;
    v->base += (size_t)(r0 / 16) * p->blk;
    v->chunk = NULL; /* w's: its rows past the view's in the last block are computed and dropped */
    out->prep = v;
}

void mxq_release(mx_weight *w) {
    mxq_ril *p = w->prep;
    w->prep = NULL;
    if (!p) return;
    if (p->chunk) mx_arena_free(p->chunk);
    free(p);
}
