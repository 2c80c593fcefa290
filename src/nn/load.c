/* Binding a checkpoint's tensors to the roles an arch description names. */
#include "model.h"
#include "../base/base.h"
#include "../quant/quant.h"
#include <stdlib.h>
#include <string.h>

static bool same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static char *fmt_name(const char *pat, int layer, const char *suffix) {
    char mod[512];
    snprintf(mod, sizeof mod, pat, layer);
    return mx_asprintf("%s%s", mod, suffix);
}

static int vec_from(mx_ckpt *ck, const char *name, int n, bool required, float **out) {
    *out = NULL;
    mx_tensor *t = required ? mx_ckpt_require(ck, name) : mx_ckpt_take(ck, name);
    if (!t) return required ? MX_ERR : MX_OK;
    if (t->ndim != 1 || t->shape[0] != n)
        return mx_set_err("%s: tensor '%s' has %d dims (first %lld), expected [%d]", ck->dir, name, t->ndim,
                          (long long)(t->ndim ? t->shape[0] : 0), n);
    *out = mx_malloc((size_t)n * sizeof(float));
    if (!*out) return MX_ERR;
    return mx_tensor_to_f32(t, *out) ? mx_err_prefix("%s", ck->dir) : MX_OK;
}

int mx_load_vec(mx_model *m, const char *pat, int layer, int n, bool required, float **out) {
    char *nm = fmt_name(pat, layer, "");
    /* tensor parallelism: per-head sink logits are this part's heads */
    const mx_shard *sh = m->shard;
    const mx_attn_spec *at = layer >= 0 && layer < m->arch.n_layers ? m->arch.layers[layer].attn : NULL;
    bool heads = sh && sh->tp > 1 && at && same(pat, at->names.sinks);
    int rc = nm ? vec_from(&m->ck, nm, heads ? n * sh->tp : n, required, out) : MX_ERR;
    free(nm);
    if (!rc && heads && *out) memmove(*out, *out + (size_t)sh->tp_rank * n, (size_t)n * sizeof(float));
    return rc;
}

int mx_load_norm(mx_model *m, const mx_norm_spec *s, const char *pat, int layer, int n, mx_normw *nw) {
    if (!pat) return MX_OK;
    int rc = MX_OK;
    if (s->weight) {
        char *nm = fmt_name(pat, layer, ".weight");
        rc = nm ? vec_from(&m->ck, nm, n, true, &nw->w) : MX_ERR;
        free(nm);
    }
    if (!rc && s->bias) {
        char *nm = fmt_name(pat, layer, ".bias");
        rc = nm ? vec_from(&m->ck, nm, n, true, &nw->b) : MX_ERR;
        free(nm);
    }
    return rc;
}

/* Tensor parallelism: how the projection `pat` of a layer is split, 1 by
 * rows (q, k, v by heads; gate, up by width), 2 by columns (o, down: their
 * outputs are summed over the group), 3 by rows of each half (a fused
 * [gate | up]), 4 by rows of each of q, k, v (a fused [q | k | v]; a fused
 * qkv grouped per KV head is split as plain rows), 5 the rows of the KV
 * head a part shares with others (k, v with fewer KV heads than parts),
 * 0 not at all. */
static int tp_axis(const mx_model *m, const char *pat, int layer) {
    const mx_shard *sh = m->shard;
    if (!sh || sh->tp < 2 || layer < 0 || layer >= m->arch.n_layers) return 0;
    const mx_arch *a = &m->arch;
    const mx_attn_spec *at = a->layers[layer].attn;
    if (at && at->tp_kv_rep > 1 && (same(pat, at->names.k) || same(pat, at->names.v))) return 5;
    /* q (with its per-head output gate where fused), k, v and a gate projection of its own: by heads */
    if (at && (same(pat, at->names.q) || same(pat, at->names.k) || same(pat, at->names.v) || same(pat, at->names.gate))) return 1;
    if (at && same(pat, at->names.qkv)) return at->qkv_layout == MX_QKV_GROUPED ? 1 : 4;
    if (a->layers[layer].mixer == &mx_block_mla && (same(pat, a->mla.q_b) || same(pat, a->mla.kv_b))) return 1; /* by heads */
    if (same(pat, a->names.gate) || same(pat, a->names.up) || same(pat, a->moe.shared.gate) || same(pat, a->moe.shared.up)) return 1;
    if (same(pat, a->names.gate_up) || same(pat, a->moe.shared.gate_up)) return 3;
    if ((at && same(pat, at->names.o)) || same(pat, a->names.down) || same(pat, a->moe.shared.down)) return 2;
    return 0;
}

int mx_tp_part(const mx_model *m, int ax, const mx_weight *full, const mx_kpolicy *kp, mx_weight *w) {
    const mx_shard *sh = m->shard;
    int T = sh->tp, k = sh->tp_rank, rows = ax == 2 ? full->rows : full->rows / T, cols = ax == 2 ? full->cols / T : full->cols;
    int rc;
    memset(w, 0, sizeof *w);
    if (ax == 2) rc = mx_weight_copy_cols(full, k * cols, cols, w);
    else if (ax == 3) { /* [gate | up]: this part's rows of each half */
        int h = full->rows / 2, f = h / T, r[2][2] = {{k * f, (k + 1) * f}, {h + k * f, h + (k + 1) * f}};
        rc = mx_weight_copy_rows(full, r, 2, w);
    }
    else if (!full->owned) rc = mx_weight_slice_rows(full, k * rows, rows, w); /* a view of the checkpoint's rows */
    else { /* a converted copy: this part's rows as a copy of its own */
        size_t rb = full->row_bytes;
        uint8_t *d = mx_malloc((size_t)rows * rb);
        rc = d ? MX_OK : MX_ERR;
        if (d) {
            memcpy(d, full->data + (size_t)k * rows * rb, (size_t)rows * rb);
            *w = *full;
            w->owned = d;
            w->data = d;
            w->rows = rows;
            w->prep = NULL;
        }
    }
    if (rc) return mx_err_prefix("tensor-parallel part %d of %d", k, T);
    return mx_weight_prepare(w, kp);
}

/* a part w taken from full (rc: how that went): full freed, a failure named, w's bytes counted */
static int part_done(mx_model *m, const char *mod, mx_weight *full, int rc, const mx_weight *w) {
    mx_weight_free(full);
    if (rc) return mx_err_prefix("%s: %s", m->ck.dir, mod);
    m->weight_bytes += mx_weight_bytes(w);
    return MX_OK;
}

/* mod's whole bias (fr floats) */
static int full_bias(mx_model *m, const char *mod, int fr, float **out) {
    char *nm = mx_asprintf("%s.bias", mod);
    int rc = nm ? vec_from(&m->ck, nm, fr, true, out) : MX_ERR;
    free(nm);
    return rc;
}

/* rows ranges[0..nr) of the [fr, cols] tensor mod, in order, and of its bias */
static int load_rows(mx_model *m, const char *mod, int fr, int cols, unsigned fl, const int (*ranges)[2], int nr, bool bias, const mx_kpolicy *kp,
                     mx_weight *w, float **b) {
    mx_weight full;
    if (mx_load_weight(&m->ck, mod, fr, cols, fl, NULL, &full)) return MX_ERR;
    int rc = mx_weight_copy_rows(&full, ranges, nr, w);
    if (!rc) rc = mx_weight_prepare(w, kp);
    float *full_b = NULL;
    if (part_done(m, mod, &full, rc, w)) return MX_ERR;
    if (!bias) return MX_OK;
    if (full_bias(m, mod, fr, &full_b)) return MX_ERR;
    size_t n = 0;
    for (int i = 0; i < nr; i++) n += (size_t)(ranges[i][1] - ranges[i][0]);
    if ((*b = mx_malloc(n * sizeof(float))))
        for (size_t i = 0, o = 0; i < (size_t)nr; o += (size_t)(ranges[i][1] - ranges[i][0]), i++)
            memcpy(*b + o, full_b + ranges[i][0], (size_t)(ranges[i][1] - ranges[i][0]) * sizeof(float));
    free(full_b);
    return *b ? MX_OK : MX_ERR;
}

int mx_load_lin_rows(mx_model *m, const char *mod, int full_rows, int cols, const int (*ranges)[2], int nr, bool bias, mx_weight *w,
                     float **b) {
    return load_rows(m, mod, full_rows, cols, m->arch.conv1d ? MX_LOAD_TRANSPOSED : 0, ranges, nr, bias, &m->kp, w, b);
}

int mx_load_lin_cols(mx_model *m, const char *mod, int rows, int full_cols, int c0, int nc, bool bias, mx_weight *w, float **b) {
    mx_weight full;
    if (mx_load_weight(&m->ck, mod, rows, full_cols, m->arch.conv1d ? MX_LOAD_TRANSPOSED : 0, NULL, &full)) return MX_ERR;
    int rc = mx_weight_copy_cols(&full, c0, nc, w);
    if (!rc) rc = mx_weight_prepare(w, &m->kp);
    if (part_done(m, mod, &full, rc, w)) return MX_ERR;
    if (!bias) return MX_OK;
    if (full_bias(m, mod, rows, b)) return MX_ERR;
    if (m->shard && m->shard->tp_rank) { /* the summed output takes the bias once */
        free(*b);
        *b = NULL;
    }
    return MX_OK;
}

/* part sh->tp_rank of a projection split by tp_axis (ax), [rows, cols] being the part's */
static int load_tp_part(mx_model *m, const char *mod, int layer, int ax, int rows, int cols, bool bias, unsigned fl, const mx_kpolicy *kp,
                        mx_weight *w, float **b) {
    const mx_shard *sh = m->shard;
    int T = sh->tp, k = sh->tp_rank, fr = ax == 2 ? rows : rows * T, fc = ax == 2 ? cols * T : cols;
    const mx_attn_spec *at = m->arch.layers[layer].attn;
    int rep = at && at->tp_kv_rep > 1 ? at->tp_kv_rep : 1; /* parts per KV head: its rows are part k / rep's */
    if (ax == 4) { /* this part's rows of q, k and v in the whole [q | k | v] */
        int qd = at->n_heads * at->head_dim, kvd = at->n_kv_heads * at->head_dim, Q = qd * T, K = kvd * T / rep, kk = k / rep;
        const int r[3][2] = {{k * qd, (k + 1) * qd}, {Q + kk * kvd, Q + (kk + 1) * kvd}, {Q + K + kk * kvd, Q + K + (kk + 1) * kvd}};
        return load_rows(m, mod, Q + 2 * K, fc, fl, r, 3, bias, kp, w, b);
    }
    if (ax == 5) { /* k or v: the shared KV head's rows */
        const int r[1][2] = {{k / rep * rows, (k / rep + 1) * rows}};
        return load_rows(m, mod, rows * T / rep, fc, fl, r, 1, bias, kp, w, b);
    }
    mx_weight full;
    if (mx_load_weight(&m->ck, mod, fr, fc, fl, NULL, &full)) return MX_ERR;
    float *full_b = NULL;
    if (part_done(m, mod, &full, mx_tp_part(m, ax, &full, kp, w), w)) return MX_ERR;
    if (!bias) return MX_OK;
    if (full_bias(m, mod, fr, &full_b)) return MX_ERR;
    if (ax == 2 && k) { free(full_b); return MX_OK; } /* the summed output takes the bias once */
    if (ax == 2) { *b = full_b; return MX_OK; }
    *b = mx_malloc((size_t)rows * sizeof(float));
    if (*b && ax == 1) memcpy(*b, full_b + (size_t)k * rows, (size_t)rows * sizeof(float));
    if (*b && ax == 3) { /* the part's rows of each half */
        size_t f = (size_t)rows / 2, hf = (size_t)fr / 2;
        memcpy(*b, full_b + (size_t)k * f, f * sizeof(float));
        memcpy(*b + f, full_b + hf + (size_t)k * f, f * sizeof(float));
    }
    free(full_b);
    return *b ? MX_OK : MX_ERR;
}

/* kp: what the weight is prepared for (NULL: rows looked up, never multiplied) */
static int load_lin(mx_model *m, const char *pat, int layer, int rows, int cols, bool bias, const mx_kpolicy *kp, mx_weight *w, float **b) {
    if (!pat) return MX_OK;
    char mod[512];
    snprintf(mod, sizeof mod, pat, layer);
    unsigned fl = m->arch.conv1d ? MX_LOAD_TRANSPOSED : 0;
    int ax = tp_axis(m, pat, layer);
    if (ax) return load_tp_part(m, mod, layer, ax, rows, cols, bias, fl, kp, w, b);
    if (mx_load_weight(&m->ck, mod, rows, cols, fl, kp, w)) return MX_ERR;
    m->weight_bytes += mx_weight_bytes(w);
    if (bias) {
        char *nm = mx_asprintf("%s.bias", mod);
        int rc = nm ? vec_from(&m->ck, nm, rows, true, b) : MX_ERR;
        free(nm);
        return rc;
    }
    return MX_OK;
}

int mx_load_lin(mx_model *m, const char *pat, int layer, int rows, int cols, bool bias, mx_weight *w, float **b) {
    return load_lin(m, pat, layer, rows, cols, bias, &m->kp, w, b);
}

void mx_normw_free(mx_normw *n) {
    free(n->w);
    free(n->b);
    n->w = n->b = NULL;
}

void mx_model_free(mx_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int i = 0; i < m->arch.n_layers; i++) {
            mx_layer_w *L = &m->layers[i];
            const mx_layer_spec *ls = &m->arch.layers[i];
            mx_normw_free(&L->attn_norm); mx_normw_free(&L->post_attn_norm);
            mx_normw_free(&L->ffn_norm); mx_normw_free(&L->post_ffn_norm);
            free(L->attn_scale); free(L->ffn_scale);
            if (ls->mixer && L->mixer_w) ls->mixer->free(L->mixer_w);
            if (ls->mixer2 && L->mixer2_w) ls->mixer2->free(L->mixer2_w);
            if (ls->post && L->post_w) ls->post->free(L->post_w);
            if (ls->shortcut && L->shortcut_w) ls->shortcut->free(L->shortcut_w);
            if (ls->branch && L->branch_w) ls->branch->free(L->branch_w);
            if (ls->ffn && L->ffn_w) ls->ffn->free(L->ffn_w);
            mx_normw_free(&L->xattn_norm);
            if (ls->xattn && L->xattn_w) ls->xattn->free(L->xattn_w);
        }
        free(m->layers);
    }
    if (m->encoder) {
        mx_model_free(m->encoder);
        free(m->encoder);
    }
    mx_weight_free(&m->embed);
    mx_weight_free(&m->pos_embed);
    mx_weight_free(&m->lm_head);
    free(m->lm_head_b);
    mx_normw_free(&m->final_norm);
    mx_encoder_free(m);
    mx_ple_free(m);
    mx_altup_free(m);
    mx_mtp_free(m);
    mx_ckpt_close(&m->ck);
    mx_arch_free(&m->arch);
    memset(m, 0, sizeof *m);
}

/* A checkpoint of the bare model (e.g. Qwen3-Embedding: Qwen3Model weights
 * under a …ForCausalLM config) names tensors without the task model's first
 * component ("model.") and has no output head. When the embedding is only
 * found that way, every name with that prefix is used without it and a
 * missing lm_head is allowed (the model then embeds but cannot generate).
 * mx_names and mx_attn_names hold only const char * members, walked here as
 * arrays. */
static void strip_prefix(const char **p, size_t n, const char *prefix, size_t pl) {
    for (size_t i = 0; i < n; i++)
        if (p[i] && !strncmp(p[i], prefix, pl)) p[i] += pl;
}

static void use_bare_names(mx_model *m) {
    mx_names *N = &m->arch.names;
    const char *dot = N->embed ? strchr(N->embed, '.') : NULL;
    if (!dot) return;
    char *full = mx_asprintf("%s.weight", N->embed), *bare = mx_asprintf("%s.weight", dot + 1);
    bool use = full && bare && !mx_ckpt_find(&m->ck, full) && mx_ckpt_find(&m->ck, bare);
    free(full);
    free(bare);
    if (!use) return;
    char prefix[64];
    size_t pl = (size_t)(dot - N->embed) + 1;
    if (pl >= sizeof prefix) return;
    memcpy(prefix, N->embed, pl);
    prefix[pl] = 0;
    strip_prefix((const char **)(void *)N, sizeof *N / sizeof(char *), prefix, pl);
    for (int k = 0; k < m->arch.n_attn_specs; k++)
        strip_prefix((const char **)(void *)&m->arch.attn_specs[k]->names, sizeof(mx_attn_names) / sizeof(char *), prefix, pl);
    char *head = N->lm_head ? mx_asprintf("%s.weight", N->lm_head) : NULL;
    if (head && !mx_ckpt_find(&m->ck, head)) N->lm_head = NULL;
    free(head);
}

int mx_model_bind(mx_model *m, mx_ckpt *ck) {
    m->ck = *ck;
    memset(ck, 0, sizeof *ck);
    mx_arch *a = &m->arch;
    const mx_names *N = &a->names;
    int H = a->hidden;
    m->layers = mx_calloc((size_t)a->n_layers, sizeof(mx_layer_w));
    if (!m->layers) goto fail;
    /* xIELU has learned per-layer scalars: only the dense MLP applies it */
    if (a->moe.act == MX_ACT_XIELU || a->ssm.act == MX_ACT_XIELU || a->rglru.act == MX_ACT_XIELU || a->shared_block.act == MX_ACT_XIELU ||
        a->lightning.act == MX_ACT_XIELU) {
        mx_set_err("%s: the xielu activation is supported in dense MLPs only", m->ck.dir);
        goto fail;
    }
    /* a shortcut's output joins the next layer's residual after its ffn */
    for (int i = 0; i < a->n_layers; i++)
        if (a->layers[i].shortcut && (i + 1 == a->n_layers || a->residual != MX_RES_SEQUENTIAL || !a->layers[i].ffn || !a->layers[i + 1].ffn)) {
            mx_set_err("%s: layer %d: a shortcut block needs a sequential layer with an ffn after it", m->ck.dir, i);
            goto fail;
        }
    if (mx_ckpt_rename(&m->ck, a->renames, a->n_renames)) goto fail;
    use_bare_names(m);
    /* Embedding tables are never transposed, whatever the linear layout. */
    bool conv = a->conv1d;
    a->conv1d = false;
    /* a distributed model's part: embeddings on the first stage, the head on the one that computes the logits */
    const mx_shard *sh = m->shard;
    bool embeds = !sh || sh->embeds, head = !sh || sh->head;
    int lo, hi;
    mx_model_layers(m, &lo, &hi);
    for (int i = lo; i < hi && sh; i++) embeds |= a->layers[i].mixer && a->layers[i].mixer->reads_embed;
    /* split by vocabulary with the head (mx_shard.vocab_n): this part's rows of the table */
    int evn = sh ? sh->vocab_n : 0;
    if ((embeds || (head && a->tied)) &&
        (evn ? load_rows(m, N->embed, a->vocab, H, 0, (const int[1][2]){{sh->vocab_lo, sh->vocab_lo + evn}}, 1, false, a->tied && head ? &m->kp : NULL, &m->embed, NULL)
             : load_lin(m, N->embed, 0, a->vocab, H, false, a->tied && head ? &m->kp : NULL, &m->embed, NULL)))
        goto fail;
    if (!a->tied || !head) m->weight_bytes -= mx_weight_bytes(&m->embed); /* a lookup reads one row */
    if (a->pos == MX_POS_LEARNED && embeds) {
        if (load_lin(m, N->pos_embed, 0, a->max_pos + a->pos_offset, H, false, NULL, &m->pos_embed, NULL)) goto fail;
        m->weight_bytes -= mx_weight_bytes(&m->pos_embed);
    }
    /* a head split by vocabulary (mx_shard.vocab_n): this part's rows, a view of the table when tied */
    int vn = sh && sh->head ? sh->vocab_n : 0;
    if (head && !a->tied &&
        (vn ? load_rows(m, N->lm_head, a->vocab, H, 0, (const int[1][2]){{sh->vocab_lo, sh->vocab_lo + vn}}, 1, a->lm_head_bias, &m->kp, &m->lm_head, &m->lm_head_b)
            : mx_load_lin(m, N->lm_head, 0, a->vocab, H, a->lm_head_bias, &m->lm_head, &m->lm_head_b)))
        goto fail;
    if (head && a->tied && vn) { /* the table is already this part's rows */
        if (mx_weight_slice_rows(&m->embed, 0, vn, &m->lm_head)) goto fail;
        m->weight_bytes += mx_weight_bytes(&m->lm_head) - mx_weight_bytes(&m->embed);
    }
    a->conv1d = conv;
    if (head && mx_load_norm(m, &a->norm, N->final_norm, 0, H, &m->final_norm)) goto fail;
    for (int i = lo; i < hi; i++) {
        mx_layer_w *L = &m->layers[i];
        const mx_layer_spec *ls = &a->layers[i];
        if (mx_load_norm(m, &a->norm, ls->no_attn_norm ? NULL : N->attn_norm, i, H, &L->attn_norm) ||
            mx_load_norm(m, &a->norm, N->post_attn_norm, i, H, &L->post_attn_norm) ||
            mx_load_norm(m, &a->norm, N->ffn_norm, i, H, &L->ffn_norm) ||
            mx_load_norm(m, &a->norm, N->post_ffn_norm, i, H, &L->post_ffn_norm))
            goto fail;
        if (ls->mixer && ls->mixer->load(m, i, &L->mixer_w)) goto fail;
        if (ls->mixer2 && ls->mixer2->load(m, i, &L->mixer2_w)) goto fail;
        if (ls->branch && (ls->branch->state_floats ? mx_set_err("block %s keeps state: not a branch block", ls->branch->name)
                                                    : ls->branch->load(m, i, &L->branch_w)))
            goto fail;
        if (ls->post && (ls->post->state_floats ? mx_set_err("block %s keeps state: not a post block", ls->post->name)
                                                : ls->post->load(m, i, &L->post_w)))
            goto fail;
        if (N->layer_scale) {
            float *v = NULL;
            if (mx_load_vec(m, N->layer_scale, i, 1, true, &v)) goto fail;
            L->out_scale = v[0];
            free(v);
        }
        if ((N->attn_scale && mx_load_vec(m, N->attn_scale, i, H, true, &L->attn_scale)) ||
            (N->ffn_scale && mx_load_vec(m, N->ffn_scale, i, H, true, &L->ffn_scale)))
            goto fail;
        if (ls->shortcut && ls->shortcut->load(m, i, &L->shortcut_w)) goto fail;
        if (ls->ffn && ls->ffn->load(m, i, &L->ffn_w)) goto fail;
        if (ls->xattn) {
            if (a->residual != MX_RES_SEQUENTIAL) { mx_set_err("%s: a cross-attention layer needs the sequential residual", m->ck.dir); goto fail; }
            if (mx_load_norm(m, &a->norm, N->xattn_norm, i, H, &L->xattn_norm) || ls->xattn->load(m, i, &L->xattn_w)) goto fail;
        }
    }
    if (mx_encoder_bind(m) || mx_ple_bind(m) || mx_altup_bind(m) || mx_mtp_bind(m)) goto fail;
    /* a part of the model leaves the other parts' tensors (a single process checks the folder) */
    if (!(sh && (lo > 0 || hi < a->n_layers || !sh->embeds || !head)) && mx_ckpt_check_unused(&m->ck, a->ignore, a->n_ignore)) goto fail;
    if (a->encoder) { /* an encoder-decoder: the encoder's description over the same folder */
        mx_ckpt eck;
        if (mx_ckpt_open(m->ck.dir, true, &eck)) goto fail;
        if (!(m->encoder = mx_calloc(1, sizeof *m->encoder))) { mx_ckpt_close(&eck); goto fail; }
        m->encoder->arch = *a->encoder; /* the encoder model owns its description from here */
        memset(a->encoder, 0, sizeof *a->encoder);
        if (mx_model_bind(m->encoder, &eck)) { free(m->encoder); m->encoder = NULL; goto fail; }
    }
    return MX_OK;
fail:
    mx_model_free(m);
    return MX_ERR;
}
