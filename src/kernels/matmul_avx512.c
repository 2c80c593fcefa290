/* avx512 float matmul (compiled with the AVX-512 -m flags; only called after
 * dispatch). The exact f32 paths are mm_simd.h's kernels on 512-bit vectors:
 * Zen 4 runs 512-bit FMAs at half rate, so prefill gains little, but one-token
 * decode converts a 16-bit weight vector in two operations instead of four
 * and streams bf16 at ~1.4x the 256-bit kernel (kbench).
 * On AVX-512 BF16 CPUs, BF16 weights take the bf2 kernels (mm_simd.h):
 * `vdpbf16ps` on the weights as stored and x as bf16 hi + lo (~16 bits,
 * within the float fixtures' 1e-4), no widening; 1B bf16 decode 0.76-0.77
 * -> 0.85-0.91 of the probe in fast phases, prefill even.
 * With MLXCEL_BF16_DOT=1 (opt-in, it rounds the activations to bf16) BF16
 * weights with n >= 24 tokens go through a packed `vdpbf16ps` GEMM instead,
 * one product per pair (about 2.3x the exact path's prefill throughput). It
 * reads the hi words of the bf2 kernels' split x, made once per matmul:
 * converting x again for every 64-row block took ~20 % of a 1B pp512. */
#include "matmul_impl.h"
#define MM_NAME(x) x##_avx512
#define MM_PT 6
#define MM_ZMM
#include "mm_simd.h"
#include "tr16_avx512.h"
#include "../base/cpu.h"
#include <stdatomic.h>
#include <stdlib.h>

static atomic_int g_bf16dot = -1;

void mx_mm_set_bf16_dot(int on) { atomic_store(&g_bf16dot, on ? 1 : 0); }

static int bf16dot_on(void) {
    int v = atomic_load_explicit(&g_bf16dot, memory_order_relaxed);
    if (v < 0) {
        const char *s = getenv("MLXCEL_BF16_DOT");
        v = s && *s && strcmp(s, "0") != 0;
        atomic_store(&g_bf16dot, v);
    }
    return v && mx_cpu()->avx512_bf16;
}

#define BD_KC 512 /* columns per block (256 bf16 pairs) */
#define BD_RB 64  /* rows packed together (2 panels of 32) */
#define BD_MC 96  /* tokens per chunk: their x rows and y stay in L2 while the panels pass (multiple of 12) */

/* dst[kp*32 + i] = the bf16 pair W[r+i][k0+2kp .. +1] (zero past nr rows / kc). */
static void bd_pack32(const mx_weight *w, int r, int nr, int k0, int kc, uint32_t *dst) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *p[16];
        for (int i = 0; i < 16; i++)
            p[i] = 16 * h + i < nr ? w->data + (size_t)(r + 16 * h + i) * w->row_bytes + (size_t)k0 * 2 : NULL;
        for (int k = 0; k < kc; k += 32) {
            int m = MX_MIN(32, kc - k), np = (m + 1) / 2;
            __mmask32 mk = m == 32 ? 0xffffffffu : (__mmask32)((1u << m) - 1);
            __m512i v[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                v[i] = p[i] ? _mm512_maskz_loadu_epi16(mk, p[i] + (size_t)k * 2) : _mm512_setzero_si512();
            mx_tr16_epi32(v);
            uint32_t *d = dst + (size_t)(k / 2) * 32 + 16 * h;
            for (int j = 0; j < np; j++) _mm512_store_si512((void *)(d + (size_t)j * 32), v[j]);
        }
    }
}

MM_AI void bd_ukern(int MR, int npairs, const uint32_t *panel, const uint32_t *xb, int ldxb, float *y, int ldy,
                    int first, int nv) {
    __m512 c0[12], c1[12];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int kp = 0; kp < npairs; kp++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512((const void *)(panel + (size_t)kp * 32));
        __m512bh b1 = (__m512bh)_mm512_load_si512((const void *)(panel + (size_t)kp * 32 + 16));
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)xb[(size_t)i * ldxb + kp]);
            c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
            c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
        }
    }
    __mmask16 m0 = nv >= 16 ? 0xffff : (__mmask16)((1u << nv) - 1);
    __mmask16 m1 = nv >= 32 ? 0xffff : nv <= 16 ? 0 : (__mmask16)((1u << (nv - 16)) - 1);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        float *yr = y + (size_t)i * ldy;
        if (!first) {
            c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, yr));
            c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, yr + 16));
        }
        _mm512_mask_storeu_ps(yr, m0, c0[i]);
        _mm512_mask_storeu_ps(yr + 16, m1, c1[i]);
    }
}

#define BD_UK(M)                                                                                          \
    static __attribute__((noinline)) void bd_uk##M(int np, const uint32_t *panel, const uint32_t *xb, int ldxb, \
                                                   float *y, int ldy, int first, int nv) {                \
        bd_ukern(M, np, panel, xb, ldxb, y, ldy, first, nv);                                              \
    }
BD_UK(1)
BD_UK(2)
BD_UK(3)
BD_UK(4)
BD_UK(5)
BD_UK(6)
BD_UK(7)
BD_UK(8)
BD_UK(9)
BD_UK(10)
BD_UK(11)
BD_UK(12)
#undef BD_UK

typedef void (*bd_uk_fn)(int, const uint32_t *, const uint32_t *, int, float *, int, int, int);

/* x: the hi words of mx_bf16_split, as bf16 pairs ldx apart */
static void bd_gemm(const mx_weight *w, const uint32_t *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    static const bd_uk_fn uk[13] = {0, bd_uk1, bd_uk2, bd_uk3, bd_uk4, bd_uk5, bd_uk6,
                                    bd_uk7, bd_uk8, bd_uk9, bd_uk10, bd_uk11, bd_uk12};
    uint32_t panel[BD_RB / 32][BD_KC / 2 * 32] __attribute__((aligned(64)));
    const int K = w->cols;
    for (int rb = r0; rb < r1; rb += BD_RB) {
        int nrb = MX_MIN(BD_RB, r1 - rb), np = (nrb + 31) / 32;
        for (int k0 = 0; k0 < K; k0 += BD_KC) {
            int kc = MX_MIN(BD_KC, K - k0), npairs = kc / 2;
            for (int p = 0; p < np; p++) bd_pack32(w, rb + 32 * p, MX_MIN(32, nrb - 32 * p), k0, kc, panel[p]);
            for (int t0 = 0; t0 < n; t0 += BD_MC) {
                int tn = MX_MIN(BD_MC, n - t0);
                for (int p = 0; p < np; p++) {
                    int nv = MX_MIN(32, nrb - 32 * p);
                    for (int t = 0; t < tn; t += 12) {
                        int mr = MX_MIN(12, tn - t);
                        uk[mr](npairs, panel[p], x + (size_t)(t0 + t) * ldx + k0 / 2, ldx,
                               y + (size_t)(t0 + t) * ldy + rb + 32 * p, ldy, k0 == 0, nv);
                    }
                }
            }
        }
    }
    if (K == 0)
        for (int t = 0; t < n; t++) memset(y + (size_t)t * ldy + r0, 0, sizeof(float) * (size_t)(r1 - r0));
}

void mx_mm_bf2_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_bf2(w, (const uint16_t *)(const void *)x, 2 * (size_t)ldx, mx_split_q2(w->cols), n, y, ldy, r0, r1);
}

void mx_bf16_split_avx512(const float *x, int n, int ldx, int K, uint16_t *xb) {
    mm_bf16_split(x, n, ldx, K, xb, mx_split_ld(K), mx_split_q2(K));
}

/* below ~24 tokens the exact dot form is as fast (packing dominates) */
bool mx_mm_bf16_dot_takes(const mx_weight *w, int n) { return w->fmt == MX_W_BF16 && w->cols % 2 == 0 && n >= 24 && bf16dot_on(); }

void mx_mm_bf16_dot_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    if (r1 > r0) bd_gemm(w, (const uint32_t *)(const void *)x, n, ldx, y, ldy, r0, r1);
}

void mx_mm_float_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_float(w, x, n, ldx, y, ldy, r0, r1);
}
