/* BitNet b1.58 with float weights (the bf16 master checkpoints): Llama with
 * an RMSNorm on the attention output before o_proj (attn_sub_norm) and one on
 * the gated MLP activation before down_proj (ffn_sub_norm), relu² gate
 * activation and rope_theta 5e5 by default. Ternary-packed checkpoints
 * (quantization_config.quant_method "bitnet") are refused. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    json_t *qc = mx_cfg_get(c, "quantization_config");
    json_t *qm = qc ? json_object_get(qc, "quant_method") : NULL;
    if (json_is_string(qm) && !strcmp(json_string_value(qm), "bitnet"))
        return mx_set_err("%s: quantization_config: ternary-packed BitNet weights are not supported (use the float/bf16 checkpoint)", c->file);
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-5f, 0, 1, &a->norm.eps) || mx_arch_act_default(a, c, "relu2")) return -1;
    a->rope_decl[0] = (mx_rope_decl){.theta = 500000.0};
    a->attn->qk_norm_spec = a->norm;
    a->attn->names.out_norm = "model.layers.%d.self_attn.attn_sub_norm";
    a->names.ffn_act_norm = "model.layers.%d.mlp.ffn_sub_norm";
    return 0;
}

MX_FAMILY(bitnet, .name = "bitnet", .base = "llama",
          .features = "llama + attention-output and mlp-activation sub-norms, relu² glu (float weights)", .configure = configure)
