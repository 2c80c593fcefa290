/* isa_bounds: hand-run microbenchmark of the instruction forms the prefill
 * and decode kernels are built from, on one core with everything in L1 (not
 * a test). It measures what a core can do at best, so the whole-model rates
 * of BENCHMARKS.md can be read against a ceiling measured on the same
 * machine:
 *   build/isa_bounds [MACS_PER_TOKEN] [CORES]
 * (defaults: 973078528, the matmuls of a Llama-3.2-1B token; 2 cores).
 * Every figure is the best of 7 runs of thread CPU time (the dev VM's cores
 * are shared: the best run is the quiet core). Needs AVX-512 VNNI; the
 * bf16 and E2M1 rows also need AVX-512 BF16 / VBMI and are skipped without. */
#define _GNU_SOURCE
#include "base/base.h"
#include "base/cpu.h"
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vnni"), noinline))
#define INL static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vnni")))
#define NT 8 /* tokens per pass, as the kernels */

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* 16 units (4 columns x 16 rows each) of expanded weights and NT tokens'
 * codes: a few KiB, in L1 */
static uint8_t W[16 * 128] __attribute__((aligned(64)));
static uint8_t X[NT][256] __attribute__((aligned(64)));

/* the kernels' forms, written as they are (qvnni_avx512.c): broadcasts folded */
#define ASM_DP(INSN)                                                                         \
    INL __m512i INSN##_m(__m512i a, __m512i w, const void *p) { \
        __asm__(#INSN " %2%{1to16%}, %1, %0" : "+v"(a) : "v"(w), "m"(*(const int32_t *)p));     \
        return a;                                                                            \
    }
ASM_DP(vpdpbusd)
ASM_DP(vpdpwssd)
ASM_DP(vfmadd231ps)
ASM_DP(vdpbf16ps)
INL __m512i dpw(__m512i a, __m512i u, __m512i v) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(a) : "v"(u), "v"(v));
    return a;
}
INL __m512i addb(__m512i u, const void *p) {
    __m512i r;
    __asm__("vpaddd %2%{1to16%}, %1, %0" : "=v"(r) : "v"(u), "m"(*(const int32_t *)p));
    return r;
}

/* one pass: per unit the weights' lines, then NT tokens; FORM(acc, cu, cv, q) */
#define PASS(NAME, FORM)                                                        \
    static AVX512 int NAME(long iters) {                                        \
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0; \
        for (long it = 0; it < iters; it++) {                                   \
            _Pragma("GCC unroll 16") for (int u = 0; u < 16; u++) {             \
                const __m512i cu = _mm512_load_si512((const void *)(W + u * 128)); \
                const __m512i cv = _mm512_load_si512((const void *)(W + u * 128 + 64)); \
                (void)cv;                                                           \
                FORM(a0, cu, cv, X[0] + u * 8); FORM(a1, cu, cv, X[1] + u * 8); \
                FORM(a2, cu, cv, X[2] + u * 8); FORM(a3, cu, cv, X[3] + u * 8); \
                FORM(a4, cu, cv, X[4] + u * 8); FORM(a5, cu, cv, X[5] + u * 8); \
                FORM(a6, cu, cv, X[6] + u * 8); FORM(a7, cu, cv, X[7] + u * 8); \
            }                                                                   \
            __asm__ volatile("" ::: "memory");                                  \
        }                                                                       \
        __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)), \
                                     _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7))); \
        return _mm512_reduce_add_epi32(s);                                      \
    }
/* the same with two weight lines per unit (two blocks of rows, as the
 * prefill kernels' tiles): 16 sums in flight and one activation word for
 * two products. With one line the bf16 and 8-bit forms are bound by their
 * 8 chains' latency (8 vdpbf16ps in ~6 cycles), not by the core's rate. */
#define PASS2(NAME, FORM2)                                                      \
    static AVX512 int NAME(long iters) {                                        \
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0; \
        __m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0; \
        for (long it = 0; it < iters; it++) {                                   \
            _Pragma("GCC unroll 16") for (int u = 0; u < 16; u++) {             \
                const __m512i cu = _mm512_load_si512((const void *)(W + u * 128)); \
                const __m512i cv = _mm512_load_si512((const void *)(W + u * 128 + 64)); \
                FORM2(a0, b0, cu, cv, X[0] + u * 8); FORM2(a1, b1, cu, cv, X[1] + u * 8); \
                FORM2(a2, b2, cu, cv, X[2] + u * 8); FORM2(a3, b3, cu, cv, X[3] + u * 8); \
                FORM2(a4, b4, cu, cv, X[4] + u * 8); FORM2(a5, b5, cu, cv, X[5] + u * 8); \
                FORM2(a6, b6, cu, cv, X[6] + u * 8); FORM2(a7, b7, cu, cv, X[7] + u * 8); \
            }                                                                   \
            __asm__ volatile("" ::: "memory");                                  \
        }                                                                       \
        __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)), \
                                     _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7))); \
        s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(b0, b1), _mm512_add_epi32(b2, b3)), \
                                                 _mm512_add_epi32(_mm512_add_epi32(b4, b5), _mm512_add_epi32(b6, b7)))); \
        return _mm512_reduce_add_epi32(s);                                      \
    }
INL __m512i bcast(const void *p) {
    __m512i r;
    __asm__("vpbroadcastd %1, %0" : "=v"(r) : "m"(*(const int32_t *)p));
    return r;
}
INL __m512i addr(__m512i u, __m512i v) {
    __m512i r;
    __asm__("vpaddd %2, %1, %0" : "=v"(r) : "v"(u), "v"(v));
    return r;
}
INL __m512i dp_r(__m512i a, __m512i w, __m512i x) {
    __asm__("vdpbf16ps %2, %1, %0" : "+v"(a) : "v"(w), "v"(x));
    return a;
}
INL __m512i dpb_r(__m512i a, __m512i w, __m512i x) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(a) : "v"(w), "v"(x));
    return a;
}
/* Winograd, two blocks: the words broadcast once, four register additions
 * (the lines stand in for both blocks' Cu and Cv) */
#define F2_WINO(a, b, cu, cv, q)                                       \
    do {                                                                \
        __m512i bu_ = bcast(q), bv_ = bcast((q) + 4);                   \
        a = dpw(a, addr(cu, bu_), addr(cv, bv_));                       \
        b = dpw(b, addr(cv, bu_), addr(cu, bv_));                       \
    } while (0)
#define F2_ONE(a, b, cu, cv, q)                                         \
    do {                                                                \
        __m512i x_ = bcast(q);                                          \
        a = dpb_r(a, cu, x_);                                           \
        b = dpb_r(b, cv, x_);                                           \
    } while (0)
#define F2_BF16(a, b, cu, cv, q)                                        \
    do {                                                                \
        __m512i x_ = bcast(q);                                          \
        a = dp_r(a, cu, x_);                                            \
        b = dp_r(b, cv, x_);                                            \
    } while (0)
PASS2(p2_wino, F2_WINO)
PASS2(p2_one, F2_ONE)
PASS2(p2_bf16, F2_BF16)

/* Winograd's pairing on 16-bit codes: 64 products per unit and token */
#define F_WINO(a, cu, cv, q) a = dpw(a, addb(cu, q), addb(cv, (q) + 4))
/* x as two int8 codes (12-bit b = 16 q1 + q2): two vpdpbusd for 64 products */
#define F_TWO(a, cu, cv, q) a = vpdpbusd_m(vpdpbusd_m(a, cu, q), cu, (q) + 128)
/* x as one int8 code (llama.cpp's Q8 activations): one vpdpbusd */
#define F_ONE(a, cu, cv, q) a = vpdpbusd_m(a, cu, q)
/* x as 16-bit codes without the pairing: two vpdpwssd */
#define F_W16(a, cu, cv, q) a = vpdpwssd_m(vpdpwssd_m(a, cu, q), cv, (q) + 4)
/* f32: 16 products per fma; bf16 pairs: 32 per vdpbf16ps */
#define F_FMA(a, cu, cv, q) a = vfmadd231ps_m(a, cu, q)
#define F_BF16(a, cu, cv, q) a = vdpbf16ps_m(a, cu, q)
PASS(p_wino, F_WINO)
PASS(p_two, F_TWO)
PASS(p_one, F_ONE)
PASS(p_w16, F_W16)
PASS(p_fma, F_FMA)
PASS(p_bf16, F_BF16)

/* decode of E2M1 (mxfp4) codes, as the one-token kernel: per 64-byte line
 * (16 rows x 8 columns) two vpermb lookups, a shift and four vpdpbusd (x as
 * two codes); two blocks in flight */
static __attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"), noinline)) int p_e2m1(long iters) {
    const __m512i t = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512i ia0 = _mm512_setzero_si512(), ja0 = ia0, ib0 = ia0, jb0 = ia0, ia1 = ia0, ja1 = ia0, ib1 = ia0, jb1 = ia0;
    for (long it = 0; it < iters; it++) {
        _Pragma("GCC unroll 8") for (int l = 0; l < 16; l++) {
            const uint8_t *q1 = X[0] + l * 8, *q2 = X[1] + l * 8;
            __m512i v0 = _mm512_load_si512((const void *)(W + l * 64)), v1 = _mm512_load_si512((const void *)(W + 1024 + l * 64));
            __m512i lo0 = _mm512_permutexvar_epi8(v0, t), hi0 = _mm512_permutexvar_epi8(_mm512_srli_epi16(v0, 4), t);
            __m512i lo1 = _mm512_permutexvar_epi8(v1, t), hi1 = _mm512_permutexvar_epi8(_mm512_srli_epi16(v1, 4), t);
            ia0 = vpdpbusd_m(ia0, lo0, q1); ja0 = vpdpbusd_m(ja0, lo0, q2);
            ib0 = vpdpbusd_m(ib0, hi0, q1 + 4); jb0 = vpdpbusd_m(jb0, hi0, q2 + 4);
            ia1 = vpdpbusd_m(ia1, lo1, q1); ja1 = vpdpbusd_m(ja1, lo1, q2);
            ib1 = vpdpbusd_m(ib1, hi1, q1 + 4); jb1 = vpdpbusd_m(jb1, hi1, q2 + 4);
        }
        __asm__ volatile("" ::: "memory");
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(ia0, ja0), _mm512_add_epi32(ib0, jb0)),
                                 _mm512_add_epi32(_mm512_add_epi32(ia1, ja1), _mm512_add_epi32(ib1, jb1)));
    return _mm512_reduce_add_epi32(s);
}

/* a chain of dependent adds: one per cycle, so the clock */
static __attribute__((noinline)) int p_clock(long iters) {
    uint64_t x = 1;
    for (long i = 0; i < iters; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    return (int)(x & 1);
}

/* best of 7: seconds per iteration */
static double best(int (*f)(long), long iters) {
    double b = 1e30;
    volatile int sink = 0;
    for (int r = 0; r < 7; r++) {
        double t0 = cpu_now();
        sink += f(iters);
        double t = cpu_now() - t0;
        if (t < b) b = t;
    }
    (void)sink;
    return b / (double)iters;
}

int main(int argc, char **argv) {
    double macs = argc > 1 ? atof(argv[1]) : 973078528.0; /* 16 x (2 x 2048^2 + 2 x 512 x 2048 + 3 x 8192 x 2048) */
    int cores = argc > 2 ? atoi(argv[2]) : 2;
    if (macs <= 0 || cores < 1) {
        fprintf(stderr, "usage: isa_bounds [MACS_PER_TOKEN > 0] [CORES >= 1]\n");
        return 2;
    }
    const mx_cpu_info *cpu = mx_cpu();
    if (cpu->level < MX_CPU_AVX512 || !cpu->avx512_vnni) {
        fprintf(stderr, "isa_bounds: needs AVX-512 VNNI (this CPU: %s)\n", mx_cpu_name(cpu->level));
        return 1;
    }
    for (size_t i = 0; i < sizeof W; i++) W[i] = (uint8_t)(i * 37u);
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < 256; i++) X[t][i] = (uint8_t)(i * 11 + t);
    double hz = 4.0 / best(p_clock, 200000000L);
    printf("clock (dependent adds, best of 7): %.2f GHz\n", hz / 1e9);
    printf("%-44s %8s %10s %s\n", "form (zmm, one core, L1)", "cycles", "MAC/cycle", "prefill ceiling, matmuls only");
    struct {
        const char *name;
        int (*f)(long);
        double macs; /* per unit and token */
        bool need;
    } forms[] = {
        {"12-bit x, Winograd (vpdpwssd + 2 vpaddd)", p_wino, 64, true},
        {"12-bit x as two int8 codes (2 vpdpbusd)", p_two, 64, true},
        {"16-bit x, plain (2 vpdpwssd)", p_w16, 64, true},
        {"8-bit x, one code (1 vpdpbusd, llama.cpp Q8)", p_one, 64, true},
        {"f32 (vfmadd231ps)", p_fma, 16, true},
        {"bf16 x (vdpbf16ps; hi + lo: half)", p_bf16, 32, cpu->avx512_bf16},
        {"two blocks: 12-bit Winograd, x in registers", p2_wino, 128, true},
        {"two blocks: 8-bit x, one code", p2_one, 128, true},
        {"two blocks: bf16 x (hi + lo: half)", p2_bf16, 64, cpu->avx512_bf16},
    };
    const long it = 200000;
    for (size_t i = 0; i < MX_ARRAY_LEN(forms); i++) {
        if (!forms[i].need) {
            printf("%-44s (not on this CPU)\n", forms[i].name);
            continue;
        }
        double cyc = best(forms[i].f, it) * hz / (16.0 * NT); /* per unit and token */
        double mpc = forms[i].macs / cyc;
        printf("%-44s %8.3f %10.1f %8.0f tokens/s on %d cores\n", forms[i].name, cyc, mpc, mpc * hz * cores / macs, cores);
    }
    if (cpu->avx512_vbmi) {
        double cyc = best(p_e2m1, it) * hz / 32.0; /* per 64-byte line */
        printf("%-44s %8.3f cycles per 64-byte line: %.1f GB/s per core, %.1f on %d\n", "E2M1 decode line (2 vpermb, 4 vpdpbusd)", cyc,
               64.0 * hz / cyc / 1e9, 64.0 * hz / cyc / 1e9 * cores, cores);
    }
    return 0;
}
