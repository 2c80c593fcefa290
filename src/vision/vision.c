/* The vision side of a vision-language model (see vision.h): opening the
 * tower, projector and processor; a view's patches -> the tower (its layers
 * through the encoder) -> the projector -> rows for the text model; and the
 * per-token layout of a prompt holding images. */
#include "vision.h"
#include "grid_sample.h"
#include "qwen_vit.h"
#include "../nn/encoder.h"
#include "../quant/quant.h"
#include "../base/base.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry ---------------------------------------------------------- */

static mx_vision_family *g_vfams;

void mx_vision_register(mx_vision_family *f) {
    f->next = g_vfams;
    g_vfams = f;
}

const mx_vision_family *mx_vision_family_list(void) { return g_vfams; }

const mx_vision_family *mx_vision_family_find(const char *mt) {
    for (const mx_vision_family *f = g_vfams; f; f = f->next) {
        if (!strcmp(f->name, mt)) return f;
        for (const char *const *a = f->aliases; a && *a; a++)
            if (!strcmp(*a, mt)) return f;
    }
    return NULL;
}

/* ---- the object -------------------------------------------------------- */

#define MAX_STRINGS 96

struct mx_vision {
    mx_vision_desc d;
    mx_model tower;            /* the ViT's layers, bound from its own mx_ckpt (scope VISION) */
    mx_image_processor proc;
    char *strings[MAX_STRINGS]; /* names with the matched prefix, owned */
    int n_strings;
    const char *pfx, *ppfx;    /* the tower's and the projector's matched prefixes */
    mx_weight patch, pos, p_in, p_out, p_merge;
    float *patch_b, *cls, *p_in_b, *p_out_b, *newline;
    mx_normw p_norm;
    mx_weight downs, p_gate, p_up; /* GLU_MERGER */
    float *downs_b;
    float *pos_table;          /* pos_bicubic: [pos_side^2, D] */
    mx_normw patch_norm;
    struct { /* DeepStack mergers */
        mx_normw norm;
        mx_weight in, out;
        float *in_b, *out_b;
    } deep[MX_VISION_MAX_DEEP];
    int D, H;                  /* tower width, text hidden size */
    int pos_side;              /* pos_interp: the table's side S (S*S rows) */
    mx_enc *enc;               /* scratch for the largest image so far */
    pthread_mutex_t mu;        /* encode and cache calls, one at a time */
    struct cache_entry *cache; /* most recently used first */
    size_t cache_bytes;
    unsigned long n_encoded, n_hits;
};

typedef struct cache_entry {
    char key[65];
    int n_rows;
    float *rows;
    struct cache_entry *next;
} cache_entry;

static const char *own(mx_vision *v, char *s) {
    if (!s) return NULL;
    if (v->n_strings >= MAX_STRINGS) {
        free(s);
        mx_set_err("vision: too many tensor names");
        return NULL;
    }
    return v->strings[v->n_strings++] = s;
}

static const char *join(mx_vision *v, const char *pfx, const char *name) {
    return name ? own(v, mx_asprintf("%s%s", pfx, name)) : NULL;
}

/* A float tensor of any rank read as [rows, cols] in place (conv kernels as
 * linears: [D, C, (T,) P, P] flattened in (c, t, y, x) order). MLX stores
 * convolutions channel-last ([D, (T,) P, P, C]); that layout is copied into
 * the PyTorch order. */
static int conv_as_linear(mx_ckpt *ck, const char *name, int rows, int cols, int channels, mx_weight *w) {
    memset(w, 0, sizeof *w);
    mx_tensor *t = mx_ckpt_require(ck, name);
    if (!t) return MX_ERR;
    if (t->ndim < 2 || t->shape[0] != rows || t->numel != (int64_t)rows * cols)
        return mx_set_err("%s: tensor '%s' has %lld elements (first dim %lld), expected [%d, %d]", ck->dir, name, (long long)t->numel,
                          (long long)(t->ndim ? t->shape[0] : 0), rows, cols);
    bool mlx = t->ndim >= 4 && t->shape[t->ndim - 1] == channels && t->shape[1] != channels;
    if (!mlx && (t->dtype == MX_DT_F32 || t->dtype == MX_DT_F16 || t->dtype == MX_DT_BF16)) {
        w->fmt = t->dtype == MX_DT_F32 ? MX_W_F32 : t->dtype == MX_DT_F16 ? MX_W_F16 : MX_W_BF16;
        w->rows = rows;
        w->cols = cols;
        w->data = t->data;
        w->row_bytes = (size_t)cols * mx_dtype_size(t->dtype);
        return MX_OK;
    }
    float *src = mx_malloc(sizeof(float) * (size_t)t->numel), *dst = mx_malloc(sizeof(float) * (size_t)t->numel);
    if (!src || !dst || mx_tensor_to_f32(t, src)) {
        free(src);
        free(dst);
        return mx_err_prefix("%s: %s", ck->dir, name);
    }
    int spatial = cols / channels; /* (t,) y, x */
    for (int r = 0; r < rows; r++)
        for (int s = 0; s < spatial; s++)
            for (int c = 0; c < channels; c++)
                dst[(size_t)r * cols + (size_t)c * spatial + s] = src[(size_t)r * cols + (size_t)s * channels + c];
    free(src);
    w->fmt = MX_W_F32;
    w->rows = rows;
    w->cols = cols;
    w->owned = dst;
    w->data = (const uint8_t *)dst;
    w->row_bytes = (size_t)cols * sizeof(float);
    return MX_OK;
}

/* A plain [in, out] matrix used as x @ W (Gemma 3's mm_input_projection_weight),
 * kept transposed as a [out, in] f32 weight. */
static int matrix_transposed(mx_ckpt *ck, const char *name, int in, int out, mx_weight *w) {
    memset(w, 0, sizeof *w);
    mx_tensor *t = mx_ckpt_require(ck, name);
    if (!t) return MX_ERR;
    if (t->ndim != 2 || t->shape[0] != in || t->shape[1] != out)
        return mx_set_err("%s: tensor '%s' is not [%d, %d]", ck->dir, name, in, out);
    float *src = mx_malloc(sizeof(float) * (size_t)in * out), *dst = mx_malloc(sizeof(float) * (size_t)in * out);
    if (!src || !dst || mx_tensor_to_f32(t, src)) {
        free(src);
        free(dst);
        return mx_err_prefix("%s: %s", ck->dir, name);
    }
    for (int i = 0; i < in; i++)
        for (int o = 0; o < out; o++) dst[(size_t)o * in + i] = src[(size_t)i * out + o];
    free(src);
    *w = (mx_weight){.fmt = MX_W_F32, .rows = out, .cols = in, .data = (const uint8_t *)dst, .row_bytes = (size_t)in * 4, .owned = dst};
    return MX_OK;
}

static int load_vec(mx_ckpt *ck, const char *name, int n, float **out) {
    mx_tensor *t = mx_ckpt_require(ck, name);
    if (!t) return MX_ERR;
    if (t->numel != n) return mx_set_err("%s: tensor '%s' has %lld elements, expected %d", ck->dir, name, (long long)t->numel, n);
    *out = mx_malloc(sizeof(float) * (size_t)n);
    return *out && !mx_tensor_to_f32(t, *out) ? MX_OK : mx_err_prefix("%s: %s", ck->dir, name);
}

static bool has(const mx_ckpt *ck, const char *pfx, const char *module, const char *suffix) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s%s", pfx, module, suffix);
    return mx_ckpt_find(ck, buf) != NULL;
}

/* "<prefix of the pattern before %d><layer>.*" for a tower layer not run */
static const char *layer_glob(mx_vision *v, const char *pat, int layer) {
    const char *d = strstr(pat, "%d");
    return d ? own(v, mx_asprintf("%.*s%d.*", (int)(d - pat), pat, layer)) : NULL;
}

/* A linear module (float or quantized, as mx_load_weight binds it) and its bias. */
static int load_linear(mx_ckpt *ck, const char *module, int rows, int cols, bool bias, const mx_kpolicy *kp, mx_weight *w, float **b) {
    if (mx_load_weight(ck, module, rows, cols, 0, kp, w)) return MX_ERR;
    if (!bias) return MX_OK;
    char *nm = mx_asprintf("%s.bias", module);
    int r = nm ? load_vec(ck, nm, rows, b) : MX_ERR;
    free(nm);
    return r;
}

static int load_norm(mx_ckpt *ck, const char *module, int n, bool bias, mx_normw *nw) {
    char *w = mx_asprintf("%s.weight", module), *b = mx_asprintf("%s.bias", module);
    int r = !w || !b || load_vec(ck, w, n, &nw->w) || (bias && load_vec(ck, b, n, &nw->b)) ? MX_ERR : MX_OK;
    free(w);
    free(b);
    return r;
}

/* The projector (and LLaVA-NeXT's newline) under the first of the family's
 * projector prefixes where its input layer exists. */
static int load_projector(mx_vision *v, mx_ckpt *ck) {
    mx_vision_desc *d = &v->d;
    int D = v->D, H = v->H;
    const char *pp = NULL;
    for (int k = 0; k < MX_VISION_PREFIXES && d->proj_prefix[k] && !pp; k++)
        if (has(ck, d->proj_prefix[k], d->proj_in, d->proj == MX_VPROJ_POOL_NORM ? "" : ".weight") ||
            has(ck, d->proj_prefix[k], d->proj_in, ".scales"))
            pp = d->proj_prefix[k];
    if (!pp) return mx_set_err("%s: the projector '%s' is not found under any known prefix", ck->dir, d->proj_in);
    v->ppfx = pp;
    const char *in = join(v, pp, d->proj_in), *out = join(v, pp, d->proj_out), *norm = join(v, pp, d->proj_norm),
               *merge = join(v, pp, d->proj_merge);
    if (!in || (d->proj_out && !out) || (d->proj_norm && !norm) || (d->proj_merge && !merge)) return MX_ERR;
    int m2 = d->merge * d->merge, s2 = d->shuffle * d->shuffle;
    switch (d->proj) {
    case MX_VPROJ_MLP:
        if (load_linear(ck, in, H, D, d->proj_bias, &v->tower.kp, &v->p_in, &v->p_in_b) ||
            load_linear(ck, out, H, H, d->proj_bias, &v->tower.kp, &v->p_out, &v->p_out_b))
            return MX_ERR;
        break;
    case MX_VPROJ_LINEAR:
        if (load_linear(ck, in, H, D, d->proj_bias, &v->tower.kp, &v->p_in, &v->p_in_b)) return MX_ERR;
        break;
    case MX_VPROJ_SHUFFLE:
        if (load_linear(ck, in, H, D * s2, false, &v->tower.kp, &v->p_in, NULL)) return MX_ERR;
        break;
    case MX_VPROJ_POOL_NORM:
        if (load_norm(ck, norm, D, false, &v->p_norm) || matrix_transposed(ck, in, D, H, &v->p_in)) return MX_ERR;
        break;
    case MX_VPROJ_GLU_MERGER: { /* the downsample conv [H, D, m, m] sits beside the merger */
        const char *ds = join(v, pp, d->downsample), *g = join(v, pp, d->proj_gate), *u = join(v, pp, d->proj_up);
        char *dw = ds ? mx_asprintf("%s.weight", ds) : NULL, *db = ds ? mx_asprintf("%s.bias", ds) : NULL;
        int r = !g || !u || !dw || !db || conv_as_linear(ck, dw, H, m2 * D, D, &v->downs) || load_vec(ck, db, H, &v->downs_b);
        free(dw);
        free(db);
        if (r || load_linear(ck, in, H, H, false, &v->tower.kp, &v->p_in, NULL) || load_norm(ck, norm, H, true, &v->p_norm) ||
            load_linear(ck, g, d->proj_ctx, H, false, &v->tower.kp, &v->p_gate, NULL) ||
            load_linear(ck, u, d->proj_ctx, H, false, &v->tower.kp, &v->p_up, NULL) ||
            load_linear(ck, out, H, d->proj_ctx, false, &v->tower.kp, &v->p_out, NULL))
            return MX_ERR;
        break;
    }
    case MX_VPROJ_MERGER:
        if (load_norm(ck, norm, D, !d->proj_norm_rms, &v->p_norm) || load_linear(ck, in, m2 * D, m2 * D, true, &v->tower.kp, &v->p_in, &v->p_in_b) ||
            load_linear(ck, out, H, m2 * D, true, &v->tower.kp, &v->p_out, &v->p_out_b))
            return MX_ERR;
        break;
    case MX_VPROJ_SHUFFLE_MLP: {
        int mid = d->proj_mid ? d->proj_mid : H, oc = d->proj_glu ? mid / 2 : mid;
        if (d->proj_glu && mid % 2) return mx_set_err("%s: the projector's SwiGLU width %d is odd", ck->dir, mid);
        if (load_norm(ck, norm, D * s2, true, &v->p_norm) || load_linear(ck, in, mid, D * s2, true, &v->tower.kp, &v->p_in, &v->p_in_b) ||
            load_linear(ck, out, H, oc, true, &v->tower.kp, &v->p_out, &v->p_out_b))
            return MX_ERR;
        break;
    }
    case MX_VPROJ_PATCH_MERGE:
        if (load_norm(ck, norm, D, false, &v->p_norm) || load_linear(ck, merge, D, m2 * D, false, &v->tower.kp, &v->p_merge, NULL) ||
            load_linear(ck, in, H, D, d->proj_bias, &v->tower.kp, &v->p_in, &v->p_in_b) ||
            load_linear(ck, out, H, H, d->proj_bias, &v->tower.kp, &v->p_out, &v->p_out_b))
            return MX_ERR;
        break;
    }
    for (int k = 0; k < d->n_deep; k++) { /* DeepStack mergers: LayerNorm over the joined rows */
        char *m = mx_asprintf(d->deep_proj, k);
        const char *base = m ? join(v, v->pfx, m) : NULL;
        free(m);
        const char *dn = base ? join(v, base, "norm") : NULL, *di = base ? join(v, base, "linear_fc1") : NULL,
                   *dout = base ? join(v, base, "linear_fc2") : NULL;
        if (!dn || !di || !dout || load_norm(ck, dn, m2 * D, true, &v->deep[k].norm) ||
            load_linear(ck, di, m2 * D, m2 * D, true, &v->tower.kp, &v->deep[k].in, &v->deep[k].in_b) ||
            load_linear(ck, dout, H, m2 * D, true, &v->tower.kp, &v->deep[k].out, &v->deep[k].out_b))
            return MX_ERR;
    }
    if (d->newline[0]) {
        const char *nl = NULL;
        for (int k = 0; k < MX_VISION_PREFIXES && d->newline[k] && !nl; k++)
            if (mx_ckpt_find(ck, d->newline[k])) nl = d->newline[k];
        if (!nl) return mx_set_err("%s: missing tensor '%s'", ck->dir, d->newline[0]);
        if (load_vec(ck, nl, H, &v->newline)) return MX_ERR;
    }
    return MX_OK;
}

int mx_vision_open(const char *dir, int text_hidden, mx_vision **out) {
    *out = NULL;
    mx_ckpt ck;
    if (mx_ckpt_open(dir, true, &ck)) return MX_ERR;
    json_t *vc = json_object_get(ck.config, "vision_config");
    const char *mt = json_string_value(json_object_get(ck.config, "model_type"));
    const mx_vision_family *fam = vc && mt ? mx_vision_family_find(mt) : NULL;
    if (!fam) { /* not a vision model, or one whose vision side is not supported: text only */
        mx_ckpt_close(&ck);
        return MX_OK;
    }
    if (!json_is_object(vc)) {
        mx_ckpt_close(&ck);
        return mx_set_err("%s: vision_config: expected an object", ck.config_path);
    }
    mx_vision *v = mx_calloc(1, sizeof *v);
    if (!v) {
        mx_ckpt_close(&ck);
        return MX_ERR;
    }
    pthread_mutex_init(&v->mu, NULL);
    v->tower.kp = mx_kpolicy_default(); /* the process's policy; each encode runs it on its pool */
    mx_vision_desc *d = &v->d;
    mx_arch *a = &v->tower.arch;
    mx_cfg c = {vc, NULL, ck.config_path}, top = {ck.config, NULL, ck.config_path};
    json_t *tc = json_object_get(ck.config, "text_config");
    mx_cfg text = {ck.config, json_is_object(tc) ? tc : NULL, ck.config_path};
    d->image_token = d->vision_start = -1;
    d->proj_dim = text_hidden;
    d->channels = 3;
    d->temporal = d->merge = 1;
    v->H = text_hidden;
    if (fam->configure(d, a, &c, &top, &text)) goto fail;
    a->family = fam->name;
    v->D = a->hidden;
    /* the tower's prefix: the first under which its patch embedding exists */
    for (int k = 0; k < MX_VISION_PREFIXES && d->prefix[k] && !v->pfx; k++)
        if (has(&ck, d->prefix[k], d->patch, ".weight")) v->pfx = d->prefix[k];
    if (!v->pfx) {
        mx_set_err("%s: the vision tower's '%s' is not found under any known prefix (%s...)", dir, d->patch, d->prefix[0]);
        goto fail;
    }
    const char **nm = (const char **)(void *)&a->names, **an = (const char **)(void *)&a->attn->names;
    for (size_t i = 0; i < sizeof a->names / sizeof *nm; i++)
        if (nm[i] && !(nm[i] = join(v, v->pfx, nm[i]))) goto fail;
    for (size_t i = 0; i < sizeof a->attn->names / sizeof *an; i++)
        if (an[i] && !(an[i] = join(v, v->pfx, an[i]))) goto fail;
    for (int i = 0; i < a->n_ignore; i++)
        if (!(a->ignore[i] = join(v, v->pfx, a->ignore[i]))) goto fail;
    /* layers past the one whose output is used are not run */
    if (d->run_layers < 1 || d->run_layers > a->n_layers) {
        mx_set_err("%s: the vision feature layer selects %d of %d layers", ck.config_path, d->run_layers, a->n_layers);
        goto fail;
    }
    for (int l = d->run_layers; l < a->n_layers; l++)
        if (!a->names.attn_norm || !layer_glob(v, a->names.attn_norm, l) || mx_arch_ignore(a, v->strings[v->n_strings - 1])) goto fail;
    a->n_layers = d->run_layers;
    /* the parts outside the layers, taken from the checkpoint before the
     * layers are bound (which then finds every vision tensor used) */
    const char *patch = join(v, v->pfx, d->patch), *cls = join(v, v->pfx, d->cls), *pos = join(v, v->pfx, d->pos);
    int cols = d->channels * d->temporal * d->patch_size * d->patch_size;
    char *pw = patch ? mx_asprintf("%s.weight", patch) : NULL, *pb = patch ? mx_asprintf("%s.bias", patch) : NULL;
    int r = !pw || !pb || conv_as_linear(&ck, pw, v->D, cols, d->channels, &v->patch) ||
            (d->patch_bias && load_vec(&ck, pb, v->D, &v->patch_b));
    free(pw);
    free(pb);
    if (r || (cls && load_vec(&ck, cls, v->D, &v->cls))) goto fail;
    if (pos) {
        char *pn = mx_asprintf("%s.weight", pos);
        mx_tensor *t = pn ? mx_ckpt_find(&ck, pn) : NULL;
        int n_pos = t && t->ndim == 2 ? (int)t->shape[0] : 0;
        mx_tensor *raw = t ? NULL : mx_ckpt_find(&ck, pos); /* a bare [1, n, D] parameter (InternViT) */
        if (raw && raw->ndim == 3 && raw->shape[0] == 1 && raw->shape[2] == v->D) {
            free(pn);
            float *rows = NULL;
            n_pos = (int)raw->shape[1];
            if (load_vec(&ck, pos, n_pos * v->D, &rows)) goto fail;
            v->pos = (mx_weight){.fmt = MX_W_F32, .rows = n_pos, .cols = v->D, .data = (const uint8_t *)rows,
                                 .row_bytes = (size_t)v->D * sizeof(float), .owned = rows};
        } else {
            v->pos_side = (int)lround(sqrt((double)n_pos));
            if (n_pos < 1 || (d->pos_bicubic && ((long long)v->pos_side * v->pos_side != n_pos || t->shape[1] != v->D))) {
                mx_set_err("%s: missing or malformed position embedding '%s.weight'%s", dir, pos,
                           n_pos > 0 ? " (not a square table of tower-wide rows)" : "");
                free(pn);
                goto fail;
            }
            if (d->pos_interp && (long long)v->pos_side * v->pos_side != n_pos) {
                mx_set_err("%s: the position table '%s.weight' has %d rows, not a square number", dir, pos, n_pos);
                free(pn);
                goto fail;
            }
            r = d->pos_bicubic ? load_vec(&ck, pn, n_pos * v->D, &v->pos_table)
                               : mx_load_weight(&ck, pos, n_pos, v->D, 0, NULL, &v->pos); /* rows looked up */
            free(pn);
            if (r) goto fail;
        }
    }
    if (d->patch_norm) {
        const char *pn = join(v, v->pfx, d->patch_norm);
        if (!pn || load_norm(&ck, pn, v->D, false, &v->patch_norm)) goto fail;
    }
    if (load_projector(v, &ck)) goto fail;
    ck.scope = MX_CKPT_VISION;
    if (mx_model_bind(&v->tower, &ck)) goto fail_bound; /* takes ck; stray vision tensors refused there */
    if (mx_image_processor_load(dir, &v->proc)) goto fail_bound;
    *out = v;
    return MX_OK;
fail:
    mx_ckpt_close(&ck);
fail_bound:
    mx_vision_free(v);
    return MX_ERR;
}

void mx_vision_free(mx_vision *v) {
    if (!v) return;
    for (cache_entry *c = v->cache, *n; c; c = n) {
        n = c->next;
        free(c->rows);
        free(c);
    }
    pthread_mutex_destroy(&v->mu);
    mx_enc_free(v->enc);
    mx_model_free(&v->tower);
    mx_weight *ws[] = {&v->patch, &v->pos, &v->p_in, &v->p_out, &v->downs, &v->p_gate, &v->p_up, &v->p_merge};
    for (size_t i = 0; i < MX_ARRAY_LEN(ws); i++) mx_weight_free(ws[i]);
    free(v->patch_b);
    free(v->cls);
    free(v->p_in_b);
    free(v->p_out_b);
    free(v->newline);
    free(v->downs_b);
    free(v->pos_table);
    mx_normw_free(&v->p_norm);
    mx_normw_free(&v->patch_norm);
    for (int k = 0; k < MX_VISION_MAX_DEEP; k++) {
        mx_normw_free(&v->deep[k].norm);
        mx_weight_free(&v->deep[k].in);
        mx_weight_free(&v->deep[k].out);
        free(v->deep[k].in_b);
        free(v->deep[k].out_b);
    }
    for (int i = 0; i < v->n_strings; i++) free(v->strings[i]);
    free(v);
}

const mx_image_processor *mx_vision_processor(const mx_vision *v) { return &v->proc; }
const mx_vision_desc *mx_vision_spec(const mx_vision *v) { return &v->d; }
int mx_vision_row_floats(const mx_vision *v) { return v->H * (1 + v->d.n_deep); }

void mx_vit_attn(mx_attn_spec *s, int heads, int head_dim) {
    s->n_heads = s->n_kv_heads = heads;
    s->head_dim = head_dim;
    s->scale = 1.0f / sqrtf((float)head_dim);
    s->bidirectional = true;
}

int mx_vit_configure(mx_arch *a, const mx_cfg *vc, int hidden, int ffn, int layers, int heads, const char *act, float eps) {
    if (mx_cfg_i32(vc, "hidden_size", hidden, 1, 1 << 16, &a->hidden) || mx_cfg_i32(vc, "intermediate_size", ffn, 1, 1 << 18, &a->ffn) ||
        mx_cfg_i32(vc, "num_hidden_layers", layers, 1, MX_MAX_LAYERS, &layers) ||
        mx_cfg_i32(vc, "num_attention_heads", heads, 1, 4096, &heads) || mx_cfg_f32(vc, "layer_norm_eps", eps, 0, 1, &eps) ||
        mx_arch_act_default(a, vc, act) || mx_arch_layers(a, layers))
        return MX_ERR;
    if (a->hidden % heads) return mx_set_err("%s: vision hidden_size %d is not a multiple of num_attention_heads %d", vc->file, a->hidden, heads);
    mx_attn_spec *s = a->attn;
    mx_vit_attn(s, heads, a->hidden / heads);
    s->q_bias = s->k_bias = s->v_bias = s->o_bias = true;
    s->names = (mx_attn_names){.q = "encoder.layers.%d.self_attn.q_proj", .k = "encoder.layers.%d.self_attn.k_proj",
                               .v = "encoder.layers.%d.self_attn.v_proj", .o = "encoder.layers.%d.self_attn.out_proj"};
    a->norm = (mx_norm_spec){MX_NORM_LAYER, 0, true, true, eps};
    a->mlp = MX_MLP_PLAIN;
    a->mlp_bias = true;
    a->pos = MX_POS_NONE;
    a->embed_scale = a->logit_scale = a->residual_scale = 1;
    a->bos_id = -1;
    for (int i = 0; i < a->n_layers; i++) a->layers[i].rope = false;
    a->names = (mx_names){.attn_norm = "encoder.layers.%d.layer_norm1", .ffn_norm = "encoder.layers.%d.layer_norm2",
                          .up = "encoder.layers.%d.mlp.fc1", .down = "encoder.layers.%d.mlp.fc2"};
    return MX_OK;
}

void mx_siglip_tower(mx_vision_desc *d, mx_arch *t, const char *prefix0, const char *prefix1) {
    d->run_layers = t->n_layers;
    d->prefix[0] = prefix0;
    d->prefix[1] = prefix1;
    d->patch = "embeddings.patch_embedding";
    d->patch_bias = true;
    d->pos = "embeddings.position_embedding";
    t->names.final_norm = "post_layernorm";
    mx_arch_ignore(t, "embeddings.position_ids");
}

int mx_vision_feature_layer(const mx_cfg *top, int n_layers, int def, int *run) {
    json_t *v = mx_cfg_get(top, "vision_feature_layer");
    if (v && !json_is_integer(v)) return mx_set_err("%s: vision_feature_layer: only one layer (an integer) is supported", top->file);
    int L;
    if (mx_cfg_i32(top, "vision_feature_layer", def, -n_layers - 1, n_layers, &L)) return MX_ERR;
    *run = L >= 0 ? L : n_layers + 1 + L;
    if (*run < 1) return mx_set_err("%s: vision_feature_layer %d selects the embeddings, not a layer", top->file, L);
    return MX_OK;
}

/* ---- encoding ---------------------------------------------------------- */

/* One view [3, h, w] -> patch rows [gh*gw, 3*P*P] in (c, y, x) order, row-major over the grid. */
static void patchify(const float *chw, int h, int w, int P, float *rows) {
    int gh = h / P, gw = w / P;
    size_t plane = (size_t)h * w;
    for (int py = 0; py < gh; py++)
        for (int px = 0; px < gw; px++)
            for (int c = 0; c < 3; c++)
                for (int y = 0; y < P; y++) {
                    memcpy(rows, chw + c * plane + (size_t)(py * P + y) * w + (size_t)px * P, sizeof(float) * P);
                    rows += P;
                }
}

/* Idefics3's pixel_shuffle: [S*S, D] -> [(S/s)^2, D s^2], output (h2, w2)
 * column (hs, ws, d) from input (h2 s + hs, w2 s + ws, d). */
static void pixel_shuffle(const float *x, int S, int D, int s, float *y) {
    int S2 = S / s;
    for (int h2 = 0; h2 < S2; h2++)
        for (int w2 = 0; w2 < S2; w2++)
            for (int hs = 0; hs < s; hs++)
                for (int ws = 0; ws < s; ws++)
                    memcpy(y + ((size_t)(h2 * S2 + w2) * s * s + (size_t)hs * s + ws) * D,
                           x + ((size_t)(h2 * s + hs) * S + (size_t)(w2 * s + ws)) * D, sizeof(float) * D);
}

static int merge_rows(mx_fwd *f, const mx_norm_spec *ns, const mx_normw *nw, const mx_weight *w1, const float *b1, const mx_weight *w2,
                      const float *b2, bool post, const float *x, int n, int D, int m2, int H, float *y, float *tmp);

/* Projects one view's features [n, D] (a row-major grid gw patches wide) into
 * rows [n', H]; tmp has room for 4 n max(D, H, proj_mid) merge^2 floats.
 * Returns n'. */
static int project(mx_vision *v, mx_fwd *f, const float *x, int n, int gw, float *y, float *tmp) {
    const mx_vision_desc *d = &v->d;
    int D = v->D, H = v->H;
    switch (d->proj) {
    case MX_VPROJ_MLP:
        mx_linear(f, &v->p_in, v->p_in_b, x, n, D, tmp, H);
        mx_act_apply(d->proj_act, tmp, n * H);
        mx_linear(f, &v->p_out, v->p_out_b, tmp, n, H, y, H);
        return n;
    case MX_VPROJ_LINEAR: mx_linear(f, &v->p_in, v->p_in_b, x, n, D, y, H); return n;
    case MX_VPROJ_SHUFFLE: {
        int S = (int)lround(sqrt(n)), s = d->shuffle, n2 = n / (s * s);
        pixel_shuffle(x, S, D, s, tmp);
        mx_linear(f, &v->p_in, NULL, tmp, n2, D * s * s, y, H);
        return n2;
    }
    case MX_VPROJ_POOL_NORM: { /* AvgPool2d(k, k) over the [D, S, S] map, row-major */
        int S = (int)lround(sqrt(n)), P = (int)lround(sqrt(d->pool_tokens)), k = S / P;
        for (int py = 0; py < P; py++)
            for (int px = 0; px < P; px++) {
                float *o = tmp + (size_t)(py * P + px) * D;
                for (int c = 0; c < D; c++) {
                    float s = 0;
                    for (int dy = 0; dy < k; dy++)
                        for (int dx = 0; dx < k; dx++) s += x[((size_t)(py * k + dy) * S + (size_t)(px * k + dx)) * D + c];
                    o[c] = s / (float)(k * k);
                }
            }
        mx_norm_spec rms = {MX_NORM_RMS, 1, true, false, d->proj_norm_eps};
        mx_norm_rows(&rms, &v->p_norm, tmp, tmp, P * P, D, D);
        mx_linear(f, &v->p_in, NULL, tmp, P * P, D, y, H);
        return P * P;
    }
    case MX_VPROJ_MERGER: { /* rows are already in merge-window order */
        mx_norm_spec ln = {d->proj_norm_rms ? MX_NORM_RMS : MX_NORM_LAYER, 0, true, !d->proj_norm_rms, d->proj_norm_eps};
        return merge_rows(f, &ln, &v->p_norm, &v->p_in, v->p_in_b, &v->p_out, v->p_out_b, false, x, n, D, d->merge * d->merge, H, y, tmp);
    }
    case MX_VPROJ_GLU_MERGER: { /* rows in merge-window order; each window as a [D, m, m] map */
        int m2 = d->merge * d->merge, n2 = n / m2, C = d->proj_ctx;
        float *a = tmp + (size_t)n * D, *g = a + (size_t)n2 * H, *u = g + (size_t)n2 * C;
        for (int w = 0; w < n2; w++)
            for (int k = 0; k < m2; k++)
                for (int c = 0; c < D; c++) tmp[(size_t)w * m2 * D + (size_t)c * m2 + k] = x[((size_t)w * m2 + k) * D + c];
        mx_linear(f, &v->downs, v->downs_b, tmp, n2, m2 * D, y, H);
        mx_linear(f, &v->p_in, NULL, y, n2, H, a, H);
        mx_norm_spec ln = {MX_NORM_LAYER, 0, true, true, d->proj_norm_eps};
        mx_norm_rows(&ln, &v->p_norm, a, a, n2, H, H);
        mx_act_apply(MX_ACT_GELU, a, n2 * H);
        mx_linear(f, &v->p_gate, NULL, a, n2, H, g, C);
        mx_linear(f, &v->p_up, NULL, a, n2, H, u, C);
        mx_act_mul(d->proj_act, g, u, n2 * C);
        mx_linear(f, &v->p_out, NULL, g, n2, C, y, H);
        return n2;
    }
    case MX_VPROJ_SHUFFLE_MLP: {
        int S = (int)lround(sqrt(n)), s = d->shuffle, n2 = n / (s * s), Ds = D * s * s;
        int mid = d->proj_mid ? d->proj_mid : H, oc = d->proj_glu ? mid / 2 : mid;
        size_t W = (size_t)MX_MAX(MX_MAX(D, H), mid);
        float *h = tmp + n * W;
        mx_norm_spec ln = {MX_NORM_LAYER, 0, true, true, d->proj_norm_eps};
        pixel_shuffle(x, S, D, s, tmp);
        mx_norm_rows(&ln, &v->p_norm, tmp, tmp, n2, Ds, Ds);
        mx_linear(f, &v->p_in, v->p_in_b, tmp, n2, Ds, h, mid);
        if (d->proj_glu) { /* [x | gate] -> silu(gate) * x */
            for (int r = 0; r < n2; r++) {
                const float *xr = h + (size_t)r * mid, *g = xr + oc;
                float *o = tmp + (size_t)r * oc;
                for (int j = 0; j < oc; j++) o[j] = xr[j] * (g[j] / (1.0f + expf(-g[j])));
            }
        } else {
            mx_act_apply(d->proj_act, h, n2 * mid);
            memcpy(tmp, h, sizeof(float) * (size_t)n2 * mid);
        }
        mx_linear(f, &v->p_out, v->p_out_b, tmp, n2, oc, y, H);
        return n2;
    }
    case MX_VPROJ_PATCH_MERGE: { /* torch unfold of the [D, gh, gw] map: column d m^2 + dy m + dx */
        int m = d->merge, m2 = m * m, gh = n / gw, n2 = (gh / m) * (gw / m);
        mx_norm_spec rms = {MX_NORM_RMS, 0, true, false, d->proj_norm_eps};
        size_t W = (size_t)MX_MAX(D, H);
        float *nx = tmp, *joined = tmp + n * W, *h = joined + n * W;
        mx_norm_rows(&rms, &v->p_norm, nx, x, n, D, D);
        for (int by = 0; by < gh / m; by++)
            for (int bx = 0; bx < gw / m; bx++) {
                float *o = joined + (size_t)(by * (gw / m) + bx) * m2 * D;
                for (int dy = 0; dy < m; dy++)
                    for (int dx = 0; dx < m; dx++) {
                        const float *src = nx + ((size_t)(by * m + dy) * gw + (size_t)(bx * m + dx)) * D;
                        for (int c = 0; c < D; c++) o[(size_t)c * m2 + dy * m + dx] = src[c];
                    }
            }
        mx_linear(f, &v->p_merge, NULL, joined, n2, m2 * D, h, D);
        mx_linear(f, &v->p_in, v->p_in_b, h, n2, D, nx, H);
        mx_act_apply(d->proj_act, nx, n2 * H);
        mx_linear(f, &v->p_out, v->p_out_b, nx, n2, H, y, H);
        return n2;
    }
    }
    return 0;
}

/* LLaVA-NeXT: base rows, then the tiles' feature maps stitched into one grid,
 * unpadded to the image's aspect ratio, each row ended by image_newline. */
static int anyres_pack(const mx_vision *v, const mx_image_input *in, const float *views, int per, float *rows) {
    int H = v->H, s = (int)lround(sqrt(per)), R = in->rows * s, C = in->cols * s;
    int y0 = 0, y1 = R, x0 = 0, x1 = C;
    int oh = in->orig_h, ow = in->orig_w;
    char buf[64];
    if ((double)ow / oh > (double)C / R) {
        snprintf(buf, sizeof buf, "%.7f", oh * ((double)C / ow)); /* int(round(x, 7)) */
        int nh = (int)strtod(buf, NULL), pad = (R - nh) / 2;
        y0 = pad;
        y1 = R - pad;
    } else {
        snprintf(buf, sizeof buf, "%.7f", ow * ((double)R / oh));
        int nw = (int)strtod(buf, NULL), pad = (C - nw) / 2;
        x0 = pad;
        x1 = C - pad;
    }
    int n = per;
    if ((long long)per + (long long)(y1 - y0) * (x1 - x0 + 1) != in->n_tokens || y1 < y0 || x1 < x0)
        return -1; /* the caller reports the mismatch */
    memcpy(rows, views, sizeof(float) * (size_t)per * H);
    for (int y = y0; y < y1; y++) {
        for (int x = x0; x < x1; x++) {
            int tile = 1 + (y / s) * in->cols + x / s, at = (y % s) * s + x % s;
            memcpy(rows + (size_t)n++ * H, views + ((size_t)tile * per + at) * H, sizeof(float) * H);
        }
        memcpy(rows + (size_t)n++ * H, v->newline, sizeof(float) * H);
    }
    return n;
}

static int encode(mx_vision *v, const mx_image_input *in, mx_pool *pool, float *rows);

int mx_vision_encode(mx_vision *v, const mx_image_input *in, mx_pool *pool, float *rows) {
    pthread_mutex_lock(&v->mu);
    int r = encode(v, in, pool, rows);
    if (!r) v->n_encoded++;
    pthread_mutex_unlock(&v->mu);
    return r;
}

int mx_vision_encode_cached(mx_vision *v, const char *key, const mx_image_input *in, mx_pool *pool, float *rows) {
    size_t n = (size_t)in->n_tokens * mx_vision_row_floats(v);
    pthread_mutex_lock(&v->mu);
    for (cache_entry **p = &v->cache, *c; (c = *p); p = &c->next)
        if (!strcmp(c->key, key) && c->n_rows == in->n_tokens) {
            memcpy(rows, c->rows, sizeof(float) * n);
            *p = c->next; /* to the front */
            c->next = v->cache;
            v->cache = c;
            v->n_hits++;
            pthread_mutex_unlock(&v->mu);
            return MX_OK;
        }
    int r = encode(v, in, pool, rows);
    if (!r) v->n_encoded++;
    cache_entry *c = !r && n * sizeof(float) <= MX_VISION_CACHE_BYTES ? calloc(1, sizeof *c) : NULL;
    if (c && (c->rows = malloc(sizeof(float) * n))) {
        snprintf(c->key, sizeof c->key, "%s", key);
        c->n_rows = in->n_tokens;
        memcpy(c->rows, rows, sizeof(float) * n);
        c->next = v->cache;
        v->cache = c;
        v->cache_bytes += sizeof(float) * n;
        while (v->cache_bytes > MX_VISION_CACHE_BYTES) { /* drop the least recently used */
            cache_entry **p = &v->cache;
            while ((*p)->next) p = &(*p)->next;
            v->cache_bytes -= sizeof(float) * (size_t)(*p)->n_rows * mx_vision_row_floats(v);
            free((*p)->rows);
            free(*p);
            *p = NULL;
        }
    } else free(c);
    pthread_mutex_unlock(&v->mu);
    return r;
}

void mx_vision_counts(mx_vision *v, unsigned long *encoded, unsigned long *hits) {
    pthread_mutex_lock(&v->mu);
    *encoded = v->n_encoded;
    *hits = v->n_hits;
    pthread_mutex_unlock(&v->mu);
}

/* The merger on n rows [n, D] -> [n / m2, H]: the norm on each row, or
 * (post) on each group of m2 rows joined; linear -> GELU -> linear. tmp:
 * 2 n D floats. */
static int merge_rows(mx_fwd *f, const mx_norm_spec *ns, const mx_normw *nw, const mx_weight *w1, const float *b1, const mx_weight *w2,
                      const float *b2, bool post, const float *x, int n, int D, int m2, int H, float *y, float *tmp) {
    int n2 = n / m2;
    float *h = tmp + (size_t)n * D;
    if (post) mx_norm_rows(ns, nw, tmp, x, n2, m2 * D, m2 * D);
    else mx_norm_rows(ns, nw, tmp, x, n, D, D);
    mx_linear(f, w1, b1, tmp, n2, m2 * D, h, m2 * D);
    mx_act_apply(MX_ACT_GELU, h, n2 * m2 * D);
    mx_linear(f, w2, b2, h, n2, m2 * D, y, H);
    return n2;
}

/* Rows of merge units reordered: dst unit j = src unit perm[j] (inverse:
 * dst unit perm[j] = src unit j). */
static void permute_units(const float *src, float *dst, const int *perm, int n_units, size_t unit_floats, bool inverse) {
    for (int j = 0; j < n_units; j++) {
        size_t to = (size_t)(inverse ? perm[j] : j), from = (size_t)(inverse ? j : perm[j]);
        memcpy(dst + to * unit_floats, src + from * unit_floats, sizeof(float) * unit_floats);
    }
}

static int encode(mx_vision *v, const mx_image_input *in, mx_pool *pool, float *rows) {
    const mx_vision_desc *d = &v->d;
    int D = v->D, H = v->H, P = d->patch_size, cls = v->cls ? 1 : 0, nd = d->n_deep, RW = mx_vision_row_floats(v);
    bool grid = v->proc.layout == MX_IP_LAYOUT_PATCHIFY;
    int nv = grid ? 1 : in->n_views, np = grid ? in->grid_t * in->grid_h * in->grid_w : (in->h / P) * (in->w / P);
    int per = np + cls, cols = d->channels * d->temporal * P * P, m = d->merge, m2 = m * m;
    if (grid ? (int)in->n_values != np * cols : (in->h % P || in->w % P))
        return mx_set_err("vision: the processor's output does not match the tower's %d-pixel patches", P);
    if (grid && (in->grid_h % m || in->grid_w % m)) return mx_set_err("vision: a %dx%d patch grid is not a multiple of the merge size %d", in->grid_h, in->grid_w, m);
    if (v->pos.fmt && !d->pos_interp && per > v->pos.rows)
        return mx_set_err("vision: %d positions per view, the tower has %d", per, v->pos.rows);
    if ((nd || d->window) && !grid) return mx_set_err("vision: windows and DeepStack need the patch-grid layout");
    if (v->pos.fmt && cls && per != v->pos.rows) /* CLIP, InternViT: HF interpolates or refuses; not ported */
        return mx_set_err("vision: a %dx%d view has %d positions, the tower's table %d (interpolated positions are not supported)", in->w,
                          in->h, per, v->pos.rows);
    if (d->max_side && (in->h / P > d->max_side || in->w / P > d->max_side))
        return mx_set_err("vision: a %dx%d view has more patches per side than the tower's %d", in->w, in->h, d->max_side);
    if ((d->proj == MX_VPROJ_SHUFFLE || d->proj == MX_VPROJ_SHUFFLE_MLP) && (in->h != in->w || (in->h / P) % d->shuffle))
        return mx_set_err("vision: a %dx%d view is not a square of patches in whole %dx%d blocks (pixel shuffle)", in->w, in->h, d->shuffle,
                          d->shuffle);
    if (d->merge > 1 && !grid && ((in->h / P) % d->merge || (in->w / P) % d->merge))
        return mx_set_err("vision: a %dx%d view is not a whole number of %dx%d patch blocks", in->w, in->h, d->merge, d->merge);
    int N = nv * per, r = MX_ERR;
    if (!v->enc || mx_enc_max_tokens(v->enc) < N) {
        mx_enc_free(v->enc);
        if (!(v->enc = mx_enc_new(&v->tower, N, pool))) return MX_ERR;
    }
    size_t big = (size_t)N * (size_t)MX_MAX(MX_MAX(MX_MAX(D, H), cols), MX_MAX(d->proj_ctx, d->proj_mid)) * (size_t)MX_MAX(4, m2) + (size_t)4 * D;
    int units = grid ? np / m2 : 0, n_win = 0;
    float *emb = mx_malloc(sizeof(float) * (size_t)N * D), *hid = mx_malloc(sizeof(float) * (size_t)N * D),
          *tmp = mx_malloc(sizeof(float) * big), *proj = mx_malloc(sizeof(float) * (size_t)N * H * (1 + nd));
    float *deep = nd ? mx_malloc(sizeof(float) * (size_t)nd * N * D) : NULL;
    int *mpos = grid || d->max_side ? mx_malloc(sizeof(int) * 2 * (size_t)np) : NULL;
    int *perm = d->window ? mx_malloc(sizeof(int) * (size_t)units) : NULL, *wlen = d->window ? mx_malloc(sizeof(int) * (size_t)units) : NULL;
    int *capture = nd ? mx_malloc(sizeof(int) * (size_t)v->tower.arch.n_layers) : NULL;
    mx_enc_seq *seqs = mx_calloc((size_t)nv, sizeof(mx_enc_seq));
    if (!emb || !hid || !tmp || !proj || !seqs || ((grid || d->max_side) && !mpos) || (nd && (!deep || !capture)) || (d->window && (!perm || !wlen))) goto done;
    mx_fwd f = {.m = &v->tower, .pool = pool};
    if (grid) { /* 2-D rope: each patch row's (row, column) in merge-window order */
        int gw = in->grid_w;
        for (int i = 0; i < np; i++) { /* frame by frame */
            int win = i / m2 % (units / in->grid_t), in_w = i % m2, bh = win / (gw / m), bw = win % (gw / m);
            mpos[i] = bh * m + in_w / m;
            mpos[np + i] = bw * m + in_w % m;
        }
    } else if (d->max_side) { /* 2-D rope: (row, column) of the row-major grid, the same for every view */
        int gw = in->w / P;
        for (int i = 0; i < np; i++) {
            mpos[i] = i / gw;
            mpos[np + i] = i % gw;
        }
    }
    /* embeddings: patches @ W (+ b) (normed), CLS first, learned positions added */
    for (int k = 0; k < nv; k++) {
        float *e = emb + (size_t)k * per * D;
        const float *patches = in->pixels;
        if (!grid) {
            patchify(in->pixels + (size_t)k * 3 * in->h * in->w, in->h, in->w, P, tmp);
            patches = tmp;
        }
        if (cls) memcpy(e, v->cls, sizeof(float) * D);
        mx_linear(&f, &v->patch, v->patch_b, patches, np, cols, e + (size_t)cls * D, D);
        if (d->patch_norm) {
            mx_norm_spec rms = {MX_NORM_RMS, 0, true, false, d->patch_norm_eps};
            mx_norm_rows(&rms, &v->patch_norm, e + (size_t)cls * D, e + (size_t)cls * D, np, D, D);
        }
        if (v->pos_table && grid)
            for (int i = 0; i < np; i++)
                mx_grid_sample_bicubic_add(v->pos_table, v->pos_side, D, in->grid_h, in->grid_w, mpos[i], mpos[np + i], e + (size_t)i * D);
        if (v->pos.fmt && d->pos_interp) { /* one frame's table, repeated over the frames */
            int hw = in->grid_h * in->grid_w;
            mx_qwen_pos_interp(&v->pos, v->pos_side, in->grid_h, in->grid_w, m, tmp, tmp + (size_t)hw * D);
            for (int i = 0; i < per; i++) mx_add(e + (size_t)i * D, tmp + (size_t)(i % hw) * D, D);
        } else if (v->pos.fmt)
            for (int i = 0; i < per; i++) {
                mx_weight_row(&v->pos, i, tmp);
                mx_add(e + (size_t)i * D, tmp, D);
            }
        seqs[k] = (mx_enc_seq){.n = per, .embeds = e};
    }
    if (grid) seqs[0].mpos = mpos;
    else if (d->max_side)
        for (int k = 0; k < nv; k++) seqs[k].mpos = mpos;
    mx_enc_plan plan = {0};
    if (d->window) { /* units in window order, frame by frame; their rows and positions with them */
        int per_frame = units / in->grid_t;
        for (int t = 0; t < in->grid_t; t++) {
            int w0 = n_win;
            n_win += mx_qwen_windows(in->grid_h / m, in->grid_w / m, d->window, perm + (size_t)t * per_frame, wlen + n_win);
            for (int j = 0; j < per_frame; j++) perm[t * per_frame + j] += t * per_frame;
            for (int k = w0; k < n_win; k++) wlen[k] *= m2;
        }
        permute_units(emb, tmp, perm, units, (size_t)m2 * D, false);
        memcpy(emb, tmp, sizeof(float) * (size_t)np * D);
        int *ip = (int *)(void *)tmp;
        for (int a = 0; a < 2; a++) {
            for (int j = 0; j < units; j++)
                for (int q = 0; q < m2; q++) ip[j * m2 + q] = mpos[a * np + perm[j] * m2 + q];
            memcpy(mpos + (size_t)a * np, ip, sizeof(int) * (size_t)np);
        }
        plan.windowed = d->windowed;
        plan.win_len = wlen;
        plan.n_win = n_win;
    }
    if (nd) {
        for (int l = 0; l < v->tower.arch.n_layers; l++) capture[l] = -1;
        for (int k = 0; k < nd; k++) capture[d->deep_layer[k]] = k;
        plan.capture = capture;
        plan.captured = deep;
    }
    if (d->window || nd ? mx_encode_plan(v->enc, &seqs[0], &plan, hid) : mx_encode(v->enc, seqs, nv, hid)) goto done;
    if (d->window) { /* back to merge-unit order */
        permute_units(hid, tmp, perm, units, (size_t)m2 * D, true);
        memcpy(hid, tmp, sizeof(float) * (size_t)np * D);
        for (int k = 0; k < nd; k++) {
            permute_units(deep + (size_t)k * np * D, tmp, perm, units, (size_t)m2 * D, true);
            memcpy(deep + (size_t)k * np * D, tmp, sizeof(float) * (size_t)np * D);
        }
    }
    /* per view: drop CLS, project */
    int n_out = 0, per_out = 0;
    for (int k = 0; k < nv; k++) {
        const float *x = hid + ((size_t)k * per + (d->drop_cls ? cls : 0)) * D;
        int n = d->drop_cls ? np : per;
        per_out = project(v, &f, x, n, grid ? in->grid_w : in->w / P, proj + (size_t)n_out * H, tmp);
        n_out += per_out;
    }
    int total = n_out;
    if (d->newline[0]) total = anyres_pack(v, in, proj, per_out, rows);
    else if (n_out <= in->n_tokens && !nd) memcpy(rows, proj, sizeof(float) * (size_t)n_out * H);
    if (total != in->n_tokens) {
        mx_set_err("vision: the tower gives %d image rows, the prompt holds %d image tokens", total, in->n_tokens);
        goto done;
    }
    if (nd) { /* each row: the merger's, then each DeepStack merger's */
        mx_norm_spec ln = {MX_NORM_LAYER, 0, true, true, d->proj_norm_eps};
        for (int k = 0; k < nd; k++)
            merge_rows(&f, &ln, &v->deep[k].norm, &v->deep[k].in, v->deep[k].in_b, &v->deep[k].out, v->deep[k].out_b, true,
                       deep + (size_t)k * np * D, np, D, m2, H, proj + (size_t)(k + 1) * n_out * H, tmp);
        for (int i = 0; i < n_out; i++)
            for (int k = 0; k <= nd; k++) memcpy(rows + (size_t)i * RW + (size_t)k * H, proj + ((size_t)k * n_out + i) * H, sizeof(float) * H);
    }
    if (d->rows_div_sqrt) {
        float s = (float)sqrt((double)H);
        for (size_t i = 0; i < (size_t)total * H; i++) rows[i] /= s;
    }
    r = MX_OK;
done:
    free(emb);
    free(hid);
    free(tmp);
    free(proj);
    free(deep);
    free(mpos);
    free(perm);
    free(wlen);
    free(capture);
    free(seqs);
    return r;
}

/* ---- the prompt's layout ----------------------------------------------- */

void mx_vision_layout_free(mx_vision_layout *lay) {
    free(lay->embed_row);
    free(lay->span_lo);
    free(lay->span_hi);
    free(lay->mpos);
    memset(lay, 0, sizeof *lay);
}

int mx_vision_layout_make(const mx_vision *v, const int32_t *ids, int n, const mx_image_input *imgs, int n_images,
                          mx_vision_layout *lay) {
    const mx_vision_desc *d = &v->d;
    memset(lay, 0, sizeof *lay);
    lay->n = n;
    lay->n_deep = d->n_deep;
    lay->embed_row = mx_malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!lay->embed_row) return MX_ERR;
    int want = 0, got = 0;
    for (int i = 0; i < n_images; i++) want += imgs[i].n_tokens;
    for (int i = 0; i < n; i++) lay->embed_row[i] = ids[i] == d->image_token ? got++ : -1;
    if (got != want) {
        mx_vision_layout_free(lay);
        return mx_set_err("the prompt holds %d image tokens, its %d image%s %d", got, n_images, n_images == 1 ? " gives" : "s give", want);
    }
    if (d->mask != MX_VMASK_CAUSAL && n_images) {
        lay->span_lo = mx_calloc((size_t)n, sizeof(int));
        lay->span_hi = mx_calloc((size_t)n, sizeof(int));
        if (!lay->span_lo || !lay->span_hi) goto fail;
        for (int i = 0; i < n; i++) {
            if (d->mask == MX_VMASK_PREFIX) {
                lay->span_hi[i] = n;
                continue;
            }
            if (ids[i] != d->image_token) continue;
            int j = i;
            while (j < n && ids[j] == d->image_token) j++;
            for (int k = i; k < j; k++) {
                lay->span_lo[k] = i;
                lay->span_hi[k] = j;
            }
            i = j - 1;
        }
    }
    if (d->mrope) {
        mx_grid_thw g[64];
        if (n_images > 64) {
            mx_set_err("at most 64 images per prompt");
            goto fail;
        }
        for (int i = 0; i < n_images; i++) g[i] = (mx_grid_thw){imgs[i].grid_t, imgs[i].grid_h, imgs[i].grid_w};
        lay->mpos = mx_malloc(sizeof(int) * 3 * (size_t)(n ? n : 1));
        int32_t delta = 0;
        if (!lay->mpos || mx_mrope_positions(ids, n, d->image_token, d->vision_start, g, n_images, d->merge, lay->mpos, &delta))
            goto fail;
        lay->rope_shift = delta;
    }
    return MX_OK;
fail:
    mx_vision_layout_free(lay);
    return MX_ERR;
}
