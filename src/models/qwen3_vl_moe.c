/* Qwen3-VL-MoE's text model: Qwen3-VL's with Qwen3-MoE's sparse blocks
 * (softmax top-k, always renormalised; layers in mlp_only_layers dense),
 * the experts stored fused: gate_up_proj [E, H, 2I] (gate = first half) and
 * down_proj [E, I, H], used as x @ W. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_qwen_moe_configure(a, c, 60, 4, 1408)) return -1;
    a->moe.norm_p = 1;
    a->moe.experts = (mx_expert_names){.gate_up = "model.layers.%d.mlp.experts.gate_up_proj", .down = "model.layers.%d.mlp.experts.down_proj",
                                       .transposed = MX_EXP_T_GATE_UP | MX_EXP_T_DOWN};
    return 0;
}

MX_FAMILY(qwen3_vl_moe, .name = "qwen3_vl_moe", .aliases = MX_ALIASES("qwen3_vl_moe_text"), .base = "qwen3_vl",
          .features = "qwen3_vl + sparse moe (softmax top-k, renormalised) with fused 3-D experts", .configure = configure,
          .defaults = "{\"rope_theta\": 5000000.0, \"rms_norm_eps\": 1e-6}")
