/* Binding a checkpoint's tensors to the roles an arch description names. */
#include "model.h"
#include "../base/base.h"
#include "../quant/quant.h"
#include <stdlib.h>
#include <string.h>

static char *fmt_name(const char *pat, int layer, const char *suffix) {
    char mod[512];
    snprintf(mod, sizeof mod, pat, layer);
    return mx_asprintf("%s%s", mod, suffix);
}

/* Loads a 1-D float vector of length n as an owned f32 copy. */
static int load_vec(mx_ckpt *ck, const char *name, int n, bool required, float **out) {
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

static int load_norm(mx_ckpt *ck, const mx_norm_spec *s, const char *pat, int layer, int n, mx_normw *nw) {
    if (!pat) return MX_OK;
    int rc = MX_OK;
    if (s->weight) {
        char *nm = fmt_name(pat, layer, ".weight");
        rc = nm ? load_vec(ck, nm, n, true, &nw->w) : MX_ERR;
        free(nm);
    }
    if (!rc && s->bias) {
        char *nm = fmt_name(pat, layer, ".bias");
        rc = nm ? load_vec(ck, nm, n, true, &nw->b) : MX_ERR;
        free(nm);
    }
    return rc;
}

static int load_lin(mx_model *m, const char *pat, int layer, int rows, int cols, bool bias, mx_weight *w, float **b) {
    if (!pat) return MX_OK;
    char mod[512];
    snprintf(mod, sizeof mod, pat, layer);
    unsigned fl = m->arch.conv1d ? MX_LOAD_TRANSPOSED : 0;
    if (mx_load_weight(&m->ck, mod, rows, cols, fl, w)) return MX_ERR;
    m->weight_bytes += mx_weight_bytes(w);
    if (bias) {
        char *nm = mx_asprintf("%s.bias", mod);
        int rc = nm ? load_vec(&m->ck, nm, rows, true, b) : MX_ERR;
        free(nm);
        return rc;
    }
    return MX_OK;
}

static void free_norm(mx_normw *n) { free(n->w); free(n->b); }

void mx_model_free(mx_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int i = 0; i < m->arch.n_layers; i++) {
            mx_layer_w *L = &m->layers[i];
            free_norm(&L->attn_norm); free_norm(&L->post_attn_norm); free_norm(&L->ffn_norm);
            free_norm(&L->post_ffn_norm); free_norm(&L->q_norm); free_norm(&L->k_norm);
            mx_weight *ws[] = {&L->q, &L->k, &L->v, &L->qkv, &L->o, &L->gate, &L->up, &L->gate_up, &L->down};
            for (size_t k = 0; k < MX_ARRAY_LEN(ws); k++) mx_weight_free(ws[k]);
            float *bs[] = {L->q_b, L->k_b, L->v_b, L->qkv_b, L->o_b, L->gate_b, L->up_b, L->gate_up_b, L->down_b};
            for (size_t k = 0; k < MX_ARRAY_LEN(bs); k++) free(bs[k]);
        }
        free(m->layers);
    }
    mx_weight_free(&m->embed);
    mx_weight_free(&m->pos_embed);
    mx_weight_free(&m->lm_head);
    free(m->lm_head_b);
    free_norm(&m->final_norm);
    mx_ckpt_close(&m->ck);
    memset(m, 0, sizeof *m);
}

int mx_model_bind(mx_model *m, mx_ckpt *ck) {
    m->ck = *ck;
    memset(ck, 0, sizeof *ck);
    mx_arch *a = &m->arch;
    const mx_names *N = &a->names;
    int H = a->hidden, hd = a->head_dim, qd = a->n_heads * hd, kvd = a->n_kv_heads * hd;
    m->layers = mx_calloc((size_t)a->n_layers, sizeof(mx_layer_w));
    if (!m->layers) goto fail;
    /* Embedding tables are never transposed, whatever the linear layout. */
    bool conv = a->conv1d;
    a->conv1d = false;
    if (load_lin(m, N->embed, 0, a->vocab, H, false, &m->embed, NULL)) goto fail;
    if (!a->tied) m->weight_bytes -= mx_weight_bytes(&m->embed); /* a lookup reads one row */
    if (a->pos == MX_POS_LEARNED && load_lin(m, N->pos_embed, 0, a->max_pos + a->pos_offset, H, false, &m->pos_embed, NULL)) goto fail;
    if (!a->tied && load_lin(m, N->lm_head, 0, a->vocab, H, a->lm_head_bias, &m->lm_head, &m->lm_head_b)) goto fail;
    a->conv1d = conv;
    if (load_norm(&m->ck, &a->norm, N->final_norm, 0, H, &m->final_norm)) goto fail;
    for (int i = 0; i < a->n_layers; i++) {
        mx_layer_w *L = &m->layers[i];
        if (load_norm(&m->ck, &a->norm, N->attn_norm, i, H, &L->attn_norm) ||
            load_norm(&m->ck, &a->norm, N->post_attn_norm, i, H, &L->post_attn_norm) ||
            load_norm(&m->ck, &a->norm, N->ffn_norm, i, H, &L->ffn_norm) ||
            load_norm(&m->ck, &a->norm, N->post_ffn_norm, i, H, &L->post_ffn_norm))
            goto fail;
        if (a->qk_norm != MX_QKNORM_NONE) {
            int qn = a->qk_norm == MX_QKNORM_HEAD ? hd : qd, kn = a->qk_norm == MX_QKNORM_HEAD ? hd : kvd;
            if (load_norm(&m->ck, &a->qk_norm_spec, N->q_norm, i, qn, &L->q_norm) ||
                load_norm(&m->ck, &a->qk_norm_spec, N->k_norm, i, kn, &L->k_norm))
                goto fail;
        }
        if (N->qkv) {
            if (load_lin(m, N->qkv, i, qd + 2 * kvd, H, a->q_bias, &L->qkv, &L->qkv_b)) goto fail;
        } else if (load_lin(m, N->q, i, qd, H, a->q_bias, &L->q, &L->q_b) ||
                   load_lin(m, N->k, i, kvd, H, a->k_bias, &L->k, &L->k_b) ||
                   load_lin(m, N->v, i, kvd, H, a->v_bias, &L->v, &L->v_b))
            goto fail;
        if (load_lin(m, N->o, i, H, qd, a->o_bias, &L->o, &L->o_b)) goto fail;
        if (a->mlp == MX_MLP_GATED) {
            if (N->gate_up) {
                if (load_lin(m, N->gate_up, i, 2 * a->ffn, H, a->mlp_bias, &L->gate_up, &L->gate_up_b)) goto fail;
            } else if (load_lin(m, N->gate, i, a->ffn, H, a->mlp_bias, &L->gate, &L->gate_b) ||
                       load_lin(m, N->up, i, a->ffn, H, a->mlp_bias, &L->up, &L->up_b))
                goto fail;
        } else if (load_lin(m, N->up, i, a->ffn, H, a->mlp_bias, &L->up, &L->up_b)) goto fail;
        if (load_lin(m, N->down, i, H, a->ffn, a->mlp_bias, &L->down, &L->down_b)) goto fail;
    }
    if (mx_ckpt_check_unused(&m->ck, a->ignore, a->n_ignore)) goto fail;
    return MX_OK;
fail:
    mx_model_free(m);
    return MX_ERR;
}
