/* EXAONE 4: OLMo-2-style post-norm blocks with a per-head q/k RMSNorm, and
 * sliding/global layers (layer_types, else sliding unless (i+1) %
 * sliding_window_pattern == 0) where global layers apply no rope (NoPE) while
 * a sliding window is configured. */
#include "family.h"
#include "../base/base.h"
#include <jansson.h>
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    int w;
    if (mx_cfg_i32(c, "sliding_window", 4096, 0, 1 << 30, &w)) return -1;
    a->attn->qk_norm = MX_QKNORM_HEAD; /* per head, where OLMo 2 norms the whole projection */
    json_t *sw = json_object_get(c->root, "sliding_window");
    if (sw && json_is_null(sw)) return 0; /* no sliding window: every layer global, with rope */
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    if (!r) {
        json_t *pat = mx_cfg_get(c, "sliding_window_pattern");
        const char *ps = json_string_value(pat);
        int p = 4;
        if (ps) {
            size_t n = strlen(ps);
            if (!n || strspn(ps, "LG") != n) return mx_set_err("%s: sliding_window_pattern: expected L/G characters", c->file);
            for (int i = 0; i < a->n_layers; i++) a->layers[i].window = ps[(size_t)i % n] == 'L' ? w : 0;
        } else {
            if (mx_cfg_i32(c, "sliding_window_pattern", 4, 1, 1 << 20, &p)) return -1;
            for (int i = 0; i < a->n_layers; i++) a->layers[i].window = (i + 1) % p ? w : 0;
        }
    }
    for (int i = 0; i < a->n_layers; i++) a->layers[i].rope = a->layers[i].window > 0;
    return 0;
}

MX_FAMILY(exaone4, .name = "exaone4", .base = "olmo2", .features = "post-norms, per-head q/k norm, sliding layers with rope, NoPE global layers",
          .configure = configure)
