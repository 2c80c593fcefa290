/* generate: a single-sequence generation session over an engine — prefill in
 * chunks, then token-by-token decode with the sampler. Used by the CLI
 * (generate, chat, bench); the server schedules many sessions itself. */
#ifndef MX_GENERATE_H
#define MX_GENERATE_H
#include "engine.h"
#include "sampler.h"

typedef struct {
    mx_engine *e;
    mx_ctx *ctx;
    mx_kv *kv;
    mx_pool *pool;
    int chunk;
    int batch;         /* most tokens one pass takes (>= chunk) */
    float *logits;     /* [chunk, vocab] scratch */
    int32_t *history;  /* every token in the cache, in order */
    int n_history, cap;
    int rope_shift;    /* M-RoPE: rope position minus cache index from the last image on */
    int img_start, img_end; /* cache span of the segments fed with images (img_start -1: none) */
    float *hidden;     /* [cap, hidden]: each cached position's final hidden state (mx_session_keep_hidden), or NULL */
    int hidden_from;   /* rows below this were not written (cached before mx_session_keep_hidden) */
} mx_session;

/* ctx_size: positions the cache holds; chunk: prefill chunk size (1 = the decode path). */
int mx_session_init(mx_session *s, mx_engine *e, int ctx_size, int chunk, mx_pool *pool);
/* The same, with passes of up to batch tokens (speculative verification)
 * while prompts still go in chunks of `chunk`. */
int mx_session_init_batch(mx_session *s, mx_engine *e, int ctx_size, int chunk, int batch, mx_pool *pool);
void mx_session_free(mx_session *s);
/* Feeds tokens; when all_logits is non-NULL it receives one row per token,
 * otherwise `last` (may be NULL) receives the last token's logits. */
int mx_session_feed(mx_session *s, const int32_t *tok, int n, float *all_logits, float *last);
/* Feeds a prompt segment holding images: lay from mx_vision_layout_make
 * over these n tokens, rows the images' rows (mx_vision_encode, in prompt
 * order) taking the text model's embedding scale when rows_scaled. Chunks
 * never split a bidirectional span (a span longer than the chunk is fed in
 * one pass). Later feeds continue the M-RoPE positions. */
int mx_session_feed_images(mx_session *s, const int32_t *tok, int n, const mx_vision_layout *lay, const float *rows,
                           bool rows_scaled, float *all_logits, float *last);
/* Feeds n <= s->batch tokens in one forward pass; rows receives [n, vocab]. */
int mx_session_feed_pass(mx_session *s, const int32_t *tok, int n, float *rows);
/* From now on every pass writes its tokens' final hidden states (after the
 * final norm) into s->hidden at their positions: what a next-n draft reads.
 * Rows of positions already cached are missing (s->hidden_from) until the
 * cache is cut back below them. */
int mx_session_keep_hidden(mx_session *s);
/* Feeds n tokens to a next-n draft (arch.mtp), token i paired with hidden
 * row i of hid [n, hidden]; `last` (may be NULL) receives the last token's
 * logits. */
int mx_session_feed_hidden(mx_session *s, const int32_t *tok, const float *hid, int n, float *last);
/* Drops the cache back to n tokens (prompt reuse: keep the common prefix);
 * a recurrent model's cache restarts from 0 instead, and a cut inside or
 * before the images restarts from the first image segment (its M-RoPE
 * positions must be recomputed): s->n_history says where it stands. */
void mx_session_truncate(mx_session *s, int n);
#endif
