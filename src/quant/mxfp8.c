/* mxfp8 (OCP MX), MLX layout: E4M3 codes, one byte each, and an E8M0 scale
 * code per group of 32. w = e4m3(code) * scale (deq.c). */
#include "quant_impl.h"

static int mxfp8_bind(mx_ckpt *ck, const char *module, int rows, int cols, int bits, int group, mx_weight *w) {
    return mxq_bind_fixed(ck, module, rows, cols, MX_W_MXFP8, "mxfp8", 8, 32, bits, group, w);
}

MX_WFORMAT(mxfp8, MX_W_MXFP8, .name = "mxfp8", .mode = "mxfp8", .bind = mxfp8_bind, MXQ_RECORD)
