/* embed: sentence embeddings and cross-encoder reranking over an engine —
 * the library API behind `mlxcel embed` / `mlxcel rerank` and the server.
 *
 * An embedder opens a model folder (any encoder, or a decoder used as an
 * embedder) and its sentence-transformers pipeline when present:
 * modules.json, 1_Pooling/config.json (cls / mean / max / mean_sqrt_len /
 * lasttoken, several concatenated in that order; include_prompt), Dense
 * modules (safetensors), Normalize, and max_seq_length from
 * sentence_bert_config.json. Without one, pooling is mean for encoders and
 * last token for decoders, with no dense and no normalisation.
 *
 * Inputs are token ids. Many inputs per call are run in passes of stacked
 * sequences, each at its own length (no padding), so an input's vector does
 * not depend on what it is batched with. Inputs longer than the maximum
 * length are cut to it, or refused when truncation is off.
 *
 * An embedder is used by one thread at a time (it owns its scratch). */
#ifndef MX_EMBED_H
#define MX_EMBED_H
#include "engine.h"
#include "../nn/encoder.h"
#include "../tokenizer/tokenizer.h"

typedef struct mx_embedder mx_embedder;

#define MX_EMB_POOL_AUTO (-1) /* the model's own pooling (sentence-transformers config, else family default) */
#define MX_EMB_POOL_NONE (-2) /* no pooling: per-token hidden states (mx_embed_hidden) */

typedef struct {
    int pooling;       /* MX_EMB_POOL_AUTO or an mx_pooling */
    int dimensions;    /* Matryoshka: keep the first D dims (0 = all); re-normalised when the pipeline normalises */
    bool no_truncate;  /* refuse inputs longer than the maximum length instead of cutting them */
    int max_tokens;    /* tokens per pass (0 = 8192, at least the maximum length) */
} mx_embed_opts;

/* pool may be NULL (single thread); it is borrowed. opts may be NULL (defaults). */
int mx_embedder_open(const char *dir, const mx_embed_opts *opts, mx_pool *pool, mx_embedder **out);
void mx_embedder_close(mx_embedder *e);

mx_engine *mx_embedder_engine(mx_embedder *e);
int mx_embedder_dim(const mx_embedder *e);      /* length of one output vector (after --dimensions) */
int mx_embedder_hidden(const mx_embedder *e);   /* hidden size */
int mx_embedder_max_len(const mx_embedder *e);  /* longest input in tokens */
bool mx_embedder_normalizes(const mx_embedder *e);
int mx_embedder_labels(const mx_embedder *e);   /* classifier outputs (0: not a cross-encoder) */
/* Describes the pipeline, e.g. "mean -> dense 384->256 tanh -> normalize". */
const char *mx_embedder_describe(const mx_embedder *e);

/* n inputs -> out[n][dim]. type_ids (per input, may be NULL or hold NULLs)
 * are the token types; prompt_lens (may be NULL) the leading prompt tokens
 * that pooling skips when the pooling config says include_prompt = false. */
int mx_embed_batch(mx_embedder *e, const int32_t *const *ids, const int *lens, int n, float *out);
int mx_embed_batch_ex(mx_embedder *e, const int32_t *const *ids, const int32_t *const *type_ids, const int *lens,
                      const int *prompt_lens, int n, float *out);

/* One input's hidden states after the final norm: hidden[len'][hidden]
 * where len' = min(len, max length) (returned through *out_len), and the
 * model's pooler output [hidden] when it has one and pooler != NULL
 * (*has_pooler says whether it was written). */
int mx_embed_hidden(mx_embedder *e, const int32_t *ids, const int32_t *type_ids, int len, float *hidden, int *out_len,
                    float *pooler, bool *has_pooler);

/* Cross-encoder: n pre-built (query, document) inputs -> logits[n][labels]
 * and, for one-label models, scores[n] = sigmoid(logit) (scores may be NULL). */
int mx_rerank_batch(mx_embedder *e, const int32_t *const *ids, const int32_t *const *type_ids, const int *lens, int n,
                    float *logits, float *scores);

/* Matryoshka truncation of one output vector to its first d values (d <=
 * mx_embedder_dim), re-normalised when the pipeline normalises: a per-request
 * `dimensions` for a server that opened the embedder without one. */
void mx_embed_truncate_dims(const mx_embedder *e, const float *v, int d, float *out);

/* Text input, with the folder's tokenizer (NULL when it has none). */
const mx_tokenizer *mx_embedder_tokenizer(const mx_embedder *e);
/* Encodes text with the special tokens the tokenizer adds; over the maximum
 * length the text is cut and the special tokens kept (HF truncation), or it
 * is refused when truncation is off. *ids is malloc'ed. */
int mx_embed_encode_text(const mx_embedder *e, const char *text, size_t len, int32_t **ids, int *n);
/* A cross-encoder input from query and document text (see mx_pair_ids),
 * the longer of the two cut first when the pair is over the maximum length. */
int mx_rerank_encode_pair(const mx_embedder *e, const char *query, const char *doc, int32_t **ids, int32_t **types, int *n);

/* Builds a cross-encoder input from query and document ids without special
 * tokens, as the model's tokenizer pairs them: BERT [CLS] q [SEP] d [SEP]
 * with token types 0 / 1, RoBERTa <s> q </s></s> d </s> (types 0).
 * *ids and *types are malloc'ed. */
int mx_pair_ids(const mx_embedder *e, int32_t cls, int32_t sep, const int32_t *q, int nq, const int32_t *d, int nd,
                int32_t **ids, int32_t **types, int *n);
#endif
