/* LAuReL (learned augmented residual layer, Gemma 3n): a low-rank branch
 * beside the attention on the same normed input, out = x + norm(right(left x)).
 * It runs as a layer's branch block (mx_layer_spec.branch, arch.laurel). */
#include "model.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_weight left, right;
    mx_normw norm;
} laurel_w;

static int laurel_load(mx_model *m, int l, void **out) {
    const mx_arch *a = &m->arch;
    const mx_laurel_spec *s = &a->laurel;
    if (s->rank < 1) return mx_set_err("%s: layer %d: a LAuReL block without a rank", m->ck.dir, l);
    laurel_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    return mx_load_lin(m, s->left, l, s->rank, a->hidden, false, &w->left, NULL) ||
                   mx_load_lin(m, s->right, l, a->hidden, s->rank, false, &w->right, NULL) ||
                   mx_load_norm(m, &a->norm, s->norm, l, a->hidden, &w->norm)
               ? MX_ERR
               : MX_OK;
}

static void laurel_free(void *p) {
    laurel_w *w = p;
    if (!w) return;
    mx_weight_free(&w->left);
    mx_weight_free(&w->right);
    mx_normw_free(&w->norm);
    free(w);
}

static size_t laurel_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer; (void)max_ctx; (void)nt;
    return (size_t)max_tokens * m->arch.laurel.rank;
}

static void laurel_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    (void)layer;
    const laurel_w *w = wp;
    const mx_arch *a = &f->m->arch;
    int N = f->N, H = a->hidden, R = a->laurel.rank;
    mx_linear(f, &w->left, NULL, in, N, H, f->scratch, R);
    mx_linear(f, &w->right, NULL, f->scratch, N, R, out, H);
    mx_norm_rows(&a->norm, &w->norm, out, out, N, H, H);
    mx_add(out, in, N * H);
}

const mx_block_ops mx_block_laurel = {
    .name = "laurel", .load = laurel_load, .free = laurel_free, .scratch_floats = laurel_scratch, .forward = laurel_forward,
};
