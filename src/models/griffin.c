/* griffin: a model_type some RecurrentGemma configs carry. With the
 * transformers RecurrentGemma keys it is that family; a DeepMind Griffin
 * config (width, num_heads, ... of the recurrentgemma package, whose
 * checkpoints are not in the transformers layout) is refused by name. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    if (!mx_cfg_has(c, "hidden_size") && mx_cfg_has(c, "width"))
        return mx_set_err("%s: a DeepMind Griffin config (width, num_heads, ...) is not the transformers RecurrentGemma layout", c->file);
    return mx_family_configure(mx_family_find("recurrent_gemma"), a, c);
}

MX_FAMILY(griffin, .name = "griffin", .features = "recurrent_gemma under the model_type griffin", .configure = configure)
