/* family: how a family file registers itself. Each src/models/<family>.c
 * registers with MX_FAMILY; the registry finds families by config.json's
 * model_type, so adding one never means editing the core.
 *
 * A family builds on another by declaring it: with .base = "qwen3" the
 * registry runs qwen3's configure (and its base's, down to the root) before
 * this family's, so a configure states only what differs from its base. A
 * root family (llama, gpt2, mamba, ...) starts from an empty description.
 * Parts several families share with their own parameters are declared at
 * the end of this header, each defined in the family file named. */
#ifndef MX_FAMILY_H
#define MX_FAMILY_H
#include "../nn/arch.h"

typedef enum { MX_TASK_CAUSAL_LM, MX_TASK_EMBEDDING, MX_TASK_SEQ_CLS } mx_task;

typedef struct mx_family {
    const char *name;                 /* primary model_type */
    const char *const *aliases;       /* other model_type values, NULL-terminated */
    const char *base;                 /* the family this one builds on (its name); NULL = a root */
    const char *features;             /* what the family exercises, for `mlxcel arch` */
    const char *task;                 /* "causal-lm" (NULL), "embedding", "sequence-classification" */
    int (*configure)(mx_arch *a, const mx_cfg *c); /* after the base's; NULL = the base alone */
    /* The HF config class's defaults for keys a config may leave out, as a
     * JSON object (e.g. Gemma3TextConfig's heads and vocabulary, which
     * packaged Gemma 3 configs omit from text_config): seen by every
     * configure of the chain when the config has no such key. */
    const char *defaults;
    struct mx_family *next;
} mx_family;

void mx_family_register(mx_family *f);
const mx_family *mx_family_find(const char *model_type);
const mx_family *mx_family_list(void);
/* Fills a (any previous content freed) for config c: the configure of f's
 * bases from the root up, then f's own. On failure a is left empty. */
int mx_family_configure(const mx_family *f, mx_arch *a, const mx_cfg *c);

#define MX_ALIASES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MX_FAMILY(id, ...)                                                        \
    static mx_family mx_family_##id = {__VA_ARGS__};                              \
    __attribute__((constructor)) static void mx_register_##id(void) { mx_family_register(&mx_family_##id); }

/* ---- parts several families share ---- */

/* bert.c: the BERT encoder on top of llama's defaults; prefix is the
 * encoder's module in task checkpoints ("bert", "roberta"); *task_head tells
 * a …ForSequenceClassification checkpoint. */
int mx_bert_configure(mx_arch *a, const mx_cfg *c, const char *prefix, bool *task_head);
/* bert.c: num_labels as HF derives it (the size of id2label, default 2). */
int mx_bert_num_labels(const mx_cfg *c, int *n);
/* qwen2_moe.c: Qwen-MoE's sparse blocks (softmax router, per-expert SwiGLU,
 * mlp_only_layers / decoder_sparse_step) with the family's defaults. */
int mx_qwen_moe_configure(mx_arch *a, const mx_cfg *c, int def_experts, int def_topk, int def_ffn);
/* granitemoe.c: Granite's sparse block (top-k then softmax, fused stacked experts). */
void mx_granite_moe_spec(mx_arch *a);
/* mamba.c: the model-level part of the pure state-space families (Mamba,
 * FalconMamba, Mamba2): embeddings, norms, head, every layer `mixer`. */
int mx_mamba_configure_base(mx_arch *a, const mx_cfg *c, const mx_block_ops *mixer);
/* mamba2.c: the Mamba2 mixer keys of Mamba2 and the hybrids built on it. */
int mx_mamba2_ssm_config(mx_ssm_spec *s, const mx_cfg *c, int hidden, const char *eps_key);
/* bamba.c: the hybrids' mamba_* keys (Bamba, Granite-MoE-Hybrid, Falcon-H1). */
int mx_hybrid_mamba2_config(mx_ssm_spec *s, const mx_cfg *c, const mx_arch *a, const char *prefix);
/* deepseek_v3.c: DeepSeek-style MoE layers, shared by the families built on
 * DeepSeek's MoE: n_routed_experts / num_experts_per_tok /
 * moe_intermediate_size / n_shared_experts / n_group / topk_group /
 * norm_topk_prob / routed_scaling_factor / first_k_dense_replace /
 * moe_layer_freq with each family's config class defaults; sigmoid router with
 * mlp.gate.e_score_correction_bias, experts mlp.experts.<e>.* (or MLX
 * switch_mlp, or v5 fused), shared experts fused as mlp.shared_experts; layer i is a MoE
 * when i >= first_k_dense_replace and i % moe_layer_freq == 0; MTP layers
 * (num_nextn_predict_layers) ignored. A family changes the router after. */
typedef struct {
    int experts, top_k, ffn, shared, n_group, topk_group, dense;
    float scale;
    bool norm;
} mx_dsmoe_defaults;
int mx_deepseek_moe_configure(mx_arch *a, const mx_cfg *c, const mx_dsmoe_defaults *d);
/* deepseek_v3.c: the expert names of that layout alone (per expert
 * mlp.experts.<e>.{gate,up,down}_proj, MLX mlp.switch_mlp.*, transformers
 * v5's fused mlp.experts.{gate_up,down}_proj, mlp.shared_experts.*). */
void mx_deepseek_moe_names(mx_moe_spec *s);
/* deepseek_v3.c: latent attention in every layer: q_lora_rank (null: a plain
 * q_proj), kv_lora_rank, qk_nope / qk_rope / v head dims (v null:
 * hidden / heads), rope on the rope slices (interleaved unless
 * rope_interleave is false), scale qk_head_dim^-0.5 times mscale^2 under
 * yarn with mscale_all_dim; each family's config class defaults for absent
 * keys. */
typedef struct {
    int q_lora, kv_lora, nope, rope, v; /* v 0: hidden_size / num_attention_heads */
    bool interleave;                   /* rope_interleave's default */
    bool fixed_rope;                   /* the class has no rope_interleave key: always `interleave` */
} mx_mla_defaults;
extern const mx_mla_defaults mx_deepseek_mla_defaults; /* DeepSeek-V3's: 1536, 512, 128, 64, 128, interleaved */
int mx_deepseek_mla_configure(mx_arch *a, const mx_cfg *c, const mx_mla_defaults *d);
/* ernie4_5_moe.c: ERNIE 4.5 MoE on top of llama's defaults (also ERNIE 4.5
 * MoE configs that say model_type ernie4_5). */
int mx_ernie4_5_moe_configure(mx_arch *a, const mx_cfg *c);
/* gemma4.c: Gemma 4 / 3n KV sharing: layers first_shared.. attend over the
 * cache of the last earlier layer of their type (sliding or full). */
int mx_gemma_kv_shared(mx_arch *a, const mx_cfg *c, int first_shared);
/* gemma4.c: Gemma 4 / 3n per-layer inputs of `dim` (a post block in every
 * layer) under their transformers names. */
void mx_gemma_ple_spec(mx_arch *a, int dim, int vocab);
/* ministral3.c: Llama 4's position scale of q, 1 + beta * log(1 + floor(pos /
 * div)), with beta = rope_parameters.llama_4_scaling_beta and div its
 * original_max_position_embeddings (def_beta, def_div: the class's when the
 * config has no rope settings); none when beta is 0. */
int mx_llama4_q_scale_configure(mx_attn_spec *at, const mx_cfg *c, double def_beta, int def_div);
#endif
