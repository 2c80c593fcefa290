/* The one-token E2M1 kernel (mxfp4, nvfp4) built with AVX-512 VBMI as well
 * (Ice Lake, Zen 4 and later): its code lookups take `vpermb` (qvnni_kern.h).
 * Decode of these formats is bound by the kernel's instruction rate where
 * the memory is fast, so fewer operations per line read more of it.
 * Called by qvnni_avx512.c only where the policy's CPU has VBMI. */
#include "qvnni_kern.h"

void mxq_dec_e2m1_vbmi(const mxq_ctx *c, const mxq_ril *p, int a0, int a1, int c0, int c1) {
    dec_e2m1_range(c, p, a0, a1, c0, c1);
}
