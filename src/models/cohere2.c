/* Cohere 2 (Command R7B): Cohere with sliding-window layers that use rope and
 * global layers (every sliding_window_pattern-th, or per layer_types) that
 * use no positional encoding at all. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    int w, pattern;
    if (mx_cfg_i32(c, "sliding_window", 4096, 1, 1 << 30, &w) ||
        mx_cfg_i32(c, "sliding_window_pattern", 4, 1, 1 << 20, &pattern))
        return -1;
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    for (int i = 0; i < a->n_layers; i++) {
        if (!r) a->layers[i].window = (i + 1) % pattern ? w : 0;
        a->layers[i].rope = a->layers[i].window > 0;
    }
    return 0;
}

MX_FAMILY(cohere2, .name = "cohere2", .base = "cohere", .features = "cohere + sliding-window rope layers and global no-rope layers",
          .configure = configure)
