/* DeepSeek V2 (and V2.5, Coder-V2): the DeepSeek V3 latent attention (q
 * through a low-rank bottleneck, or a plain q_proj when q_lora_rank is null)
 * with a softmax router: topk_method "greedy" takes the top-k probabilities,
 * "group_limited_greedy" first keeps the topk_group of n_group groups whose
 * best probability is highest; weights the chosen probabilities times
 * routed_scaling_factor (not renormalised, as transformers' DeepseekV2; a
 * config asking for norm_topk_prob is refused: transformers ignores it while
 * DeepSeek's own code renormalises, so its meaning is ambiguous); shared
 * experts; dense layers before first_k_dense_replace. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_dsmoe_defaults d = {.experts = 64, .top_k = 6, .ffn = 1407, .shared = 2, .n_group = 1, .topk_group = 1,
                                        .dense = 0, .scale = 1.0f, .norm = false};
    int err = 0;
    const char *method = mx_cfg_str(c, "topk_method", "greedy", &err);
    if (err || mx_deepseek_mla_configure(a, c, &mx_deepseek_mla_defaults) || mx_deepseek_moe_configure(a, c, &d)) return -1;
    mx_moe_spec *s = &a->moe;
    if (s->norm_p) return mx_set_err("%s: norm_topk_prob true is not supported for deepseek_v2", c->file);
    if (!strcmp(method, "group_limited_greedy")) s->group_max = true;
    else if (!strcmp(method, "greedy")) s->n_group = s->topk_group = 1;
    else return mx_set_err("%s: topk_method '%s' is not supported (greedy, group_limited_greedy)", c->file, method);
    s->route = MX_ROUTE_SOFTMAX;
    s->score_bias = NULL;
    s->norm_eps = 0;
    return 0;
}

MX_FAMILY(deepseek_v2, .name = "deepseek_v2", .base = "llama",
          .features = "mla (plain or low-rank q, latent kv cache, rope slice), softmax moe (greedy or group-limited), routed scaling, shared experts, dense first layers",
          .configure = configure)
