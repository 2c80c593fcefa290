/* See mrope.h; follows transformers' Qwen2VLForConditionalGeneration
 * .get_rope_index for images. */
#include "mrope.h"
#include "../base/base.h"

int mx_mrope_positions(const int32_t *ids, int T, int32_t image_token, int32_t vision_start, const mx_grid_thw *grids,
                       int n_images, int merge, int32_t *pos, int32_t *delta) {
    if (merge < 1) return mx_set_err("M-RoPE positions: merge size %d", merge);
    int n_marked = 0;
    for (int i = 0; i + 1 < T; i++) n_marked += ids[i] == vision_start && ids[i + 1] == image_token;
    if (n_marked != n_images)
        return mx_set_err("M-RoPE positions: the prompt has %d image%s after a vision start token, %d given", n_marked,
                          n_marked == 1 ? "" : "s", n_images);
    int32_t *pt = pos, *ph = pos + T, *pw = pos + 2 * T;
    int st = 0, next = 0; /* next free position (max so far + 1) */
    for (int k = 0; k < n_images; k++) {
        int ed = st;
        while (ed < T && ids[ed] != image_token) ed++;
        int gt = grids[k].t, gh = grids[k].h / merge, gw = grids[k].w / merge;
        int64_t n = (int64_t)gt * gh * gw;
        if (ed >= T || n <= 0 || ed + n > T) return mx_set_err("M-RoPE positions: image %d's %lld tokens do not fit the prompt", k, (long long)n);
        for (int i = st; i < ed; i++) pt[i] = ph[i] = pw[i] = next + (i - st);
        int base = next + (ed - st), mx = base;
        for (int64_t j = 0; j < n; j++) {
            int t = (int)(j / ((int64_t)gh * gw)), r = (int)(j / gw % gh), c = (int)(j % gw);
            pt[ed + j] = base + t;
            ph[ed + j] = base + r;
            pw[ed + j] = base + c;
            mx = MX_MAX(mx, MX_MAX(base + t, MX_MAX(base + r, base + c)));
        }
        next = mx + 1;
        st = ed + (int)n;
    }
    for (int i = st; i < T; i++) pt[i] = ph[i] = pw[i] = next + (i - st);
    int mx = T ? next + (T - st) - 1 : 0;
    if (st == T) mx = next - 1;
    *delta = mx + 1 - T;
    return MX_OK;
}
