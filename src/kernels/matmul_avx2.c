/* avx2 float matmul (compiled with -mavx2 -mfma -mf16c; only called after dispatch). */
#include "matmul_impl.h"
#define MM_NAME(x) x##_avx2
#include "mm_simd.h"

void mx_mm_float_avx2(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mm_float(w, x, n, ldx, y, ldy, r0, r1);
}
