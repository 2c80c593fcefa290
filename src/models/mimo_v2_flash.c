/* MiMo-V2-Flash: GQA attention whose values have a head size of their own
 * (v_head_dim) and are scaled by attention_value_scale; layer_types sliding
 * (by default all but layer 0 and every 6th) / full; sliding layers have
 * twice the kv heads and a learned sink logit per head, each layer type its
 * own rope (rope_parameters[layer type]: theta, partial rotary); no o_proj
 * bias. MLPs: mlp_layer_types dense (by default the first) or the
 * DeepSeek-V3 MoE without shared experts (sigmoid with correction bias,
 * groups masked to -inf, renormalised, routed scaling). The MTP module
 * (model.mtp.*) is ignored. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 256, .top_k = 8, .ffn = 2048, .shared = 0, .n_group = 1, .topk_group = 1,
                                        .dense = 1, .scale = 1.0f, .norm = true};
    mx_attn_spec *at = a->attn;
    int win, lt, mt;
    double vs = mx_cfg_absent(c, "attention_value_scale") ? 0.707 : 1; /* null: values unscaled */
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_cfg_i32(c, "head_dim", 192, 1, 1 << 14, &at->head_dim) ||
        mx_cfg_i32(c, "v_head_dim", 128, 1, 1 << 14, &at->v_head_dim) || mx_cfg_i32(c, "sliding_window", 128, 1, 1 << 30, &win) ||
        mx_cfg_float(c, "attention_value_scale", vs, 1e-6, 1e6, &vs) ||
        (lt = mx_arch_layer_types(a, c, win)) < 0 || mx_deepseek_moe_configure(a, c, &d) || (mt = mx_arch_mlp_layer_types(a, c, &mx_block_moe)) < 0 ||
        mx_arch_ignore(a, "model.mtp.*"))
        return -1;
    at->scale = 1.0f / sqrtf((float)at->head_dim);
    at->v_scale = (float)vs;
    at->o_bias = false;
    a->moe.shared_ffn = 0;
    a->moe.group_mask_inf = true;
    bool per_type = mx_cfg_get(c, "rope_parameters") != NULL; /* else the class's thetas and partial factor */
    a->rope_decl[0] = (mx_rope_decl){.theta = 5e6, .partial = 0.334, .params_key = per_type ? "full_attention" : NULL};
    a->rope_decl[1] = (mx_rope_decl){.theta = 1e4, .partial = 0.334, .params_key = per_type ? "sliding_attention" : NULL};
    a->n_rope = 2;
    mx_attn_spec *swa = mx_arch_add_attn(a, at);
    if (!swa) return -1;
    swa->n_kv_heads = 2 * at->n_kv_heads;
    swa->names.sinks = "model.layers.%d.self_attn.sinks";
    if (swa->n_heads % swa->n_kv_heads)
        return mx_set_err("%s: num_attention_heads %d is not a multiple of the sliding layers' 2 * num_key_value_heads", c->file, at->n_heads);
    for (int i = 0; i < a->n_layers; i++) {
        mx_layer_spec *l = &a->layers[i];
        if (!lt) l->window = i == 0 || (i + 1) % 6 == 0 ? 0 : win;
        if (!mt) l->ffn = i ? &mx_block_moe : &mx_block_mlp;
        l->attn = l->window ? swa : at;
        l->rope_idx = l->window ? 1 : 0;
    }
    return 0;
}

MX_FAMILY(mimo_v2_flash, .name = "mimo_v2_flash", .base = "llama",
          .features = "sliding (double kv heads, sinks) / full gqa, v head dim and value scale, rope per layer type (partial); deepseek-v3 moe without shared experts in mlp_layer_types' sparse layers; mtp ignored",
          .configure = configure)
