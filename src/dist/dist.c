/* Tensor and pipeline parallelism over MPI (see dist.h). */
#include "dist.h"
#include "../base/base.h"
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CMD_STEP = 1, CMD_FREE, CMD_STOP, CMD_END, CMD_FILL };
#define HDR 64 /* ints of a pass's first broadcast: [cmd, n_seqs, all, N, payload ints], then the payload when it fits */
#define SEQ_INTS 9 /* per sequence: cache id, cap, len, n, seg_end, rope_shift, vision flags, n_deep, image rows sent */
/* a sequence's vision inputs in a pass (mx_seq_in): after all the tokens, each sequence's embed_row [n]
 * (rebased to the rows sent), mpos [axes][n], span_lo [n] and span_hi [n] as present; the rows
 * themselves in a broadcast of floats of their own */
enum { VIS_ROWS = 1, VIS_SCALED = 2, VIS_MPOS = 4, VIS_SPANS = 8 };

static struct {
    bool active, inited, stopped, loaded;
    int rank, size, tp, pp, stage, part, threads;
    MPI_Comm tp_comm;
    mx_shard shard;
    int next_id;
    int *step;     /* rank 0: the pass announcement, grown when a pass needs more (no allocation per token) */
    size_t n_step;
    float *gbuf;   /* rank 0: one part of a split head's logits as it arrives (grown, kept) */
    size_t n_gbuf;
    int vocab, vocab_part; /* the vocabulary and a part's rows of it (the last part may have fewer; 0: not split) */
    int micro;     /* pipeline micro-batches per pass (mx_dist_micro; 0: P, and 2P for long passes) */
    MPI_Request *reqs; /* sends under way (flushed at the end of each pass) */
    int n_reqs, cap_reqs;
    int hidden, axes;      /* an image row's width; the multi-axis rope positions a pass carries per token */
    mx_dist_stats st;
} g;

static double now(void) { return MPI_Wtime(); }
#define TIMED(call, nbytes)                       \
    do {                                          \
        double t_ = now();                        \
        call;                                     \
        g.st.seconds += now() - t_;               \
        g.st.msgs++;                              \
        g.st.bytes += (double)(nbytes);           \
    } while (0)

bool mx_dist_active(void) { return g.active; }
void mx_dist_micro(int n) { g.micro = n; }
int mx_dist_rank(void) { return g.inited ? g.rank : 0; }
mx_dist_stats mx_dist_get_stats(void) { return g.st; }

int mx_dist_start(int tp, int pp, int threads) {
    if (g.inited) return MX_OK;
    bool launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK");
    if (tp * pp == 1 && !launched) return MX_OK; /* a plain run: no MPI at all */
    int prov = 0;
    /* serialized: the server's engine thread runs the passes the main thread loaded the model for */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &prov) != MPI_SUCCESS) return mx_set_err("MPI_Init failed");
    g.inited = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.size);
    atexit(mx_dist_finish);
    if (g.size != tp * pp)
        return mx_set_err("--tp %d x --pp %d needs %d processes, but mpirun started %d (mpirun -np %d)", tp, pp, tp * pp, g.size, tp * pp);
    if (g.size == 1) return MX_OK; /* mpirun -np 1: one process holds the whole model */
    g.active = true;
    g.tp = tp;
    g.pp = pp;
    g.threads = threads;
    g.stage = g.rank / tp;
    g.part = g.rank % tp;
    MPI_Comm_split(MPI_COMM_WORLD, g.stage, g.part, &g.tp_comm);
    return MX_OK;
}

/* ---- the hooks the forward pass calls (nn/model.h mx_dist_ops) ---- */

static void die(const char *what) {
    fprintf(stderr, "mlxcel: rank %d: %s\n", g.rank, what);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void bcast_ints(int *v, int n) { TIMED(MPI_Bcast(v, n, MPI_INT, 0, MPI_COMM_WORLD), g.rank == 0 ? (size_t)n * 4 : 0); }

static void bcast_floats(float *v, size_t n) {
    if (n > INT_MAX) die("a pass's image rows are too many for one broadcast");
    TIMED(MPI_Bcast(v, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD), g.rank == 0 ? n * 4 : 0);
}

/* the image rows [*lo, *hi] a sequence's tokens take in this pass (*hi < *lo: none) */
static void rows_of(const mx_seq_in *s, int *lo, int *hi) {
    *lo = INT_MAX, *hi = -1;
    for (int i = 0; s->embed_row && i < s->n; i++)
        if (s->embed_row[i] >= 0) *lo = MX_MIN(*lo, s->embed_row[i]), *hi = MX_MAX(*hi, s->embed_row[i]);
}

static int vis_flags(const mx_seq_in *s, int lo, int hi) {
    return (hi >= lo ? VIS_ROWS : 0) | (s->embeds_scaled ? VIS_SCALED : 0) | (s->mpos ? VIS_MPOS : 0) | (s->span_lo ? VIS_SPANS : 0);
}

static int vis_ints(int flags, int n) { return (flags & VIS_ROWS ? n : 0) + (flags & VIS_MPOS ? g.axes * n : 0) + (flags & VIS_SPANS ? 2 * n : 0); }

static size_t row_floats(int n_deep) { return (size_t)(1 + n_deep) * (size_t)g.hidden; }

static void hook_begin(void *ctx, const mx_seq_in *seqs, int n_seqs, bool all) {
    (void)ctx;
    if (g.rank != 0) return; /* a worker's pass was announced already */
    int N = 0, nv = 0, lo, hi;
    for (int s = 0; s < n_seqs; s++) {
        rows_of(&seqs[s], &lo, &hi);
        N += seqs[s].n;
        nv += vis_ints(vis_flags(&seqs[s], lo, hi), seqs[s].n);
    }
    g.st.passes++;
    int pay = n_seqs * SEQ_INTS + N + nv;
    size_t need = (size_t)(HDR > 5 + pay ? HDR : 5 + pay);
    if (need > g.n_step) {
        int *nb = realloc(g.step, sizeof(int) * need);
        if (!nb) die("out of memory");
        g.step = nb;
        g.n_step = need;
    }
    int *buf = g.step;
    memset(buf, 0, sizeof(int) * HDR);
    buf[0] = CMD_STEP, buf[1] = n_seqs, buf[2] = all, buf[3] = N, buf[4] = pay;
    int *p = buf + 5, *tok = p + n_seqs * SEQ_INTS, *ex = tok + N;
    for (int s = 0; s < n_seqs; s++) {
        const mx_seq_in *sq = &seqs[s];
        mx_kv *kv = sq->kv;
        if (!kv->dist_id) kv->dist_id = ++g.next_id;
        rows_of(sq, &lo, &hi);
        int fl = vis_flags(sq, lo, hi), n = sq->n, *q = p + s * SEQ_INTS;
        q[0] = kv->dist_id, q[1] = kv->cap, q[2] = kv->len, q[3] = n, q[4] = sq->seg_end, q[5] = sq->rope_shift;
        q[6] = fl, q[7] = fl & VIS_ROWS ? sq->n_deep : 0, q[8] = fl & VIS_ROWS ? hi - lo + 1 : 0;
        memcpy(tok, sq->tokens, sizeof(int) * (size_t)n);
        tok += n;
        for (int i = 0; (fl & VIS_ROWS) && i < n; i++) *ex++ = sq->embed_row[i] >= 0 ? sq->embed_row[i] - lo : -1;
        if (fl & VIS_MPOS) {
            memcpy(ex, sq->mpos, sizeof(int) * (size_t)g.axes * (size_t)n);
            ex += g.axes * n;
        }
        if (fl & VIS_SPANS) {
            memcpy(ex, sq->span_lo, sizeof(int) * (size_t)n);
            memcpy(ex + n, sq->span_hi, sizeof(int) * (size_t)n);
            ex += 2 * n;
        }
    }
    bcast_ints(buf, HDR);
    if (5 + pay > HDR) bcast_ints(buf + 5, pay);
    /* the image rows the pass reads, sequence by sequence: to every process, though only the first stage
     * reads their embeddings and the stage holding layer l their DeepStack part l + 1 (one collective,
     * rather than sends chosen by stage; the rows are a small part of a pass's work) */
    for (int s = 0; s < n_seqs; s++) {
        rows_of(&seqs[s], &lo, &hi);
        size_t rf = row_floats(seqs[s].n_deep);
        if (hi >= lo) bcast_floats((float *)seqs[s].embeds + (size_t)lo * rf, (size_t)(hi - lo + 1) * rf); /* read only on rank 0 */
    }
}

static void hook_recv(void *ctx, float *x, size_t n) {
    (void)ctx;
    TIMED(MPI_Recv(x, (int)n, MPI_FLOAT, g.rank - g.tp, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), 0);
    g.st.msgs--; /* counted by the sender */
}

/* a send that may still be under way when it returns (hook_flush waits for it): a stage goes on with
 * its next micro-batch while the next stage takes this one */
static void isend(const float *x, size_t n, int to, int tag) {
    if (g.n_reqs == g.cap_reqs) {
        int cap = g.cap_reqs ? 2 * g.cap_reqs : 16;
        MPI_Request *nr = realloc(g.reqs, sizeof *nr * (size_t)cap);
        if (!nr) die("out of memory");
        g.reqs = nr;
        g.cap_reqs = cap;
    }
    TIMED(MPI_Isend(x, (int)n, MPI_FLOAT, to, tag, MPI_COMM_WORLD, &g.reqs[g.n_reqs]), n * 4);
    g.n_reqs++;
}

static void hook_send(void *ctx, const float *x, size_t n) {
    (void)ctx;
    isend(x, n, g.rank + g.tp, 1);
}

static void hook_flush(void *ctx) {
    (void)ctx;
    if (!g.n_reqs) return;
    double t = now();
    MPI_Waitall(g.n_reqs, g.reqs, MPI_STATUSES_IGNORE);
    g.st.seconds += now() - t;
    g.n_reqs = 0;
}

/* MPI moves a large message on only inside MPI calls: between layers, so the next stage is not kept
 * waiting for a micro-batch until this one's pass ends */
static void hook_progress(void *ctx) {
    (void)ctx;
    if (!g.n_reqs) return;
    int done = 0;
    double t = now();
    MPI_Testall(g.n_reqs, g.reqs, &done, MPI_STATUSES_IGNORE);
    g.st.seconds += now() - t;
    if (done) g.n_reqs = 0;
}

static void hook_reduce(void *ctx, float *x, size_t n) {
    (void)ctx;
    TIMED(MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, g.tp_comm), n * 4);
}

/* the last stage's output (its part 0's) goes back to rank 0, which has the head: hidden states, not logits */
static void hook_final(void *ctx, float *x, size_t n, bool send) {
    (void)ctx;
    int last = (g.pp - 1) * g.tp;
    if (send && g.rank == last) isend(x, n, 0, 2);
    else if (!send && g.rank == 0) {
        TIMED(MPI_Recv(x, (int)n, MPI_FLOAT, last, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE), 0);
        g.st.msgs--;
    }
}

/* a head split by vocabulary: the last stage's parts send their logits to rank 0, which lays each
 * part's columns into its rows */
static void hook_gather(void *ctx, const float *part, int rows, float *out) {
    (void)ctx;
    int c = g.vocab_part, V = g.vocab, first = (g.pp - 1) * g.tp;
    size_t n = (size_t)rows * (size_t)g.shard.vocab_n;
    if (g.rank != 0) {
        TIMED(MPI_Send(part, (int)n, MPI_FLOAT, 0, 3, MPI_COMM_WORLD), n * 4);
        return;
    }
    n = (size_t)rows * (size_t)c; /* the largest part */
    if (n > g.n_gbuf) {
        float *nb = realloc(g.gbuf, n * sizeof(float));
        if (!nb) { fprintf(stderr, "mlxcel: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
        g.gbuf = nb;
        g.n_gbuf = n;
    }
    for (int k = 0; k < g.tp; k++) {
        const float *p = part;
        int vk = MX_MIN(c, V - k * c); /* part k's rows: the last part may have fewer */
        if (first + k != 0) {
            TIMED(MPI_Recv(g.gbuf, rows * vk, MPI_FLOAT, first + k, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE), 0);
            g.st.msgs--; /* counted by the sender */
            p = g.gbuf;
        }
        for (int r = 0; r < rows; r++) memcpy(out + (size_t)r * V + (size_t)k * c, p + (size_t)r * vk, (size_t)vk * sizeof(float));
    }
}

static void hook_kv_free(void *ctx, int id) {
    (void)ctx;
    if (g.rank != 0 || g.stopped) return;
    int buf[HDR] = {CMD_FREE, id};
    bcast_ints(buf, HDR);
}

static void hook_kv_fill(void *ctx, mx_kv *kv, uint64_t seed) {
    (void)ctx;
    if (g.rank != 0 || g.stopped) return;
    if (!kv->dist_id) kv->dist_id = ++g.next_id;
    int buf[HDR] = {CMD_FILL, kv->dist_id, kv->cap, (int)(seed & 0x7fffffff), (int)(seed >> 31 & 0x7fffffff)};
    bcast_ints(buf, HDR);
}

static const mx_dist_ops g_ops = {.begin = hook_begin, .recv_hidden = hook_recv, .send_hidden = hook_send, .flush = hook_flush,
                                  .progress = hook_progress, .reduce = hook_reduce, .final_hidden = hook_final,
                                  .kv_free = hook_kv_free, .kv_fill = hook_kv_fill, .gather_logits = hook_gather};

/* ---- planning a process's part ---- */

static const char *block_name(const mx_block_ops *b) { return b && b->name ? b->name : "?"; }

/* Tensor parallelism splits attention by heads and the dense MLP by width;
 * anything else is refused by name. */
/* an MLP or MoE block b of layer l (the ffn, or the mixer of an MLP-only layer), split by width */
static int ffn_check(const mx_arch *a, int l, const mx_block_ops *b, int T) {
    const char *fam = a->family ? a->family : "?";
    if (b == &mx_block_moe) {
        const mx_moe_spec *ms = &a->moe;
        if (ms->n_zero) return mx_set_err("--tp: %s has identity experts, which cannot be split by width (use --pp)", fam);
        if (ms->ffn % T || ms->shared_ffn % T)
            return mx_set_err("--tp %d: %s's expert width %d or shared expert width %d does not divide by %d", T, fam, ms->ffn, ms->shared_ffn, T);
    } else if (b && b != &mx_block_mlp)
        return mx_set_err("--tp: %s layer %d runs a '%s' ffn, which cannot be split among processes yet (use --pp)", fam, l, block_name(b));
    return MX_OK;
}

static int tp_check(const mx_model *m, int T) {
    const mx_arch *a = &m->arch;
    const char *fam = a->family ? a->family : "?";
    if (a->ple.dim || a->altup.n) return mx_set_err("--tp: %s has per-layer inputs or AltUp streams, which cannot be split (use --pp)", fam);
    for (int l = 0; l < a->n_layers; l++) {
        const mx_layer_spec *ls = &a->layers[l];
        bool mla = ls->mixer == &mx_block_mla; /* by heads: q_b / q and kv_b rows, o columns; the latent cache whole */
        if (mla && a->mla.index_topk > 0) return mx_set_err("--tp: %s's sparse-attention indexer cannot be split by heads yet (use --pp)", fam);
        if (ls->mixer == &mx_block_deltanet) { /* by key heads (and their value heads) */
            if (a->deltanet.n_k_heads % T)
                return mx_set_err("--tp %d: %s's %d DeltaNet key heads do not divide by %d", T, fam, a->deltanet.n_k_heads, T);
        } else if (ls->mixer == &mx_block_mamba2) { /* by heads; the B / C groups split or copied */
            const mx_ssm_spec *ss = &a->ssm;
            if (ss->n_heads % T || (ss->n_groups % T && T % ss->n_groups))
                return mx_set_err("--tp %d: %s's Mamba2 layers have %d heads and %d groups: the heads must divide by %d, and the groups "
                                  "by %d or %d by the groups", T, fam, ss->n_heads, ss->n_groups, T, T, T);
        } else if (ls->mixer == &mx_block_lightning) { /* by heads, the norm over all of them summed over the parts */
            if (a->lightning.n_heads % T)
                return mx_set_err("--tp %d: %s's %d lightning-attention heads do not divide by %d", T, fam, a->lightning.n_heads, T);
        } else if (ls->mixer == &mx_block_rglru) { /* by heads (the gates' blocks) */
            if (a->rglru.n_heads % T) return mx_set_err("--tp %d: %s's %d RG-LRU heads do not divide by %d", T, fam, a->rglru.n_heads, T);
        } else if (ls->mixer == &mx_block_shortconv) { /* by channels */
            if (a->hidden % T) return mx_set_err("--tp %d: %s's short-conv width %d does not divide by %d", T, fam, a->hidden, T);
        } else if (ls->mixer == &mx_block_mamba) { /* by channels */
            if (a->ssm.d_inner % T) return mx_set_err("--tp %d: %s's Mamba inner width %d does not divide by %d", T, fam, a->ssm.d_inner, T);
        } else if (ls->mixer == &mx_block_mlp || ls->mixer == &mx_block_moe) { /* an MLP / MoE layer (Nemotron-H) */
            if (ffn_check(a, l, ls->mixer, T)) return MX_ERR;
        } else if (!mla && ls->mixer != &mx_block_attention)
            return mx_set_err("--tp: %s layer %d runs a '%s' mixer, which cannot be split among processes (use --pp)", fam, l, block_name(ls->mixer));
        if (ffn_check(a, l, ls->ffn, T)) return MX_ERR;
        if (ls->mixer2 && ls->mixer2 != &mx_block_mamba2) /* a Mamba2 beside the attention (Falcon-H1): both by heads */
            return mx_set_err("--tp: %s layer %d has a second mixer '%s', which cannot be split (use --pp)", fam, l, block_name(ls->mixer2));
        if (ls->mixer2 == &mx_block_mamba2 && (a->ssm.n_heads % T || (a->ssm.n_groups % T && T % a->ssm.n_groups)))
            return mx_set_err("--tp %d: %s's Mamba2 layers have %d heads and %d groups: the heads must divide by %d, and the groups "
                              "by %d or %d by the groups", T, fam, a->ssm.n_heads, a->ssm.n_groups, T, T, T);
        if (ls->post || ls->shortcut || ls->branch || ls->xattn)
            return mx_set_err("--tp: %s layer %d has a post, shortcut, branch or cross-attention block, which cannot be split (use --pp)", fam, l);
        if (ls->gate_sparsity > 0) return mx_set_err("--tp: %s layer %d: the MLP's gate sparsity needs the whole width (use --pp)", fam, l);
        int F = ls->ffn_width ? ls->ffn_width : a->ffn;
        if ((ls->ffn == &mx_block_mlp || ls->mixer == &mx_block_mlp) && F % T)
            return mx_set_err("--tp %d: %s layer %d: the MLP width %d does not divide by %d", T, fam, l, F, T);
        const mx_attn_spec *at = ls->attn;
        if (!mla && ls->mixer != &mx_block_attention) continue; /* a recurrent mixer, split above */
        /* a q/k norm over all heads: RMS, its sums of squares summed over the parts, before the rope */
        bool full_ok = at->qk_norm != MX_QKNORM_FULL || (at->qk_norm_spec.kind == MX_NORM_RMS && !at->qk_norm_spec.bias && !at->qk_norm_after_rope);
        if (at->names.out_norm || ls->kv_shared || at->k_eq_v || !full_ok)
            return mx_set_err("--tp: %s layer %d: its attention (an output norm, shared K/V, or a q/k norm over all heads that is "
                              "not an RMSNorm before the rope) cannot be split by heads (use --pp)", fam, l);
        /* KV heads shared out; fewer of them than parts (MQA): each part keeps a copy of its group's */
        bool kv_ok = mla || at->n_kv_heads % T == 0 || (T % at->n_kv_heads == 0 && at->qkv_layout != MX_QKV_GROUPED);
        if (!kv_ok || at->n_heads % T)
            return mx_set_err("--tp %d: %s has %d attention heads and %d KV heads: the attention heads must divide by %d, and the "
                              "KV heads by %d or %d by the KV heads (GQA groups stay together)", T, fam, at->n_heads, at->n_kv_heads, T, T, T);
    }
    if (a->names.ffn_act_norm) return mx_set_err("--tp: %s has a norm inside its MLP, which needs the whole width (use --pp)", fam);
    return MX_OK;
}

/* A stage may start at layer b when no later layer reads the K/V cache of a
 * layer before b (Gemma 3n / 4's KV-shared layers): caches stay in their stage. */
static bool cut_ok(const mx_arch *a, int b) {
    for (int l = b; l < a->n_layers; l++)
        if (a->layers[l].kv_shared && a->layers[l].kv_from < b) return false;
    return true;
}

/* the layer ranges of the stages: as even as the KV-shared layers allow. (Weighing the stages by their
 * bytes, the head with the driver's, was measured slower here: prefill runs the head on one row per
 * sequence, and the driver also samples and serves HTTP; BENCHMARKS.md, issue 27.) */
static int plan_stages(const mx_arch *a, int P, int *cuts) {
    int n = a->n_layers;
    cuts[0] = 0;
    cuts[P] = n;
    for (int s = 1; s < P; s++) {
        int ideal = (int)((long)n * s / P), lo = cuts[s - 1] + 1, hi = n - (P - s), b = -1;
        for (int d = 0; d <= n && b < 0; d++) {
            if (ideal - d >= lo && ideal - d <= hi && cut_ok(a, ideal - d)) b = ideal - d;
            else if (ideal + d >= lo && ideal + d <= hi && cut_ok(a, ideal + d)) b = ideal + d;
        }
        if (b < 0)
            return mx_set_err("--pp %d: %s's layers cannot be cut into %d stages that keep each KV-shared layer with the layer whose cache it reads",
                              P, a->family ? a->family : "?", P);
        cuts[s] = b;
    }
    return MX_OK;
}

int mx_dist_shard(mx_model *m) {
    if (!g.active) return MX_OK;
    mx_arch *a = &m->arch;
    const char *fam = a->family ? a->family : "?";
    if (a->encoder) return mx_set_err("%s is an encoder-decoder: distributed runs take decoder-only models", fam);
    if (g.pp > a->n_layers) return mx_set_err("--pp %d: %s has only %d layers", g.pp, fam, a->n_layers);
    if (g.tp > 1) {
        if (tp_check(m, g.tp)) return MX_ERR;
        for (int k = 0; k < a->n_attn_specs; k++) {
            mx_attn_spec *at = a->attn_specs[k];
            at->n_heads /= g.tp;
            if (at->n_kv_heads > 0 && at->n_kv_heads < g.tp) { /* replicated: one KV head per part, tp / n_kv_heads parts per head */
                at->tp_kv_rep = g.tp / at->n_kv_heads;
                at->n_kv_heads = 1;
            } else at->n_kv_heads /= g.tp;
        }
        bool m1 = false;
        for (int l = 0; l < a->n_layers; l++) m1 |= a->layers[l].mixer == &mx_block_mamba;
        if (m1) a->ssm.d_inner /= g.tp;
        bool lt = false;
        for (int l = 0; l < a->n_layers; l++) lt |= a->layers[l].mixer == &mx_block_lightning;
        if (lt) a->lightning.n_heads /= g.tp;
        bool rg = false;
        for (int l = 0; l < a->n_layers; l++) rg |= a->layers[l].mixer == &mx_block_rglru;
        if (rg) {
            a->rglru.width /= g.tp;
            a->rglru.n_heads /= g.tp;
        }
        for (int l = 0; l < a->n_layers; l++)
            if (a->layers[l].mixer == &mx_block_shortconv) a->shortconv.tp_width = a->hidden / g.tp;
        for (int l = 0; l < a->n_layers; l++) {
            if ((a->layers[l].mixer != &mx_block_mamba2 && a->layers[l].mixer2 != &mx_block_mamba2) || a->ssm.tp_n_groups) continue;
            mx_ssm_spec *ss = &a->ssm; /* once: the spec is shared by the layers */
            int T = g.tp, gs = ss->gated_norm ? ss->d_inner / ss->norm_groups : 1;
            ss->tp_n_groups = ss->n_groups;
            ss->tp_norm_groups = ss->norm_groups;
            ss->d_inner /= T;
            ss->n_heads /= T;
            ss->n_groups = ss->n_groups >= T ? ss->n_groups / T : 1;
            /* a part's channels hold whole norm groups, or each group's squares are summed over the parts */
            ss->tp_norm_split = ss->gated_norm && ss->d_inner % gs;
            if (ss->gated_norm && !ss->tp_norm_split) ss->norm_groups = ss->d_inner / gs;
        }
        a->deltanet.n_k_heads /= g.tp;
        a->deltanet.n_v_heads /= g.tp;
        a->ffn /= g.tp;
        a->moe.ffn /= g.tp;
        a->moe.shared_ffn /= g.tp;
        for (int l = 0; l < a->n_layers; l++) a->layers[l].ffn_width /= g.tp;
    }
    /* the table and head split by vocabulary among the parts, ceil(V / T) rows each and the rest to the
     * last (rank 0's whole when some part would get none) */
    int c = g.tp > 1 ? (a->vocab + g.tp - 1) / g.tp : 0;
    if (c && a->vocab - (g.tp - 1) * c < 1) c = 0;
    int *cuts = malloc(sizeof(int) * (size_t)(g.pp + 1));
    if (!cuts) return mx_set_err("out of memory");
    if (plan_stages(a, g.pp, cuts)) { free(cuts); return MX_ERR; }
    g.vocab = a->vocab;
    g.vocab_part = c;
    g.hidden = a->hidden;
    g.axes = 1; /* mx_seq_in.mpos: [axes][n], the most any rope reads */
    for (int r = 0; r < a->n_rope; r++) g.axes = MX_MAX(g.axes, MX_MIN(a->rope[r].n_axes, MX_ROPE_MAX_AXES));
    int vn = c ? MX_MIN(c, a->vocab - c * g.part) : 0;
    g.shard = (mx_shard){.ops = &g_ops, .layer_lo = cuts[g.stage], .layer_hi = cuts[g.stage + 1], .tp = g.tp, .tp_rank = g.part,
                         .embeds = g.stage == 0, .head = vn ? g.stage == g.pp - 1 : g.rank == 0, .driver = g.rank == 0,
                         .vocab_lo = c * g.part, .vocab_n = vn, .micro = g.pp > 1 ? (g.micro ? g.micro : g.pp) : 1,
                         .micro_long = g.pp > 1 ? (g.micro ? g.micro : 2 * g.pp) : 1};
    free(cuts);
    m->shard = &g.shard;
    return MX_OK;
}

int mx_dist_loaded(int rc) {
    if (!g.active) return rc;
    char msg[512] = {0};
    if (rc) snprintf(msg, sizeof msg, "%s", mx_errmsg());
    char *all = g.rank == 0 ? calloc((size_t)g.size, sizeof msg) : NULL;
    MPI_Gather(msg, sizeof msg, MPI_CHAR, all, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD);
    int bad = -1;
    if (g.rank == 0)
        for (int r = 0; r < g.size && bad < 0; r++)
            if (all[(size_t)r * sizeof msg]) bad = r;
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad > 0 && g.rank == 0) mx_set_err("rank %d (stage %d, part %d): %s", bad, bad / g.tp, bad % g.tp, all + (size_t)bad * sizeof msg);
    else if (bad >= 0 && !rc) mx_set_err("rank %d failed to load its part", bad);
    free(all);
    g.loaded = bad < 0; /* the workers now serve passes until rank 0 stops them */
    return bad >= 0 ? MX_ERR : MX_OK;
}

int mx_dist_follow(int rc, int *v, int n) {
    if (!g.active) return rc;
    if (n > 15) return mx_set_err("mx_dist_follow: at most 15 values");
    int buf[16] = {rc != 0};
    if (g.rank == 0) memcpy(buf + 1, v, sizeof(int) * (size_t)n);
    MPI_Bcast(buf, 1 + n, MPI_INT, 0, MPI_COMM_WORLD);
    memcpy(v, buf + 1, sizeof(int) * (size_t)n);
    if (!buf[0]) return MX_OK;
    g.loaded = false; /* no process serves passes: rank 0 has none to stop */
    if (g.rank != 0) mx_set_err("rank 0 failed to open the model");
    return MX_ERR;
}

/* ---- the workers ---- */

typedef struct {
    int id;
    mx_kv *kv;
} kv_slot;

/* cache id of capacity cap in this worker's list, made the first time rank 0 names it */
static mx_kv *worker_kv(const mx_model *m, kv_slot **kvs, int *n_kvs, int id, int cap) {
    for (int i = 0; i < *n_kvs; i++)
        if ((*kvs)[i].id == id) return (*kvs)[i].kv;
    kv_slot *nk = realloc(*kvs, sizeof **kvs * (size_t)(*n_kvs + 1));
    mx_kv *kv = NULL;
    if (!nk || !(kv = mx_kv_new(m, cap))) die(mx_errmsg());
    *kvs = nk;
    (*kvs)[(*n_kvs)++] = (kv_slot){id, kv};
    return kv;
}

int mx_dist_worker(const mx_model *m) {
    if (!g.active || g.rank == 0) return MX_OK;
    mx_pool *pool = mx_pool_new(g.threads);
    kv_slot *kvs = NULL;
    int n_kvs = 0, mt = 0, mc = 0, rc = MX_OK;
    mx_ctx *ctx = NULL;
    float *logits = NULL; /* a worker never has the head: mx_forward writes none */
    int *buf = NULL, *pay = NULL;
    float *rows = NULL; /* a pass's image rows */
    mx_seq_in *seqs = NULL;
    size_t nbuf = 0, nseqs = 0, nrows = 0;
    int hdr[HDR];
    if (!pool) return MX_ERR;
    for (;;) {
        bcast_ints(hdr, HDR);
        if (hdr[0] == CMD_STOP || hdr[0] == CMD_END) break;
        if (hdr[0] == CMD_FREE) {
            for (int i = 0; i < n_kvs; i++)
                if (kvs[i].id == hdr[1]) {
                    mx_kv_free(kvs[i].kv);
                    kvs[i] = kvs[--n_kvs];
                    break;
                }
            continue;
        }
        if (hdr[0] == CMD_FILL) { /* bench --depth-random: this process's part of the cache, the same seed */
            mx_kv_fill_random(m, worker_kv(m, &kvs, &n_kvs, hdr[1], hdr[2]), (uint64_t)hdr[3] | (uint64_t)hdr[4] << 31);
            continue;
        }
        if (hdr[0] != CMD_STEP) die("unknown command from rank 0");
        g.st.passes++;
        int n_seqs = hdr[1], N = hdr[3], np = hdr[4];
        bool all = hdr[2];
        if ((size_t)np > nbuf) {
            free(buf);
            if (!(buf = malloc(sizeof(int) * (size_t)np))) die("out of memory");
            nbuf = (size_t)np;
        }
        if (5 + np > HDR) bcast_ints(buf, np);
        else memcpy(buf, hdr + 5, sizeof(int) * (size_t)np);
        pay = buf;
        if ((size_t)n_seqs > nseqs) {
            free(seqs);
            if (!(seqs = calloc((size_t)n_seqs, sizeof *seqs))) die("out of memory");
            nseqs = (size_t)n_seqs;
        }
        const int32_t *tok = pay + n_seqs * SEQ_INTS;
        const int *ex = tok + N; /* the sequences' vision inputs */
        size_t nf = 0, fo = 0;
        for (int s = 0; s < n_seqs; s++) {
            const int *q = pay + s * SEQ_INTS;
            if (q[6] & VIS_ROWS) nf += (size_t)q[8] * row_floats(q[7]);
        }
        if (nf > nrows) {
            free(rows);
            if (!(rows = malloc(sizeof(float) * nf))) die("out of memory");
            nrows = nf;
        }
        int need_ctx = 0;
        for (int s = 0; s < n_seqs; s++) {
            const int *q = pay + s * SEQ_INTS;
            mx_kv *kv = worker_kv(m, &kvs, &n_kvs, q[0], q[1]);
            kv->len = q[2];
            int n = q[3], fl = q[6];
            seqs[s] = (mx_seq_in){.kv = kv, .tokens = tok, .n = n, .seg_end = q[4], .rope_shift = q[5]};
            tok += n;
            if (fl & VIS_ROWS) {
                size_t rf = row_floats(q[7]), nr = (size_t)q[8] * rf;
                bcast_floats(rows + fo, nr);
                seqs[s].embeds = rows + fo, seqs[s].embed_row = ex, seqs[s].n_deep = q[7], seqs[s].embeds_scaled = fl & VIS_SCALED;
                fo += nr;
                ex += n;
            }
            if (fl & VIS_MPOS) {
                seqs[s].mpos = ex;
                ex += g.axes * n;
            }
            if (fl & VIS_SPANS) {
                seqs[s].span_lo = ex, seqs[s].span_hi = ex + n;
                ex += 2 * n;
            }
            need_ctx = MX_MAX(need_ctx, kv->cap);
        }
        if (!ctx || N > mt || need_ctx > mc) {
            mx_ctx_free(ctx);
            mt = MX_MAX(mt, N);
            mc = MX_MAX(mc, need_ctx);
            if (!(ctx = mx_ctx_new(m, mt, mc, pool))) die(mx_errmsg());
        }
        if (mx_forward(ctx, seqs, n_seqs, logits, all)) die(mx_errmsg());
    }
    for (int i = 0; i < n_kvs; i++) mx_kv_free(kvs[i].kv);
    free(kvs);
    mx_ctx_free(ctx);
    free(logits);
    free(buf);
    free(rows);
    free(seqs);
    mx_pool_free(pool);
    return rc;
}

void mx_dist_release(void) {
    if (g.active && g.loaded && g.rank == 0 && !g.stopped) {
        int buf[HDR] = {CMD_END};
        bcast_ints(buf, HDR);
    }
    g.loaded = false;
}

static void stop_workers(void) {
    if (g.active && g.loaded && g.rank == 0 && !g.stopped) {
        int buf[HDR] = {CMD_STOP};
        bcast_ints(buf, HDR);
    }
    g.stopped = true;
}

void mx_dist_report(void) {
    if (!g.active) return;
    stop_workers();
    double mine[6] = {(double)g.st.msgs, g.st.bytes, g.st.seconds, (double)g.st.passes, g.shard.layer_lo, g.shard.layer_hi}, *all = NULL;
    if (g.rank == 0 && !(all = calloc((size_t)g.size * 6, sizeof(double)))) return;
    MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int r = 0; g.rank == 0 && r < g.size; r++) {
        const double *v = all + (size_t)r * 6;
        double n = v[3] > 0 ? v[3] : 1;
        char head[96] = "";
        int c = g.vocab_part, k = r % g.tp, o = 0, hi = MX_MIN((k + 1) * c, g.vocab) - 1;
        if (c && r / g.tp == 0) o = snprintf(head, sizeof head, ", table rows %d-%d", k * c, hi);
        if (c && r / g.tp == g.pp - 1) snprintf(head + o, sizeof head - (size_t)o, ", head rows %d-%d", k * c, hi);
        fprintf(stderr, "mpi: rank %d (stage %d: layers %.0f-%.0f, part %d%s): %.0f passes, %.0f messages (%.1f per pass), %.0f bytes sent (%.0f per pass), "
                        "%.1f ms in MPI (%.3f ms per pass)\n",
                r, r / g.tp, v[4], v[5] - 1, r % g.tp, head, v[3], v[0], v[0] / n, v[1], v[1] / n, v[2] * 1e3, v[2] * 1e3 / n);
    }
    free(all);
}

void mx_dist_finish(void) {
    if (!g.inited) return;
    stop_workers();
    g.inited = false;
    if (g.active) MPI_Comm_free(&g.tp_comm);
    g.active = false;
    free(g.step);
    free(g.gbuf);
    free(g.reqs);
    g.reqs = NULL;
    g.n_reqs = g.cap_reqs = 0;
    g.gbuf = NULL;
    g.n_gbuf = 0;
    g.step = NULL;
    g.n_step = 0;
    MPI_Finalize();
}
