/* Qwen2: Llama with q/k/v biases (o_proj has none); the window applies only
 * when use_sliding_window is set, to layers from max_window_layers on. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = true;
    a->attn->o_bias = false;
    bool use;
    int w, from;
    if (mx_cfg_bool(c, "use_sliding_window", false, &use) || mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w) ||
        mx_cfg_i32(c, "max_window_layers", a->n_layers, 0, 1 << 20, &from))
        return -1;
    if (use && w > 0)
        for (int i = from; i < a->n_layers; i++) a->layers[i].window = w;
    return 0;
}

MX_FAMILY(qwen2, .name = "qwen2", .base = "llama", .features = "llama + qkv bias, optional sliding window", .configure = configure)
