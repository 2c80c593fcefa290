/* model: a loaded decoder (weights bound to an arch description), its
 * per-sequence cache, and the forward pass.
 *
 * mx_forward runs any number of sequences in one pass: their tokens are
 * stacked so each weight matrix is read once for all of them (batched decode,
 * chunked prefill); stateful blocks (attention, recurrences) work per
 * sequence against that sequence's cache. */
#ifndef MX_MODEL_H
#define MX_MODEL_H
#include "arch.h"
#include "../format/checkpoint.h"
#include "../base/threadpool.h"
#include "prof.h"

typedef struct { float *w, *b; } mx_normw;

/* A model split over processes (src/dist/ fills it in, nn/ only calls it):
 * this process runs layers [layer_lo, layer_hi) of a pipeline and, under
 * tensor parallelism, holds part tp_rank of tp of every attention's heads and
 * every MLP's width (the arch's counts are then its own part's). The hooks
 * run at the block boundaries of a forward pass. NULL in mx_model: the whole
 * model in this process. */
typedef struct mx_seq_in mx_seq_in;
typedef struct mx_kv mx_kv;
typedef struct mx_dist_ops {
    /* the driving process (rank 0) tells the others a pass begins */
    void (*begin)(void *ctx, const mx_seq_in *seqs, int n_seqs, bool all);
    void (*recv_hidden)(void *ctx, float *x, size_t n); /* from the previous stage */
    /* to the next stage; x is left untouched until flush (the send may still be under way) */
    void (*send_hidden)(void *ctx, const float *x, size_t n);
    void (*flush)(void *ctx);    /* waits for this process's sends under way */
    void (*progress)(void *ctx); /* moves sends under way on (between a micro-batch's layers) */
    void (*reduce)(void *ctx, float *x, size_t n); /* sum over the tensor-parallel group */
    /* the last stage's output x [n] back to the process with the head (rank 0):
     * send on the last stage (as send_hidden: x untouched until flush),
     * receive (send false) on the head's process */
    void (*final_hidden)(void *ctx, float *x, size_t n, bool send);
    void (*kv_free)(void *ctx, int kv_id); /* the driver freed cache kv_id */
    /* the driver filled kv with random values (mx_kv_fill_random): every
     * process fills its part of that cache with the same seed */
    void (*kv_fill)(void *ctx, mx_kv *kv, uint64_t seed);
    /* A head split by vocabulary (mx_shard.vocab_n): each part of the last
     * stage gives its logits part [rows][vocab_n] (part NULL on a driver
     * outside the last stage); the driver receives [rows][vocab] in out. */
    void (*gather_logits)(void *ctx, const float *part, int rows, float *out);
} mx_dist_ops;
#define MX_MICRO_LONG 256 /* a pass this long (a prompt chunk) is compute-bound: more, smaller runs pay */
typedef struct {
    const mx_dist_ops *ops;
    void *ctx;
    int layer_lo, layer_hi;
    int tp, tp_rank;
    bool embeds; /* looks up embeddings (first stage) */
    bool head;   /* computes the logits (or, split, its part of them) */
    bool driver; /* rank 0: tokenizes, samples, receives the logits */
    /* The head split by vocabulary among the last stage's parts (tp > 1 and
     * the vocabulary divides by it): this part's rows [vocab_lo, vocab_lo +
     * vocab_n) of it; 0: not split (the driver holds it whole). */
    int vocab_lo, vocab_n;
    /* Pipeline micro-batches: a pass's stacked tokens go through the stages
     * in up to `micro` runs (`micro_long` for passes of MX_MICRO_LONG tokens
     * or more), each sent on while the next one is computed, so the stages
     * work at once (1: the whole pass at a time). The same on every process:
     * each splits a pass the same way (mx_forward). */
    int micro, micro_long;
} mx_shard;

typedef struct {
    mx_normw attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;
    void *mixer_w, *ffn_w; /* owned by the layer's blocks */
    void *mixer2_w;        /* layers with a second mixer */
    void *post_w;          /* layers with a post block */
    float out_scale;       /* names.layer_scale's value (0 = none) */
    float *attn_scale, *ffn_scale; /* names.attn_scale / ffn_scale vectors (NULL = none) */
    void *shortcut_w;      /* layers with a shortcut block */
    void *branch_w;        /* layers with a branch block */
    mx_normw xattn_norm;   /* layers with a cross-attention sub-layer */
    void *xattn_w;
} mx_layer_w;

struct mx_model {
    mx_arch arch;
    mx_ckpt ck;
    mx_weight embed, pos_embed, lm_head;
    float *lm_head_b;
    mx_normw final_norm;
    mx_layer_w *layers;
    int32_t eos[16];
    int n_eos;
    int32_t bos;
    size_t weight_bytes; /* bytes one decode step reads (all linears, head) */
    /* encoders (nn/encoder.h) */
    mx_weight type_embed;
    mx_normw embed_norm;
    mx_weight head_dense, head_out;
    float *head_dense_b, *head_out_b;
    mx_normw head_norm;
    /* per-layer inputs (arch.ple, nn/ple.c) */
    mx_weight ple_embed, ple_proj;
    mx_normw ple_norm;
    struct mx_altup_w *altup; /* AltUp weights (arch.altup), nn/altup.c */
    mx_normw mtp_enorm, mtp_hnorm; /* a next-n draft's input stage (arch.mtp), nn/mtp.c */
    mx_weight mtp_eh;
    /* encoder-decoders: the encoder (arch.encoder bound to the same folder) */
    struct mx_model *encoder;
    mx_weight stem_w[2];      /* an encoder's input stem (nn/stem.c) */
    float *stem_b[2];
    mx_kpolicy kp; /* the kernel policy: the weights are prepared for it at bind, contexts start from it */
    const mx_shard *shard; /* this process's part of a distributed model (NULL: all of it) */
};

/* Binds every tensor the description names; fails on missing, misshapen or
 * unexpected tensors. Takes ownership of *ck (closed on failure too). */
int mx_model_bind(mx_model *m, mx_ckpt *ck);
void mx_model_free(mx_model *m);
/* Binds/frees the encoder parts (type embeddings, embedding norm, head);
 * nothing when the description names none (nn/encoder.c). */
int mx_encoder_bind(mx_model *m);
void mx_encoder_free(mx_model *m);
/* Binds/frees the model-level per-layer-input tensors (arch.ple; nothing
 * when ple.dim is 0), nn/ple.c. */
int mx_ple_bind(mx_model *m);
void mx_ple_free(mx_model *m);
/* Binds/frees the AltUp weights (arch.altup; nothing when altup.n is 0), nn/altup.c. */
int mx_altup_bind(mx_model *m);
void mx_altup_free(mx_model *m);
/* Binds/frees a next-n draft's input stage (arch.mtp; nothing when off), nn/mtp.c. */
int mx_mtp_bind(mx_model *m);
void mx_mtp_free(mx_model *m);

/* Per-sequence cache: every layer's state (attention K/V for `cap`
 * positions, recurrent state, ...), laid out by the layers' blocks. The
 * attention blocks store their K and V rows as type[0] and type[1]
 * (kernels/kvcache.h): mx_kv_new takes them from the model's policy
 * (m->kp.kv_type, decided at start); a cache made otherwise (the encoder's
 * per-pass state) is zeroed, all f32. Other state is always f32. */
typedef struct mx_kv {
    int cap, len;
    int n_layers;
    float *data;
    size_t *offset; /* per layer, into data */
    mx_kv_type type[2];
    int dist_id;    /* distributed model: the id the other processes know this cache by (0: none) */
    const mx_shard *shard;
    /* a cache in a pool (mx_kv_new_in): its chunks' ids, and the length below
     * which it may map chunks other caches map too (0: none) */
    struct mx_kv_pool *pool;
    uint64_t *chunks;
    size_t n_chunks;
    int share_len;
} mx_kv;
mx_kv *mx_kv_new(const mx_model *m, int cap);
/* Caches that can share prompt-prefix pages (nn/kvpages.c): every cache made
 * in one pool lies in the pool's memory file, chunk_bytes at a time (0: 64
 * KiB; a multiple of the page size); mx_kv_share_prefix lets a cache map
 * another's chunks. A pool is freed after its caches. */
typedef struct mx_kv_pool mx_kv_pool;
mx_kv_pool *mx_kv_pool_new(size_t chunk_bytes);
void mx_kv_pool_free(mx_kv_pool *p);
/* Bytes mapped by more than one cache, once for each map beyond the first
 * (the memory sharing saves), and the bytes the pool's file takes. */
size_t mx_kv_pool_shared_bytes(mx_kv_pool *p);
size_t mx_kv_pool_resident(mx_kv_pool *p);
/* mx_kv_new in a pool (NULL: mx_kv_new) */
mx_kv *mx_kv_new_in(const mx_model *m, int cap, mx_kv_pool *pool);
/* As mx_kv_copy_prefix, but where both caches are in one pool the chunks that
 * lie wholly inside src's rows of positions [0, n) are mapped into dst, not
 * copied (layers whose blocks say where those rows are, prefix_ranges; the
 * rest is copied). Returns the bytes shared. Either cache writing below n
 * later first takes copies of its own (mx_forward does, mx_kv_unshare). */
size_t mx_kv_share_prefix(const mx_model *m, mx_kv *dst, mx_kv *src, int n);
/* Where dst and src (one pool, each holding at least n positions) hold the
 * same bytes in whole chunks of their rows of positions [0, n), dst maps
 * src's chunks in place of its own: two caches that computed a common
 * prefix apart (admitted together) keep it once. Checked byte for byte:
 * rows computed in different prompt chunks can differ in their last bits,
 * and those stay apart. Layers without rows of their own are left alone.
 * Returns the bytes now shared. */
size_t mx_kv_dedupe_prefix(const mx_model *m, mx_kv *dst, mx_kv *src, int n);
/* Bytes of kv's chunks that another cache maps too (0 outside a pool). */
size_t mx_kv_shared_bytes(const mx_kv *kv);
/* Before kv writes rows below kv->share_len (its length cut back into a
 * shared prefix): copies of its own of the chunks it shares that hold rows
 * at or past kv->len (fresh ones for those holding no row below it); the
 * chunks wholly below stay shared (MX_ERR: out of memory). */
int mx_kv_unshare(const mx_model *m, mx_kv *kv);
/* Bytes mx_kv_new(m, cap) allocates (with the types of m's policy), 0 when
 * out of range. */
size_t mx_kv_new_bytes(const mx_model *m, int cap);
/* Bytes of the cache's whole allocation. */
static inline size_t mx_kv_bytes(const mx_kv *kv) { return kv->offset[kv->n_layers] * sizeof(float); }
/* Some layer stores K/V rows whose type the policy chooses (an attention or
 * MLA block of the decoder's own cache); false for recurrent-only models. */
bool mx_model_has_kv_rows(const mx_model *m);
/* Random values in the whole cache (f32: unit variance; typed rows: every
 * 16-bit word an ordinary number in any of the types), for benchmarks that
 * time attention at a depth without filling it: the time does not depend on
 * what the rows hold. */
void mx_kv_fill_random(const mx_model *m, mx_kv *kv, uint64_t seed);
void mx_kv_free(mx_kv *kv);
/* The cache's memory is reserved address space (mx_kv_new): pages take
 * memory once written. mx_kv_release gives all of them back (every layer's
 * state reads as zeros again) and empties it; mx_kv_resident is the bytes
 * its pages take now. */
void mx_kv_release(mx_kv *kv);
size_t mx_kv_resident(const mx_kv *kv);
/* An upper bound of the bytes a cache made by mx_kv_new(m, cap) takes once
 * positions [0, n) have been written (whole pages; this process's layers). */
size_t mx_kv_used_bytes(const mx_model *m, int cap, int n);
/* dst takes src's state (both made for the same model and cap). */
void mx_kv_copy(mx_kv *dst, const mx_kv *src);
/* dst takes src's first n positions (n <= src->len; both made for the same
 * model and cap) and length n: the K/V rows alone for the blocks that can
 * say where theirs are (copy_prefix), else each layer's whole state, so for
 * recurrent state only n == src->len gives dst src's history. This process's
 * layers only (a distributed run's other parts are not copied). */
void mx_kv_copy_prefix(const mx_model *m, mx_kv *dst, const mx_kv *src, int n);
/* The shortest length kv can be cut back to (kv->len = n) with every
 * layer's state still right: 0, but for sliding-window layers that keep a
 * ring of rows (nn/attention.c) once it has wrapped. A shorter prefix is
 * computed again from 0, as with recurrent state. */
int mx_kv_min_len(const mx_model *m, const mx_kv *kv);
/* Snapshots of the state a cache cannot be cut back through (every block
 * without copy_prefix: recurrent state, conv windows, ...): taken when kv
 * holds len positions, restoring one into the same cache later (its rows
 * below len unchanged since) gives the cache of that prefix, so hybrids and
 * SSMs can reuse a prompt prefix. mx_kv_snapshot_floats is a snapshot's size
 * for caches of cap positions (this process's layers; 0 when every block
 * has rows). */
size_t mx_kv_snapshot_floats(const mx_model *m, int cap);
void mx_kv_snapshot(const mx_model *m, const mx_kv *kv, float *out);
void mx_kv_restore(const mx_model *m, mx_kv *kv, const float *in, int len);
/* A sliding-window ring's slack (nn/attention.c): a pass writes and attends
 * at most this many tokens at a time, and an image block seen both ways must
 * not be longer for a model to keep rings. */
#define MX_KV_RING_SLICE 512
static inline float *mx_kv_layer(const mx_kv *kv, int layer) { return kv->data + kv->offset[layer]; }
/* The state of block b of a layer: a layer's blocks keep their states one
 * after the other (mixer, mixer2, xattn, ffn); the mixer's is at mx_kv_layer. */
float *mx_kv_block(const mx_model *m, const mx_kv *kv, int layer, const mx_block_ops *b);
/* Some block keeps recurrent state: a cache can then only be extended or
 * restarted from length 0, never cut back to a prefix. */
bool mx_model_recurrent(const mx_model *m);

/* Scratch for forward passes of up to max_tokens stacked tokens whose
 * sequences reach at most max_ctx positions. Allocated once. */
typedef struct mx_ctx mx_ctx;
mx_ctx *mx_ctx_new(const mx_model *m, int max_tokens, int max_ctx, mx_pool *pool);
/* The most scratch any of the model's blocks needs for one forward. */
size_t mx_blocks_scratch_floats(const mx_model *m, int max_tokens, int max_ctx, int n_threads);
/* The per-token buffers a forward pass (decoder or encoder) works in, for up
 * to max_tokens tokens: hidden states, rope tables, block scratch, positions. */
typedef struct {
    float *x, *xn, *tmp, *tmp2, *cs, *scratch;
    int *pos, *seq_of;
    int *span;    /* [2][max_tokens] stacked spans (lo, then hi) */
    int *apos;    /* [MX_ROPE_MAX_AXES][max_tokens] multi-axis rope positions */
    float *ple; /* per-layer inputs [tokens + 1][n_layers * ple.dim] (arch.ple) */
    float *carry; /* [N, hidden]: a shortcut block's output until the next layer ends (NULL when no layer has one) */
    float *altup; /* AltUp streams and coefficients (mx_altup_floats; NULL when arch.altup.n is 0) */
    float *head;  /* [tokens][shard vocab_n]: this part's logits when the head is split by vocabulary */
    float *mtp;   /* [tokens][2 hidden]: a next-n draft's input stage (arch.mtp; NULL otherwise) */
} mx_fwd_bufs;
int mx_fwd_bufs_alloc(mx_fwd_bufs *b, const mx_model *m, int max_tokens, int max_ctx, int n_threads);
void mx_fwd_bufs_free(mx_fwd_bufs *b);
void mx_ctx_free(mx_ctx *c);
int mx_ctx_max_tokens(const mx_ctx *c);
/* The context's kernel policy (the model's, on the context's pool), which
 * its forward passes carry: a caller may change it between passes (the
 * scheduler's qmode per pass; tests). */
mx_kpolicy *mx_ctx_policy(mx_ctx *c);
/* The op timer the context's passes add to (nn/prof.h); NULL (the default)
 * turns it off. The caller owns p and reads it between passes. */
void mx_ctx_set_prof(mx_ctx *c, mx_prof *p);
/* Where the context's next passes write their tokens' final hidden states
 * (after the final norm), [N, hidden] in the pass's token order: what a
 * next-n draft reads. NULL (the default): not written. A model split over
 * processes refuses it. */
void mx_ctx_set_hidden_out(mx_ctx *c, float *rows);

struct mx_seq_in {
    mx_kv *kv;
    const int32_t *tokens;
    int n;
    /* Length the sequence reaches once the whole segment being fed is in
     * (>= kv->len + n; 0 = kv->len + n). Length-dependent rope variants use
     * it, so chunking a prompt gives the same result as one pass. */
    int seg_end;
    /* Vision-language inputs (all optional, NULL / 0 = none):
     * embed_row[i] >= 0: token i takes row embed_row[i] of embeds [*, hidden]
     * instead of its token embedding, multiplied by arch.embed_scale only when
     * embeds_scaled (PaliGemma scales its image rows like tokens, Gemma 3 not).
     * mpos: rope positions of multi-axis ropes, [n_axes][n] (axis-major);
     * without it every axis reads kv->len + i + rope_shift (M-RoPE after an
     * image: the position continues from the image's largest one).
     * span_lo/span_hi[i]: besides its causal keys, token i also attends the
     * cache positions [span_lo, span_hi) (an image block seen both ways,
     * PaliGemma's prefix); every position of a span must be in this pass,
     * and stay in the cache of every layer (a sliding layer too). */
    const float *embeds;
    const int *embed_row;
    bool embeds_scaled;
    /* DeepStack (Qwen3-VL): each row of embeds is (1 + n_deep) * hidden
     * floats; part k + 1 is added to the token's hidden state after decoder
     * layer k. */
    int n_deep;
    const int *mpos;
    int rope_shift;
    const int *span_lo, *span_hi;
    /* A next-n draft (arch.mtp): [n, hidden], the hidden state each token is
     * paired with (required there, ignored elsewhere). */
    const float *hidden;
};

/* Appends each sequence's tokens to its cache and writes logits: all=true
 * gives one row per token in order, all=false one row per sequence (its last
 * token). The total token count must be <= max_tokens. */
int mx_forward(mx_ctx *c, const mx_seq_in *seqs, int n_seqs, float *logits, bool all);

/* Encoder-decoders: every cross-attention layer of m keeps the K/V of the
 * encoder memory mem [n rows of the encoder's width] (n = arch.mem_len) in
 * kv, for the decoder tokens fed after it (nn/xattn.c). */
int mx_xattn_remember(const mx_model *m, mx_kv *kv, const float *mem, int n, mx_pool *pool);

/* ---- for block implementations ---- */
struct mx_fwd {
    const mx_model *m;
    mx_pool *pool;
    const mx_seq_in *seqs;
    int n_seqs, N;          /* sequences, stacked tokens */
    const int *pos;         /* absolute position of each stacked token */
    const int *seq_of;      /* sequence of each stacked token */
    const float *cs[2];     /* rope cos|sin rows per token, per arch.rope[] */
    float *scratch;         /* block scratch (max of the blocks' scratch_floats) */
    int max_tokens, max_ctx;
    const uint8_t *key_mask; /* per stacked token, 0 = no query attends it
                                (encoder padding); NULL = none */
    const int *span_lo, *span_hi; /* per stacked token: extra keys [lo, hi) (mx_seq_in); NULL = none */
    const float *ple;        /* per-layer inputs [N][n_layers * ple.dim] (arch.ple); NULL = none */
    float *carry;           /* mx_fwd_bufs.carry */
    const mx_kpolicy *kp;    /* the products' policy (its pool is `pool`); NULL: the model's on `pool` */
    mx_prof *prof;           /* the op timer (nn/prof.h); NULL: off */
};
/* Fills buf (mx_fwd_bufs.ple) with f's per-layer inputs from the scaled
 * token embeddings h0 [N, hidden] and sets f->ple (nn/ple.c). */
void mx_ple_inputs(mx_fwd *f, const float *h0, float *buf);
/* A next-n draft's input stage (arch.mtp, nn/mtp.c): x [N, hidden] holds the
 * token embeddings and becomes eh_proj([enorm(x) ; hnorm(h)]), h each
 * token's mx_seq_in.hidden row; cat is [N, 2 hidden] scratch. */
void mx_mtp_inputs(const mx_fwd *f, float *x, float *cat);
/* AltUp (arch.altup, nn/altup.c) in a forward over buf (mx_altup_floats):
 * embed makes the streams from the scaled embeddings x; predict updates them
 * and sets x to the active one (the layer's input); correct spreads the
 * layer's output y (clobbered) to the streams and adds the layer's post
 * block output to streams 1..n-1; unembed writes the merged streams to x. */
size_t mx_altup_floats(const mx_arch *a, int max_tokens);
void mx_altup_embed(mx_fwd *f, const float *x, float *buf);
void mx_altup_predict(mx_fwd *f, int layer, float *buf, float *x);
void mx_altup_correct(mx_fwd *f, int layer, float *buf, float *y, float *tmp);
void mx_altup_unembed(mx_fwd *f, float *buf, float *x, float *tmp);

/* Scratch plan: a block declares its scratch buffers once, in one function
 * that takes them in order from a plan. Run with base NULL it only sizes
 * them (the block's scratch_floats returns p.n); run with base = f->scratch
 * it carves them (the forward), so size and layout cannot disagree. */
typedef struct {
    float *base; /* NULL: sizing only */
    size_t n;    /* floats taken so far */
} mx_plan;
static inline float *mx_plan_take(mx_plan *p, size_t floats) {
    float *r = p->base ? p->base + p->n : NULL;
    p->n += floats;
    return r;
}

/* One layer (norms, mixer, ffn, residuals) over f->N stacked rows of x in
 * place; xn, tmp, tmp2 are [N, hidden] scratch. The decoder and the encoder
 * (nn/encoder.h) both run their layers through it. */
void mx_layer_forward(mx_fwd *f, int layer, float *x, float *xn, float *tmp, float *tmp2);

/* y = x W^T (+ b), threaded, under the pass's policy. */
void mx_linear(const mx_fwd *f, const mx_weight *w, const float *b, const float *x, int n, int ldx, float *y, int ldy);
/* mx_linear with its role for the op timer (mx_linear's is MX_OP_MATMUL) */
void mx_linear_as(const mx_fwd *f, mx_op op, const mx_weight *w, const float *b, const float *x, int n, int ldx, float *y, int ldy);
/* mx_norm_rows timed as MX_OP_NORM under f's op timer */
void mx_norm_rows_f(const mx_fwd *f, const mx_norm_spec *s, const mx_normw *w, float *y, const float *x, int n, int d, int ld);
/* mx_linear for count (<= 4) weights reading the same x, into y[i] with the
 * same ldy (q/k/v, gate/up): one pass over the pool where the kernels allow. */
void mx_linear_multi(const mx_fwd *f, int count, const mx_weight *const *w, float *const *b, const float *x, int n, int ldx, float *const *y, int ldy);
void mx_linear_multi_as(const mx_fwd *f, mx_op op, int count, const mx_weight *const *w, float *const *b, const float *x, int n, int ldx,
                        float *const *y, int ldy);
/* The position scale of q when a->temp_scale is set (Llama 4's attention
 * temperature, Ministral 3's / Mistral 4's Llama-4 scaling). */
float mx_attn_q_temp(const mx_attn_spec *a, int pos);
/* The values' head size of an attention spec (v_head_dim, or head_dim). */
int mx_attn_vdim(const mx_attn_spec *a);
void mx_norm_rows(const mx_norm_spec *s, const mx_normw *w, float *y, const float *x, int n, int d, int ld);
/* Rope positions of one sequence's n tokens, per axis k at apos[k * stride]:
 * s->mpos where given, else pos[i] + s->rope_shift. */
void mx_rope_positions(const mx_rope *r, const mx_seq_in *s, const int *pos, int *apos, int stride);
/* Layers [*lo, *hi) run in this process (all of them unless m->shard says otherwise). */
void mx_model_layers(const mx_model *m, int *lo, int *hi);
/* Loaders used by blocks: patterns have "%d" for the layer. Under tensor
 * parallelism (m->shard->tp > 1) mx_load_lin splits the projections it
 * knows by their pattern: rows and cols are this part's, the checkpoint's
 * are tp times larger along the split. */
int mx_load_lin(mx_model *m, const char *pat, int layer, int rows, int cols, bool bias, mx_weight *w, float **b);
/* Part m->shard->tp_rank of full (unprepared), split by rows (ax 1),
 * columns (ax 2) or rows of each half of a fused [gate | up] (ax 3): a view
 * of full's rows where full owns no copy (keep full until w is freed), else a
 * copy; prepared for kp. */
int mx_tp_part(const mx_model *m, int ax, const mx_weight *full, const mx_kpolicy *kp, mx_weight *w);
/* A part of module mod's [full_rows, cols] weight (and bias) that blocks
 * choose themselves (tensor parallelism over layouts mx_load_lin does not
 * know, e.g. a recurrent mixer's fused projections): rows ranges[0..nr) in
 * order, or columns [c0, c0 + nc) (an output summed over the parts: the bias
 * on part 0 only, *b NULL elsewhere). Copies, prepared for m->kp. */
int mx_load_lin_rows(mx_model *m, const char *mod, int full_rows, int cols, const int (*ranges)[2], int nr, bool bias, mx_weight *w,
                     float **b);
int mx_load_lin_cols(mx_model *m, const char *mod, int rows, int full_cols, int c0, int nc, bool bias, mx_weight *w, float **b);
int mx_load_norm(mx_model *m, const mx_norm_spec *s, const char *pat, int layer, int n, mx_normw *nw);
int mx_load_vec(mx_model *m, const char *pat, int layer, int n, bool required, float **out);
void mx_normw_free(mx_normw *n);
#endif
