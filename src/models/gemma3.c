/* Gemma 3 (text): Gemma 2 without the soft-caps by default, per-head q/k norm,
 * and a sliding/global layer pattern where sliding layers use their own rope
 * base (rope_local_base_freq) and global layers the scaled rope_theta. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    a->attn->qk_norm = MX_QKNORM_HEAD;
    a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    int w, pattern;
    if (mx_cfg_i32(c, "sliding_window", 4096, 1, 1 << 30, &w) || mx_cfg_i32(c, "sliding_window_pattern", 6, 1, 1 << 20, &pattern))
        return -1;
    /* EmbeddingGemma: use_bidirectional_attention (any tmpl_truthy value, as Python reads it) makes every
     * layer bidirectional, and Gemma3TextConfig then replaces sliding_window S by S // 2 + 1, also
     * when loading a saved config: a sliding layer sees keys with |i - j| < S // 2 + 1 */
    json_t *bd = mx_cfg_get(c, "use_bidirectional_attention");
    if (bd && !json_is_false(bd) && !(json_is_string(bd) && !*json_string_value(bd)) && !(json_is_number(bd) && json_number_value(bd) == 0)) {
        a->attn->bidirectional = true;
        w = w / 2 + 1;
    }
    a->rope_decl[1] = (mx_rope_decl){.theta_key = "rope_local_base_freq", .plain = true}; /* the local rope has no scaling */
    a->n_rope = 2;
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    for (int i = 0; i < a->n_layers; i++) {
        if (!r) a->layers[i].window = (i + 1) % pattern ? w : 0;
        a->layers[i].rope_idx = a->layers[i].window ? 1 : 0;
    }
    return 0;
}

/* Gemma3TextConfig's defaults: released Gemma 3 configs (the packaged ones'
 * text_config above all) leave these out */
MX_FAMILY(gemma3_text, .name = "gemma3_text", .base = "gemma2",
          .features = "gemma2 + per-head q/k norm, sliding/global pattern with two rope bases; bidirectional (EmbeddingGemma)",
          .configure = configure,
          .defaults = "{\"vocab_size\": 262208, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 256,"
                      " \"query_pre_attn_scalar\": 256, \"max_position_embeddings\": 131072, \"rope_theta\": 1000000.0,"
                      " \"rms_norm_eps\": 1e-6, \"sliding_window\": 4096}")
