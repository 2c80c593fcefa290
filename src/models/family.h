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
int bert_configure(mx_arch *a, const mx_cfg *c, const char *prefix, bool *task_head);
/* bert.c: num_labels as HF derives it (the size of id2label, default 2). */
int bert_num_labels(const mx_cfg *c, int *n);
/* qwen2_moe.c: Qwen-MoE's sparse blocks (softmax router, per-expert SwiGLU,
 * mlp_only_layers / decoder_sparse_step) with the family's defaults. */
int qwen_moe_configure(mx_arch *a, const mx_cfg *c, int def_experts, int def_topk, int def_ffn);
/* granitemoe.c: Granite's sparse block (top-k then softmax, fused stacked experts). */
void granite_moe_spec(mx_arch *a);
/* mamba.c: the model-level part of the pure state-space families (Mamba,
 * FalconMamba, Mamba2): embeddings, norms, head, every layer `mixer`. */
int mamba_configure_base(mx_arch *a, const mx_cfg *c, const mx_block_ops *mixer);
/* mamba2.c: the Mamba2 mixer keys of Mamba2 and the hybrids built on it. */
int mamba2_ssm_config(mx_ssm_spec *s, const mx_cfg *c, int hidden, const char *eps_key);
/* bamba.c: the hybrids' mamba_* keys (Bamba, Granite-MoE-Hybrid, Falcon-H1). */
int hybrid_mamba2_config(mx_ssm_spec *s, const mx_cfg *c, const mx_arch *a, const char *prefix);
#endif
