#include "scheduler.h"
#include "spec.h"
#include "../base/base.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mx_req {
    mx_sched *s;
    int refs;                 /* consumer + scheduler */
    mx_req_params p;
    int32_t *prompt;
    int32_t *bias_ids;
    float *bias_vals;
    mx_vision_layout lay;     /* copies of the image inputs (lay.n = 0: none) */
    float *rows;
    uint64_t *tags;           /* [n_prompt]; NULL without images */
    bool rows_scaled;
    mx_tok_event *ev;
    int n_ev, cap_ev, read;
    mx_finish fin;
    bool cancel;
    void (*notify)(void *);   /* consumer wake-up, under mu */
    void *notify_arg;
    int cached;
    double t_submit, t_first, t_end; /* mx_now() at submit, first token, finish */
    mx_constraint con;        /* the grammar's state (con.m NULL: unconstrained) */
    int allowed;              /* tokens the mask of this step allows (computed outside the lock) */
    int think_state;          /* thinking budget: 0 before the block, 1 in it, 2 after it (or none) */
    int think_match, think_n; /* marker tokens matched so far; tokens generated in the block */
    uint64_t id;              /* unique, from 1 */
    uint64_t lead_id;         /* n > 1: the id of the request whose prompt this one shares (0: none) */
    bool waited;              /* --kv-memory held it back at least once */
    /* pre-emption (--kv-memory, preempt): a request stopped for room goes back
     * to the queue's head with the tokens it generated appended to its prompt
     * (n_prompt0: the prompt's own, what usage reports), its count of them and
     * its sampler, and goes on where it stopped once it has read them again */
    int n_prompt0;
    int n_gen;
    mx_sampler *smp;
    int preempted;
    mx_req *next;
};

typedef struct {
    mx_kv *kv;
    int32_t *toks;            /* tokens held in kv, in order */
    uint64_t *tags;           /* their image content tags (0: text) */
    int *mpos;                /* [3][step_tokens]: a prompt chunk's M-RoPE positions */
    int rope_shift;           /* decode positions: cache index + this */
    mx_req *req;
    int n_fed;                /* prompt tokens already in the cache */
    mx_sampler *smp;
    int n_gen;
    int32_t pending;          /* sampled, not yet fed */
    int32_t *spec;            /* speculation: [draft_max + 1] pending, then the drafts of this step */
    float *spec_snap;         /*   recurrent state: the state before this step's drafts (spec_buffers) */
    int refeed;               /*   recurrent state: tokens of this step to feed again after a rejection */
    mx_kv *dkv;               /* the draft model's cache (mx_sched_set_draft) */
    int32_t *dtoks;           /*   and the tokens it holds */
    /* a next-n module as the draft (mx_sched.mtp): the target's final hidden state at each position
     * its cache's passes computed (rows below hid_from are missing), the
     * module's positions below dvalid read them (later ones its own), and its last hidden state */
    float *hid, *dhid;
    int hid_from, dvalid;
    bool decoding;
    /* a sample of a group (n > 1) waits for its leader's prefill, then takes
     * a copy of the leader's cache and samples from the same logits */
    bool waiting;
    int lead_slot;
    uint64_t lead_id;
    uint64_t last_used;       /* admission stamp; 0 = never used */
    int foot;                 /* positions its caches may have written since they were last released */
    /* state snapshots (mx_sched_set_snapshots): snap_pos[i] > 0 is the
     * length at which snap[i] was taken; the last entry is the latest
     * prompt's end, the others the earliest stride boundaries */
    int *snap_pos;
    float **snap;
} slot;

struct mx_sched {
    mx_engine *e;
    mx_pool *pool;
    mx_kv_pool *kvpool; /* the slots' caches share prompt-prefix pages (NULL: copies; distributed runs, MLXCEL_KV_SHARE=0) */
    mx_ctx *ctx;
    int parallel, ctx_len, step_tokens, vocab;
    bool truncatable;
    slot *slots;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv, cv_ev;
    mx_req *q_head, *q_tail;
    int n_queued;
    uint64_t n_admitted, n_submitted;
    bool quit;
    float *logits, *lp, *row2; /* row2: a copy of a leader's logits row for its group */
    int spec_max, spec_ngram;  /* speculation (mx_sched_set_spec / _set_draft; 0: off) */
    mx_engine *draft;          /* the draft model (mx_sched_set_draft; NULL: prompt lookup) */
    bool mtp;                  /* the draft is a next-n module (arch.mtp): draft_model_pass */
    float *hbuf, *dhbuf;       /* the target's / the module's passes' hidden states (mtp) */
    mx_ctx *dctx;
    int dvocab;
    float *dlogits;            /* [step_tokens, dvocab]: one row per sequence of a draft pass */
    mx_seq_in *dins;
    int *dneed, *dpos;         /* per decode row: draft-model tokens left to feed, where they start */
    float *dist;               /* [vocab]: a sampled request's distribution, to accept a draft */
    mx_seq_in *ins;
    int *in_slot;
    size_t kv_budget;          /* bytes all slots' caches may take (mx_sched_set_kv_budget; 0: no bound) */
    int grow;                  /* positions a footprint grows by under it (foot0, grow) */
    int n_snaps, snap_every;   /* state snapshots per slot and their stride (0: off) */
    size_t snap_floats;
    /* the prompt cache (mx_sched_set_prompt_cache): caches of earlier prompts
     * kept past their slot, each a slot struct of which only the cache
     * (kv, toks, tags, snapshots) and last_used mean anything; foot is the
     * length it holds */
    slot **ents;
    int n_ents, cap_ents;
    int64_t cache_ram;         /* bytes they may take (-1: no bound; 0: off) */
    mx_sched_stats st;
};

static void req_free(mx_req *r) {
    mx_sampler_free(r->smp);
    free(r->prompt);
    free(r->bias_ids);
    free(r->bias_vals);
    mx_vision_layout_free(&r->lay);
    free(r->rows);
    free(r->tags);
    free(r->ev);
    mx_constraint_free(&r->con);
    mx_grammar_unref(r->p.grammar);
    free(r);
}

static void req_unref(mx_req *r) {
    if (--r->refs > 0) return;
    req_free(r);
}

static void notify(mx_req *r) {
    if (r->notify) r->notify(r->notify_arg);
}

/* The request is over (first reason wins); its consumer is told. */
static void set_fin(mx_req *r, mx_finish why) {
    if (r->fin == MX_FIN_NONE) { r->fin = why; r->t_end = mx_now(); }
    notify(r);
}

static void push_event(mx_req *r, const mx_tok_event *ev) {
    if (r->n_ev == r->cap_ev) {
        int cap = r->cap_ev ? r->cap_ev * 2 : 64;
        mx_tok_event *n = realloc(r->ev, sizeof(mx_tok_event) * (size_t)cap);
        if (!n) { set_fin(r, MX_FIN_ERROR); return; }
        r->ev = n;
        r->cap_ev = cap;
    }
    r->ev[r->n_ev++] = *ev;
    notify(r);
}

/* Tokens of the prompt a free slot can reuse: equal tokens with equal image
 * tags, and never ending inside a bidirectional span (its keys go in one
 * pass). */
/* The longest prefix of at most l tokens slot sl's cache can be cut back to:
 * l itself when the cache can be cut back (and a ring still holds it),
 * for recurrent state the longest snapshot within l, else nothing. */
static int cut_to(const mx_sched *s, const slot *sl, int l) {
    if (l >= sl->kv->len) return l;
    if (l < mx_kv_min_len(&s->e->model, sl->kv)) return 0;
    if (s->truncatable) return l;
    int best = 0;
    for (int i = 0; i < s->n_snaps; i++)
        if (sl->snap_pos[i] <= l && sl->snap_pos[i] > best) best = sl->snap_pos[i];
    return best;
}

/* Cuts slot sl's cache back to keep tokens (a length cut_to gave). */
static void cut_back(const mx_sched *s, slot *sl, int keep) {
    if (keep < sl->kv->len && keep > 0 && !s->truncatable)
        for (int i = 0; i < s->n_snaps; i++)
            if (sl->snap_pos[i] == keep) { mx_kv_restore(&s->e->model, sl->kv, sl->snap[i], keep); break; }
    sl->kv->len = keep;
    sl->hid_from = MX_MIN(sl->hid_from, keep);
    for (int i = 0; i < s->n_snaps; i++) /* snapshots past the kept tokens are of another history */
        if (sl->snap_pos[i] > keep) sl->snap_pos[i] = 0;
}

/* The first stride entry of slot sl's snapshots still free (-1: none, or snapshots off). */
static int stride_free(const mx_sched *s, const slot *sl) {
    for (int i = 0; i + 1 < s->n_snaps; i++)
        if (!sl->snap_pos[i]) return i;
    return -1;
}

/* Entry i of slot sl's snapshots takes the state of its cache now (its
 * buffer made on first use; without memory there is no snapshot). */
static void take_snapshot(const mx_sched *s, slot *sl, int i) {
    if (!sl->snap[i] && !(sl->snap[i] = mx_malloc(sizeof(float) * s->snap_floats))) return;
    mx_kv_snapshot(&s->e->model, sl->kv, sl->snap[i]);
    sl->snap_pos[i] = sl->kv->len;
}

static int reusable(const mx_sched *s, const slot *sl, const mx_req *r) {
    int l = 0, m = MX_MIN(sl->kv->len, r->p.n_prompt);
    while (l < m && sl->toks[l] == r->prompt[l] && sl->tags[l] == (r->tags ? r->tags[l] : 0)) l++;
    if (r->lay.span_lo && l < r->p.n_prompt && r->lay.span_hi[l] > r->lay.span_lo[l]) l = MX_MIN(l, r->lay.span_lo[l]);
    return cut_to(s, sl, l);
}

/* The tokens of slot sl's cache a request admitted with it keeps: what it
 * can reuse, less the last prompt token (one is always fed, so the step
 * yields logits), never ending inside an image's span, and for a cache that
 * cannot be cut back that far, none. */
static int keep_of(const mx_sched *s, const slot *sl, const mx_req *r) {
    int keep = MX_MIN(reusable(s, sl, r), r->p.n_prompt - 1);
    if (r->lay.span_lo && r->lay.span_hi[keep] > r->lay.span_lo[keep]) keep = MX_MIN(keep, r->lay.span_lo[keep]);
    return cut_to(s, sl, keep);
}

#define MX_BORROW_MIN 16
static bool sample_into(mx_sched *s, slot *sl, float *row, int32_t draft);

/* ---- the prompt cache: when a slot is about to lose cached tokens to
 * another prompt, its cache becomes an entry (the slot's cache swapped for
 * a fresh one: nothing is copied), which later prompts borrow from as they
 * do from other slots (borrow_prefix); entries past --cache-ram, or in the
 * way of --kv-memory, go least recently used first. */
static size_t ent_kv_bytes(const mx_sched *s, const slot *g) { return mx_kv_used_bytes(&s->e->model, s->ctx_len, g->foot); }
/* what an entry takes: its cache's rows, its token arrays and snapshots */
static size_t ent_bytes(const mx_sched *s, const slot *g) {
    size_t b = ent_kv_bytes(s, g) + (sizeof(int32_t) + sizeof(uint64_t)) * (size_t)s->ctx_len;
    for (int i = 0; i < s->n_snaps; i++) b += g->snap[i] ? s->snap_floats * sizeof(float) : 0;
    if (g->hid) b += sizeof(float) * (size_t)g->kv->len * s->e->model.arch.hidden; /* a next-n draft's rows */
    return b;
}
static void ent_free(const mx_sched *s, slot *g) {
    if (!g) return;
    mx_kv_free(g->kv);
    free(g->toks);
    free(g->tags);
    free(g->hid);
    for (int i = 0; g->snap && i < s->n_snaps; i++) free(g->snap[i]);
    free(g->snap);
    free(g->snap_pos);
    free(g);
}
/* a fresh cache with its arrays (NULL: no memory) */
static slot *ent_new(const mx_sched *s) {
    slot *g = mx_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->kv = mx_kv_new_in(&s->e->model, s->ctx_len, s->kvpool);
    g->toks = mx_malloc(sizeof(int32_t) * (size_t)s->ctx_len);
    g->tags = mx_calloc((size_t)s->ctx_len, sizeof(uint64_t));
    if (s->n_snaps) {
        g->snap_pos = mx_calloc((size_t)s->n_snaps, sizeof(int));
        g->snap = mx_calloc((size_t)s->n_snaps, sizeof(float *));
    }
    if (s->mtp) g->hid = mx_malloc(sizeof(float) * (size_t)s->ctx_len * s->e->model.arch.hidden); /* pages taken as written */
    if (!g->kv || !g->toks || !g->tags || (s->n_snaps && (!g->snap_pos || !g->snap)) || (s->mtp && !g->hid)) { ent_free(s, g); return NULL; }
    return g;
}
static void swap_cache(slot *a, slot *b) {
#define SWAP(f) do { __typeof__(a->f) t_ = a->f; a->f = b->f; b->f = t_; } while (0)
    SWAP(kv); SWAP(toks); SWAP(tags); SWAP(snap_pos); SWAP(snap); SWAP(hid); SWAP(hid_from);
#undef SWAP
}
static void ent_evict(mx_sched *s, int i) {
    ent_free(s, s->ents[i]);
    s->ents[i] = s->ents[--s->n_ents];
    s->st.cache_evictions++;
}
static int ent_lru(const mx_sched *s) {
    int v = -1;
    for (int i = 0; i < s->n_ents; i++)
        if (v < 0 || s->ents[i]->last_used < s->ents[v]->last_used) v = i;
    return v;
}
/* tokens (with their image tags) a and b's caches hold alike from the start */
static int common_len(const slot *a, const slot *b) {
    int l = 0, m = MX_MIN(a->kv->len, b->kv->len);
    while (l < m && a->toks[l] == b->toks[l] && a->tags[l] == b->tags[l]) l++;
    return l;
}
static int64_t charged_now(const mx_sched *s);
/* The entries within --cache-ram, and with `extra` more bytes within --kv-memory. */
static void ent_trim(mx_sched *s, size_t extra) {
    for (;;) {
        size_t total = 0;
        for (int i = 0; i < s->n_ents; i++) total += ent_bytes(s, s->ents[i]);
        bool over = (s->cache_ram > 0 && total > (size_t)s->cache_ram) || (s->kv_budget && charged_now(s) + (int64_t)extra > (int64_t)s->kv_budget);
        if (!over || !s->n_ents) return;
        ent_evict(s, ent_lru(s));
    }
}
/* Slot sl's cache becomes an entry (true; sl then holds an empty cache and
 * its draft cache is released; ent_trim bounds the entries), unless the
 * cache is off, the slot holds fewer than MX_BORROW_MIN tokens, an entry
 * holds them all already, or there is no memory for a fresh cache. Entries
 * that the slot's tokens extend go (they hold nothing more). */
static bool retain(mx_sched *s, slot *sl) {
    if (!s->cache_ram || sl->kv->len < MX_BORROW_MIN) return false;
    for (int i = 0; i < s->n_ents; i++) {
        slot *g = s->ents[i];
        int c = common_len(g, sl);
        if (c == sl->kv->len) { g->last_used = MX_MAX(g->last_used, sl->last_used); return false; }
        if (c == g->kv->len) ent_evict(s, i--);
    }
    if (s->n_ents == s->cap_ents) {
        int cap = s->cap_ents ? 2 * s->cap_ents : 8;
        slot **n = realloc(s->ents, sizeof *n * (size_t)cap);
        if (!n) return false;
        s->ents = n;
        s->cap_ents = cap;
    }
    slot *g = ent_new(s);
    if (!g) return false;
    swap_cache(sl, g);
    g->foot = g->kv->len;
    g->last_used = sl->last_used;
    s->ents[s->n_ents++] = g;
    if (sl->dkv) mx_kv_release(sl->dkv);
    sl->foot = 0;
    return true; /* the caller trims the entries (after borrowing, which marks the entry it takes from used) */
}

/* A prompt's first tokens may be in another slot's cache (a shared system
 * prompt, an agent's next call while the last one still runs): when some
 * slot, busy or idle, holds at least MX_BORROW_MIN more of them than slot
 * `to` keeps (`keep`), `to` takes their K/V rows (the whole pages of them
 * mapped from the other cache, shared until either writes there again:
 * mx_kv_share_prefix; the rest copied) and that many are not computed
 * again. Same rule as a slot's own prefix (reusable): at
 * least one prompt token is left to feed, an image's span is not split, and
 * recurrent state only comes whole. Not in distributed runs (the other
 * processes hold the rest of each cache). Returns the tokens `to` now keeps. */
/* A next-n draft reads the target's hidden states: a slot taking n rows from
 * another cache (a slot or a prompt cache entry) takes its hidden rows too,
 * valid where the other's were. */
static void borrow_hidden(const mx_sched *s, slot *d, const slot *o, int n) {
    if (!s->mtp) return;
    int H = s->e->model.arch.hidden;
    d->hid_from = MX_MIN(o->hid_from, n);
    if (d->hid_from < n) memcpy(d->hid + (size_t)d->hid_from * H, o->hid + (size_t)d->hid_from * H, sizeof(float) * (size_t)(n - d->hid_from) * H);
}

static int borrow_prefix(mx_sched *s, int to, const mx_req *r, int keep) {
    if (s->e->model.shard) return keep;
    int from = -1, best = keep + MX_BORROW_MIN - 1;
    for (int i = 0; i < s->parallel + s->n_ents; i++) { /* the other slots, then the prompt cache's entries */
        if (i == to) continue;
        int l = keep_of(s, i < s->parallel ? &s->slots[i] : s->ents[i - s->parallel], r);
        if (l > best) { best = l; from = i; }
    }
    if (from < 0) return keep;
    slot *d = &s->slots[to], *o = from < s->parallel ? &s->slots[from] : s->ents[from - s->parallel];
    if (from >= s->parallel) {
        o->last_used = ++s->n_admitted;
        s->st.cache_hit_tokens += (uint64_t)best;
    }
    mx_kv_share_prefix(&s->e->model, d->kv, o->kv, best);
    for (int i = 0; i < s->n_snaps; i++) {
        if (best < o->kv->len && o->snap_pos[i] == best) mx_kv_restore(&s->e->model, d->kv, o->snap[i], best); /* recurrent state at that prefix */
        d->snap_pos[i] = 0;
    }
    memcpy(d->toks, o->toks, sizeof(int32_t) * (size_t)best);
    memcpy(d->tags, o->tags, sizeof(uint64_t) * (size_t)best);
    borrow_hidden(s, d, o, best);
    s->st.borrowed_tokens += (uint64_t)best;
    return best;
}

/* ---- --kv-memory: caches are reserved address space and take memory as
 * they are written (mx_kv_new); a slot's footprint is what `foot`
 * positions write (mx_kv_used_bytes, an upper bound), and the slots'
 * footprints together stay within kv_budget. A request is admitted with
 * room for its prompt, max_tokens and drafts; idle slots' caches are
 * released, least recently used first, to make that room, else it waits
 * for running requests to end. */
static int need_of(const mx_sched *s, const mx_req_params *p) {
    return (int)MX_MIN((int64_t)s->ctx_len, (int64_t)p->n_prompt + MX_MAX(p->max_tokens, 0) + s->spec_max + 1);
}
/* Under --kv-memory a request starts with room for its prompt and s->grow
 * (64; MLXCEL_KV_GROW) more positions, and grows by as many at a time as it
 * generates (grow); one with images gets its whole need at once (it is
 * never pre-empted: its prompt cannot be read again with the tokens it
 * generated). */
static int need_req(const mx_sched *s, const mx_req *r) {
    return (int)MX_MIN((int64_t)s->ctx_len, (int64_t)r->p.n_prompt + MX_MAX(r->p.max_tokens - r->n_gen, 0) + s->spec_max + 1);
}
static int foot0(const mx_sched *s, const mx_req *r) {
    int need = need_req(s, r);
    return s->kv_budget && !r->lay.n ? (int)MX_MIN((int64_t)need, (int64_t)r->p.n_prompt + s->grow + s->spec_max + 1) : need;
}
static size_t foot_bytes(const mx_sched *s, int n) {
    return mx_kv_used_bytes(&s->e->model, s->ctx_len, n) + (s->draft ? mx_kv_used_bytes(&s->draft->model, s->ctx_len, n) : 0);
}
static void release_slot(mx_sched *s, slot *sl) {
    cut_back(s, sl, 0);
    if (!sl->foot) return;
    mx_kv_release(sl->kv);
    if (sl->dkv) mx_kv_release(sl->dkv);
    sl->foot = 0;
    s->st.kv_releases++;
}
/* What sharing takes off the slots' footprints added up: each page several
 * slots map is counted by every one of them, so the pool's maps beyond the
 * first (mx_kv_pool_shared_bytes) come off, but for those of slot `best`
 * when it is about to be released (keep 0: its maps go) or cut back into a
 * prefix it shares (it then copies those pages, up to its shared bytes
 * more than its own charge covers). best < 0: none is. */
static int64_t shared_credit(const mx_sched *s, int best, int keep) {
    if (!s->kvpool) return 0;
    int64_t sh = (int64_t)mx_kv_pool_shared_bytes(s->kvpool);
    const mx_kv *kv = best >= 0 ? s->slots[best].kv : NULL;
    if (kv && keep < kv->share_len) sh -= (int64_t)mx_kv_shared_bytes(kv) * (keep ? 2 : 1);
    return sh;
}
/* The bytes the slots' caches and the prompt cache's entries would be
 * charged for with slot `best`'s footprint taken as `use` bytes and its
 * shared pages as keeping `keep` tokens (shared_credit); best < 0: as they
 * are now. */
static int64_t charged_if(const mx_sched *s, int best, int keep, int64_t use) {
    int64_t total = use - shared_credit(s, best, keep);
    for (int i = 0; i < s->parallel; i++)
        if (i != best && s->slots[i].foot) total += (int64_t)foot_bytes(s, s->slots[i].foot);
    for (int i = 0; i < s->n_ents; i++) total += (int64_t)ent_kv_bytes(s, s->ents[i]);
    return total;
}
static int64_t charged_now(const mx_sched *s) { return charged_if(s, -1, 0, 0); }
size_t mx_sched_kv_charged(mx_sched *s) {
    pthread_mutex_lock(&s->mu);
    int64_t total = charged_now(s);
    pthread_mutex_unlock(&s->mu);
    return total > 0 ? (size_t)total : 0;
}
static void finish(mx_sched *s, slot *sl, mx_finish why);
/* The least recently used of the prompt cache's entries and the idle slots
 * (but `keep`) goes: false when there is none. */
static bool drop_lru(mx_sched *s, int keep) {
    int victim = -1, ent = ent_lru(s);
    for (int i = 0; i < s->parallel; i++) {
        const slot *o = &s->slots[i];
        if (i != keep && o->foot && !o->req && (victim < 0 || o->last_used < s->slots[victim].last_used)) victim = i;
    }
    if (ent >= 0 && (victim < 0 || s->ents[ent]->last_used < s->slots[victim].last_used)) ent_evict(s, ent);
    else if (victim >= 0) release_slot(s, &s->slots[victim]);
    else return false;
    return true;
}

/* Room for request r in slot `best` keeping `keep` of its tokens, and for
 * its n_follow samples (each in a slot of its own, started from 0). */
static bool make_room(mx_sched *s, const mx_req *r, int best, int keep, int n_follow) {
    if (!s->kv_budget) return true;
    size_t need = foot_bytes(s, foot0(s, r)), use = keep ? MX_MAX(need, foot_bytes(s, s->slots[best].foot)) : need;
    use += (size_t)n_follow * need;
    /* idle slots and the prompt cache's entries go, least recently used first */
    while (charged_if(s, best, keep, (int64_t)use) > (int64_t)s->kv_budget)
        if (!drop_lru(s, best)) return false;
    return true;
}

/* Pre-emption by recompute (vLLM's): slot v's request stops, its cache is
 * released, and it goes back to the queue's head with what it generated
 * appended to its prompt (the pending token too: reading it gives the next
 * token's logits), keeping its sampler and count; the consumer sees nothing
 * but a pause. */
static void preempt(mx_sched *s, int v) {
    slot *sl = &s->slots[v];
    mx_req *r = sl->req;
    int n = sl->kv->len + 1;
    int32_t *np = realloc(r->prompt, sizeof(int32_t) * (size_t)n);
    if (!np) { finish(s, sl, MX_FIN_ERROR); release_slot(s, sl); return; }
    memcpy(np, sl->toks, sizeof(int32_t) * (size_t)sl->kv->len);
    np[n - 1] = sl->pending;
    r->prompt = np;
    r->p.prompt = np;
    r->p.n_prompt = n;
    r->n_gen = sl->n_gen;
    r->smp = sl->smp;
    sl->smp = NULL;
    r->lead_id = 0;
    r->preempted++;
    sl->req = NULL;
    sl->decoding = false;
    release_slot(s, sl);
    r->next = s->q_head;
    s->q_head = r;
    if (!s->q_tail) s->q_tail = r;
    s->n_queued++;
    s->st.preemptions++;
}

/* --kv-memory: a generating slot whose next step may write past its
 * footprint grows by s->grow positions (up to its request's whole need).
 * Room comes from the prompt cache's entries and idle slots, least
 * recently used first, else from pre-empting the generating request
 * admitted last (this one, if it is). Requests with images started with
 * their whole need. */
static void grow(mx_sched *s) {
    for (int i = 0; i < s->parallel; i++) {
        slot *sl = &s->slots[i];
        if (!sl->req || !sl->decoding || sl->kv->len + 1 + s->spec_max + 1 <= sl->foot) continue;
        int nf = MX_MIN(need_req(s, sl->req), (int)MX_MIN((int64_t)s->ctx_len, MX_MAX((int64_t)sl->kv->len + 1 + s->spec_max + 1, (int64_t)sl->foot + s->grow)));
        if (nf <= sl->foot) continue; /* its whole need already */
        /* it keeps every token it has: its shared pages stay shared (INT_MAX) */
        while (sl->req && charged_if(s, i, INT_MAX, (int64_t)foot_bytes(s, nf)) > (int64_t)s->kv_budget) {
            if (drop_lru(s, i)) continue;
            int v = -1;
            for (int k = 0; k < s->parallel; k++) {
                const slot *o = &s->slots[k];
                if (o->req && o->decoding && !o->req->lay.n && (v < 0 || o->last_used > s->slots[v].last_used)) v = k;
            }
            if (v < 0) break;
            preempt(s, v);
        }
        if (sl->req) sl->foot = MX_MAX(sl->foot, nf);
    }
}

/* Admits queued requests into free slots, preferring the slot whose cached
 * tokens share the longest prefix with the prompt. A short shared prefix (the
 * common header of a chat template) is not worth another conversation's
 * cache: when the best slot would lose tokens and its prefix covers less than
 * half the prompt, the least recently used free slot (empty ones first) is
 * taken instead. Called under mu. */
static void admit(mx_sched *s) {
    while (s->q_head) {
        /* a group (n > 1) is admitted whole: its leader and the samples queued right after it */
        int n_follow = 0, n_free = 0;
        for (mx_req *q = s->q_head->next; q && q->lead_id == s->q_head->id; q = q->next) n_follow++;
        for (int i = 0; i < s->parallel; i++) n_free += !s->slots[i].req;
        if (n_free < 1 + n_follow) return;
        int best = -1, best_len = -1, lru = -1;
        for (int i = 0; i < s->parallel; i++) {
            if (s->slots[i].req) continue;
            int l = reusable(s, &s->slots[i], s->q_head);
            if (l > best_len) { best_len = l; best = i; }
            if (lru < 0 || s->slots[i].last_used < s->slots[lru].last_used) lru = i;
        }
        if (best < 0) return;
        if (best != lru && best_len < s->slots[best].kv->len && 2 * best_len < s->q_head->p.n_prompt) best = lru;
        mx_req *r = s->q_head;
        int keep0 = keep_of(s, &s->slots[best], r);
        if (!make_room(s, r, best, keep0, n_follow)) { /* waits for running requests to end */
            if (!r->waited) s->st.kv_waits++;
            r->waited = true;
            return;
        }
        s->q_head = r->next;
        if (!s->q_head) s->q_tail = NULL;
        s->n_queued--;
        slot *sl = &s->slots[best];
        /* the tokens it would lose stay in the prompt cache; what the request keeps of them it borrows back
         * (its pages mapped in a pool; without one, copied: then only when it loses at least as many as
         * it keeps, as an edit near a conversation's end is not worth a copy of the rest) */
        int lost = sl->kv->len - keep0;
        if (lost >= MX_BORROW_MIN && (s->kvpool || lost >= keep0) && retain(s, sl)) keep0 = 0;
        if (!keep0) release_slot(s, sl);
        int keep = borrow_prefix(s, best, r, keep0);
        if (keep == keep0) cut_back(s, sl, keep);
        sl->foot = MX_MAX(sl->foot, foot0(s, r));
        sl->rope_shift = 0;
        sl->n_fed = keep;
        if (!r->preempted) r->cached = keep;
        sl->req = r;
        sl->last_used = ++s->n_admitted;
        sl->n_gen = r->n_gen;
        sl->decoding = false;
        mx_sampler_free(sl->smp);
        sl->smp = r->smp ? r->smp : mx_sampler_new(&r->p.samp, s->vocab);
        r->smp = NULL;
        sl->waiting = false;
        if (!sl->smp) { set_fin(r, MX_FIN_ERROR); sl->req = NULL; req_unref(r); continue; } /* its samples read the prompt themselves */
        if (!r->preempted) {
            s->st.cached_tokens += (uint64_t)keep;
            s->st.prompt_tokens += (uint64_t)keep; /* the rest is counted as it is fed */
        }
        for (int k = 0; k < n_follow; k++) {
            mx_req *f = s->q_head;
            s->q_head = f->next;
            if (!s->q_head) s->q_tail = NULL;
            s->n_queued--;
            int fi = -1;
            for (int i = 0; i < s->parallel; i++)
                if (!s->slots[i].req && (fi < 0 || s->slots[i].last_used < s->slots[fi].last_used)) fi = i;
            slot *fs = &s->slots[fi];
            retain(s, fs);
            release_slot(s, fs);
            fs->foot = foot0(s, f);
            fs->req = f;
            fs->rope_shift = 0;
            cut_back(s, fs, 0);
            fs->n_fed = 0;
            fs->n_gen = 0;
            fs->decoding = false;
            /* in a distributed run the other processes hold the rest of each cache, which
             * share_prefill's copy cannot reach: each sample reads the prompt itself */
            fs->waiting = !s->e->model.shard;
            fs->lead_slot = best;
            fs->lead_id = r->id;
            fs->last_used = ++s->n_admitted;
            mx_sampler_free(fs->smp);
            fs->smp = mx_sampler_new(&f->p.samp, s->vocab);
            if (!fs->smp) { set_fin(f, MX_FIN_ERROR); fs->req = NULL; req_unref(f); }
        }
        if (s->n_ents) ent_trim(s, 0); /* the entries made above, beside the slots' new footprints */
    }
}

/* The samples of a group whose leader (in slot li) has just read its whole
 * prompt: each takes a copy of the leader's cache and samples from a copy
 * of its logits row (before the leader samples from it). Called under mu. */
static void share_prefill(mx_sched *s, int li, const float *row) {
    slot *ls = &s->slots[li];
    for (int i = 0; i < s->parallel; i++) {
        slot *fs = &s->slots[i];
        if (!fs->req || !fs->waiting || fs->lead_slot != li || fs->lead_id != ls->req->id) continue;
        mx_kv_share_prefix(&s->e->model, fs->kv, ls->kv, ls->kv->len); /* the rows it holds: pages past them stay untouched */
        memcpy(fs->toks, ls->toks, sizeof(int32_t) * (size_t)ls->kv->len);
        memcpy(fs->tags, ls->tags, sizeof(uint64_t) * (size_t)ls->kv->len);
        borrow_hidden(s, fs, ls, ls->kv->len);
        mx_req *r = fs->req;
        fs->n_fed = r->p.n_prompt;
        fs->rope_shift = r->lay.rope_shift;
        fs->waiting = false;
        r->cached = r->p.n_prompt;
        if (r->con.m) r->allowed = mx_gmatch_mask(r->con.m, r->con.bits);
        memcpy(s->row2, row, sizeof(float) * (size_t)s->vocab);
        sample_into(s, fs, s->row2, -1);
    }
}

/* Slot i has just read its prompt: where another cache in its pool (a slot,
 * a prompt cache entry) begins with the same tokens, the chunks of that
 * prefix whose bytes agree are kept once (mx_kv_dedupe_prefix): prompts
 * admitted together compute their common prefix apart, neither having it
 * to borrow. Called under mu. */
static void dedupe(mx_sched *s, int i) {
    slot *sl = &s->slots[i];
    if (!s->kvpool || s->e->model.shard) return;
    const slot *best = NULL;
    int best_len = MX_BORROW_MIN - 1;
    for (int k = 0; k < s->parallel + s->n_ents; k++) {
        const slot *o = k < s->parallel ? &s->slots[k] : s->ents[k - s->parallel];
        if (o == sl || !o->kv->len) continue;
        int c = common_len(sl, o);
        if (c > best_len) { best_len = c; best = o; }
    }
    if (!best) return;
    size_t before = mx_kv_pool_shared_bytes(s->kvpool);
    mx_kv_dedupe_prefix(&s->e->model, sl->kv, best->kv, best_len);
    size_t after = mx_kv_pool_shared_bytes(s->kvpool);
    if (after > before) s->st.kv_dedup_bytes += after - before;
}

/* A sample whose leader is gone (cancelled, failed) reads the prompt itself. */
static void orphans(mx_sched *s) {
    for (int i = 0; i < s->parallel; i++) {
        slot *fs = &s->slots[i];
        if (!fs->req || !fs->waiting) continue;
        slot *ls = &s->slots[fs->lead_slot];
        if (ls->req && ls->req->id == fs->lead_id && !ls->decoding) continue;
        fs->waiting = false;
    }
}

static void finish(mx_sched *s, slot *sl, mx_finish why) {
    mx_req *r = sl->req;
    set_fin(r, why);
    sl->req = NULL;
    req_unref(r);
    (void)s;
}

/* The thinking budget's view of a generated token: the block opening,
 * its length and its end marker (matched token by token). */
static void think_track(mx_req *r, int32_t tok) {
    const mx_req_params *p = &r->p;
    if (r->think_state == 2) return;
    if (r->think_state == 0) { /* the open marker, only as the reply's first tokens */
        if (tok != p->think_open[r->think_match]) { r->think_state = 2; return; }
        if (++r->think_match == p->n_think_open) { r->think_state = 1; r->think_match = 0; }
        return;
    }
    r->think_n++;
    r->think_match = tok == p->think_end[r->think_match] ? r->think_match + 1 : tok == p->think_end[0];
    if (r->think_match == p->n_think_end) r->think_state = 2;
}

/* Samples the next token for a slot from its logits row (the history it
 * saw: sl->toks[0..kv->len)); emits the event. With a draft (>= 0; -1:
 * none) a greedy request keeps its argmax and a sampled one accepts the
 * draft with its probability, else draws from the rest (spec.h); true when
 * the token is the draft. */
static bool sample_into(mx_sched *s, slot *sl, float *row, int32_t draft) {
    mx_req *r = sl->req;
    int V = s->vocab;
    for (int i = 0; i < r->p.n_bias; i++) row[r->bias_ids[i]] += r->bias_vals[i];
    if (r->con.m && r->allowed <= 0) { finish(s, sl, r->allowed < 0 ? MX_FIN_ERROR : MX_FIN_STOP); return false; }
    mx_tok_event ev = {0};
    if (r->p.top_logprobs >= 0) {
        /* log-softmax of the biased logits, before sampling transforms */
        float mx = -INFINITY;
        for (int i = 0; i < V; i++) mx = row[i] > mx ? row[i] : mx;
        double sum = 0;
        for (int i = 0; i < V; i++) sum += exp((double)row[i] - mx);
        float lse = mx + (float)log(sum);
        for (int i = 0; i < V; i++) s->lp[i] = row[i] - lse;
    }
    /* the grammar's mask (computed with the forward pass) applies after the
     * logprobs, which stay the model's */
    if (r->con.m) mx_gmask_apply(r->con.bits, row, V);
    /* history for penalties: the prompt and what was generated so far */
    int32_t tok;
    if (draft >= 0 && r->p.samp.temperature > 0) {
        mx_sampler_dist(sl->smp, row, sl->toks, sl->kv->len, s->dist);
        double u1 = mx_sampler_uniform(sl->smp), u2 = mx_sampler_uniform(sl->smp);
        bool acc;
        tok = mx_spec_accept(s->dist, V, NULL, 0, draft, u1, u2, &acc);
    } else tok = mx_sampler_sample(sl->smp, row, sl->toks, sl->kv->len);
    /* over the thinking budget: the end marker instead */
    if (r->think_state == 1 && r->think_n >= r->p.think_budget) tok = r->p.think_end[r->think_match];
    think_track(r, tok);
    if (r->con.m && mx_constraint_accept(&r->con, tok)) { finish(s, sl, MX_FIN_ERROR); return false; }
    ev.token = tok;
    if (r->p.top_logprobs >= 0) {
        ev.logprob = s->lp[tok];
        int k = MX_MIN(r->p.top_logprobs, MX_MAX_TOP_LOGPROBS);
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int i = 0; i < V; i++) {
                bool used = false;
                for (int q = 0; q < j && !used; q++) used = ev.top_ids[q] == i;
                if (!used && (best < 0 || s->lp[i] > s->lp[best])) best = i;
            }
            ev.top_ids[j] = best;
            ev.top_lp[j] = s->lp[best];
        }
        ev.n_top = k;
    }
    if (sl->n_gen == 0) {
        r->t_first = mx_now();
        s->st.ttft_sum += r->t_first - r->t_submit;
        s->st.ttft_count += 1;
    }
    push_event(r, &ev);
    sl->n_gen++;
    s->st.gen_tokens++;
    sl->pending = tok;
    sl->decoding = true;
    if (!r->p.ignore_eos && mx_engine_is_eos(s->e, tok)) finish(s, sl, MX_FIN_STOP);
    else if (r->con.m && mx_constraint_done(&r->con)) finish(s, sl, MX_FIN_STOP);
    else if (sl->n_gen >= r->p.max_tokens || sl->kv->len + 1 > s->ctx_len) finish(s, sl, MX_FIN_LENGTH);
    return tok == draft;
}

/* The drafts a generating slot offers this step (at most room): what
 * followed the last earlier match of its last tokens, pending included; with
 * a draft model, how many it will draft (draft_model_pass, outside the lock;
 * not for prompts with images, which the draft model cannot read). */
static int draft_for(mx_sched *s, slot *sl, int room) {
    const mx_req *r = sl->req;
    int k = r->p.spec_max < 0 || r->con.m ? 0 : r->p.spec_max ? MX_MIN(r->p.spec_max, s->spec_max) : s->spec_max;
    k = MX_MIN(k, MX_MIN(room, r->p.max_tokens - sl->n_gen - 1));
    k = MX_MIN(k, s->ctx_len - sl->kv->len - 1); /* the pass writes pending and the drafts */
    if (k <= 0) return 0;
    sl->toks[sl->kv->len] = sl->pending; /* the history with pending (the pass writes the same value there) */
    if (s->draft) k = r->lay.n ? 0 : k;
    else k = mx_spec_draft_ngram(sl->toks, sl->kv->len + 1, s->spec_ngram, k, sl->spec + 1);
    return k >= MX_MAX(1, r->p.spec_min) ? k : 0;
}

/* The draft model's part of a step: the decode rows s->ins[0..kd) that
 * reserved drafts (n - 1 each) get them. A row's draft cache is cut back to
 * the longest prefix it shares with the slot's committed tokens (history and
 * pending: toks[0..len]) and brought up to them in passes of at most a step
 * for all rows together; then each draft is the draft model's argmax after
 * the one before, one pass per draft for all rows. Drafts are point masses,
 * so accepting one with the target's probability keeps the target's
 * distribution (spec.h). A row whose tokens go past the draft's vocabulary
 * gets none. A next-n module (s->mtp; spec.c's draft_mtp for every slot at
 * once) holds one position fewer: its position i reads token i + 1 with the
 * target's hidden state at i, so only its positions that read the target's
 * rows (below dvalid) are kept, the last one is always read again (its
 * logits give the first draft), a later draft reads the one before with the
 * module's own hidden state, and a row whose needed rows are missing (below
 * hid_from) gets none. Only the engine thread touches slots: runs outside the
 * lock. Returns the decode rows' token total. */
static int draft_model_pass(mx_sched *s, int kd) {
    const mx_model *dm = &s->draft->model;
    int sh = s->mtp, H = s->e->model.arch.hidden;
    int Vd = s->dvocab, kmax = 0, *need = s->dneed, *pos = s->dneed + s->parallel, *row = s->dneed + 2 * s->parallel;
    for (int j = 0; j < kd; j++) {
        slot *sl = &s->slots[s->in_slot[j]];
        need[j] = 0;
        if (s->ins[j].n < 2) continue;
        int lc = sl->kv->len + 1 - sh, dl = 0, m = MX_MIN(sl->dkv->len, lc - 1); /* positions the draft holds; one left to feed */
        if (sh) m = MX_MIN(m, sl->dvalid);
        while (dl < m && sl->dtoks[dl] == sl->toks[dl + sh]) dl++;
        if (dl < sl->dkv->len && dl < mx_kv_min_len(dm, sl->dkv)) dl = 0;
        if (sh && (dl < sl->hid_from || lc < 1)) s->ins[j].n = 1;
        for (int t = dl + sh; t < lc + sh && s->ins[j].n > 1; t++)
            if (sl->toks[t] >= Vd) s->ins[j].n = 1;
        if (s->ins[j].n < 2) continue;
        sl->dkv->len = dl;
        need[j] = lc - dl;
        pos[j] = dl;
        kmax = MX_MAX(kmax, s->ins[j].n - 1);
    }
    int rc = 0;
    mx_ctx_set_hidden_out(s->dctx, sh ? s->dhbuf : NULL);
    for (int i = 0; !rc && i < kmax; i++) {
        /* pass 0 (repeated while rows need more than a step): the committed
         * tokens; pass i > 0: draft i - 1 of every row wanting more than i */
        int n = 0, budget = mx_ctx_max_tokens(s->dctx);
        for (int j = 0; j < kd && budget > 0; j++) {
            slot *sl = &s->slots[s->in_slot[j]];
            int m = i ? s->ins[j].n - 1 > i : MX_MIN(need[j], budget);
            if (m <= 0) continue;
            s->dins[n] = (mx_seq_in){.kv = sl->dkv, .tokens = i ? sl->spec + i : sl->toks + pos[j] + sh, .n = m, .seg_end = i ? 0 : pos[j] + need[j],
                                     .hidden = !sh ? NULL : i ? sl->dhid : sl->hid + (size_t)pos[j] * H};
            row[n++] = j;
            budget -= m;
        }
        if (!n) continue;
        if ((rc = mx_forward(s->dctx, s->dins, n, s->dlogits, false))) break;
        for (int q = 0, off = 0; q < n; off += s->dins[q].n, q++) {
            int j = row[q];
            slot *sl = &s->slots[s->in_slot[j]];
            memcpy(sl->dtoks + sl->dkv->len - s->dins[q].n, s->dins[q].tokens, sizeof(int32_t) * (size_t)s->dins[q].n);
            if (sh) memcpy(sl->dhid, s->dhbuf + (size_t)(off + s->dins[q].n - 1) * H, sizeof(float) * (size_t)H);
            if (!i) {
                pos[j] += s->dins[q].n;
                if ((need[j] -= s->dins[q].n) > 0) continue;
                sl->dvalid = sl->dkv->len; /* a module: from here on its own hidden states */
            }
            sl->spec[i + 1] = mx_argmax(s->dlogits + (size_t)q * Vd, Vd);
        }
        bool more = false;
        for (int j = 0; !i && j < kd; j++) more |= need[j] > 0;
        if (more) i--; /* pass 0 again */
    }
    int n_tok = 0;
    for (int j = 0; j < kd; j++) {
        if (rc && s->ins[j].n > 1) { /* the drafts are off this step; the draft cache starts again */
            s->ins[j].n = 1;
            s->slots[s->in_slot[j]].dkv->len = 0;
        }
        n_tok += s->ins[j].n;
    }
    return n_tok;
}

/* Recurrent state cannot be cut back past rejected drafts: the slots whose
 * drafts were rejected this step (refeed > 0) get their state from before the
 * pass back and read pending and the accepted drafts again, all in one pass
 * (decode rows, as they were read: a token's bits do not depend on its
 * batch); the logits are not used. Called with the lock held, released for
 * the pass. */
static void refeed_pass(mx_sched *s, int kd) {
    int n = 0;
    for (int j = 0; j < kd; j++) {
        slot *sl = &s->slots[s->in_slot[j]];
        if (!sl->refeed) continue;
        int base = sl->kv->len - sl->refeed;
        mx_kv_restore(&s->e->model, sl->kv, sl->spec_snap, base);
        s->ins[n] = (mx_seq_in){.kv = sl->kv, .tokens = sl->toks + base, .n = sl->refeed, .rope_shift = sl->rope_shift};
        s->in_slot[n++] = s->in_slot[j];
        sl->refeed = 0;
    }
    if (!n) return;
    pthread_mutex_unlock(&s->mu);
    mx_ctx_policy(s->ctx)->qmode = MX_QMODE_PER_TOKEN;
    mx_ctx_set_hidden_out(s->ctx, NULL); /* the rows were kept from the pass before */
    int rc = mx_forward(s->ctx, s->ins, n, s->logits, false);
    pthread_mutex_lock(&s->mu);
    for (int q = 0; rc && q < n; q++) { /* the state is lost: the slot starts over */
        slot *sl = &s->slots[s->in_slot[q]];
        sl->kv->len = 0;
        if (sl->req) finish(s, sl, MX_FIN_ERROR);
    }
}

static void *engine_loop(void *arg) {
    mx_sched *s = arg;
    int V = s->vocab;
    pthread_mutex_lock(&s->mu);
    while (!s->quit) {
        for (int i = 0; i < s->parallel; i++)
            if (s->slots[i].req && s->slots[i].req->cancel) finish(s, &s->slots[i], MX_FIN_CANCELLED);
        admit(s);
        orphans(s);
        if (s->kv_budget) grow(s);
        int n_active = 0;
        for (int i = 0; i < s->parallel; i++) n_active += s->slots[i].req != NULL;
        s->st.active = n_active;
        s->st.queued = s->n_queued;
        if (!n_active) {
            pthread_cond_broadcast(&s->cv_ev);
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        /* one decode token per generating slot (speculation: and its
         * drafts, out of what the step has left), then prompt chunks */
        int k = 0, budget = s->step_tokens, room = s->step_tokens, n_dtok = 0;
        for (int i = 0; i < s->parallel; i++) room -= s->slots[i].req && s->slots[i].decoding;
        for (int i = 0; i < s->parallel; i++) {
            slot *sl = &s->slots[i];
            if (!sl->req || !sl->decoding) continue;
            int nd = s->spec_max ? draft_for(s, sl, room) : 0;
            room -= nd;
            if (s->spec_max) sl->spec[0] = sl->pending;
            s->ins[k] = (mx_seq_in){.kv = sl->kv, .tokens = s->spec_max ? sl->spec : &sl->pending, .n = 1 + nd, .rope_shift = sl->rope_shift};
            s->in_slot[k++] = i;
            budget -= 1 + nd;
            n_dtok += 1 + nd;
        }
        int kd = k;
        bool drafts = s->draft && n_dtok > kd; /* the draft model drafts after the lock is released */
        for (int i = 0; i < s->parallel && budget > 0; i++) {
            slot *sl = &s->slots[i];
            if (!sl->req || sl->decoding || sl->waiting) continue;
            mx_req *r = sl->req;
            int f = sl->n_fed, m = MX_MIN(r->p.n_prompt - f, budget);
            if (stride_free(s, sl) >= 0) m = MX_MIN(m, (f / s->snap_every + 1) * s->snap_every - f); /* a chunk ends at the next stride */
            for (int t = f; r->lay.span_lo && t < f + m; t++) /* a span goes in whole: now, or in a later step */
                if (r->lay.span_hi[t] > r->lay.span_lo[t] && r->lay.span_hi[t] > f + m) m = r->lay.span_hi[t] - f;
            if (m > budget) continue;
            s->ins[k] = (mx_seq_in){.kv = sl->kv, .tokens = r->prompt + f, .n = m, .seg_end = r->p.n_prompt};
            if (r->lay.n) {
                mx_seq_in *in = &s->ins[k];
                in->embeds = r->rows;
                in->embed_row = r->lay.embed_row + f;
                in->embeds_scaled = r->rows_scaled;
                in->n_deep = r->lay.n_deep;
                if (r->lay.span_lo) {
                    in->span_lo = r->lay.span_lo + f;
                    in->span_hi = r->lay.span_hi + f;
                }
                if (r->lay.mpos) {
                    for (int a = 0; a < 3; a++) memcpy(sl->mpos + (size_t)a * m, r->lay.mpos + (size_t)a * r->p.n_prompt + f, sizeof(int) * (size_t)m);
                    in->mpos = sl->mpos;
                }
            }
            s->in_slot[k++] = i;
            budget -= m;
        }
        pthread_mutex_unlock(&s->mu);
        double t0 = mx_now();
        if (drafts) n_dtok = draft_model_pass(s, kd);
        for (int j = 0; !s->truncatable && j < kd; j++) /* recurrent state: kept from before the drafts */
            if (s->ins[j].n > 1) mx_kv_snapshot(&s->e->model, s->slots[s->in_slot[j]].kv, s->slots[s->in_slot[j]].spec_snap);
        /* Decode tokens and prompt chunks go in separate passes, each with a
         * fixed quantized-kernel choice, so every token is computed the same
         * way whatever else is in the batch (mx_qmode, kernels/policy.h). */
        int rc = 0;
        if (kd) { /* drafts: every row's logits (a slot's rows follow each other) */
            mx_ctx_policy(s->ctx)->qmode = MX_QMODE_PER_TOKEN;
            if (s->mtp) mx_ctx_set_hidden_out(s->ctx, s->hbuf); /* a next-n draft reads them */
            rc = mx_forward(s->ctx, s->ins, kd, s->logits, n_dtok > kd);
        }
        double dt = mx_now() - t0;
        if (!rc && k > kd) {
            mx_ctx_policy(s->ctx)->qmode = MX_QMODE_PANEL;
            if (s->mtp) mx_ctx_set_hidden_out(s->ctx, s->hbuf + (size_t)n_dtok * s->e->model.arch.hidden);
            rc = mx_forward(s->ctx, s->ins + kd, k - kd, s->logits + (size_t)n_dtok * V, false);
        }
        /* grammar masks of the rows that sample this step, before taking the
         * lock (only this thread touches a slot's request state) */
        for (int j = 0; !rc && j < k; j++) {
            slot *sl = &s->slots[s->in_slot[j]];
            mx_req *r = sl->req;
            if (r && r->con.m && (sl->decoding || sl->n_fed + s->ins[j].n == r->p.n_prompt)) r->allowed = mx_gmatch_mask(r->con.m, r->con.bits);
        }
        pthread_mutex_lock(&s->mu);
        for (int j = 0, hrow = 0; !rc && j < k; hrow += s->ins[j].n, j++) { /* every slot's tokens first: dedupe compares them */
            slot *sl = &s->slots[s->in_slot[j]];
            int base = sl->kv->len - s->ins[j].n, H = s->e->model.arch.hidden;
            memcpy(sl->toks + base, s->ins[j].tokens, sizeof(int32_t) * (size_t)s->ins[j].n);
            if (s->mtp) memcpy(sl->hid + (size_t)base * H, s->hbuf + (size_t)hrow * H, sizeof(float) * (size_t)s->ins[j].n * H);
            for (int t = 0; t < s->ins[j].n; t++)
                sl->tags[base + t] = !sl->decoding && sl->req && sl->req->tags ? sl->req->tags[sl->n_fed + t] : 0;
        }
        int n_dec = 0, row = 0;
        for (int j = 0; j < k; j++) {
            slot *sl = &s->slots[s->in_slot[j]];
            float *lrow = s->logits + (size_t)(j < kd ? row : n_dtok + j - kd) * V;
            if (j < kd) row += s->ins[j].n;
            int base = sl->kv->len - s->ins[j].n;
            if (!sl->req) continue;
            if (rc) { finish(s, sl, MX_FIN_ERROR); continue; }
            if (sl->decoding) {
                /* row i saw pending and drafts 0..i-1: it samples while they all held */
                int n = s->ins[j].n, acc = 0;
                for (int i = 0; i < n && sl->req; i++) {
                    sl->kv->len = base + 1 + i;
                    n_dec++;
                    if (!sample_into(s, sl, lrow + (size_t)i * V, i + 1 < n ? sl->spec[i + 1] : -1) || i + 1 == n) break;
                    acc++;
                }
                sl->kv->len = base + 1 + acc; /* pending and the drafts kept */
                if (!s->truncatable && acc + 1 < n) sl->refeed = acc + 1; /* its state saw the rejected ones: refeed_pass */
                s->st.spec_drafted += (uint64_t)(n - 1);
                s->st.spec_accepted += (uint64_t)acc;
                continue;
            }
            sl->n_fed += s->ins[j].n;
            if (!sl->req->preempted) s->st.prompt_tokens += (uint64_t)s->ins[j].n;
            if (s->n_snaps && sl->n_fed == sl->req->p.n_prompt) take_snapshot(s, sl, s->n_snaps - 1);
            else if (s->n_snaps && sl->n_fed % s->snap_every == 0 && stride_free(s, sl) >= 0) take_snapshot(s, sl, stride_free(s, sl));
            if (sl->n_fed == sl->req->p.n_prompt) {
                dedupe(s, s->in_slot[j]);
                sl->rope_shift = sl->req->lay.rope_shift;
                share_prefill(s, s->in_slot[j], lrow);
                sample_into(s, sl, lrow, -1);
            }
        }
        if (n_dec && dt > 0) s->st.decode_tps = n_dec / dt;
        pthread_cond_broadcast(&s->cv_ev);
        if (!s->truncatable && s->spec_max) refeed_pass(s, kd);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The buffers every kind of speculation needs; sets spec_max. */
static int spec_buffers(mx_sched *s, int draft_max) {
    const mx_model *m = &s->e->model;
    if (!s->truncatable && m->shard)
        return mx_set_err("speculative decoding of a model with recurrent state (%s) runs in one process", m->arch.family);
    if (draft_max < 1) return mx_set_err("speculation needs --draft-max >= 1");
    /* every decode row's logits: at most step_tokens rows, then the prompt chunks' (one per slot) */
    float *lg = mx_malloc(sizeof(float) * (size_t)(s->step_tokens + s->parallel) * s->vocab), *dist = mx_malloc(sizeof(float) * (size_t)s->vocab);
    int32_t **sp = mx_calloc((size_t)s->parallel, sizeof(int32_t *));
    bool ok = lg && dist && sp;
    for (int i = 0; ok && i < s->parallel; i++) ok = (sp[i] = mx_malloc(sizeof(int32_t) * (size_t)(draft_max + 1))) != NULL;
    /* a cache that cannot be cut back: each slot's state before its drafts (pages taken as written) */
    for (int i = 0; ok && !s->truncatable && i < s->parallel; i++)
        ok = s->slots[i].spec_snap || (s->slots[i].spec_snap = mx_malloc(sizeof(float) * mx_kv_snapshot_floats(m, s->ctx_len))) != NULL;
    if (!ok) {
        for (int i = 0; sp && i < s->parallel; i++) free(sp[i]);
        free(sp); free(lg); free(dist);
        return MX_ERR;
    }
    pthread_mutex_lock(&s->mu);
    free(s->logits);
    s->logits = lg;
    free(s->dist);
    s->dist = dist;
    for (int i = 0; i < s->parallel; i++) {
        free(s->slots[i].spec);
        s->slots[i].spec = sp[i];
    }
    s->spec_max = draft_max;
    pthread_mutex_unlock(&s->mu);
    free(sp);
    return MX_OK;
}

int mx_sched_set_spec(mx_sched *s, int draft_max, int ngram) {
    if (ngram < 1) return mx_set_err("speculation needs --lookup-ngram >= 1");
    if (spec_buffers(s, draft_max)) return MX_ERR;
    s->spec_ngram = ngram;
    return MX_OK;
}

int mx_sched_set_draft(mx_sched *s, mx_engine *draft, int draft_max) {
    const mx_model *dm = &draft->model;
    if (mx_model_recurrent(dm)) return mx_set_err("the draft model (%s) keeps recurrent state: its cache cannot be cut back", dm->arch.family);
    if (dm->arch.vocab > s->vocab) return mx_set_err("the draft model's vocabulary (%d logits) is wider than the target's (%d)", dm->arch.vocab, s->vocab);
    int H = s->e->model.arch.hidden;
    if (dm->arch.mtp.on && dm->arch.hidden != H)
        return mx_set_err("the next-n module's hidden size %d is not the target's %d", dm->arch.hidden, H);
    if (dm->arch.mtp.on && s->e->model.shard) return mx_set_err("a next-n module drafts in one process (not under --tp / --pp)");
    if (spec_buffers(s, draft_max)) return MX_ERR;
    s->dvocab = dm->arch.vocab;
    if (dm->arch.mtp.on) { /* the hidden-state rows: pages taken as written */
        if (!(s->hbuf = mx_malloc(sizeof(float) * (size_t)s->step_tokens * H)) || !(s->dhbuf = mx_malloc(sizeof(float) * (size_t)s->step_tokens * H)))
            return MX_ERR;
        for (int i = 0; i < s->parallel; i++)
            if (!(s->slots[i].hid = mx_malloc(sizeof(float) * (size_t)s->ctx_len * H)) || !(s->slots[i].dhid = mx_malloc(sizeof(float) * (size_t)H)))
                return MX_ERR;
    }
    s->dctx = mx_ctx_new(dm, s->step_tokens, s->ctx_len, s->pool);
    s->dlogits = mx_malloc(sizeof(float) * (size_t)s->parallel * s->dvocab);
    s->dins = mx_calloc((size_t)s->parallel, sizeof(mx_seq_in));
    s->dneed = mx_calloc(3 * (size_t)s->parallel, sizeof(int));
    if (!s->dctx || !s->dlogits || !s->dins || !s->dneed) return MX_ERR;
    for (int i = 0; i < s->parallel; i++) {
        slot *sl = &s->slots[i];
        if (!(sl->dkv = mx_kv_new(dm, s->ctx_len)) || !(sl->dtoks = mx_malloc(sizeof(int32_t) * (size_t)s->ctx_len))) return MX_ERR;
    }
    pthread_mutex_lock(&s->mu);
    s->mtp = dm->arch.mtp.on;
    s->draft = draft; /* the engine thread drafts with it from the next step */
    pthread_mutex_unlock(&s->mu);
    return MX_OK;
}

int mx_sched_set_snapshots(mx_sched *s, int n, int every) {
    size_t fl = mx_kv_snapshot_floats(&s->e->model, s->ctx_len);
    if (n < 1 || s->truncatable || s->e->model.shard || !fl) return MX_OK; /* nothing to keep, or (distributed) the state is in other processes */
    if (every < 1) return mx_set_err("snapshots need a stride of at least 1 token");
    for (int i = 0; i < s->parallel; i++)
        if (!(s->slots[i].snap_pos = mx_calloc((size_t)n, sizeof(int))) || !(s->slots[i].snap = mx_calloc((size_t)n, sizeof(float *)))) return MX_ERR;
    pthread_mutex_lock(&s->mu);
    s->snap_floats = fl;
    s->snap_every = every;
    s->n_snaps = n;
    pthread_mutex_unlock(&s->mu);
    return MX_OK;
}

int mx_sched_set_prompt_cache(mx_sched *s, int64_t bytes) {
    pthread_mutex_lock(&s->mu);
    s->cache_ram = s->e->model.shard ? 0 : bytes; /* distributed: prefixes are not borrowed (borrow_prefix) */
    pthread_mutex_unlock(&s->mu);
    return MX_OK;
}

size_t mx_sched_snapshot_bytes(const mx_sched *s) { return s->n_snaps ? s->snap_floats * sizeof(float) : 0; }

void mx_sched_set_kv_budget(mx_sched *s, size_t bytes) {
    pthread_mutex_lock(&s->mu);
    s->kv_budget = bytes;
    const char *g = getenv("MLXCEL_KV_GROW"); /* tests: a whole request's need at once (no pre-emption) */
    s->grow = g && atoi(g) > 0 ? atoi(g) : 64;
    pthread_mutex_unlock(&s->mu);
}

/* Under the lock: the prompt cache swaps slots' caches and frees entries. */
size_t mx_sched_kv_resident(mx_sched *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->kvpool ? mx_kv_pool_resident(s->kvpool) : 0; /* a shared page once */
    for (int i = 0; i < s->parallel; i++) n += (s->kvpool ? 0 : mx_kv_resident(s->slots[i].kv)) + (s->slots[i].dkv ? mx_kv_resident(s->slots[i].dkv) : 0);
    for (int i = 0; !s->kvpool && i < s->n_ents; i++) n += mx_kv_resident(s->ents[i]->kv);
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t mx_sched_kv_bytes(mx_sched *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = 0;
    for (int i = 0; i < s->parallel; i++) n += (s->slots[i].kv ? mx_kv_bytes(s->slots[i].kv) : 0) + (s->slots[i].dkv ? mx_kv_bytes(s->slots[i].dkv) : 0);
    pthread_mutex_unlock(&s->mu);
    return n;
}

mx_sched *mx_sched_new(mx_engine *e, int parallel, int ctx, int step_tokens, int threads) {
    mx_sched *s = mx_calloc(1, sizeof *s);
    if (!s) return NULL;

    s->e = e;
    s->parallel = parallel;
    s->ctx_len = ctx;
    s->step_tokens = MX_MAX(step_tokens, parallel);
    s->vocab = e->model.arch.vocab;
    s->truncatable = true;
    for (int l = 0; l < e->model.arch.n_layers; l++) {
        const mx_layer_spec *ls = &e->model.arch.layers[l];
        if ((ls->mixer && ls->mixer->recurrent) || (ls->mixer2 && ls->mixer2->recurrent) || (ls->ffn && ls->ffn->recurrent))
            s->truncatable = false;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->cv_ev, NULL);
    s->pool = mx_pool_new(threads);
    s->ctx = mx_ctx_new(&e->model, s->step_tokens, ctx, s->pool);
    s->slots = mx_calloc((size_t)parallel, sizeof(slot));
    s->logits = mx_malloc(sizeof(float) * (size_t)parallel * s->vocab);
    s->lp = mx_malloc(sizeof(float) * (size_t)s->vocab);
    s->row2 = mx_malloc(sizeof(float) * (size_t)s->vocab);
    s->ins = mx_calloc((size_t)parallel, sizeof(mx_seq_in));
    s->in_slot = mx_calloc((size_t)parallel, sizeof(int));
    if (!s->pool || !s->ctx || !s->slots || !s->logits || !s->lp || !s->row2 || !s->ins || !s->in_slot) { mx_sched_free(s); return NULL; }
    /* shared prefix pages between slots; MLXCEL_KV_CHUNK sets their granule (bytes, whole pages: tests
     * with tiny models use one page), MLXCEL_KV_SHARE=0 turns sharing off (prefixes are then copied) */
    const char *share = getenv("MLXCEL_KV_SHARE"), *chunk = getenv("MLXCEL_KV_CHUNK");
    if (parallel > 1 && !e->model.shard && !(share && !strcmp(share, "0")) &&
        !(s->kvpool = mx_kv_pool_new(chunk ? (size_t)strtoull(chunk, NULL, 10) : 0))) {
        mx_sched_free(s);
        return NULL;
    }
    for (int i = 0; i < parallel; i++) {
        s->slots[i].kv = mx_kv_new_in(&e->model, ctx, s->kvpool);
        s->slots[i].toks = mx_malloc(sizeof(int32_t) * (size_t)ctx);
        s->slots[i].tags = mx_calloc((size_t)ctx, sizeof(uint64_t));
        s->slots[i].mpos = mx_malloc(sizeof(int) * 3 * (size_t)s->step_tokens);
        if (!s->slots[i].kv || !s->slots[i].toks || !s->slots[i].tags || !s->slots[i].mpos) { mx_sched_free(s); return NULL; }
    }
    if (pthread_create(&s->th, NULL, engine_loop, s) != 0) { mx_set_err("cannot start the engine thread"); mx_sched_free(s); return NULL; }
    s->started = true;
    return s;
}

void mx_sched_stop(mx_sched *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started) pthread_join(s->th, NULL);
    s->started = false;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; s->slots && i < s->parallel; i++)
        if (s->slots[i].req) finish(s, &s->slots[i], MX_FIN_CANCELLED);
    while (s->q_head) {
        mx_req *r = s->q_head;
        s->q_head = r->next;
        set_fin(r, MX_FIN_CANCELLED);
        req_unref(r);
    }
    s->q_tail = NULL;
    s->n_queued = 0;
    pthread_cond_broadcast(&s->cv_ev);
    pthread_mutex_unlock(&s->mu);
}

void mx_sched_free(mx_sched *s) {
    if (!s) return;
    mx_sched_stop(s);
    for (int i = 0; s->slots && i < s->parallel; i++) {
        mx_kv_free(s->slots[i].kv);
        free(s->slots[i].toks);
        free(s->slots[i].tags);
        free(s->slots[i].mpos);
        free(s->slots[i].spec);
        free(s->slots[i].spec_snap);
        free(s->slots[i].hid);
        free(s->slots[i].dhid);
        mx_kv_free(s->slots[i].dkv);
        free(s->slots[i].dtoks);
        for (int k = 0; s->slots[i].snap && k < s->n_snaps; k++) free(s->slots[i].snap[k]);
        free(s->slots[i].snap);
        free(s->slots[i].snap_pos);
        mx_sampler_free(s->slots[i].smp);
    }
    for (int i = 0; i < s->n_ents; i++) ent_free(s, s->ents[i]);
    free(s->ents);
    mx_kv_pool_free(s->kvpool); /* after its caches */
    mx_ctx_free(s->dctx);
    free(s->dlogits);
    free(s->hbuf);
    free(s->dhbuf);
    free(s->dins);
    free(s->dneed);
    free(s->slots);
    mx_ctx_free(s->ctx);
    mx_pool_free(s->pool);
    free(s->logits);
    free(s->lp);
    free(s->row2);
    free(s->dist);
    free(s->ins);
    free(s->in_slot);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->cv_ev);
    free(s);
}

/* The request's own copy of its image inputs; a span longer than a step
 * could never be fed. */
static int copy_images(const mx_sched *s, mx_req *r, const mx_req_params *p) {
    const mx_vision_layout *l = p->lay;
    int n = p->n_prompt, H = s->e->vision ? mx_vision_row_floats(s->e->vision) : s->e->model.arch.hidden;
    if (l->n != n) return mx_set_err("image layout of %d tokens for a prompt of %d", l->n, n);
    for (int i = 0; l->span_lo && i < n; i++)
        if (l->span_hi[i] - l->span_lo[i] > s->step_tokens)
            return mx_set_err("an image block of %d tokens is longer than a step (%d tokens): raise the server's step size",
                              l->span_hi[i] - l->span_lo[i], s->step_tokens);
    r->lay.n = n;
    r->lay.rope_shift = l->rope_shift;
    r->lay.n_deep = l->n_deep;
    r->rows_scaled = s->e->vision && mx_vision_spec(s->e->vision)->rows_scaled;
    r->lay.embed_row = mx_malloc(sizeof(int) * (size_t)n);
    r->rows = mx_malloc(sizeof(float) * (size_t)(p->n_rows ? p->n_rows : 1) * H);
    r->tags = mx_malloc(sizeof(uint64_t) * (size_t)n);
    if (!r->lay.embed_row || !r->rows || !r->tags) return MX_ERR;
    memcpy(r->lay.embed_row, l->embed_row, sizeof(int) * (size_t)n);
    memcpy(r->rows, p->rows, sizeof(float) * (size_t)p->n_rows * H);
    memcpy(r->tags, p->tags, sizeof(uint64_t) * (size_t)n);
    for (int i = 0; i < n; i++)
        if (l->embed_row[i] >= p->n_rows) return mx_set_err("image row %d of %d", l->embed_row[i], p->n_rows);
    if (l->span_lo) {
        r->lay.span_lo = mx_malloc(sizeof(int) * (size_t)n);
        r->lay.span_hi = mx_malloc(sizeof(int) * (size_t)n);
        if (!r->lay.span_lo || !r->lay.span_hi) return MX_ERR;
        memcpy(r->lay.span_lo, l->span_lo, sizeof(int) * (size_t)n);
        memcpy(r->lay.span_hi, l->span_hi, sizeof(int) * (size_t)n);
    }
    if (l->mpos) {
        if (!(r->lay.mpos = mx_malloc(sizeof(int) * 3 * (size_t)n))) return MX_ERR;
        memcpy(r->lay.mpos, l->mpos, sizeof(int) * 3 * (size_t)n);
    }
    return MX_OK;
}

/* A request's own copy of p, not yet queued. */
static mx_req *req_new(mx_sched *s, const mx_req_params *p) {
    if (p->n_prompt < 1) { mx_set_err("the prompt is empty"); return NULL; }
    if (p->n_prompt >= s->ctx_len) {
        mx_set_err("the prompt has %d tokens; the context size is %d", p->n_prompt, s->ctx_len);
        return NULL;
    }
    for (int i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->vocab) { mx_set_err("token id %d is outside the vocabulary", p->prompt[i]); return NULL; }
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias_ids[i] < 0 || p->bias_ids[i] >= s->vocab) { mx_set_err("logit_bias: token id %d is outside the vocabulary", p->bias_ids[i]); return NULL; }
    mx_req *r = mx_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->s = s;
    r->refs = 2;
    r->p = *p;
    r->prompt = mx_malloc(sizeof(int32_t) * (size_t)p->n_prompt);
    r->bias_ids = mx_malloc(sizeof(int32_t) * (size_t)(p->n_bias + 1));
    r->bias_vals = mx_malloc(sizeof(float) * (size_t)(p->n_bias + 1));
    if (!r->prompt || !r->bias_ids || !r->bias_vals) { free(r->prompt); free(r->bias_ids); free(r->bias_vals); free(r); return NULL; }
    memcpy(r->prompt, p->prompt, sizeof(int32_t) * (size_t)p->n_prompt);
    r->n_prompt0 = p->n_prompt;
    r->p.lay = NULL;
    r->p.grammar = mx_grammar_ref(p->grammar); /* req_free drops it on any failure below */
    if (p->lay && copy_images(s, r, p)) {
        req_free(r);
        return NULL;
    }
    if (p->n_bias) {
        memcpy(r->bias_ids, p->bias_ids, sizeof(int32_t) * (size_t)p->n_bias);
        memcpy(r->bias_vals, p->bias_vals, sizeof(float) * (size_t)p->n_bias);
    }
    r->p.prompt = r->prompt;
    r->p.bias_ids = r->bias_ids;
    r->p.bias_vals = r->bias_vals;
    if (p->grammar && mx_constraint_init(&r->con, p->grammar, s->vocab)) {
        req_free(r);
        return NULL;
    }
    if (r->p.max_tokens < 1) r->p.max_tokens = 1;
    if (r->p.n_think_end < 1 || r->p.n_think_end > MX_THINK_MARK_MAX || r->p.n_think_open < 0 || r->p.n_think_open > MX_THINK_MARK_MAX)
        r->think_state = 2; /* no budget */
    else r->think_state = r->p.n_think_open ? 0 : 1;
    r->t_submit = mx_now();
    return r;
}

mx_req *mx_sched_submit(mx_sched *s, const mx_req_params *p) {
    mx_req *r;
    return mx_sched_submit_n(s, p, 1, &r) ? NULL : r;
}

int mx_sched_submit_n(mx_sched *s, const mx_req_params *p, int n, mx_req **out) {
    if (n < 1 || n > s->parallel) return mx_set_err("%d samples of one prompt: the server has %d slots", n, s->parallel);
    if (s->kv_budget && p->n_prompt > 0 && p->n_prompt < s->ctx_len && foot_bytes(s, need_of(s, p)) * (size_t)n > s->kv_budget)
        return mx_set_err("the request needs %.1f KiB of KV cache (%d prompt tokens and up to %d generated%s), more than the server's --kv-memory of %.1f KiB",
                          foot_bytes(s, need_of(s, p)) * (double)n / 1024.0, p->n_prompt, MX_MIN(p->max_tokens, s->ctx_len - p->n_prompt),
                          n > 1 ? ", for each sample" : "", s->kv_budget / 1024.0);
    for (int i = 0; i < n; i++) {
        mx_req_params q = *p;
        if (q.samp.seed != MX_SEED_RANDOM) q.samp.seed += (uint64_t)i; /* sample i: the seed + i */
        if (!(out[i] = req_new(s, &q))) {
            while (i--) req_free(out[i]);
            return MX_ERR;
        }
    }
    pthread_mutex_lock(&s->mu);
    if (s->quit) {
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++) req_free(out[i]);
        return mx_set_err("the server is shutting down");
    }
    for (int i = 0; i < n; i++) {
        mx_req *r = out[i];
        r->id = ++s->n_submitted;
        r->lead_id = i ? out[0]->id : 0;
        if (s->q_tail) s->q_tail->next = r;
        else s->q_head = r;
        s->q_tail = r;
        s->n_queued++;
        s->st.requests++;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return MX_OK;
}

int mx_req_next(mx_req *r, mx_tok_event *ev, int timeout_ms) {
    mx_sched *s = r->s;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    for (;;) {
        if (r->read < r->n_ev) { *ev = r->ev[r->read++]; rc = 1; break; }
        if (r->fin != MX_FIN_NONE) { rc = -1; break; }
        if (pthread_cond_timedwait(&s->cv_ev, &s->mu, &ts) == ETIMEDOUT) { rc = 0; break; }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

mx_finish mx_req_finish(const mx_req *r) { return r->fin; }
int mx_req_cached_tokens(const mx_req *r) { return r->cached; }
int mx_req_prompt_tokens(const mx_req *r) { return r->n_prompt0; }

void mx_req_times(mx_req *r, double *submit, double *first, double *end) {
    pthread_mutex_lock(&r->s->mu);
    *submit = r->t_submit;
    *first = r->t_first;
    *end = r->t_end;
    pthread_mutex_unlock(&r->s->mu);
}

void mx_req_cancel(mx_req *r) {
    mx_sched *s = r->s;
    pthread_mutex_lock(&s->mu);
    r->cancel = true;
    /* still queued: drop it now */
    mx_req **pp = &s->q_head, *prev = NULL;
    while (*pp && *pp != r) { prev = *pp; pp = &(*pp)->next; }
    if (*pp) {
        *pp = r->next;
        if (s->q_tail == r) s->q_tail = prev;
        s->n_queued--;
        set_fin(r, MX_FIN_CANCELLED);
        req_unref(r);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void mx_req_set_notify(mx_req *r, void (*fn)(void *), void *arg) {
    pthread_mutex_lock(&r->s->mu);
    r->notify = fn;
    r->notify_arg = arg;
    if (fn && (r->read < r->n_ev || r->fin != MX_FIN_NONE)) fn(arg); /* what came before */
    pthread_mutex_unlock(&r->s->mu);
}

void mx_req_release(mx_req *r) {
    mx_sched *s = r->s;
    pthread_mutex_lock(&s->mu);
    bool running = r->fin == MX_FIN_NONE;
    pthread_mutex_unlock(&s->mu);
    if (running) mx_req_cancel(r);
    pthread_mutex_lock(&s->mu);
    r->notify = NULL;
    req_unref(r);
    pthread_mutex_unlock(&s->mu);
}

void mx_sched_stats_get(mx_sched *s, mx_sched_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->queued = s->n_queued;
    out->kv_shared_bytes = s->kvpool ? mx_kv_pool_shared_bytes(s->kvpool) : 0;
    out->cache_entries = (uint64_t)s->n_ents;
    out->cache_tokens = out->cache_bytes = 0;
    for (int i = 0; i < s->n_ents; i++) {
        out->cache_tokens += (uint64_t)s->ents[i]->foot;
        out->cache_bytes += (uint64_t)ent_bytes(s, s->ents[i]);
    }
    pthread_mutex_unlock(&s->mu);
}

int mx_sched_slots(mx_sched *s, mx_slot_info *out, int max) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->parallel && i < max; i++) {
        const slot *sl = &s->slots[i];
        out[i] = (mx_slot_info){sl->req != NULL, sl->req ? sl->req->n_prompt0 : 0, sl->req ? sl->n_gen : 0};
    }
    pthread_mutex_unlock(&s->mu);
    return s->parallel;
}
