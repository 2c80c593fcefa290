/* XLM-RoBERTa / RoBERTa: BERT with RoBERTa positions (they start at
 * pad_token_id + 1 and pad tokens keep position pad_token_id), the encoder
 * under "roberta." in task checkpoints, and its classification head
 * out_proj(tanh(dense(h[0]))) instead of the pooler. */
#include "family.h"
#include "../base/base.h"

static int configure(mx_arch *a, const mx_cfg *c) {
    bool cls;
    int pad;
    if (mx_bert_configure(a, c, "roberta", &cls) || mx_cfg_i32(c, "pad_token_id", 1, 0, 1 << 24, &pad)) return -1;
    a->pos_offset = pad + 1;
    a->pos_skip_pad = true;
    if (a->max_pos <= a->pos_offset)
        return mx_set_err("%s: max_position_embeddings %d leaves no position after pad_token_id %d", c->file, a->max_pos, pad);
    a->max_pos -= a->pos_offset;
    if (cls) {
        a->head = (mx_head_spec){.pool = MX_POOL_CLS, .dense = "classifier.dense", .dense_bias = true, .act = MX_ACT_TANH,
                                 .out = "classifier.out_proj"};
        if (mx_bert_num_labels(c, &a->head.n_labels)) return -1;
    }
    return 0;
}

MX_FAMILY(xlm_roberta, .name = "xlm-roberta", .base = "llama", .task = "embedding, sequence-classification", .aliases = MX_ALIASES("roberta", "xlm_roberta", "camembert"),
          .features = "bert + roberta positions (from pad_token_id + 1), classification head dense-tanh-out_proj",
          .configure = configure)
