/* nvfp4, MLX layout: E2M1 (4-bit float) codes packed two per byte, low
 * nibble first, and one E4M3 scale code per group of 16. w = e2m1(code) *
 * scale (deq.c). */
#include "quant_impl.h"

static int nvfp4_bind(mx_ckpt *ck, const char *module, int rows, int cols, int bits, int group, mx_weight *w) {
    return mxq_bind_fixed(ck, module, rows, cols, MX_W_NVFP4, "nvfp4", 4, 16, bits, group, w);
}

MX_WFORMAT(nvfp4, MX_W_NVFP4, .name = "nvfp4", .mode = "nvfp4", .bind = nvfp4_bind, MXQ_RECORD)
