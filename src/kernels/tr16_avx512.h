/* tr16_avx512.h: a 16 x 16 transpose of 32-bit elements in sixteen zmm
 * registers, for files compiled with the AVX-512 flags (the BF16 weight
 * packer, the int8 repack). */
#ifndef MX_TR16_AVX512_H
#define MX_TR16_AVX512_H
#include <immintrin.h>

/* r[i] lane j -> r[j] lane i. */
static inline __attribute__((always_inline)) void mx_tr16_epi32(__m512i *r) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        __m512i w0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), w1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        __m512i w2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88), w3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = _mm512_shuffle_i32x4(w0, w2, 0x88);
        r[4 + j] = _mm512_shuffle_i32x4(w1, w3, 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(w0, w2, 0xdd);
        r[12 + j] = _mm512_shuffle_i32x4(w1, w3, 0xdd);
    }
}
#endif
