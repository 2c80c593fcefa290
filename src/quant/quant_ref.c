/* Placeholder until the quantized formats land: refuses clearly. */
#include "quant.h"
#include "../base/base.h"
int mx_quant_bind(mx_ckpt *ck, const char *module, int rows, int cols, const char *mode, int bits, int group, mx_weight *w) {
    (void)rows; (void)cols; (void)w;
    return mx_set_err("%s: module %s: quantization mode '%s' (%d bits, group %d) is not supported", ck->dir, module, mode, bits, group);
}
void mx_qmatmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, mx_pool *pool) {
    (void)w; (void)x; (void)n; (void)ldx; (void)y; (void)ldy; (void)pool;
}
void mx_qrow(const mx_weight *w, int r, float *out) { (void)w; (void)r; (void)out; }
size_t mx_qbytes(const mx_weight *w) { (void)w; return 0; }
