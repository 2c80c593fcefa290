/* Mixture-of-experts ffn block (arch.moe): a router (its logits optionally
 * soft-capped) picks top_k experts per token (softmax, top-k-then-softmax,
 * sigmoid with correction bias and group limit, sparsemixer), the chosen
 * experts' outputs are summed with their weights, plus an optional shared
 * expert with an optional sigmoid gate and scale.
 *
 * Tokens are grouped by expert: the rows routed to expert e are gathered into
 * one block and run through e's weights with one matmul per projection, so a
 * forward reads each used expert's weights once (prefill), and a decode step
 * reads only the routed experts. Expert tensors are bound per expert or as
 * views into one stacked tensor (quant/load.c: mx_load_weight_stacked). */
#include "moe.h"
#include "../base/base.h"
#include "../quant/quant.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { P_GATE, P_UP, P_GATE_UP, P_DOWN, P_N };

typedef struct {
    mx_weight w[P_N];
    float *b[P_N];
} expert_w;

typedef struct {
    mx_weight router, shared_gate;
    float *router_b, *score_bias, *shared_gate_b;
    int E;
    expert_w *ex;           /* E routed experts (views into whole[] when stacked) */
    mx_weight whole[P_N];   /* stacked storage */
    float *bias[P_N];       /* routed expert biases, [E][rows] */
    size_t *ex_bytes;       /* per expert */
    expert_w shared;
    bool has_shared;
    mx_moe_stats stats;
} moe_w;

/* ---- routing ---- */

/* Indices of the k largest vals (skipping NaN), largest first; ties keep the
 * lower index. */
static void topk(const float *vals, int n, int k, int *idx) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int q = 0; q < j; q++) taken |= idx[q] == i;
            if (taken || vals[i] != vals[i]) continue;
            if (best < 0 || vals[i] > vals[best]) best = i;
        }
        idx[j] = best < 0 ? 0 : best;
    }
}

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* PhiMoE sparsemixer (inference): the winner's weight is its softmax over the
 * experts whose logit is within a relative 2*eps of the max; the runner-up's
 * likewise with the winner masked out. */
static void sparsemixer(const float *s, int E, float eps, int *idx, float *w, float *tmp) {
    int first = -1;
    for (int r = 0; r < 2; r++) {
        int best = -1;
        for (int i = 0; i < E; i++)
            if (i != first && (best < 0 || s[i] > s[best])) best = i;
        float m = s[best], mx = -INFINITY;
        for (int i = 0; i < E; i++) {
            float factor = fmaxf(fabsf(s[i]), m);
            bool masked = i == first || (m - s[i]) / factor > 2 * eps;
            tmp[i] = masked ? -INFINITY : s[i];
            if (tmp[i] > mx) mx = tmp[i];
        }
        float sum = 0;
        for (int i = 0; i < E; i++) {
            tmp[i] = tmp[i] == -INFINITY ? 0 : expf(tmp[i] - mx);
            sum += tmp[i];
        }
        idx[r] = best;
        w[r] = tmp[best] / sum;
        first = best;
    }
}

void mx_moe_route(const mx_moe_spec *s, const float *logits, const float *score_bias, int *idx, float *w, float *tmp) {
    int E = s->n_experts + s->n_zero, K = s->top_k; /* identity experts are routed like the others */
    switch (s->route) {
    case MX_ROUTE_TOPK_SOFTMAX:
        topk(logits, E, K, idx);
        for (int k = 0; k < K; k++) w[k] = logits[idx[k]];
        mx_softmax(w, K);
        break;
    case MX_ROUTE_SOFTMAX:
    case MX_ROUTE_SIGMOID: {
        float *sc = tmp, *choice = tmp + E;
        if (s->route == MX_ROUTE_SOFTMAX) {
            memcpy(sc, logits, (size_t)E * sizeof(float));
            mx_softmax(sc, E);
        } else
            for (int i = 0; i < E; i++) sc[i] = sigmoidf(logits[i]);
        for (int i = 0; i < E; i++) choice[i] = sc[i] + (score_bias ? score_bias[i] : 0.0f);
        if (s->n_group > 1 && s->topk_group < s->n_group) {
            int G = s->n_group, gs = E / G, gsel[64], top2[2];
            float gscore[64];
            for (int g = 0; g < G; g++) {
                int nt = s->group_max ? 1 : gs < 2 ? gs : 2;
                topk(choice + g * gs, gs, nt, top2);
                gscore[g] = 0;
                for (int q = 0; q < nt; q++) gscore[g] += choice[g * gs + top2[q]];
            }
            topk(gscore, G, s->topk_group, gsel);
            for (int g = 0; g < G; g++) {
                bool keep = false;
                for (int q = 0; q < s->topk_group; q++) keep |= gsel[q] == g;
                if (!keep)
                    for (int i = 0; i < gs; i++) choice[g * gs + i] = s->group_mask_inf ? -INFINITY : 0.0f; /* as HF: 0 (V3) or -inf */
            }
        }
        topk(choice, E, K, idx);
        for (int k = 0; k < K; k++) w[k] = sc[idx[k]];
        break;
    }
    case MX_ROUTE_SPARSEMIXER:
        sparsemixer(logits, E, s->jitter_eps, idx, w, tmp);
        break;
    }
    if (s->norm_p > 0) {
        float d = 0;
        if (s->norm_p == 1.0f) for (int k = 0; k < K; k++) d += fabsf(w[k]);
        else {
            for (int k = 0; k < K; k++) d += powf(fabsf(w[k]), s->norm_p);
            d = powf(d, 1.0f / s->norm_p);
        }
        d += s->norm_eps;
        if (d < s->norm_min) d = s->norm_min;
        for (int k = 0; k < K; k++) w[k] /= d;
    }
    if (s->routed_scale != 0.0f && s->routed_scale != 1.0f)
        for (int k = 0; k < K; k++) w[k] *= s->routed_scale;
}

/* ---- loading ---- */

static int count_d(const char *pat) {
    int n = 0;
    for (const char *p = pat; (p = strstr(p, "%d")); p += 2) n++;
    return n;
}

static bool module_exists(const mx_ckpt *ck, const char *pat, int layer) {
    char mod[512], nm[540];
    snprintf(mod, sizeof mod, pat, layer, 0);
    snprintf(nm, sizeof nm, "%s.weight", mod);
    if (mx_ckpt_find(ck, nm) || mx_ckpt_find(ck, mod)) return true;
    snprintf(nm, sizeof nm, "%s_blocks", mod); /* HF MXFP4 */
    return mx_ckpt_find(ck, nm) != NULL;
}

/* Stacked bias: tensor module.bias or module_bias, [E, rows] or [E*rows]. */
static int load_stacked_bias(mx_ckpt *ck, const char *mod, int E, int rows, float *out) {
    char *a = mx_asprintf("%s.bias", mod), *b = mx_asprintf("%s_bias", mod);
    if (!a || !b) { free(a); free(b); return MX_ERR; }
    mx_tensor *t = mx_ckpt_take(ck, a);
    if (!t) t = mx_ckpt_take(ck, b);
    int rc = MX_OK;
    if (!t) rc = mx_set_err("%s: missing expert bias '%s' (or '%s')", ck->dir, a, b);
    else if (t->numel != (int64_t)E * rows || t->ndim > 2 || (t->ndim == 2 && t->shape[0] != E))
        rc = mx_set_err("%s: tensor '%s' has %lld elements, expected [%d, %d]", ck->dir, t->name, (long long)t->numel, E, rows);
    else if (mx_tensor_to_f32(t, out)) rc = mx_err_prefix("%s", ck->dir);
    free(a);
    free(b);
    return rc;
}

/* The selection bias: [E], or [1, E] (ERNIE's moe_statics). */
static int load_score_bias(mx_model *m, const char *pat, int layer, int E, float **out) {
    char nm[512];
    snprintf(nm, sizeof nm, pat, layer);
    mx_tensor *t = mx_ckpt_require(&m->ck, nm);
    if (!t) return MX_ERR;
    if (t->numel != E || t->ndim < 1 || t->ndim > 2 || (t->ndim == 2 && t->shape[0] != 1))
        return mx_set_err("%s: tensor '%s' has %lld elements, expected [%d] or [1, %d]", m->ck.dir, nm, (long long)t->numel, E, E);
    if (!(*out = mx_malloc((size_t)E * sizeof(float)))) return MX_ERR;
    return mx_tensor_to_f32(t, *out) ? mx_err_prefix("%s", m->ck.dir) : MX_OK;
}

/* Tensor parallelism (m->shard): every expert's width is split; rows and
 * cols are the part's. The checkpoint's projections are bound whole,
 * unprepared, then each expert's part taken (views of gate/up rows, copies of
 * down columns), and the biases cut alike (down's kept by part 0 only):
 * experts [first, first + n), full_b their whole biases from expert first. */
static int tp_experts(mx_model *m, moe_w *w, int p, int rows, int first, int n, const float *full_b) {
    const mx_shard *sh = m->shard;
    /* a fused gate_up: interleaved rows (g, u pairs) split as plain rows, [gate | up] by each half */
    int ax = p == P_DOWN ? 2 : p == P_GATE_UP && !m->arch.moe.gate_up_interleaved ? 3 : 1;
    for (int e = first; e < first + n; e++) {
        mx_weight part;
        if (mx_tp_part(m, ax, &w->ex[e].w[p], &m->kp, &part)) return MX_ERR;
        mx_weight_free(&w->ex[e].w[p]); /* a view (of the stacked tensor or the mmap) or a copy the part no longer needs */
        w->ex[e].w[p] = part;
        if (!full_b) continue;
        float *dst = w->bias[p] + (size_t)e * rows;
        if (ax == 2 && sh->tp_rank) memset(dst, 0, (size_t)rows * sizeof(float));
        else if (ax == 2) memcpy(dst, full_b + (size_t)(e - first) * rows, (size_t)rows * sizeof(float));
        else if (ax == 1) memcpy(dst, full_b + ((size_t)(e - first) * sh->tp + (size_t)sh->tp_rank) * rows, (size_t)rows * sizeof(float));
        else { /* the part's rows of each half of [gate | up] */
            size_t f = (size_t)rows / 2, src = (size_t)(e - first) * sh->tp * rows;
            memcpy(dst, full_b + src + (size_t)sh->tp_rank * f, f * sizeof(float));
            memcpy(dst + f, full_b + src + (size_t)sh->tp * f + (size_t)sh->tp_rank * f, f * sizeof(float));
        }
    }
    return MX_OK;
}

/* Binds projection p of every routed expert from pattern pat. */
static int load_proj(mx_model *m, moe_w *w, const char *pat, int layer, int p, int rows, int cols, bool transposed, bool bias) {
    const mx_moe_spec *s = &m->arch.moe;
    int E = s->n_experts;
    /* tensor parallelism: bind the whole projections, then take this part of each (tp_experts) */
    int T = m->shard && m->shard->tp > 1 ? m->shard->tp : 1, lrows = rows;
    const mx_kpolicy *kp = T > 1 ? NULL : &m->kp;
    if (T > 1) {
        if (p == P_DOWN) cols *= T;
        else rows *= T;
    }
    unsigned fl = transposed ? MX_LOAD_TRANSPOSED : 0;
    char mod[512];
    if (bias) {
        w->bias[p] = mx_malloc((size_t)E * lrows * sizeof(float));
        if (!w->bias[p]) return MX_ERR;
        for (int e = 0; e < E; e++) w->ex[e].b[p] = w->bias[p] + (size_t)e * lrows;
    }
    if (count_d(pat) >= 2) {
        for (int e = 0; e < E; e++) {
            snprintf(mod, sizeof mod, pat, layer, e);
            if (mx_load_weight(&m->ck, mod, rows, cols, fl, kp, &w->ex[e].w[p])) return MX_ERR;
            float *b = NULL;
            if (bias) {
                char *nm = mx_asprintf("%s.bias", mod);
                int rc = nm ? mx_load_vec(m, nm, 0, rows, true, &b) : MX_ERR;
                free(nm);
                if (rc) return MX_ERR;
                if (T == 1) memcpy(w->bias[p] + (size_t)e * rows, b, (size_t)rows * sizeof(float));
            }
            int rc = T > 1 ? tp_experts(m, w, p, lrows, e, 1, b) : MX_OK;
            free(b);
            if (rc) return MX_ERR;
        }
        return MX_OK;
    }
    snprintf(mod, sizeof mod, pat, layer);
    /* a stacked tensor may also hold rows for the identity experts (LongCat's gate_up_proj): unused */
    int n = E;
    if (s->n_zero > 0) {
        char *wn = mx_asprintf("%s.weight", mod);
        const mx_tensor *t = wn ? mx_ckpt_find(&m->ck, wn) : NULL;
        free(wn);
        if (!t) t = mx_ckpt_find(&m->ck, mod);
        if (t && t->ndim == 3 && t->shape[0] == (int64_t)E + s->n_zero) n = E + s->n_zero;
    }
    mx_weight *views = mx_calloc((size_t)n, sizeof(mx_weight));
    if (!views) return MX_ERR;
    int rc = mx_load_weight_stacked(&m->ck, mod, n, rows, cols, fl, kp, &w->whole[p], views);
    if (!rc) for (int e = 0; e < E; e++) w->ex[e].w[p] = views[e];
    for (int e = E; e < n; e++) mx_weight_free(&views[e]); /* the zero experts' views: what prepare made for them */
    free(views);
    if (!rc && bias && T == 1) rc = load_stacked_bias(&m->ck, mod, E, rows, w->bias[p]);
    if (!rc && T > 1) {
        float *fb = bias ? mx_malloc((size_t)E * rows * sizeof(float)) : NULL;
        rc = bias && (!fb || load_stacked_bias(&m->ck, mod, E, rows, fb)) ? MX_ERR : tp_experts(m, w, p, lrows, 0, E, fb);
        free(fb);
    }
    return rc;
}

static int load_experts(mx_model *m, moe_w *w, const mx_expert_names *nm, int layer, bool bias) {
    const mx_moe_spec *s = &m->arch.moe;
    int H = m->arch.hidden, F = s->ffn;
    if (nm->gate_up) {
        if (load_proj(m, w, nm->gate_up, layer, P_GATE_UP, 2 * F, H, nm->transposed & MX_EXP_T_GATE_UP, bias)) return MX_ERR;
    } else {
        if (s->gated && load_proj(m, w, nm->gate, layer, P_GATE, F, H, nm->transposed & MX_EXP_T_GATE, bias)) return MX_ERR;
        if (load_proj(m, w, nm->up, layer, P_UP, F, H, nm->transposed & MX_EXP_T_UP, bias)) return MX_ERR;
    }
    return load_proj(m, w, nm->down, layer, P_DOWN, H, F, nm->transposed & MX_EXP_T_DOWN, bias);
}

static void moe_free(void *p) {
    moe_w *w = p;
    if (!w) return;
    if (w->ex)
        for (int e = 0; e < w->E; e++)
            for (int q = 0; q < P_N; q++) mx_weight_free(&w->ex[e].w[q]);
    for (int q = 0; q < P_N; q++) {
        mx_weight_free(&w->whole[q]);
        free(w->bias[q]);
        mx_weight_free(&w->shared.w[q]);
        free(w->shared.b[q]);
    }
    mx_weight_free(&w->router);
    mx_weight_free(&w->shared_gate);
    free(w->router_b);
    free(w->score_bias);
    free(w->shared_gate_b);
    free(w->ex);
    free(w->ex_bytes);
    free(w);
}

static int moe_load(mx_model *m, int layer, void **out) {
    const mx_arch *a = &m->arch;
    const mx_moe_spec *s = &a->moe;
    int H = a->hidden, E = s->n_experts, Et = E + s->n_zero; /* routed: the real experts and the identity ones */
    if (E < 1 || s->n_zero < 0 || Et > MX_MAX_EXPERTS) return mx_set_err("%s: %d experts (+%d identity) is out of range (1..%d)", m->ck.dir, E, s->n_zero, MX_MAX_EXPERTS);
    if (s->top_k < 1 || s->top_k > Et) return mx_set_err("%s: %d experts per token with %d experts", m->ck.dir, s->top_k, Et);
    if (s->ffn < 1) return mx_set_err("%s: expert intermediate size %d is invalid", m->ck.dir, s->ffn);
    if (s->route == MX_ROUTE_SPARSEMIXER && s->top_k != 2) return mx_set_err("%s: sparsemixer routing needs 2 experts per token, not %d", m->ck.dir, s->top_k);
    if (s->n_group > 1 && (s->n_group > 64 || Et % s->n_group || s->topk_group < 1 || s->topk_group > s->n_group ||
                           s->top_k > s->topk_group * (Et / s->n_group)))
        return mx_set_err("%s: group-limited routing with %d groups (top %d) of %d experts, %d per token is inconsistent", m->ck.dir,
                          s->n_group, s->topk_group, Et, s->top_k);
    if (!s->router || !s->experts.down) return mx_set_err("%s: MoE layer without router or expert names", m->ck.dir);
    moe_w *w = mx_calloc(1, sizeof *w);
    if (!w) return MX_ERR;
    *out = w;
    w->E = E;
    w->ex = mx_calloc((size_t)E, sizeof(expert_w));
    w->ex_bytes = mx_calloc((size_t)E, sizeof(size_t));
    if (!w->ex || !w->ex_bytes) return MX_ERR;
    if (mx_load_lin(m, s->router, layer, Et, H, s->router_bias, &w->router, &w->router_b)) return MX_ERR;
    if (s->score_bias && load_score_bias(m, s->score_bias, layer, Et, &w->score_bias)) return MX_ERR;
    /* routed experts: primary names, or the first alternative layout present */
    const mx_expert_names *nm = &s->experts, *cand[3] = {&s->experts, &s->alt, &s->alt2};
    for (int k = 0; k < 3; k++) {
        const char *probe = cand[k]->gate_up ? cand[k]->gate_up : cand[k]->gate ? cand[k]->gate : cand[k]->up;
        if (cand[k]->down && probe && module_exists(&m->ck, probe, layer)) { nm = cand[k]; break; }
    }
    if (load_experts(m, w, nm, layer, s->expert_bias)) return MX_ERR;
    size_t all = 0;
    for (int e = 0; e < E; e++) {
        for (int q = 0; q < P_N; q++) w->ex_bytes[e] += mx_weight_bytes(&w->ex[e].w[q]);
        all += w->ex_bytes[e];
    }
    w->stats.all_expert_bytes = all;
    /* a decode step reads top_k of the E experts (on average all/E each) */
    m->weight_bytes += all / (size_t)E * (size_t)s->top_k;
    if (s->shared_ffn > 0) {
        int Fs = s->shared_ffn;
        const mx_expert_names *sh = &s->shared;
        bool eb = s->expert_bias; /* the shared expert has biases iff the routed ones do */
        w->has_shared = true;
        if (sh->gate_up) {
            if (mx_load_lin(m, sh->gate_up, layer, 2 * Fs, H, eb, &w->shared.w[P_GATE_UP], &w->shared.b[P_GATE_UP])) return MX_ERR;
        } else if ((s->gated && mx_load_lin(m, sh->gate, layer, Fs, H, eb, &w->shared.w[P_GATE], &w->shared.b[P_GATE])) ||
                   mx_load_lin(m, sh->up, layer, Fs, H, eb, &w->shared.w[P_UP], &w->shared.b[P_UP]))
            return MX_ERR;
        if (mx_load_lin(m, sh->down, layer, H, Fs, eb, &w->shared.w[P_DOWN], &w->shared.b[P_DOWN])) return MX_ERR;
        if (s->shared_gate && mx_load_lin(m, s->shared_gate, layer, 1, H, false, &w->shared_gate, &w->shared_gate_b)) return MX_ERR;
    }
    return MX_OK;
}

/* ---- forward ---- */

static int max_width(const mx_moe_spec *s) { return s->ffn > s->shared_ffn ? s->ffn : s->shared_ffn; }

/* logits [rows][E]; wts, sel, order [rows][K]; start [E + 1]; xg, yg
 * [rows][H] (tokens gathered for one expert); gu [rows][2F]; row [2F];
 * tmp [2E] (routing); sg [rows] (shared expert gate). The int buffers take
 * float-sized slots. */
typedef struct { float *logits, *wts, *xg, *yg, *gu, *row, *tmp, *sg; int *sel, *order, *start; } moe_bufs;
_Static_assert(sizeof(int) == sizeof(float), "int buffers live in float scratch");
static size_t moe_plan(const mx_model *m, int rows, float *base, moe_bufs *b) {
    const mx_moe_spec *s = &m->arch.moe;
    size_t N = (size_t)rows, E = (size_t)s->n_experts + (size_t)s->n_zero, K = (size_t)s->top_k, H = (size_t)m->arch.hidden;
    size_t F2 = 2 * (size_t)max_width(s);
    mx_plan p = {base, 0};
    b->logits = mx_plan_take(&p, N * E);
    b->wts = mx_plan_take(&p, N * K);
    b->sel = (int *)mx_plan_take(&p, N * K);
    b->order = (int *)mx_plan_take(&p, N * K);
    b->start = (int *)mx_plan_take(&p, E + 1);
    b->xg = mx_plan_take(&p, N * H);
    b->yg = mx_plan_take(&p, N * H);
    b->gu = mx_plan_take(&p, N * F2);
    b->row = mx_plan_take(&p, F2);
    b->tmp = mx_plan_take(&p, 2 * E);
    b->sg = mx_plan_take(&p, N);
    return p.n;
}

static size_t moe_scratch(const mx_model *m, int layer, int max_tokens, int max_ctx, int nt) {
    (void)layer; (void)max_ctx; (void)nt;
    moe_bufs b;
    return moe_plan(m, max_tokens, NULL, &b);
}

/* x[n, H] -> y[n, H] through one expert of width F; gu: [n, 2F] scratch,
 * row: [2F] scratch. */
static void expert_run(const mx_fwd *f, const mx_moe_spec *s, const expert_w *ex, int F, const float *x, int n, float *gu, float *row,
                       float *y) {
    int H = f->m->arch.hidden, F2 = 2 * F;
    bool gated = ex->w[P_GATE_UP].fmt || ex->w[P_GATE].fmt;
    if (ex->w[P_GATE_UP].fmt) mx_linear_as(f, MX_OP_EXPERT, &ex->w[P_GATE_UP], ex->b[P_GATE_UP], x, n, H, gu, F2);
    else {
        if (ex->w[P_GATE].fmt) mx_linear_as(f, MX_OP_EXPERT, &ex->w[P_GATE], ex->b[P_GATE], x, n, H, gu, F2);
        mx_linear_as(f, MX_OP_EXPERT, &ex->w[P_UP], ex->b[P_UP], x, n, H, gated ? gu + F : gu, F2);
    }
    double t_op = f->prof ? mx_now() : 0;
    for (int t = 0; t < n; t++) {
        float *g = gu + (size_t)t * F2;
        if (!gated) { mx_act_apply(s->act, g, F); continue; }
        if (ex->w[P_GATE_UP].fmt && s->gate_up_interleaved) {
            for (int i = 0; i < F; i++) { row[i] = g[2 * i]; row[F + i] = g[2 * i + 1]; }
            memcpy(g, row, (size_t)F2 * sizeof(float));
        }
        if (s->swiglu_limit > 0) {
            float lim = s->swiglu_limit, al = s->swiglu_alpha;
            for (int i = 0; i < F; i++) {
                float gv = fminf(g[i], lim), uv = fmaxf(-lim, fminf(g[F + i], lim));
                g[i] = (uv + 1.0f) * gv * sigmoidf(al * gv);
            }
        } else mx_act_mul(s->act, g, g + F, F);
    }
    if (f->prof) mx_prof_add(f->prof, MX_OP_ACT, t_op);
    mx_linear_as(f, MX_OP_EXPERT, &ex->w[P_DOWN], ex->b[P_DOWN], gu, n, F2, y, H);
}

static void moe_forward(mx_fwd *f, int layer, void *wp, const float *in, float *out) {
    (void)layer;
    moe_w *w = wp;
    const mx_arch *a = &f->m->arch;
    const mx_moe_spec *s = &a->moe;
    int N = f->N, H = a->hidden, E = s->n_experts + s->n_zero, K = s->top_k; /* E: routed, identity ones included */
    moe_bufs b;
    moe_plan(f->m, N, f->scratch, &b);
    float *logits = b.logits, *wts = b.wts, *xg = b.xg, *yg = b.yg, *gu = b.gu, *row = b.row, *tmp = b.tmp, *sg = b.sg;
    int *sel = b.sel, *order = b.order, *start = b.start;
    mx_linear_as(f, MX_OP_ROUTER, &w->router, w->router_b, in, N, H, logits, E);
    if (s->router_softcap > 0)
        for (size_t i = 0; i < (size_t)N * E; i++) logits[i] = tanhf(logits[i] / s->router_softcap) * s->router_softcap;
    for (int t = 0; t < N; t++) mx_moe_route(s, logits + (size_t)t * E, w->score_bias, sel + (size_t)t * K, wts + (size_t)t * K, tmp);
    /* group the (token, k) pairs by expert, tokens in order within each */
    memset(start, 0, (size_t)(E + 1) * sizeof(int));
    for (int i = 0; i < N * K; i++) start[sel[i] + 1]++;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
    int *fill = (int *)tmp; /* E ints: tmp is free once routing is done */
    memcpy(fill, start, (size_t)E * sizeof(int));
    for (int i = 0; i < N * K; i++) order[fill[sel[i]]++] = i;
    /* shared expert first (it initialises out), then the routed ones */
    if (w->has_shared) {
        expert_run(f, s, &w->shared, s->shared_ffn, in, N, gu, row, out);
        if (w->shared_gate.fmt) {
            mx_linear_as(f, MX_OP_ROUTER, &w->shared_gate, w->shared_gate_b, in, N, H, sg, 1);
            for (int t = 0; t < N; t++) mx_scale(out + (size_t)t * H, sigmoidf(sg[t]), H);
        }
        if (s->shared_scale && s->shared_scale != 1.0f) mx_scale(out, s->shared_scale, N * H);
    } else memset(out, 0, (size_t)N * H * sizeof(float));
    for (int e = 0; e < E; e++) {
        int n = start[e + 1] - start[e];
        if (!n) continue;
        const int *ord = order + start[e];
        if (e >= s->n_experts) { /* an identity expert: out += w * x */
            for (int j = 0; j < n; j++) mx_axpy(out + (size_t)(ord[j] / K) * H, wts[ord[j]], in + (size_t)(ord[j] / K) * H, H);
            continue;
        }
        for (int j = 0; j < n; j++) memcpy(xg + (size_t)j * H, in + (size_t)(ord[j] / K) * H, (size_t)H * sizeof(float));
        if (s->scale_input) /* the weight scales the expert's input, not its output */
            for (int j = 0; j < n; j++) mx_scale(xg + (size_t)j * H, wts[ord[j]], H);
        expert_run(f, s, &w->ex[e], s->ffn, xg, n, gu, row, yg);
        for (int j = 0; j < n; j++) mx_axpy(out + (size_t)(ord[j] / K) * H, s->scale_input ? 1.0f : wts[ord[j]], yg + (size_t)j * H, H);
        w->stats.expert_bytes += w->ex_bytes[e];
        w->stats.expert_groups++;
        w->stats.routed_pairs += (uint64_t)n;
    }
}

void mx_moe_stats_get(const mx_model *m, mx_moe_stats *out, bool reset) {
    memset(out, 0, sizeof *out);
    for (int l = 0; l < m->arch.n_layers; l++) {
        const mx_layer_spec *ls = &m->arch.layers[l];
        moe_w *w = ls->ffn == &mx_block_moe ? m->layers[l].ffn_w : ls->shortcut == &mx_block_moe ? m->layers[l].shortcut_w : NULL;
        if (!w) continue;
        out->expert_bytes += w->stats.expert_bytes;
        out->expert_groups += w->stats.expert_groups;
        out->routed_pairs += w->stats.routed_pairs;
        out->all_expert_bytes += w->stats.all_expert_bytes;
        if (reset) w->stats.expert_bytes = w->stats.expert_groups = w->stats.routed_pairs = 0;
    }
}

const mx_block_ops mx_block_moe = {
    .name = "moe", .load = moe_load, .free = moe_free, .scratch_floats = moe_scratch, .forward = moe_forward,
};
