/* avx2 float matmul (compiled with -mavx2 flags; only called after dispatch). */
#include "matmul_impl.h"
void mx_mm_float_avx2(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, int r0, int r1) {
    mx_mm_float_portable(w, x, n, ldx, y, ldy, r0, r1);
}
