/* DeepSeek-V3.2 (deepseek_v32): DeepSeek-V3 (latent attention with a q LoRA
 * and interleaved rope slices; sigmoid group-limited MoE, the left-out
 * groups' experts at -inf, in mlp_layer_types' sparse layers, by default
 * after first_k_dense_replace dense ones) plus DeepSeek sparse attention: in
 * every layer a lightning indexer (self_attn.indexer: wq_b from the q LoRA
 * latent, wk + LayerNorm k_norm, weights_proj; index_n_heads heads of
 * index_head_dim) keeps each query's index_topk best keys (nn/dsa.c).
 * MLXCEL_DSA_DENSE=1 in the environment runs the same checkpoint with dense
 * latent attention (the indexer is not loaded), for comparisons. */
#include "family.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_mla_defaults md = {.q_lora = 1536, .kv_lora = 512, .nope = 128, .rope = 64, .v = 128, .interleave = true,
                                       .fixed_rope = true};
    static const mx_dsmoe_defaults d = {.experts = 256, .top_k = 8, .ffn = 2048, .shared = 1, .n_group = 8, .topk_group = 4,
                                        .dense = 3, .scale = 2.5f, .norm = true};
    mx_mla_spec *m = &a->mla;
    if (mx_deepseek_mla_configure(a, c, &md) || mx_deepseek_moe_configure(a, c, &d) || mx_arch_mlp_layer_types(a, c, &mx_block_moe) < 0 ||
        mx_cfg_i32(c, "index_topk", 2048, 1, 1 << 24, &m->index_topk) || mx_cfg_i32(c, "index_head_dim", 128, 2, 1 << 14, &m->index_dim) ||
        mx_cfg_i32(c, "index_n_heads", 64, 1, 4096, &m->index_heads))
        return -1;
    if (m->q_lora_rank < 1) return mx_set_err("%s: q_lora_rank is required (the indexer reads the q LoRA latent)", c->file);
    if (m->index_dim < m->qk_rope_dim)
        return mx_set_err("%s: index_head_dim %d is smaller than qk_rope_head_dim %d", c->file, m->index_dim, m->qk_rope_dim);
    json_t *lt = mx_cfg_get(c, "layer_types");
    if (lt && (!json_is_array(lt) || (int)json_array_size(lt) != a->n_layers))
        return mx_set_err("%s: layer_types: expected %d entries", c->file, a->n_layers);
    for (int i = 0; lt && i < a->n_layers; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        if (!s || strcmp(s, "deepseek_sparse_attention"))
            return mx_set_err("%s: layer_types[%d]: only deepseek_sparse_attention layers are supported", c->file, i);
    }
    a->moe.group_mask_inf = true;
    m->index_norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, 1e-6f};
    m->index_q = "model.layers.%d.self_attn.indexer.wq_b";
    m->index_k = "model.layers.%d.self_attn.indexer.wk";
    m->index_k_norm = "model.layers.%d.self_attn.indexer.k_norm";
    m->index_w = "model.layers.%d.self_attn.indexer.weights_proj";
    const char *dense = getenv("MLXCEL_DSA_DENSE");
    if (dense && *dense && strcmp(dense, "0")) {
        m->index_topk = 0;
        if (mx_arch_ignore(a, "model.layers.*.self_attn.indexer.*")) return -1;
    }
    return 0;
}

MX_FAMILY(deepseek_v32, .name = "deepseek_v32", .base = "llama",
          .features = "deepseek-v3 mla + sparse attention (lightning indexer, top-k keys per query, cached indexer keys); sigmoid group-limited moe in mlp_layer_types' sparse layers",
          .configure = configure)
