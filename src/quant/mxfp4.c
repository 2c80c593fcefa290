/* mxfp4 (OCP MX), MLX layout: E2M1 (4-bit float) codes packed two per byte,
 * low nibble first, and one E8M0 scale code (a power of two) per group of
 * 32. w = e2m1(code) * scale (deq.c). */
#include "quant_impl.h"

static int mxfp4_bind(mx_ckpt *ck, const char *module, int rows, int cols, int bits, int group, mx_weight *w) {
    return mxq_bind_fixed(ck, module, rows, cols, MX_W_MXFP4, "mxfp4", 4, 32, bits, group, w);
}

MX_WFORMAT(mxfp4, MX_W_MXFP4, .name = "mxfp4", .mode = "mxfp4", .bind = mxfp4_bind, MXQ_RECORD)
