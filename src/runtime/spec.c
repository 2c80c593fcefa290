#include "spec.h"
#include "../base/base.h"
#include <stdlib.h>
#include <string.h>

int mx_spec_check_vocab(const mx_textmodel *t, const mx_textmodel *d) {
    int V = t->e.model.arch.vocab, Vd = d->e.model.arch.vocab;
    if (!t->tok != !d->tok) return mx_set_err("the draft model needs the target's tokenizer: one of the two folders has none");
    if (t->tok) {
        int n = mx_tok_vocab_size(t->tok);
        if (n != mx_tok_vocab_size(d->tok))
            return mx_set_err("the draft model needs the target's tokenizer: %d tokens vs the target's %d", mx_tok_vocab_size(d->tok), n);
        for (int32_t i = 0; i < n; i++) {
            size_t la = 0, lb = 0;
            const char *a = mx_tok_token_str(t->tok, i, &la), *b = mx_tok_token_str(d->tok, i, &lb);
            if (!a != !b || la != lb || (a && memcmp(a, b, la)))
                return mx_set_err("the draft model needs the target's tokenizer: token %d differs", (int)i);
        }
    } else if (V != Vd)
        return mx_set_err("without tokenizers the draft model needs the target's vocabulary size: %d vs %d", Vd, V);
    if (Vd > V) return mx_set_err("the draft model's vocabulary (%d logits) is wider than the target's (%d)", Vd, V);
    return MX_OK;
}

int mx_spec_init(mx_spec *sp, mx_session *s, mx_sampler *smp, const mx_sampling *samp, const mx_spec_cfg *cfg) {
    memset(sp, 0, sizeof *sp);
    const mx_model *m = &s->e->model;
    if (mx_model_recurrent(m) && m->shard)
        return mx_set_err("speculative decoding of a model with recurrent state (%s) runs in one process", m->arch.family);
    if (cfg->draft_max < 1) return mx_set_err("--draft-max must be at least 1");
    if (s->batch < cfg->draft_max + 1) return mx_set_err("the session's passes take %d tokens, verification needs %d", s->batch, cfg->draft_max + 1);
    if (cfg->kind == MX_DRAFT_NGRAM && cfg->ngram < 1) return mx_set_err("--lookup-ngram must be at least 1");
    sp->cfg = *cfg;
    sp->s = s;
    sp->smp = smp;
    sp->greedy = samp->temperature <= 0;
    sp->V = m->arch.vocab;
    int K = cfg->draft_max, V = sp->V;
    sp->rows = mx_malloc(sizeof(float) * (size_t)(K + 1) * V);
    sp->work = mx_malloc(sizeof(float) * (size_t)V);
    sp->p = mx_malloc(sizeof(float) * (size_t)V);
    sp->tok = mx_malloc(sizeof(int32_t) * (size_t)(K + 1));
    if (!sp->rows || !sp->work || !sp->p || !sp->tok) goto oom;
    if (mx_model_recurrent(m) && !(sp->snap = mx_malloc(sizeof(float) * mx_kv_snapshot_floats(m, s->kv->cap)))) goto oom;
    if (cfg->kind == MX_DRAFT_MTP) {
        const mx_arch *da = &cfg->draft->model.arch;
        if (!da->mtp.on) { mx_set_err("the draft is not a next-n module (mlxcel split-mtp writes one)"); goto fail; }
        if (da->hidden != m->arch.hidden) {
            mx_set_err("the next-n module's hidden size %d is not the target's %d", da->hidden, m->arch.hidden);
            goto fail;
        }
        if (mx_session_keep_hidden(s)) goto fail;
    } else if (cfg->draft && cfg->draft->model.arch.mtp.on) {
        mx_set_err("a next-n module drafts from its target's hidden states, not as a draft model of its own");
        goto fail;
    }
    if (cfg->kind == MX_DRAFT_MODEL || cfg->kind == MX_DRAFT_MTP) {
        sp->Vd = cfg->draft->model.arch.vocab;
        if (sp->Vd > V) { mx_set_err("the draft model's vocabulary (%d logits) is wider than the target's (%d)", sp->Vd, V); goto fail; }
        mx_sampling ds = *samp;
        ds.seed = samp->seed ^ 0x5bd1e995u; /* its own stream: the draft's draws must not be the acceptance draws */
        sp->dsmp = mx_sampler_new(&ds, sp->Vd);
        sp->dlog = mx_malloc(sizeof(float) * (size_t)sp->Vd);
        sp->dq = mx_malloc(sizeof(float) * (size_t)K * sp->Vd);
        if (!sp->dsmp || !sp->dlog || !sp->dq) goto oom;
        if (mx_session_init(&sp->ds, cfg->draft, s->cap, s->chunk, s->pool)) goto fail;
        if (cfg->kind == MX_DRAFT_MTP && mx_session_keep_hidden(&sp->ds)) goto fail;
    }
    return MX_OK;
oom:
    mx_set_err("out of memory");
fail:
    mx_spec_free(sp);
    return MX_ERR;
}

void mx_spec_free(mx_spec *sp) {
    if (sp->ds.kv) mx_session_free(&sp->ds);
    mx_sampler_free(sp->dsmp);
    free(sp->snap);
    free(sp->rows); free(sp->work); free(sp->p); free(sp->dq); free(sp->dlog); free(sp->tok);
    memset(sp, 0, sizeof *sp);
}

int32_t mx_spec_accept(const float *p, int V, const float *q, int Vq, int32_t d, double u1, double u2, bool *accepted) {
    double qd = q ? (d < Vq ? q[d] : 0) : 1;
    *accepted = u1 * qd < p[d];
    if (*accepted) return d;
    double sum = 0;
    for (int i = 0; i < V; i++) {
        double qi = q ? (i < Vq ? q[i] : 0) : (i == d);
        if (p[i] > qi) sum += p[i] - qi;
    }
    if (!(sum > 0)) return mx_argmax(p, V); /* p <= q everywhere: only rounding can get here */
    double r = u2 * sum, c = 0;
    int32_t last = d;
    for (int i = 0; i < V; i++) {
        double qi = q ? (i < Vq ? q[i] : 0) : (i == d);
        if (p[i] <= qi) continue;
        c += p[i] - qi;
        last = i;
        if (r < c) return i;
    }
    return last;
}

int mx_spec_draft_ngram(const int32_t *seq, int len, int n, int k, int32_t *out) {
    for (int g = MX_MIN(n, len - 1); g >= 1; g--) {
        const int32_t *pat = seq + len - g;
        for (int j = len - g - 1; j >= 0; j--) {
            if (memcmp(seq + j, pat, sizeof(int32_t) * (size_t)g)) continue;
            int m = MX_MIN(k, len - (j + g));
            memcpy(out, seq + j + g, sizeof(int32_t) * (size_t)m);
            return m;
        }
    }
    return 0;
}

/* Draft j from the draft's logits sp->dlog (hist: the sequence they
 * continue). With sampling, q row j keeps the distribution it was drawn from. */
static int32_t draw(mx_spec *sp, int j, const int32_t *hist, int n_hist) {
    if (sp->greedy) return mx_sampler_sample(sp->dsmp, sp->dlog, hist, n_hist);
    float *q = sp->dq + (size_t)j * sp->Vd;
    mx_sampler_dist(sp->dsmp, sp->dlog, hist, n_hist, q);
    double r = mx_sampler_uniform(sp->dsmp), c = 0;
    int32_t d = 0;
    for (int i = 0; i < sp->Vd; i++)
        if (q[i] > 0) {
            d = i;
            if (r < (c += q[i])) break;
        }
    return d;
}

/* The draft model: brought up to the committed sequence seq[0..len) (only
 * what it lacks is fed), then k tokens drawn one by one. */
static int draft_model(mx_spec *sp, const int32_t *seq, int len, int k, int32_t *out) {
    mx_session *ds = &sp->ds;
    int L = 0;
    while (L < ds->n_history && L < len - 1 && ds->history[L] == seq[L]) L++;
    mx_session_truncate(ds, L);
    L = ds->n_history; /* a recurrent draft restarts from 0 */
    for (int i = L; i < len; i++)
        if (seq[i] >= sp->Vd) return 0; /* an id past the draft's logits (padding): no drafts from here on */
    if (mx_session_feed(ds, seq + L, len - L, NULL, sp->dlog)) return -1;
    for (int j = 0; j < k; j++) {
        if (j && mx_session_feed(ds, &out[j - 1], 1, NULL, sp->dlog)) return -1;
        out[j] = draw(sp, j, ds->history, ds->n_history);
    }
    return k;
}

/* The next-n module: its position i holds token seq[i + 1] with the
 * target's hidden state at i, for every committed i < n0 = len - 1 (the
 * target has computed those); positions it filled from its own hidden
 * states last round (>= mtp_valid) are fed again. Its logits at n0 - 1
 * give the first draft; draft j >= 1 feeds draft j - 1 with the module's
 * own hidden state at the position before. The draws see the committed
 * sequence and the drafts before them, as the target's do. */
static int draft_mtp(mx_spec *sp, const int32_t *seq, int len, int k, int32_t *out) {
    mx_session *ds = &sp->ds, *s = sp->s;
    int n0 = len - 1, H = s->e->model.arch.hidden, L = 0;
    if (n0 < 1 || s->hidden_from > 0) return 0; /* the target's first rows were cached before its hidden states were kept */
    int keep = seq[0] == sp->mtp_first ? MX_MIN(MX_MIN(ds->n_history, sp->mtp_valid), n0) : 0;
    while (L < keep && ds->history[L] == seq[L + 1]) L++;
    mx_session_truncate(ds, L);
    for (int i = L + 1; i < len; i++)
        if (seq[i] >= sp->Vd) return 0; /* an id past the module's logits: no drafts from here on */
    if (L < n0 && mx_session_feed_hidden(ds, seq + L + 1, s->hidden + (size_t)L * H, n0 - L, sp->dlog)) return -1;
    sp->mtp_valid = n0;
    sp->mtp_first = seq[0];
    for (int j = 0; j < k; j++) {
        if (j && mx_session_feed_hidden(ds, &out[j - 1], ds->hidden + (size_t)(ds->n_history - 1) * H, 1, sp->dlog)) return -1;
        /* the sequence this draw continues: seq, then the drafts before it (in the target's history's free rows) */
        if (j) s->history[len + j - 1] = out[j - 1];
        out[j] = draw(sp, j, s->history, len + j);
    }
    return k;
}

int mx_spec_step(mx_spec *sp, int32_t pending, int limit, int32_t *out) {
    mx_session *s = sp->s;
    int V = sp->V, n0 = s->n_history;
    int k = MX_MIN(sp->cfg.draft_max, MX_MIN(limit - 1, s->cap - n0 - 1));
    if (k < 0 || n0 >= s->cap) { mx_set_err("context size %d exceeded", s->cap); return -1; }
    /* the committed sequence is the history and then pending: written into
     * the history's next slot (feeding it below writes the same value) */
    s->history[n0] = pending;
    int32_t *d = sp->tok + 1;
    if (k > 0) {
        switch (sp->cfg.kind) {
        case MX_DRAFT_NGRAM: k = mx_spec_draft_ngram(s->history, n0 + 1, sp->cfg.ngram, k, d); break;
        case MX_DRAFT_ORACLE: k = MX_MAX(0, MX_MIN(k, sp->cfg.n_oracle - (n0 + 1))); memcpy(d, sp->cfg.oracle + n0 + 1, sizeof(int32_t) * (size_t)k); break;
        case MX_DRAFT_MODEL: k = draft_model(sp, s->history, n0 + 1, k, d); break;
        case MX_DRAFT_MTP: k = draft_mtp(sp, s->history, n0 + 1, k, d); break;
        }
        if (k < 0) return -1;
    }
    for (int j = 0; j < k; j++)
        if (d[j] < 0 || d[j] >= V) k = j; /* an oracle's stray id: offer what came before */
    sp->tok[0] = pending;
    if (sp->snap && k > 0) mx_kv_snapshot(&s->e->model, s->kv, sp->snap); /* the recurrent state before the drafts */
    if (mx_session_feed_pass(s, sp->tok, k + 1, sp->rows)) return -1;
    int m = 0;
    for (int i = 0; i <= k; i++) {
        const float *row = sp->rows + (size_t)i * V;
        const int32_t *hist = s->history;
        int nh = n0 + 1 + i; /* the history this position saw: pending and the drafts before it */
        memcpy(sp->work, row, sizeof(float) * (size_t)V);
        int32_t t;
        bool acc = false;
        if (sp->greedy) {
            t = mx_sampler_sample(sp->smp, sp->work, hist, nh);
            acc = i < k && t == d[i];
        } else if (i < k) {
            mx_sampler_dist(sp->smp, sp->work, hist, nh, sp->p);
            const float *q = sp->cfg.kind == MX_DRAFT_MODEL || sp->cfg.kind == MX_DRAFT_MTP ? sp->dq + (size_t)i * sp->Vd : NULL;
            double u1 = mx_sampler_uniform(sp->smp), u2 = mx_sampler_uniform(sp->smp);
            t = mx_spec_accept(sp->p, V, q, sp->Vd, d[i], u1, u2, &acc);
        } else t = mx_sampler_sample(sp->smp, sp->work, hist, nh);
        out[m++] = t;
        if (!acc) break;
    }
    sp->rounds++;
    sp->drafted += k;
    sp->accepted += m - 1;
    if (sp->snap && m < k + 1) {
        /* recurrent state cannot be cut back: the state before the pass, then pending and the accepted
         * drafts again (their rows come out as the pass's did: a token's bits do not depend on its batch) */
        mx_kv_restore(&s->e->model, s->kv, sp->snap, n0);
        s->n_history = n0;
        if (mx_session_feed_pass(s, sp->tok, m, sp->rows)) return -1;
    } else mx_session_truncate(s, n0 + m); /* pending and the accepted drafts stay */
    return m;
}
