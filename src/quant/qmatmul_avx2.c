/* AVX2 + FMA quantized kernels (ymm, 8 lanes): see qkern.h. */
#include "quant_impl.h"
#include "../base/base.h"
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

typedef __m256 vf;
typedef __m256i vi;
#define VL 8
#define VF_ZERO() _mm256_setzero_ps()
#define VF_LD(p) _mm256_loadu_ps(p)
#define VF_ST(p, v) _mm256_storeu_ps(p, v)
#define VF_SET1(a) _mm256_set1_ps(a)
#define VF_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VF_MUL(a, b) _mm256_mul_ps(a, b)
#define VF_ADD(a, b) _mm256_add_ps(a, b)
#define VF_SPLIT2(a, b) _mm256_setr_m128(_mm_set1_ps(a), _mm_set1_ps(b))
#define VI_U8(p) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p)))
#define VI_AND(v, m) _mm256_and_si256(v, _mm256_set1_epi32(m))
#define VI_SRL(v, n) _mm256_srli_epi32(v, n)
#define VI_CVT(v) _mm256_cvtepi32_ps(v)
#define QK(name) name##_avx2

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define VF_HSUM(v) hsum8(v)

/* E2M1: magnitude from an 8-entry table, sign from bit 3. */
static inline __m256 fp4_avx2(__m256i nib) {
    const __m256 lut = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    __m256 mag = _mm256_permutevar8x32_ps(lut, _mm256_and_si256(nib, _mm256_set1_epi32(7)));
    __m256i sgn = _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(8)), 28);
    return _mm256_xor_ps(mag, _mm256_castsi256_ps(sgn));
}
#define VF_FP4(v) fp4_avx2(v)

/* 8 E4M3 bytes -> f32 values x 2^-8 through f16 (see qmatmul_avx512.c). */
static inline __m256 e4m3_avx2(const uint8_t *p) {
    __m128i t = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)p)), 7);
    return _mm256_cvtph_ps(_mm_add_epi16(t, _mm_and_si128(t, _mm_set1_epi16(0x4000))));
}
#define VF_E4M3(p) e4m3_avx2(p)

/* 8 codes of B bits (MLX's LSB-first stream: B bytes) at p as int32 lanes. */
static inline __m256i bits_avx2(const uint8_t *p, size_t avail, int B) {
    __m256i v = _mm256_set1_epi64x((long long)mxq_ld64(p, avail));
    __m256i lo = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, B, 2 * B, 3 * B));
    __m256i hi = _mm256_srlv_epi64(v, _mm256_setr_epi64x(4 * B, 5 * B, 6 * B, 7 * B));
    /* low dwords: codes 0 1 4 5 | 2 3 6 7, then the middle qwords swapped */
    __m256 t = _mm256_shuffle_ps(_mm256_castsi256_ps(lo), _mm256_castsi256_ps(hi), _MM_SHUFFLE(2, 0, 2, 0));
    __m256i c = _mm256_permute4x64_epi64(_mm256_castps_si256(t), _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_and_si256(c, _mm256_set1_epi32((1 << B) - 1));
}
#define VI_BITS(p, avail, B) bits_avx2(p, avail, B)

#include "qkern.h"
