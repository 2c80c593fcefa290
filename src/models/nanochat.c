/* NanoChat: Llama with every RMSNorm weightless (the same norm also once on
 * the token embeddings, before the first layer), q/k normed per head by it
 * after rope, rope rotating the opposite way to Llama's (rotate_half(x) =
 * [x2, -x1]), a plain relu² MLP (mlp.fc1 / mlp.fc2) and final logit
 * soft-capping (15 unless null). */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_arch_act_default(a, c, "relu2") || mx_cfg_i32(c, "intermediate_size", 8192, 1, 1 << 20, &a->ffn) ||
        mx_cfg_f32(c, "final_logit_softcapping", mx_cfg_absent(c, "final_logit_softcapping") ? 15.0f : 0.0f, 0, 1e9f, &a->final_softcap) ||
        mx_cfg_i32(c, "bos_token_id", 0, -1, 1 << 30, &a->bos_id))
        return -1;
    a->norm.weight = false;
    a->names.embed_norm = "model.norm";
    a->attn->qk_norm = MX_QKNORM_HEAD;
    a->attn->qk_norm_spec = a->norm;
    a->attn->qk_norm_after_rope = true;
    a->rope_decl[0].reversed = true;
    a->mlp = MX_MLP_PLAIN;
    a->names.gate = NULL;
    a->names.up = "model.layers.%d.mlp.fc1";
    a->names.down = "model.layers.%d.mlp.fc2";
    return 0;
}

MX_FAMILY(nanochat, .name = "nanochat", .base = "llama",
          .features = "weightless rmsnorms (also on the embeddings), per-head q/k norm after rope, reversed rope, relu² mlp, final softcap",
          .configure = configure)
