/* Mistral: Llama plus a sliding window on every layer. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    int w;
    if (mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w)) return -1;
    mx_arch_set_window_all(a, w);
    return 0;
}

MX_FAMILY(mistral, .name = "mistral", .base = "llama", .features = "llama + sliding-window attention", .configure = configure)
