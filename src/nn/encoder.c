/* The encoder pass (see encoder.h): embeddings, the same layer step as the
 * decoder (mx_layer_forward) over per-pass attention state, final norm. */
#include "encoder.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mx_enc {
    const mx_model *m;
    mx_pool *pool;
    int max_tokens;
    mx_fwd_bufs b;
    float *state;
    size_t state_cap;
    uint8_t *mask;
    mx_seq_in *seqs;
    mx_kv *kvs;
    size_t *zero_off; /* every layer's state at offset 0: layers run one after another */
    float *col;       /* the input stem's im2col rows (mx_encode_features) */
};

mx_enc *mx_enc_new(const mx_model *m, int max_tokens, mx_pool *pool) {
    const mx_arch *a = &m->arch;
    if (max_tokens < 1 || max_tokens > (1 << 24)) { mx_set_err("encoder batch of %d tokens is out of range", max_tokens); return NULL; }
    for (int l = 0; l < a->n_layers; l++) /* the pass keeps one layer's state at a time */
        if (a->layers[l].kv_shared) { mx_set_err("the encoder pass does not run layers that share another layer's K/V"); return NULL; }
    mx_enc *c = mx_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->m = m;
    c->pool = pool;
    c->max_tokens = max_tokens;
    size_t N = (size_t)max_tokens;
    c->mask = mx_calloc(N, 1);
    c->seqs = mx_calloc(N, sizeof(mx_seq_in));
    c->kvs = mx_calloc(N, sizeof(mx_kv));
    c->zero_off = mx_calloc((size_t)a->n_layers + 1, sizeof(size_t));
    if (mx_fwd_bufs_alloc(&c->b, m, max_tokens, max_tokens, mx_pool_size(pool)) || !c->mask || !c->seqs || !c->kvs || !c->zero_off) {
        mx_enc_free(c);
        return NULL;
    }
    return c;
}

void mx_enc_free(mx_enc *c) {
    if (!c) return;
    mx_fwd_bufs_free(&c->b);
    mx_aligned_free(c->state);
    mx_aligned_free(c->col);
    free(c->mask); free(c->seqs); free(c->kvs); free(c->zero_off);
    free(c);
}

int mx_enc_max_tokens(const mx_enc *c) { return c->max_tokens; }

/* state floats one sequence of n positions needs in the layer that needs most */
static size_t seq_state(const mx_model *m, int n) {
    const mx_arch *a = &m->arch;
    size_t most = 0;
    for (int l = 0; l < a->n_layers; l++) {
        const mx_layer_spec *ls = &a->layers[l];
        size_t s = 0;
        if (ls->mixer && ls->mixer->state_floats) s += ls->mixer->state_floats(m, l, n);
        if (ls->ffn && ls->ffn->state_floats) s += ls->ffn->state_floats(m, l, n);
        most = MX_MAX(most, s);
    }
    return (most + 15) & ~(size_t)15;
}

static int run_layers(mx_enc *c, int n_seqs, int N, bool any_mask, const mx_enc_plan *plan, float *hidden);

int mx_encode(mx_enc *c, const mx_enc_seq *seqs, int n_seqs, float *hidden) {
    const mx_model *m = c->m;
    const mx_arch *a = &m->arch;
    int H = a->hidden, N = 0;
    bool any_mask = false;
    if (n_seqs < 1) return mx_set_err("no sequence to encode");
    for (int s = 0; s < n_seqs; s++) {
        const mx_enc_seq *q = &seqs[s];
        if (q->n < 1) return mx_set_err("sequence %d is empty", s);
        if (q->n > c->max_tokens - N) return mx_set_err("batch of %d+ tokens exceeds the encoder capacity %d", N + q->n, c->max_tokens);
        for (int i = 0; i < q->n; i++) {
            int32_t tok = q->tokens ? q->tokens[i] : 0, ty = q->type_ids ? q->type_ids[i] : 0;
            if (!q->embeds && (tok < 0 || tok >= a->vocab)) return mx_set_err("token id %d is outside the vocabulary (size %d)", tok, a->vocab);
            if (ty < 0 || ty >= (m->type_embed.fmt ? a->n_types : 1))
                return mx_set_err("token type id %d is out of range (the model has %d token types)", ty, m->type_embed.fmt ? a->n_types : 1);
            c->b.pos[N] = i;
            c->b.seq_of[N] = s;
            c->mask[N] = q->mask ? q->mask[i] != 0 : 1;
            any_mask |= !c->mask[N];
            N++;
        }
        if (a->pos == MX_POS_LEARNED && q->n > a->max_pos)
            return mx_set_err("sequence of %d tokens exceeds max_position_embeddings %d", q->n, a->max_pos);
    }
    /* embeddings */
    for (int s = 0, t = 0; s < n_seqs; s++) {
        const mx_enc_seq *q = &seqs[s];
        int counted = 0, pad = a->pos_offset - 1;
        for (int i = 0; i < q->n; i++, t++) {
            float *row = c->b.x + (size_t)t * H;
            if (q->embeds) { /* given rows: nothing is added */
                memcpy(row, q->embeds + (size_t)i * H, (size_t)H * 4);
                continue;
            }
            mx_weight_row(&m->embed, q->tokens[i], row);
            if (a->embed_scale != 1.0f) mx_scale(row, a->embed_scale, H);
            if (a->pos == MX_POS_LEARNED) {
                int r = a->pos_skip_pad ? (q->tokens[i] == pad ? pad : a->pos_offset + counted++) : i + a->pos_offset;
                mx_weight_row(&m->pos_embed, r, c->b.tmp);
                mx_add(row, c->b.tmp, H);
            }
            if (m->type_embed.fmt) {
                mx_weight_row(&m->type_embed, q->type_ids ? q->type_ids[i] : 0, c->b.tmp);
                mx_add(row, c->b.tmp, H);
            }
        }
    }
    if (a->names.embed_norm) mx_norm_rows(&a->norm, &m->embed_norm, c->b.x, c->b.x, N, H, H);
    for (int s = 0; s < n_seqs; s++) c->seqs[s] = (mx_seq_in){.tokens = seqs[s].tokens, .n = seqs[s].n, .seg_end = seqs[s].n, .mpos = seqs[s].mpos};
    if (!hidden) return MX_OK; /* mx_encode_plan: the embeddings only */
    return run_layers(c, n_seqs, N, any_mask, NULL, hidden);
}

int mx_encode_plan(mx_enc *c, const mx_enc_seq *seq, const mx_enc_plan *plan, float *hidden) {
    int n = 0;
    for (int k = 0; plan->windowed && k < plan->n_win; k++) {
        if (plan->win_len[k] < 1) return mx_set_err("encoder window %d is empty", k);
        n += plan->win_len[k];
    }
    if (plan->windowed && n != seq->n) return mx_set_err("encoder windows cover %d of %d rows", n, seq->n);
    if (!seq->embeds) return mx_set_err("a planned encoder pass takes input rows");
    return mx_encode(c, seq, 1, NULL) ? MX_ERR : run_layers(c, 1, seq->n, false, plan, hidden);
}

/* The attention groups of a layer: the whole sequence, or the plan's windows */
static void partition(mx_enc *c, int n_parts, const int *len) {
    const mx_model *m = c->m;
    size_t off = 0;
    for (int k = 0, t = 0; k < n_parts; k++) {
        int n = len[k];
        c->seqs[k].n = c->seqs[k].seg_end = n;
        c->kvs[k] = (mx_kv){.cap = n, .len = 0, .n_layers = m->arch.n_layers, .data = c->state + off, .offset = c->zero_off};
        c->seqs[k].kv = &c->kvs[k];
        for (int i = 0; i < n; i++, t++) {
            c->b.pos[t] = i;
            c->b.seq_of[t] = k;
        }
        off += seq_state(m, n);
    }
}

/* The layers and final norm over the rows in c->b.x of n_seqs sequences
 * (c->seqs[s].n rows each, N in all). */
static int run_layers(mx_enc *c, int n_seqs, int N, bool any_mask, const mx_enc_plan *plan, float *hidden) {
    const mx_model *m = c->m;
    const mx_arch *a = &m->arch;
    int H = a->hidden;
    /* per-sequence attention state, views into one buffer */
    size_t need = 0, win_need = 0;
    for (int s = 0; s < n_seqs; s++) need += seq_state(m, c->seqs[s].n);
    if (plan && plan->windowed) {
        for (int k = 0; k < plan->n_win; k++) win_need += seq_state(m, plan->win_len[k]);
        need = MX_MAX(need, win_need);
    }
    if (need > c->state_cap) {
        mx_aligned_free(c->state);
        c->state_cap = 0;
        c->state = mx_aligned_alloc((need ? need : 1) * 4);
        if (!c->state) return MX_ERR;
        c->state_cap = need;
    }
    size_t off = 0;
    for (int s = 0; s < n_seqs; s++) {
        int n = c->seqs[s].n;
        c->kvs[s] = (mx_kv){.cap = n, .len = 0, .n_layers = a->n_layers, .data = c->state + off, .offset = c->zero_off};
        c->seqs[s].kv = &c->kvs[s];
        off += seq_state(m, n);
    }
    /* rope tables: positions 0..n-1 of each sequence */
    if (a->pos == MX_POS_ROPE) {
        size_t roff = 0;
        for (int r = 0; r < a->n_rope; r++) {
            for (int s = 0, t = 0; s < n_seqs; t += c->seqs[s].n, s++) {
                mx_rope_positions(&a->rope[r], &c->seqs[s], c->b.pos + t, c->b.apos + t, c->max_tokens);
                const int *axes[MX_ROPE_MAX_AXES];
                for (int k = 0; k < MX_ROPE_MAX_AXES; k++) axes[k] = c->b.apos + (size_t)k * c->max_tokens + t;
                mx_rope_table_axes(&a->rope[r], axes, c->seqs[s].n, c->seqs[s].n, c->b.cs + roff + (size_t)t * a->rope[r].dim);
            }
            roff += (size_t)N * a->rope[r].dim;
        }
    }
    mx_fwd f = {.m = m, .pool = c->pool, .seqs = c->seqs, .n_seqs = n_seqs, .N = N, .pos = c->b.pos, .seq_of = c->b.seq_of,
                .scratch = c->b.scratch, .max_tokens = c->max_tokens, .max_ctx = c->max_tokens,
                .key_mask = any_mask ? c->mask : NULL};
    for (int r = 0, ro = 0; r < a->n_rope; ro += N * a->rope[r].dim, r++) f.cs[r] = c->b.cs + ro;
    if (a->ple.dim) mx_ple_inputs(&f, c->b.x, c->b.ple);
    if (a->altup.n) mx_altup_embed(&f, c->b.x, c->b.altup);
    bool in_windows = false;
    for (int l = 0; l < a->n_layers; l++) {
        bool w = plan && plan->windowed && plan->windowed[l];
        if (w != in_windows) { /* rope tables stay: they are per row */
            int whole = N;
            partition(c, w ? plan->n_win : 1, w ? plan->win_len : &whole);
            f.n_seqs = w ? plan->n_win : 1;
            in_windows = w;
        }
        if (a->layers[l].mixer != &mx_block_attention) memset(c->state, 0, need * 4); /* recurrent state starts empty */
        if (a->altup.n) mx_altup_predict(&f, l, c->b.altup, c->b.x);
        mx_layer_forward(&f, l, c->b.x, c->b.xn, c->b.tmp, c->b.tmp2);
        if (a->altup.n) mx_altup_correct(&f, l, c->b.altup, c->b.x, c->b.tmp);
        if (plan && plan->capture && plan->capture[l] >= 0)
            memcpy(plan->captured + (size_t)plan->capture[l] * N * H, c->b.x, (size_t)N * H * 4);
    }
    if (a->altup.n) mx_altup_unembed(&f, c->b.altup, c->b.x, c->b.tmp);
    if (a->names.final_norm) mx_norm_rows(&a->norm, &m->final_norm, hidden, c->b.x, N, H, H);
    else memcpy(hidden, c->b.x, (size_t)N * H * 4);
    return MX_OK;
}

int mx_encode_features(mx_enc *c, const float *feat, float *hidden) {
    const mx_model *m = c->m;
    const mx_arch *a = &m->arch;
    int H = a->hidden, T = mx_stem_rows(&a->stem);
    if (!a->stem.n_conv) return mx_set_err("this encoder takes token ids, not features");
    if (T > c->max_tokens) return mx_set_err("the stem gives %d rows, more than the encoder's capacity %d", T, c->max_tokens);
    if (a->pos == MX_POS_LEARNED && T > a->max_pos) return mx_set_err("the stem gives %d rows for %d positions", T, a->max_pos);
    if (!c->col && !(c->col = mx_aligned_alloc(mx_stem_col_floats(&a->stem, H) * 4))) return MX_ERR;
    mx_stem_run(m, c->pool, feat, c->b.x, c->col);
    for (int t = 0; t < T; t++) {
        c->b.pos[t] = t;
        c->b.seq_of[t] = 0;
        if (a->pos == MX_POS_LEARNED) {
            mx_weight_row(&m->pos_embed, t + a->pos_offset, c->b.tmp);
            mx_add(c->b.x + (size_t)t * H, c->b.tmp, H);
        }
    }
    c->seqs[0] = (mx_seq_in){.n = T, .seg_end = T};
    return run_layers(c, 1, T, false, NULL, hidden);
}

/* ---- head ---- */

bool mx_head_has_pooler(const mx_model *m) { return m->head_dense.fmt != MX_W_NONE; }
int mx_head_labels(const mx_model *m) { return m->head_out.fmt != MX_W_NONE ? m->head_out.rows : 0; }

void mx_pooling_apply(mx_pooling how, const float *hidden, int n, int H, const uint8_t *mask, float *out) {
    int cnt = 0, last = -1;
    if (how == MX_POOL_CLS) { memcpy(out, hidden, (size_t)H * 4); return; }
    for (int i = 0; i < H; i++) out[i] = how == MX_POOL_MAX ? -INFINITY : 0;
    for (int t = 0; t < n; t++) {
        if (mask && !mask[t]) continue;
        const float *r = hidden + (size_t)t * H;
        cnt++;
        last = t;
        if (how == MX_POOL_MEAN) mx_add(out, r, H);
        else if (how == MX_POOL_MAX)
            for (int i = 0; i < H; i++) out[i] = r[i] > out[i] ? r[i] : out[i];
    }
    if (how == MX_POOL_MEAN && cnt) mx_scale(out, 1.0f / (float)cnt, H);
    if (how == MX_POOL_LAST && last >= 0) memcpy(out, hidden + (size_t)last * H, (size_t)H * 4);
    if (!cnt) memset(out, 0, (size_t)H * 4);
}

int mx_head_forward(const mx_model *m, mx_pool *pool, const float *hidden, int n, const uint8_t *mask, float *pooled,
                    float *logits) {
    const mx_arch *a = &m->arch;
    int H = a->hidden;
    if (logits && !m->head_out.fmt) return mx_set_err("the model has no classification head");
    float *v = mx_malloc((size_t)H * 2 * sizeof(float));
    if (!v) return MX_ERR;
    float *y = v + H;
    mx_fwd f = {.m = m, .pool = pool};
    mx_pooling_apply(a->head.pool, hidden, n, H, mask, v);
    if (m->head_dense.fmt) {
        mx_linear(&f, &m->head_dense, m->head_dense_b, v, 1, H, y, H);
        mx_act_apply(a->head.act, y, H);
        if (a->head.norm) mx_norm_rows(&a->norm, &m->head_norm, y, y, 1, H, H);
    } else memcpy(y, v, (size_t)H * 4);
    if (pooled) memcpy(pooled, y, (size_t)H * 4);
    if (logits) mx_linear(&f, &m->head_out, m->head_out_b, y, 1, H, logits, m->head_out.rows);
    free(v);
    return MX_OK;
}

int mx_encoder_bind(mx_model *m) {
    mx_arch *a = &m->arch;
    const mx_names *N = &a->names;
    const mx_head_spec *h = &a->head;
    int H = a->hidden;
    if (mx_stem_bind(m)) return MX_ERR;
    if (N->type_embed) {
        if (a->n_types < 1) return mx_set_err("%s: the token type embedding needs type_vocab_size >= 1", m->ck.dir);
        if (mx_load_lin(m, N->type_embed, 0, a->n_types, H, false, &m->type_embed, NULL)) return MX_ERR;
        m->weight_bytes -= mx_weight_bytes(&m->type_embed); /* a lookup reads one row */
    }
    if (mx_load_norm(m, &a->norm, N->embed_norm, 0, H, &m->embed_norm)) return MX_ERR;
    if (h->dense) {
        char *nm = mx_asprintf("%s.weight", h->dense);
        if (!nm) return MX_ERR;
        bool have = mx_ckpt_find(&m->ck, nm) != NULL;
        free(nm);
        if (have || !h->optional) {
            if (mx_load_lin(m, h->dense, 0, H, H, h->dense_bias, &m->head_dense, &m->head_dense_b) ||
                mx_load_norm(m, &a->norm, h->norm, 0, H, &m->head_norm))
                return MX_ERR;
        }
    }
    if (h->out) {
        if (h->n_labels < 1) return mx_set_err("%s: a classification head needs at least one label", m->ck.dir);
        if (mx_load_lin(m, h->out, 0, h->n_labels, H, true, &m->head_out, &m->head_out_b)) return MX_ERR;
    }
    return MX_OK;
}

void mx_encoder_free(mx_model *m) {
    mx_stem_free(m);
    mx_weight_free(&m->type_embed);
    mx_weight_free(&m->head_dense);
    mx_weight_free(&m->head_out);
    free(m->head_dense_b);
    free(m->head_out_b);
    m->head_dense_b = m->head_out_b = NULL;
    mx_normw_free(&m->embed_norm);
    mx_normw_free(&m->head_norm);
}
