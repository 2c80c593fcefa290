/* avx512 float matmul (compiled with the AVX-512 -m flags; only called after
 * dispatch). The exact f32 paths are mm_simd.h's kernels on 512-bit vectors:
 * Zen 4 runs 512-bit FMAs at half rate, so prefill gains little, but one-token
 * decode converts a 16-bit weight vector in two operations instead of four
 * and streams bf16 at ~1.4x the 256-bit kernel (kbench).
 * On AVX-512 BF16 CPUs, BF16 weights take the bf2 kernels (mm_simd.h):
 * `vdpbf16ps` on the weights as stored and x as bf16 hi + lo (~16 bits,
 * within the float fixtures' 1e-4), no widening; 1B bf16 decode 0.76-0.77
 * -> 0.85-0.91 of the probe in fast phases, prefill even.
 * With the policy's bf16_dot (opt-in, it rounds the activations to bf16) BF16
 * weights with n >= 24 tokens take the same tiles with the hi words alone:
 * one product per pair, ~1.95x the exact path's prefill rate (kbench). A
 * packed GEMM served it before; its packing (16x16 transposes of the weights)
 * and its per-block conversion of x took ~40 % of a 1B pp512, and the tiles
 * need neither. */
#include "matmul_impl.h"
#define MM_NAME(x) x##_avx512
#define MM_PT 6
#define MM_ZMM
#include "mm_simd.h"

void mx_mm_bf2_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_bf2(w, (const uint16_t *)(const void *)x, 2 * (size_t)ldx, mx_split_q2(w->cols), n, y, ldy, r0, r1, 2);
}

void mx_bf16_split_avx512(const float *x, int n, int ldx, int K, uint16_t *xb) {
    mm_bf16_split(x, n, ldx, K, xb, mx_split_ld(K), mx_split_q2(K));
}

void mx_mm_bf16_dot_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_bf2(w, (const uint16_t *)(const void *)x, 2 * (size_t)ldx, mx_split_q2(w->cols), n, y, ldy, r0, r1, 1);
}

void mx_mm_float_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_float(w, x, n, ldx, y, ldy, r0, r1);
}

void mx_mm_bfr2_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_bfr(w, (const uint16_t *)(const void *)x, 2 * (size_t)ldx, mx_split_q2(w->cols), n, y, ldy, r0, r1, 2);
}

void mx_mm_bfr1_avx512(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_bfr(w, (const uint16_t *)(const void *)x, 2 * (size_t)ldx, mx_split_q2(w->cols), n, y, ldy, r0, r1, 1);
}

void mx_bfr_pack_avx512(const mx_weight *w, int b0, int b1, uint8_t *base, size_t blk) { mm_bfr_pack(w, b0, b1, base, blk); }
