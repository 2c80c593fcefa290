/* Helium: Llama with interleaved rope (pairs 2i, 2i+1) over the whole head;
 * attention_bias puts biases on q/k/v only; rms_norm_eps defaults to 1e-8. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (mx_cfg_f32(c, "rms_norm_eps", 1e-8f, 0, 1, &a->norm.eps)) return -1;
    a->attn->qk_norm_spec = a->norm;
    a->attn->o_bias = false;
    a->rope_decl[0].interleaved = true;
    return 0;
}

MX_FAMILY(helium, .name = "helium", .base = "llama", .features = "llama + interleaved rope, q/k/v bias", .configure = configure)
