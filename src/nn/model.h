/* model: a loaded decoder (weights bound to an arch description), its
 * per-sequence cache, and the forward pass.
 *
 * mx_forward runs any number of sequences in one pass: their tokens are
 * stacked so each weight matrix is read once for all of them (batched decode,
 * chunked prefill); attention runs per sequence against its own cache. */
#ifndef MX_MODEL_H
#define MX_MODEL_H
#include "arch.h"
#include "../format/checkpoint.h"
#include "../base/threadpool.h"

typedef struct { float *w, *b; } mx_normw;

typedef struct {
    mx_normw attn_norm, post_attn_norm, ffn_norm, post_ffn_norm, q_norm, k_norm;
    mx_weight q, k, v, qkv, o, gate, up, gate_up, down;
    float *q_b, *k_b, *v_b, *qkv_b, *o_b, *gate_b, *up_b, *gate_up_b, *down_b;
} mx_layer_w;

typedef struct mx_model {
    mx_arch arch;
    mx_ckpt ck;
    mx_weight embed, pos_embed, lm_head;
    float *lm_head_b;
    mx_normw final_norm;
    mx_layer_w *layers;
    int32_t eos[16];
    int n_eos;
    int32_t bos;
    size_t weight_bytes;
} mx_model;

/* Binds every tensor the description names; fails on missing, misshapen or
 * unexpected tensors. Takes ownership of *ck (closed on failure too). */
int mx_model_bind(mx_model *m, mx_ckpt *ck);
void mx_model_free(mx_model *m);

/* Per-sequence cache: K and V for every layer, `cap` positions. */
typedef struct {
    int cap, len;
    int n_layers, kv_dim;
    float *data;
} mx_kv;
mx_kv *mx_kv_new(const mx_model *m, int cap);
void mx_kv_free(mx_kv *kv);
static inline float *mx_kv_k(const mx_kv *kv, int layer) { return kv->data + (size_t)layer * 2 * kv->cap * kv->kv_dim; }
static inline float *mx_kv_v(const mx_kv *kv, int layer) { return mx_kv_k(kv, layer) + (size_t)kv->cap * kv->kv_dim; }

/* Scratch for forward passes of up to max_tokens stacked tokens whose
 * sequences reach at most max_ctx positions. Allocated once. */
typedef struct mx_ctx mx_ctx;
mx_ctx *mx_ctx_new(const mx_model *m, int max_tokens, int max_ctx, mx_pool *pool);
void mx_ctx_free(mx_ctx *c);
int mx_ctx_max_tokens(const mx_ctx *c);

typedef struct {
    mx_kv *kv;
    const int32_t *tokens;
    int n;
    /* Length the sequence reaches once the whole segment being fed is in
     * (>= kv->len + n; 0 = kv->len + n). Length-dependent rope variants use
     * it, so chunking a prompt gives the same result as one pass. */
    int seg_end;
} mx_seq_in;

/* Appends each sequence's tokens to its cache and writes logits: all=true
 * gives one row per token in order, all=false one row per sequence (its last
 * token). The total token count must be <= max_tokens. */
int mx_forward(mx_ctx *c, const mx_seq_in *seqs, int n_seqs, float *logits, bool all);
#endif
