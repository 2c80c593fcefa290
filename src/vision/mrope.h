/* mrope: Qwen2-VL's multimodal rotary positions (get_rope_index). Text
 * tokens advance all three axes (temporal, height, width) together; the
 * tokens of an image get (s, s + row, s + col) over its merged patch grid,
 * s being the position after the text before it; text after an image
 * continues at the largest position so far + 1. Decode step i (0-based)
 * after a prompt of T tokens uses T + i + delta on every axis, with
 * delta = max(position) + 1 - T. */
#ifndef MX_MROPE_H
#define MX_MROPE_H
#include <stdint.h>

typedef struct {
    int t, h, w; /* the image's grid in patches (image_grid_thw) */
} mx_grid_thw;

/* pos: [3][T] (row-major: all temporal, then height, then width). Images are
 * the runs of image_token that follow vision_start; there must be exactly
 * n_images of them, each t*h*w/merge^2 tokens long. */
int mx_mrope_positions(const int32_t *ids, int T, int32_t image_token, int32_t vision_start, const mx_grid_thw *grids,
                       int n_images, int merge, int32_t *pos, int32_t *delta);
#endif
