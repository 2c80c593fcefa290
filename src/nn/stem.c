/* stem: a speech encoder's input stem (arch.stem): features [n_in][frames]
 * through 1-D convolutions of kernel 3 and padding 1, each followed by the
 * activation, as im2col rows times the [out, in*3] view of the Conv1d weight
 * [out, in, 3]. */
#include "encoder.h"
#include "../base/base.h"
#include "../quant/quant.h"
#include <stdlib.h>
#include <string.h>

static int out_len(int len, int stride) { return (len + 2 - 3) / stride + 1; }

int mx_stem_rows(const mx_stem_spec *s) {
    int n = s->frames;
    for (int i = 0; i < s->n_conv; i++) n = out_len(n, s->stride[i]);
    return n;
}

size_t mx_stem_col_floats(const mx_stem_spec *s, int hidden) {
    return (size_t)s->frames * 3 * (size_t)MX_MAX(s->n_in, hidden) + (size_t)s->frames * hidden;
}

int mx_stem_bind(mx_model *m) {
    const mx_stem_spec *s = &m->arch.stem;
    int H = m->arch.hidden;
    for (int i = 0; i < s->n_conv; i++) {
        int in = i ? H : s->n_in;
        char *nm = mx_asprintf("%s.weight", s->conv[i]), *bn = mx_asprintf("%s.bias", s->conv[i]);
        mx_tensor *t = nm ? mx_ckpt_find(&m->ck, nm) : NULL, *bt = bn ? mx_ckpt_require(&m->ck, bn) : NULL;
        int rc = MX_ERR;
        if (!t) mx_set_err("%s: missing tensor '%s'", m->ck.dir, nm ? nm : s->conv[i]);
        else if (t->ndim != 3 || t->shape[0] != H || t->shape[1] != in || t->shape[2] != 3)
            mx_set_err("%s: tensor '%s' should be [%d, %d, 3]", m->ck.dir, nm, H, in);
        else if (bt && bt->numel != H) mx_set_err("%s: tensor '%s' should have %d elements", m->ck.dir, bn, H);
        else if (bt) {
            t->ndim = 2; /* the [out, in*3] matrix of the im2col rows */
            t->shape[1] = (int64_t)in * 3;
            m->stem_b[i] = mx_malloc(sizeof(float) * (size_t)H);
            rc = !m->stem_b[i] || mx_tensor_to_f32(bt, m->stem_b[i]) || mx_load_weight(&m->ck, s->conv[i], H, in * 3, 0, &m->kp, &m->stem_w[i]) ? MX_ERR : MX_OK;
        }
        free(nm);
        free(bn);
        if (rc) return MX_ERR;
    }
    return MX_OK;
}

void mx_stem_free(mx_model *m) {
    for (int i = 0; i < 2; i++) {
        mx_weight_free(&m->stem_w[i]);
        free(m->stem_b[i]);
        m->stem_b[i] = NULL;
    }
}

void mx_stem_run(const mx_model *m, mx_pool *pool, const float *feat, float *out, float *col) {
    const mx_stem_spec *s = &m->arch.stem;
    int H = m->arch.hidden, len = s->frames;
    float *mid = col + (size_t)s->frames * 3 * (size_t)MX_MAX(s->n_in, H); /* [frames][H] between the convolutions */
    mx_fwd f = {.m = m, .pool = pool};
    const float *x = feat;
    for (int i = 0; i < s->n_conv; i++) {
        int in = i ? H : s->n_in, ol = out_len(len, s->stride[i]), K = in * 3;
        for (int t = 0; t < ol; t++) {
            float *c = col + (size_t)t * K;
            for (int ci = 0; ci < in; ci++)
                for (int k = 0; k < 3; k++) {
                    int p = t * s->stride[i] + k - 1;
                    /* the features are channels-first; later inputs are rows */
                    c[ci * 3 + k] = p < 0 || p >= len ? 0 : i ? x[(size_t)p * H + ci] : x[(size_t)ci * len + p];
                }
        }
        float *y = i == s->n_conv - 1 ? out : mid;
        mx_linear(&f, &m->stem_w[i], m->stem_b[i], col, ol, K, y, H);
        for (int t = 0; t < ol; t++) mx_act_apply(s->act, y + (size_t)t * H, H);
        x = y;
        len = ol;
    }
}
