/* Gemma 3n (text): Gemma 3's sandwich-normed decoder with plain x * w
 * RMSNorms, q/k norms and a weightless v norm, attention scale 1, a rope
 * theta per layer type (rope_parameters), final soft-cap, and
 * - AltUp: altup_num_inputs residual streams, predicted before and corrected
 *   after every layer (nn/altup.c);
 * - LAuReL, a low-rank branch beside the attention: the layer's residual is
 *   (x + attn + laurel) / sqrt(2) (nn/laurel.c);
 * - per-layer inputs (as Gemma 4) added to the corrected streams but the first;
 * - the last num_kv_shared_layers layers attend over the K/V of the last
 *   earlier layer of their type;
 * - intermediate_size per layer, and a gaussian top-k on the MLP gate of the
 *   layers with activation_sparsity_pattern > 0. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    mx_attn_spec *s = a->attn;
    mx_altup_spec *u = &a->altup;
    int w, n_shared, ple_dim, ple_vocab, rank;
    if (mx_cfg_i32(c, "sliding_window", 512, 1, 1 << 30, &w) || mx_cfg_i32(c, "num_kv_shared_layers", 0, 0, a->n_layers, &n_shared) ||
        mx_cfg_i32(c, "hidden_size_per_layer_input", 256, 1, 1 << 16, &ple_dim) ||
        mx_cfg_i32(c, "vocab_size_per_layer_input", 262144, 1, 1 << 24, &ple_vocab) ||
        mx_cfg_i32(c, "laurel_rank", 64, 1, 1 << 16, &rank) || mx_cfg_i32(c, "altup_num_inputs", 4, 2, MX_ALTUP_MAX, &u->n) ||
        mx_cfg_i32(c, "altup_active_idx", 0, 0, MX_ALTUP_MAX - 1, &u->active) ||
        mx_cfg_f32(c, "altup_coef_clip", 120.0f, 0, 1e30f, &u->coef_clip) || mx_cfg_bool(c, "altup_correct_scale", true, &u->correct_scale))
        return -1;
    if (u->active >= u->n) return mx_set_err("%s: altup_active_idx %d is not below altup_num_inputs %d", c->file, u->active, u->n);
    a->norm.offset = 0;
    s->qk_norm_spec = a->norm;
    s->scale = 1.0f;
    s->softcap = 0;
    s->v_norm = true;
    int r = mx_arch_layer_types(a, c, w);
    if (r < 0) return -1;
    json_t *sp = mx_cfg_get(c, "activation_sparsity_pattern");
    if (sp && (!json_is_array(sp) || (int)json_array_size(sp) != a->n_layers))
        return mx_set_err("%s: activation_sparsity_pattern: expected a list of %d numbers", c->file, a->n_layers);
    for (int i = 0; i < a->n_layers; i++) {
        mx_layer_spec *ls = &a->layers[i];
        if (!r) ls->window = (i + 1) % 5 ? w : 0; /* Gemma3nTextConfig's default: 4 sliding, 1 full */
        ls->branch = &mx_block_laurel;
        double p = 0;
        if (sp && mx_json_num(json_array_get(sp, i), c->file, "activation_sparsity_pattern", 0, 0.999999, &p)) return -1;
        ls->gate_sparsity = (float)p;
    }
    mx_arch_rope_per_type(a, c, 1000000.0, 10000.0);
    if (!a->rope_decl[1].params_key) /* configs before rope_parameters: Gemma 3's local base */
        a->rope_decl[1] = (mx_rope_decl){.theta_key = "rope_local_base_freq", .theta = 10000.0, .plain = true};
    if (mx_gemma_kv_shared(a, c, a->n_layers - n_shared)) return -1;
    mx_gemma_ple_spec(a, ple_dim, ple_vocab);
    a->branch_scale = (float)(1.0 / sqrt(2.0));
    a->laurel = (mx_laurel_spec){.rank = rank, .left = "model.layers.%d.laurel.linear_left",
                                 .right = "model.layers.%d.laurel.linear_right", .norm = "model.layers.%d.laurel.post_laurel_norm"};
    u->proj = "model.altup_projections.%d";
    u->unembed = "model.altup_unembed_projections.%d";
    u->router_norm = "model.layers.%d.altup.router_norm";
    u->router = "model.layers.%d.altup.modality_router";
    u->predict = "model.layers.%d.altup.prediction_coefs";
    u->correct = "model.layers.%d.altup.correction_coefs";
    u->out_scale = "model.layers.%d.altup.correct_output_scale";
    return 0;
}

MX_FAMILY(gemma3n_text, .name = "gemma3n_text", .base = "gemma3_text",
          .features = "altup streams (predict / correct), laurel branch, per-layer inputs, gaussian top-k mlp gate, kv-shared layers, "
                      "v norm, attention scale 1, rope theta per layer type, per-layer mlp width, final softcap",
          .configure = configure,
          /* Gemma3nTextConfig's own defaults, before gemma3_text's (another config class) */
          .defaults = "{\"vocab_size\": 262400, \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 256,"
                      " \"max_position_embeddings\": 32768, \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-6, \"sliding_window\": 512}")
