/* ModernBERT: a pre-norm encoder with bias-free LayerNorms, an embedding norm
 * and a final norm, fused Wqkv and GeGLU Wi, no attention norm in layer 0, and
 * alternating attention: layer l is global iff l % global_attn_every_n_layers
 * == 0 (rope base global_rope_theta), otherwise local over |i - j| <=
 * local_attention / 2 (rope base local_rope_theta). The classifier pools
 * (classifier_pooling cls|mean) -> head.dense -> act -> head.norm ->
 * classifier. Task checkpoints put the encoder under "model.". */
#include "family.h"
#include "../base/base.h"
#include <string.h>

#define MB_NAMES(P)                                                                                                \
    {                                                                                                              \
        .embed = P "embeddings.tok_embeddings", .embed_norm = P "embeddings.norm", .final_norm = P "final_norm",     \
        .attn_norm = P "layers.%d.attn_norm", .ffn_norm = P "layers.%d.mlp_norm", .gate_up = P "layers.%d.mlp.Wi",  \
        .down = P "layers.%d.mlp.Wo",                                                                              \
    }
#define MB_ATTN_NAMES(P) {.qkv = P "layers.%d.attn.Wqkv", .o = P "layers.%d.attn.Wo"}

static int configure(mx_arch *a, const mx_cfg *c) {
    static const mx_names plain = MB_NAMES(""), prefixed = MB_NAMES("model.");
    static const mx_attn_names attn_plain = MB_ATTN_NAMES(""), attn_prefixed = MB_ATTN_NAMES("model.");
    float eps;
    bool nbias, abias, cbias;
    int every, local, err = 0;
    if (mx_cfg_f32(c, "norm_eps", 1e-5f, 0, 1, &eps) || mx_cfg_bool(c, "norm_bias", false, &nbias) ||
        mx_cfg_bool(c, "attention_bias", false, &abias) || mx_cfg_bool(c, "mlp_bias", false, &a->mlp_bias) ||
        mx_cfg_bool(c, "classifier_bias", false, &cbias) || mx_cfg_i32(c, "global_attn_every_n_layers", 3, 1, 1 << 20, &every) ||
        mx_cfg_i32(c, "local_attention", 128, 0, 1 << 24, &local) || mx_cfg_i32(c, "max_position_embeddings", 8192, 1, 1 << 26, &a->max_pos))
        return -1;
    const char *act = mx_cfg_str(c, "hidden_activation", "gelu", &err);
    if (err || mx_act_parse(act, &a->act)) return err ? -1 : mx_set_err("%s: hidden_activation: unsupported '%s'", c->file, act);
    a->rope_decl[0] = (mx_rope_decl){.theta_key = "global_rope_theta", .theta = 160000.0, .plain = true};
    a->rope_decl[1] = (mx_rope_decl){.theta_key = "local_rope_theta", .theta = 10000.0, .plain = true};
    a->n_rope = 2;
    json_t *archs = mx_cfg_get(c, "architectures");
    const char *an = archs && json_is_array(archs) ? json_string_value(json_array_get(archs, 0)) : NULL;
    size_t an_len = an ? strlen(an) : 0;
    bool bare = !an || (an_len >= 5 && !strcmp(an + an_len - 5, "Model"));
    a->names = bare ? plain : prefixed;
    a->attn->names = bare ? attn_plain : attn_prefixed;
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, nbias, eps};
    a->attn->q_bias = a->attn->k_bias = a->attn->v_bias = a->attn->o_bias = abias;
    a->tied = false;
    a->attn->bidirectional = true;
    for (int i = 0; i < a->n_layers; i++) {
        bool global = i % every == 0;
        a->layers[i].window = global ? 0 : local / 2 + 1; /* |i - j| < W */
        a->layers[i].rope_idx = global ? 0 : 1;
    }
    a->layers[0].no_attn_norm = true;
    if (an && strstr(an, "ForSequenceClassification")) {
        const char *pool = mx_cfg_str(c, "classifier_pooling", "cls", &err), *cact = mx_cfg_str(c, "classifier_activation", "gelu", &err);
        if (err) return -1;
        a->head = (mx_head_spec){.dense = "head.dense", .norm = "head.norm", .out = "classifier", .dense_bias = cbias};
        if (!strcmp(pool, "mean")) a->head.pool = MX_POOL_MEAN;
        else if (!strcmp(pool, "cls")) a->head.pool = MX_POOL_CLS;
        else return mx_set_err("%s: classifier_pooling: unsupported '%s'", c->file, pool);
        if (mx_act_parse(cact, &a->head.act)) return mx_set_err("%s: classifier_activation: unsupported '%s'", c->file, cact);
        json_t *m = mx_cfg_get(c, "id2label");
        a->head.n_labels = m && json_is_object(m) ? (int)json_object_size(m) : 2;
    } else {
        mx_arch_ignore(a, "head.*");    /* masked-LM head */
        mx_arch_ignore(a, "decoder.*");
    }
    return 0;
}

MX_FAMILY(modernbert, .name = "modernbert", .base = "llama", .task = "embedding, sequence-classification",
          .features = "encoder: pre-norm layernorm without bias, geglu, alternating local (symmetric window)/global attention with two rope bases, embedding and final norms",
          .configure = configure)
