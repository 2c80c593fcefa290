/* Phi-3: Llama with a fused qkv_proj ([q | k | v]) and gate_up_proj
 * ([gate | up]), an optional sliding window on every layer, and longrope
 * scaling (original_max_position_embeddings at the top level of the config). */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    int w;
    if (mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w) ||
        mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps))
        return -1;
    a->attn->names.q = a->attn->names.k = a->attn->names.v = NULL;
    a->attn->names.qkv = "model.layers.%d.self_attn.qkv_proj";
    a->names.gate = a->names.up = NULL;
    a->names.gate_up = "model.layers.%d.mlp.gate_up_proj";
    mx_arch_set_window_all(a, w);
    return 0;
}

MX_FAMILY(phi3, .name = "phi3", .base = "llama", .features = "llama + fused qkv and gate_up, sliding window, longrope",
          .configure = configure)
