/* encoder: the model run without a cache over whole sequences, giving hidden
 * states instead of logits — BERT-style encoders (arch.bidirectional) and
 * decoders used as embedders (causal attention, same path).
 *
 * Any number of sequences are stacked in one pass, each at its own length
 * (unpadded execution: every weight is read once for all of them, and the
 * result of a sequence does not depend on what it is batched with). A
 * sequence may also carry an attention mask (padded input as a tokenizer
 * gives it): keys with mask 0 are ignored by every query; their own rows are
 * still computed.
 *
 * Speech encoders start from features instead (an input stem, arch.stem).
 *
 * Embeddings: token (x embed_scale) + learned position (RoBERTa positions
 * when arch.pos_skip_pad) + token type, then names.embed_norm. After the
 * layers: names.final_norm. The head (arch.head) pools, then dense -> act ->
 * norm -> out. */
#ifndef MX_ENCODER_H
#define MX_ENCODER_H
#include "model.h"

typedef struct {
    const int32_t *tokens;
    const int32_t *type_ids; /* NULL = all 0 */
    const uint8_t *mask;     /* NULL = all 1 */
    int n;
    /* Vision towers: the input rows [n, hidden] themselves (patch embeddings,
     * positions already added) instead of tokens, and the positions of a
     * multi-axis rope, [n_axes][n] (NULL: 0..n-1 on every axis). */
    const float *embeds;
    const int *mpos;
} mx_enc_seq;

typedef struct mx_enc mx_enc;
/* Scratch for passes of up to max_tokens stacked tokens. */
mx_enc *mx_enc_new(const mx_model *m, int max_tokens, mx_pool *pool);
void mx_enc_free(mx_enc *c);
int mx_enc_max_tokens(const mx_enc *c);

/* hidden: one row [hidden] per stacked token, in order (NULL: the
 * embeddings only, as mx_encode_plan starts). */
int mx_encode(mx_enc *c, const mx_enc_seq *seqs, int n_seqs, float *hidden);
/* A vision tower's pass over one sequence with layer-dependent attention
 * groups and intermediate outputs: a layer with windowed[l] runs each
 * window (consecutive runs of win_len[k] rows, summing to the sequence) as a
 * sequence of its own (Qwen2.5-VL's window attention), the others over the
 * whole sequence; after a layer with capture[l] >= 0 its output rows go to
 * captured + capture[l] * n * hidden (Qwen3-VL's DeepStack). */
typedef struct {
    const bool *windowed; /* [n_layers]; NULL: none */
    const int *win_len;
    int n_win;
    const int *capture;   /* [n_layers], -1: none; NULL: none */
    float *captured;
} mx_enc_plan;
int mx_encode_plan(mx_enc *c, const mx_enc_seq *seq, const mx_enc_plan *plan, float *hidden);
/* An encoder with an input stem (arch.stem, speech): features
 * [stem.n_in][stem.frames] -> the stem's rows + positions -> the layers ->
 * the final norm: hidden gets mx_stem_rows rows. max_tokens must hold them. */
int mx_encode_features(mx_enc *c, const float *feat, float *hidden);

/* The input stem (nn/stem.c). */
int mx_stem_rows(const mx_stem_spec *s);                  /* rows it gives (frames after the strides) */
size_t mx_stem_col_floats(const mx_stem_spec *s, int hidden); /* its im2col scratch */
int mx_stem_bind(mx_model *m);                            /* from mx_encoder_bind */
void mx_stem_free(mx_model *m);
/* feat [n_in][frames] -> out [rows][hidden]; col: mx_stem_col_floats floats. */
void mx_stem_run(const mx_model *m, mx_pool *pool, const float *feat, float *out, float *col);

/* True when the model has a head stage that gives a pooled vector
 * (the pooler) / labels. */
bool mx_head_has_pooler(const mx_model *m);
int mx_head_labels(const mx_model *m);
/* Pools one sequence's rows [n, hidden] (rows with mask 0 skipped; mask
 * may be NULL) the way `how` says into out[hidden]. */
void mx_pooling_apply(mx_pooling how, const float *hidden, int n, int H, const uint8_t *mask, float *out);
/* The head on one sequence: pooled gets the dense stage's output
 * (BERT's pooler_output) and logits the n_labels outputs; either may be
 * NULL. Runs on the calling thread (pool may be NULL). */
int mx_head_forward(const mx_model *m, mx_pool *pool, const float *hidden, int n, const uint8_t *mask, float *pooled,
                    float *logits);
#endif
