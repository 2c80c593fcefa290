/* dsa: DeepSeek sparse attention's lightning indexer (arch.mla.index_*),
 * run by the latent-attention block (nn/mla.c) of a model that has one. The
 * indexer keys live in the block's cache after the latents; per token the
 * indexer hands the block the keys to attend. */
#ifndef MX_DSA_H
#define MX_DSA_H
#include "model.h"

typedef struct {
    mx_weight q, k, w; /* index_q [heads * dim, q_lora], index_k [dim, hidden], index_w [heads, hidden] */
    mx_normw k_norm;
} mx_dsa_w;

/* q [rows][heads * dim], k [rows][dim], w [rows][heads] (the projections);
 * vals [group][max_ctx]: the index values of `group` tokens scored together;
 * tmp per thread (stride tmp_ld): a key block's per-head scores, then a copy
 * of one token's values for the selection; sel [rows][topk]: the keys a
 * token attends, ascending, n_sel [rows] their count (-1: every causal key).
 * The int buffers take float-sized slots. */
typedef struct {
    float *q, *k, *w, *vals, *tmp;
    int *sel, *n_sel;
    int group;
    size_t tmp_ld;
} mx_dsa_bufs;

int mx_dsa_load(mx_model *m, int layer, mx_dsa_w *w);
void mx_dsa_free(mx_dsa_w *w);
/* Floats of indexer keys a cache of cap positions holds (0 when off). */
size_t mx_dsa_state(const mx_mla_spec *s, int cap);
/* Floats of an MLA cache's latent rows (cap rows stored as t, 64-byte
 * padded), which the indexer keys follow (nn/mla.c). */
size_t mx_mla_rows_floats(const mx_mla_spec *s, mx_kv_type t, int cap);
/* Takes the indexer's scratch from p (nothing when off). */
void mx_dsa_plan(const mx_mla_spec *s, int rows, int max_ctx, int nt, mx_plan *p, mx_dsa_bufs *b);
/* For the f->N tokens of x [N, hidden] and their normed q LoRA latents
 * qa [N, q_lora]: caches each token's indexer key at its position (in the
 * layer's cache, after the block's cap rows of `row` floats), then fills
 * b->sel / b->n_sel. */
void mx_dsa_select(mx_fwd *f, int layer, const mx_dsa_w *w, const float *x, const float *qa, int row, const mx_dsa_bufs *b);
#endif
