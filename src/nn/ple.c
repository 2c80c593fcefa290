/* Per-layer inputs (arch.ple, Gemma 4): once per forward, every token gets
 * one small vector per layer from a second embedding table and from a
 * projection of its scaled embedding (mx_ple_inputs); then each layer whose
 * post block is mx_block_ple mixes its own vector into its output through a
 * gated bottleneck: out = norm(up(act(gate(h)) * pli_layer)). */
#include "model.h"
#include "../base/base.h"
#include <math.h>
#include <stdlib.h>

int mx_ple_bind(mx_model *m) {
    mx_arch *a = &m->arch;
    const mx_ple_spec *s = &a->ple;
    if (!s->dim) return MX_OK;
    int LP = a->n_layers * s->dim;
    if (s->vocab < a->vocab)
        return mx_set_err("%s: the per-layer input vocabulary (%d) is smaller than the vocabulary (%d)", m->ck.dir, s->vocab, a->vocab);
    bool conv = a->conv1d; /* an embedding table is never transposed */
    a->conv1d = false;
    int rc = mx_load_lin(m, s->embed, 0, s->vocab, LP, false, &m->ple_embed, NULL);
    a->conv1d = conv;
    if (rc) return MX_ERR;
    m->weight_bytes -= mx_weight_bytes(&m->ple_embed); /* a lookup reads one row */
    return mx_load_lin(m, s->proj, 0, LP, a->hidden, false, &m->ple_proj, NULL) ||
                   mx_load_norm(m, &a->norm, s->proj_norm, 0, s->dim, &m->ple_norm)
               ? MX_ERR
               : MX_OK;
}

void mx_ple_free(mx_model *m) {
    mx_weight_free(&m->ple_embed);
    mx_weight_free(&m->ple_proj);
    mx_normw_free(&m->ple_norm);
}

void mx_ple_inputs(mx_fwd *f, const float *h0, float *buf) {
    const mx_model *m = f->m;
    const mx_arch *a = &m->arch;
    int N = f->N, P = a->ple.dim, LP = a->n_layers * P;
    float *row = buf + (size_t)N * LP; /* the last row: one token's table entry */
    mx_linear(f, &m->ple_proj, NULL, h0, N, a->hidden, buf, LP);
    mx_scale(buf, 1.0f / sqrtf((float)a->hidden), N * LP); /* as HF: times hidden^-0.5 in f32 */
    mx_norm_rows(&a->norm, &m->ple_norm, buf, buf, N * a->n_layers, P, P);
    float es = sqrtf((float)P), half = (float)(1.0 / sqrt(2.0));
    for (int t = 0; t < N; t++) {
        const mx_seq_in *s = &f->seqs[f->seq_of[t]];
        mx_weight_row(&m->ple_embed, s->tokens[f->pos[t] - s->kv->len], row);
        float *o = buf + (size_t)t * LP;
        for (int i = 0; i < LP; i++) o[i] = (o[i] + row[i] * es) * half;
    }
    f->ple = buf;
}

typedef struct {
    mx_weight gate, up;
    mx_normw norm;
} ple_w;

static int ple_load(mx_model *m, int l, void **out) {
    const mx_arch *a = &m->arch;
    const mx_ple_spec *s = &a->ple;
    if (!s->dim) return mx_set_err("%s: layer %d: a per-layer input block without per-layer inputs", m->ck.dir, l);
    ple_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    return mx_load_lin(m, s->gate, l, s->dim, a->hidden, false, &w->gate, NULL) ||
                   mx_load_lin(m, s->up, l, a->hidden, s->dim, false, &w->up, NULL) ||
                   mx_load_norm(m, &a->norm, s->norm, l, a->hidden, &w->norm)
               ? MX_ERR
               : MX_OK;
}

static void ple_free(void *p) {
    ple_w *w = p;
    if (!w) return;
    mx_weight_free(&w->gate);
    mx_weight_free(&w->up);
    mx_normw_free(&w->norm);
    free(w);
}

static size_t ple_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer; (void)max_ctx; (void)nt;
    return (size_t)max_tokens * m->arch.ple.dim;
}

static void ple_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    const ple_w *w = wp;
    const mx_arch *a = &f->m->arch;
    int N = f->N, P = a->ple.dim, H = a->hidden;
    float *g = f->scratch;
    mx_linear(f, &w->gate, NULL, in, N, H, g, P);
    for (int t = 0; t < N; t++) {
        float *gt = g + (size_t)t * P;
        const float *pl = f->ple + ((size_t)t * a->n_layers + layer) * P;
        mx_act_apply(a->ple.act, gt, P);
        for (int i = 0; i < P; i++) gt[i] *= pl[i];
    }
    mx_linear(f, &w->up, NULL, g, N, P, out, H);
    mx_norm_rows(&a->norm, &w->norm, out, out, N, H, H);
}

const mx_block_ops mx_block_ple = {
    .name = "per-layer input", .load = ple_load, .free = ple_free, .scratch_floats = ple_scratch, .forward = ple_forward,
};
