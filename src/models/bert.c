/* BERT encoder: learned absolute positions + token type embeddings, embedding
 * LayerNorm, post-norm blocks (LayerNorm of the residual sum), bidirectional
 * attention with biases, plain GELU MLP, pooler tanh(dense(h[0])).
 * BertModel checkpoints name tensors without a prefix; the task heads
 * (…ForSequenceClassification, …ForMaskedLM) put the encoder under "bert.".
 * A sequence classifier is pooler -> classifier. XLM-RoBERTa builds on
 * mx_bert_configure. */
#include "family.h"
#include "../base/base.h"
#include <string.h>

#define BERT_NAMES(P)                                                                                              \
    {                                                                                                              \
        .embed = P "embeddings.word_embeddings", .pos_embed = P "embeddings.position_embeddings",                  \
        .type_embed = P "embeddings.token_type_embeddings", .embed_norm = P "embeddings.LayerNorm",                \
        .post_attn_norm = P "encoder.layer.%d.attention.output.LayerNorm",                                         \
        .up = P "encoder.layer.%d.intermediate.dense", .down = P "encoder.layer.%d.output.dense",                  \
        .post_ffn_norm = P "encoder.layer.%d.output.LayerNorm",                                                    \
    }
#define BERT_ATTN_NAMES(P)                                                                                         \
    {                                                                                                              \
        .q = P "encoder.layer.%d.attention.self.query", .k = P "encoder.layer.%d.attention.self.key",              \
        .v = P "encoder.layer.%d.attention.self.value", .o = P "encoder.layer.%d.attention.output.dense",          \
    }

/* prefix: the encoder's module name in task checkpoints ("bert", "roberta"). */
int mx_bert_configure(mx_arch *a, const mx_cfg *c, const char *prefix, bool *task_head) {
    static const mx_names plain = BERT_NAMES(""), bert = BERT_NAMES("bert."), roberta = BERT_NAMES("roberta.");
    static const mx_attn_names attn[] = {BERT_ATTN_NAMES(""), BERT_ATTN_NAMES("bert."), BERT_ATTN_NAMES("roberta.")};
    static const char *const poolers[] = {"pooler.dense", "bert.pooler.dense", "roberta.pooler.dense"};
    int err = 0;
    const char *pet = mx_cfg_str(c, "position_embedding_type", "absolute", &err);
    if (err) return -1;
    if (strcmp(pet, "absolute")) return mx_set_err("%s: position_embedding_type '%s' is not supported (only absolute)", c->file, pet);
    float eps;
    if (mx_cfg_f32(c, "layer_norm_eps", 1e-12f, 0, 1, &eps) || mx_cfg_i32(c, "max_position_embeddings", 512, 1, 1 << 24, &a->max_pos) ||
        mx_cfg_i32(c, "type_vocab_size", 2, 0, 1 << 16, &a->n_types))
        return -1;
    const char *act = mx_cfg_str(c, "hidden_act", "gelu", &err);
    if (err || mx_act_parse(act, &a->act)) return err ? -1 : mx_set_err("%s: hidden_act: unsupported '%s'", c->file, act);
    /* the encoder sits under "<prefix>." unless the checkpoint is the bare model (…Model) */
    json_t *archs = mx_cfg_get(c, "architectures");
    const char *an = archs && json_is_array(archs) ? json_string_value(json_array_get(archs, 0)) : NULL;
    size_t an_len = an ? strlen(an) : 0;
    bool bare = !an || (an_len >= 5 && !strcmp(an + an_len - 5, "Model"));
    *task_head = an && strstr(an, "ForSequenceClassification");
    int pi = bare ? 0 : !strcmp(prefix, "bert") ? 1 : 2;
    a->names = pi == 0 ? plain : pi == 1 ? bert : roberta;
    a->attn->names = attn[pi];
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, eps};
    a->mlp = MX_MLP_PLAIN;
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = a->attn->o_bias = a->mlp_bias = true;
    a->tied = false;
    a->pos = MX_POS_LEARNED;
    a->n_rope = 0;
    a->attn->bidirectional = true;
    a->norm_after_residual = true;
    if (!a->n_types) a->names.type_embed = NULL;
    for (int i = 0; i < a->n_layers; i++) a->layers[i].rope = false;
    /* embedding models: the pooler when the checkpoint has one */
    a->head = (mx_head_spec){.pool = MX_POOL_CLS, .dense = poolers[pi], .dense_bias = true, .optional = true, .act = MX_ACT_TANH};
    mx_arch_ignore(a, "*embeddings.position_ids");
    mx_arch_ignore(a, "*embeddings.token_type_ids");
    mx_arch_ignore(a, "cls.*");     /* BERT MLM / NSP heads */
    mx_arch_ignore(a, "lm_head.*"); /* RoBERTa MLM head */
    return 0;
}

/* num_labels as HF derives it: the size of id2label (default 2). */
int mx_bert_num_labels(const mx_cfg *c, int *n) {
    json_t *m = mx_cfg_get(c, "id2label");
    if (m && json_is_object(m)) { *n = (int)json_object_size(m); return 0; }
    return mx_cfg_i32(c, "num_labels", 2, 1, 1 << 20, n);
}

static int configure(mx_arch *a, const mx_cfg *c) {
    bool cls;
    if (mx_bert_configure(a, c, "bert", &cls)) return -1;
    if (cls) { /* pooler -> classifier */
        a->head.optional = false;
        a->head.out = "classifier";
        if (mx_bert_num_labels(c, &a->head.n_labels)) return -1;
    }
    return 0;
}

MX_FAMILY(bert, .name = "bert", .base = "llama", .task = "embedding, sequence-classification", .features = "encoder: learned positions, token types, post-norm layernorm, gelu mlp, pooler, sequence classifier",
          .configure = configure)
