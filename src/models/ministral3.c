/* Ministral 3 (the text model of Mistral 3 / Ministral 3 checkpoints): Mistral
 * (a sliding window on every layer when sliding_window is set) whose queries
 * are scaled after rope by Llama 4's position scale
 * 1 + llama_4_scaling_beta * log(1 + floor(pos / original_max_position_embeddings)),
 * both read from rope_parameters. Config class defaults: head_dim 128,
 * rms_norm_eps 1e-5, and when no rope settings are given, yarn (factor 16 over
 * 16384, theta 1e6) with beta 0.1. */
#include "family.h"
#include "../base/base.h"
#include <math.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps)) return -1;
    if (mx_cfg_absent(c, "head_dim")) {
        a->attn->head_dim = 128;
        a->attn->scale = 1.0f / sqrtf((float)a->attn->head_dim);
    }
    bool no_rope = mx_cfg_absent(c, "rope_parameters") && mx_cfg_absent(c, "rope_scaling");
    a->rope_decl[0] = (mx_rope_decl){.theta = 1e6,
                                     .scaling_default = "{\"rope_type\": \"yarn\", \"factor\": 16.0, \"original_max_position_embeddings\": 16384, "
                                                        "\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}"};
    return mx_llama4_q_scale_configure(a->attn, c, no_rope ? 0.1 : 0, no_rope ? 16384 : 0);
}

int mx_llama4_q_scale_configure(mx_attn_spec *at, const mx_cfg *c, double def_beta, int def_div) {
    json_t *rp = mx_cfg_get(c, "rope_parameters");
    double beta = def_beta;
    int div = def_div;
    if (rp) {
        mx_cfg r = {rp, NULL, c->file};
        if (mx_cfg_float(&r, "llama_4_scaling_beta", 0, 0, 1e3, &beta) || mx_cfg_i32(&r, "original_max_position_embeddings", 0, 0, 1 << 30, &div))
            return -1;
    }
    if (beta > 0) {
        if (!div) return mx_set_err("%s: rope_parameters: llama_4_scaling_beta needs original_max_position_embeddings", c->file);
        at->temp_scale = (float)beta;
        at->temp_floor = (float)div;
        at->temp_pos0 = true;
    }
    return 0;
}

MX_FAMILY(ministral3, .name = "ministral3", .base = "mistral", .features = "mistral + llama-4 position scaling of q, rope_parameters (yarn)",
          .configure = configure)
