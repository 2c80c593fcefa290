/* OLMo 3: OLMo 2 with sliding-window layers (layer_types; by default every
 * 4th layer is global). Sliding layers use the unscaled default rope, global
 * layers the configured rope_scaling. */
#include "family.h"
#include <jansson.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    int w;
    if (mx_cfg_i32(c, "sliding_window", 4096, 0, 1 << 30, &w)) return -1;
    json_t *sw = json_object_get(c->root, "sliding_window");
    if (sw && json_is_null(sw)) w = 0;
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    if (!r)
        for (int i = 0; i < a->n_layers; i++) a->layers[i].window = (i + 1) % 4 ? w : 0;
    if (mx_cfg_has(c, "rope_scaling")) {
        a->rope_decl[1] = (mx_rope_decl){.plain = true};
        a->n_rope = 2;
        for (int i = 0; i < a->n_layers; i++) a->layers[i].rope_idx = a->layers[i].window ? 1 : 0;
    }
    return 0;
}

MX_FAMILY(olmo3, .name = "olmo3", .base = "olmo2", .features = "olmo2 + sliding/global layer pattern (unscaled rope on sliding layers)",
          .configure = configure)
