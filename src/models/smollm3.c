/* SmolLM3: Llama with NoPE layers (no_rope_layers[i] == 0: no positional
 * encoding; by default every no_rope_layer_interval-th layer), optional
 * sliding layers, rope_theta 2e6 and tied embeddings by default. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    int interval, w;
    bool use_sw;
    if (mx_cfg_bool(c, "tie_word_embeddings", true, &a->tied) ||
        mx_cfg_i32(c, "no_rope_layer_interval", 4, 1, 1 << 20, &interval) ||
        mx_cfg_bool(c, "use_sliding_window", false, &use_sw) || mx_cfg_i32(c, "sliding_window", 0, 0, 1 << 30, &w))
        return -1;
    a->rope_decl[0].theta = 2000000.0;
    json_t *nr = mx_cfg_get(c, "no_rope_layers");
    if (nr && (!json_is_array(nr) || (int)json_array_size(nr) < a->n_layers))
        return mx_set_err("%s: no_rope_layers: expected at least %d entries", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        if (nr) {
            json_t *v = json_array_get(nr, (size_t)i);
            if (!json_is_integer(v) && !json_is_boolean(v)) return mx_set_err("%s: no_rope_layers[%d]: expected 0 or 1", c->file, i);
            a->layers[i].rope = json_is_integer(v) ? json_integer_value(v) != 0 : json_is_true(v);
        } else a->layers[i].rope = (i + 1) % interval != 0;
    }
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    if (!r && use_sw && w > 0)
        for (int i = 0; i < a->n_layers; i++) a->layers[i].window = a->layers[i].rope ? 0 : w;
    return 0;
}

MX_FAMILY(smollm3, .name = "smollm3", .base = "llama", .features = "llama + no-rope (NoPE) layers, optional sliding layers",
          .configure = configure)
