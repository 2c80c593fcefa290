/* Llama: the reference decoder; every default in mx_arch_hf_defaults is its. */
#include "family.h"

static int configure(mx_arch *a, const mx_cfg *c) { return mx_arch_hf_defaults(a, c); }

MX_FAMILY(llama, .name = "llama", .aliases = MX_ALIASES("codellama", "yi"),
          .features = "rmsnorm, swiglu, rope (default/linear/dynamic/yarn/llama3/longrope), gqa, tied or untied",
          .configure = configure)
