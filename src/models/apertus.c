/* Apertus: Llama attention with per-head q/k RMSNorm before rope, norms
 * named attention_layernorm / feedforward_layernorm, and a plain MLP
 * down(xielu(up x)) whose xIELU scalars are learned per layer. Config class
 * defaults: rope_theta 1.2e7, and llama3 rope scaling (factor 8 over 8192)
 * when the config names no rope settings at all. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_arch_act_default(a, c, "xielu")) return -1;
    a->rope_decl[0] = (mx_rope_decl){.theta = 12000000.0,
                                     .scaling_default = "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"original_max_position_embeddings\": 8192, "
                                                        "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0}"};
    a->attn->qk_norm_spec = a->norm;
    a->attn->qk_norm = MX_QKNORM_HEAD;
    a->attn->names.q_norm = "model.layers.%d.self_attn.q_norm";
    a->attn->names.k_norm = "model.layers.%d.self_attn.k_norm";
    a->mlp = MX_MLP_PLAIN;
    a->mlp_bias = false;
    a->names.attn_norm = "model.layers.%d.attention_layernorm";
    a->names.ffn_norm = "model.layers.%d.feedforward_layernorm";
    a->names.gate = NULL;
    a->names.act_params = "model.layers.%d.mlp.act_fn";
    return 0;
}

MX_FAMILY(apertus, .name = "apertus", .base = "llama",
          .features = "llama + per-head q/k rmsnorm, plain mlp with learned xielu, llama3 rope by class default",
          .configure = configure)
