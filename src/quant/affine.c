/* MLX affine: codes of 1..8 bits (7 excepted) packed LSB-first in uint32
 * words, a scale and a bias per group of 32, 64 or 128 columns in the
 * model's float dtype; w = s * code + b (rounded product, then rounded sum,
 * as MLX computes it: deq.c). */
#include "quant_impl.h"
#include "../base/base.h"

static int affine_bind(mx_ckpt *ck, const char *module, int rows, int cols, int bits, int group, mx_weight *w) {
    const char *cfg = ck->config_path ? ck->config_path : ck->dir;
    if (bits < 1 || bits > 8 || bits == 7)
        return mx_set_err("%s: module %s: affine quantization with %d bits is not supported (1, 2, 3, 4, 5, 6 or 8)", cfg, module, bits);
    if (group != 32 && group != 64 && group != 128)
        return mx_set_err("%s: module %s: affine group_size %d is not supported (32, 64 or 128)", cfg, module, group);
    return mxq_bind_mlx(ck, module, rows, cols, MX_W_AFFINE, "affine", bits, group, w);
}

MX_WFORMAT(affine, MX_W_AFFINE, .name = "affine", .mode = "affine", .bind = affine_bind, MXQ_RECORD)
