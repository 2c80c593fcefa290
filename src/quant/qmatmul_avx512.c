/* AVX-512 quantized kernels (zmm, 16 lanes): see qkern.h. */
#include "quant_impl.h"
#include "../base/base.h"
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

typedef __m512 vf;
typedef __m512i vi;
#define VL 16
#define VF_ZERO() _mm512_setzero_ps()
#define VF_LD(p) _mm512_loadu_ps(p)
#define VF_ST(p, v) _mm512_storeu_ps(p, v)
#define VF_SET1(a) _mm512_set1_ps(a)
#define VF_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VF_MUL(a, b) _mm512_mul_ps(a, b)
#define VF_ADD(a, b) _mm512_add_ps(a, b)
#define VF_SPLIT2(a, b) _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1)
#define VI_U8(p) _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define VI_AND(v, m) _mm512_and_si512(v, _mm512_set1_epi32(m))
#define VI_SRL(v, n) _mm512_srli_epi32(v, n)
#define VI_CVT(v) _mm512_cvtepi32_ps(v)
#define VF_HSUM(v) _mm512_reduce_add_ps(v)
#define QK(name) name##_avx512

/* E2M1: all 16 codes (sign included) from one permute. */
static inline __m512 fp4_avx512(__m512i nib) {
    const __m512 lut = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    return _mm512_permutexvar_ps(nib, lut);
}
#define VF_FP4(v) fp4_avx512(v)
/* 0..15 -> f32 by one permute (instead of a conversion) */
#define VF_NIB(v) _mm512_permutexvar_ps(v, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))

/* 16 E4M3 bytes -> f32 values x 2^-8, exactly: each byte becomes an f16
 * (magnitude bits << 7, sign to bit 15), whose conversion handles E4M3's
 * subnormals as f16 subnormals in hardware; building f32 bits directly made
 * them f32 denormals, whose multiplies take microcode assists (random codes
 * halved mxfp8 decode). */
static inline __m512 e4m3_avx512(const uint8_t *p) {
    __m256i t = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)p)), 7);
    return _mm512_cvtph_ps(_mm256_add_epi16(t, _mm256_and_si256(t, _mm256_set1_epi16(0x4000))));
}
#define VF_E4M3(p) e4m3_avx512(p)

/* 16 codes of B bits (MLX's LSB-first stream, 8 codes in B bytes) at p as
 * int32 lanes: each 8 from one 64-bit word, shifted per lane. */
static inline __m512i bits_avx512(const uint8_t *p, size_t avail, int B) {
    const __m512i sh = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(B));
    __m512i a = _mm512_srlv_epi64(_mm512_set1_epi64((long long)mxq_ld64(p, avail)), sh);
    __m512i b = _mm512_srlv_epi64(_mm512_set1_epi64((long long)mxq_ld64(p + B, avail - (size_t)B)), sh);
    __m512i c = _mm512_permutex2var_epi32(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
    return _mm512_and_si512(c, _mm512_set1_epi32((1 << B) - 1));
}
#define VI_BITS(p, avail, B) bits_avx512(p, avail, B)

#include "qkern.h"
