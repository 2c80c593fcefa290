/* Mistral 4 (Mistral-Small-4): DeepSeek-V3's latent attention (q LoRA or a
 * plain q_proj, interleaved rope on the rope slices unless rope_interleave is
 * false) whose q, both slices, is multiplied by Llama 4's position scale
 * 1 + llama_4_scaling_beta * log(1 + floor(pos / original_max_position_embeddings));
 * yarn rope with the config's factor as given (transformers v5), the softmax
 * scale times mscale(factor, mscale_all_dim)^2; dense SwiGLU in the first
 * first_k_dense_replace layers, then a MoE: softmax router, group-limited
 * (top-2 sums; the left-out groups' experts score 0), renormalised, routed
 * scaling, shared experts. Without rope settings the config class's yarn
 * (factor 128 over 8192, mscale 1, beta 0.1). */
#include "family.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_mla_defaults md = {.q_lora = 1024, .kv_lora = 256, .nope = 64, .rope = 64, .v = 128, .interleave = true};
    static const mx_dsmoe_defaults d = {.experts = 128, .top_k = 4, .ffn = 2048, .shared = 1, .n_group = 1, .topk_group = 1,
                                        .dense = 0, .scale = 1.0f, .norm = true};
    bool no_rope = mx_cfg_absent(c, "rope_parameters") && mx_cfg_absent(c, "rope_scaling");
    if (mx_deepseek_mla_configure(a, c, &md) || mx_deepseek_moe_configure(a, c, &d) ||
        mx_llama4_q_scale_configure(a->attn, c, no_rope ? 0.1 : 0, no_rope ? 8192 : 0))
        return -1;
    a->rope_decl[0].yarn_factor_given = true;
    a->rope_decl[0].scaling_default = "{\"rope_type\": \"yarn\", \"factor\": 128.0, \"original_max_position_embeddings\": 8192, "
                                      "\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}";
    if (no_rope) { /* the default yarn's mscale(128, 1)^2 on the softmax scale, as mx_deepseek_mla_configure does for a given one */
        double ms = 0.1 * log(128.0) + 1.0;
        a->attn->scale *= (float)(ms * ms);
    }
    mx_moe_spec *s = &a->moe;
    s->route = MX_ROUTE_SOFTMAX;
    s->score_bias = NULL;
    return 0;
}

MX_FAMILY(mistral4, .name = "mistral4", .base = "llama",
          .features = "mla with llama-4 position scaling of q, yarn (v5 factor); softmax group-limited moe, routed scaling, shared experts, dense first layers",
          .configure = configure)
