/* block: the interface every layer building block implements (attention,
 * dense MLP, and later MoE, SSM mixers, ...). A layer is a "mixer" block and
 * an "ffn" block wrapped in norms and residuals by the decoder; the arch
 * description names the block of each layer, so a new kind of block is a new
 * file in nn/ and never a change to the decoder loop.
 *
 * A block owns its weights (load/free), says how much per-sequence state it
 * keeps for a cache of `cap` positions (KV, recurrent state, ...) and how much
 * scratch a forward of a layer needs (declared once with an mx_plan, model.h,
 * which both sizes and carves it), and maps in[N, hidden] to out[N, hidden]. */
#ifndef MX_BLOCK_H
#define MX_BLOCK_H
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include "../kernels/kernels.h"
#include "../kernels/kvcache.h"

typedef struct mx_model mx_model;
typedef struct mx_fwd mx_fwd;

typedef struct mx_block_ops {
    const char *name;
    int (*load)(mx_model *m, int layer, void **w);
    void (*free)(void *w);
    size_t (*state_floats)(const mx_model *m, int layer, int cap);         /* may be NULL: stateless */
    /* The blocks that keep K/V rows (attention, MLA): their state in a cache
     * whose keys are stored as type[0] and values as type[1]
     * (kernels/kvcache.h), as mx_kv_new lays it out; state_floats is this
     * with f32 rows (the encoder's per-pass state). NULL: state_floats. */
    size_t (*cache_floats)(const mx_model *m, int layer, int cap, const mx_kv_type type[2]);
    size_t (*scratch_floats)(const mx_model *m, int layer, int max_tokens, int max_ctx, int n_threads);
    /* Copies positions [0, n) of this block's cache state (cap positions,
     * rows as `type`) from src to dst: the rows alone, where copying the
     * whole state would move cap positions (mx_kv_copy_prefix). NULL: the
     * whole state is copied. */
    void (*copy_prefix)(const mx_model *m, int layer, uint8_t *dst, const uint8_t *src, int cap, int n, const mx_kv_type type[2]);
    /* The byte ranges of this block's cache state (r[k][0] .. r[k][1], at
     * most 4) that hold positions [0, n) and that later positions never
     * write, so that caches may share them (mx_kv_share_prefix). Returns
     * their count, -1 when the rows are not laid out so (a ring). NULL: not
     * shared. */
    int (*prefix_ranges)(const mx_model *m, int layer, int cap, int n, const mx_kv_type type[2], size_t r[4][2]);
    /* The shortest length a cache of cap positions now holding len can be
     * cut back to with this block's state still valid (a ring of rows
     * forgets the oldest; mx_kv_min_len). NULL: 0. */
    int (*keep_min)(const mx_model *m, int layer, int cap, int len);
    /* Floats of this block's state in a cache of cap positions that
     * positions [0, n) write (the pages they take, mx_kv_used_bytes). NULL:
     * the whole state (recurrent state is written whole). */
    size_t (*used_floats)(const mx_model *m, int layer, int cap, int n, const mx_kv_type type[2]);
    void (*forward)(mx_fwd *f, int layer, void *w, const float *in, float *out);
    /* State summarises the whole history (SSM, linear attention) rather than
     * one entry per position, so a cache cannot be cut back to a prefix. */
    bool recurrent;
    /* Looks up token embeddings (m->embed) itself (Zamba2's shared block reads
     * [h | embeddings]): a pipeline stage running it binds the table too. */
    bool reads_embed;
} mx_block_ops;

extern const mx_block_ops mx_block_attention; /* causal self-attention over a KV cache */
/* Keys per block in the attention's inner loops (0: sized for the caches,
 * the default). Results do not depend on it; tests set a small one so that
 * short fixtures take the blocked path. */
void mx_attention_set_key_block(int keys);
extern const mx_block_ops mx_block_mlp;       /* dense MLP, gated or plain */
extern const mx_block_ops mx_block_moe;       /* mixture of experts (arch.moe), nn/moe.c */
extern const mx_block_ops mx_block_mla;       /* multi-head latent attention (arch.mla), nn/mla.c */
extern const mx_block_ops mx_block_mamba;     /* Mamba selective scan (arch.ssm, MAMBA1), nn/mamba.c */
extern const mx_block_ops mx_block_mamba2;    /* Mamba2 SSD scan (arch.ssm, MAMBA2), nn/mamba.c */
extern const mx_block_ops mx_block_rglru;     /* RecurrentGemma RG-LRU block (arch.rglru), nn/rglru.c */
extern const mx_block_ops mx_block_shortconv; /* LFM2 gated short convolution (arch.shortconv), nn/shortconv.c */
extern const mx_block_ops mx_block_deltanet;  /* gated DeltaNet linear attention (arch.deltanet), nn/deltanet.c */
extern const mx_block_ops mx_block_ple;       /* Gemma 4 per-layer input (arch.ple), a layer's post block, nn/ple.c */
extern const mx_block_ops mx_block_lightning; /* MiniMax lightning attention (arch.lightning), nn/lightning.c */
extern const mx_block_ops mx_block_laurel;    /* Gemma 3n LAuReL low-rank branch (arch.laurel), nn/laurel.c */
extern const mx_block_ops mx_block_xattn;     /* cross-attention to the encoder memory (layer.xattn_attn), nn/xattn.c */
extern const mx_block_ops mx_block_zamba;     /* Zamba2 shared-transformer + Mamba2 hybrid layer (arch.shared_block), nn/zamba.c */
#endif
