/* The matcher: parser states as sets of stacks, advanced byte by byte, and
 * the per-step token mask.
 *
 * closure(pos, ctx) expands a position until every stack waits on a BYTES
 * element: a RULE pushes its return position (not when that is the end of
 * the alternative: right recursion then runs in constant stack) and
 * expands each alternative; an END pops. Closures are memoized per
 * (pos, ctx) in the table that interns the continuations, so following a
 * token is a few bit tests and copies.
 *
 * Mask: for each grammar position met, the trie of the vocabulary is walked
 * once from the stack (pos, BASE). A token whose bytes all match inside the
 * position's rule (or that ends exactly where the rule may end) is accepted
 * in every context; one that dies inside is rejected in every context; one
 * that pops past BASE with bytes left depends on what follows the rule and
 * is checked against the real stack at each step. */
#include "gram_int.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------- small containers ---------- */

static int g_vec_reserve(g_vec *v, int n) {
    if (n <= v->cap) return MX_OK;
    int nc = v->cap ? v->cap : 16;
    while (nc < n) nc *= 2;
    uint64_t *nv = mx_realloc(v->v, (size_t)nc * sizeof *nv);
    if (!nv) return MX_ERR;
    v->v = nv;
    v->cap = nc;
    return MX_OK;
}

static int g_vec_push(g_vec *v, uint64_t x) {
    if (v->n == v->cap && g_vec_reserve(v, v->n + 1)) return MX_ERR;
    v->v[v->n++] = x;
    return MX_OK;
}

static void g_vec_free(g_vec *v) {
    free(v->v);
    memset(v, 0, sizeof *v);
}

static uint32_t mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    return (uint32_t)(x ^ (x >> 33));
}

#define EMPTY_KEY UINT64_MAX

int mx_g_ctab_init(g_ctab *t) {
    memset(t, 0, sizeof *t);
    t->cap = 1024;
    t->ret = mx_malloc((size_t)t->cap * sizeof *t->ret);
    t->parent = mx_malloc((size_t)t->cap * sizeof *t->parent);
    if (!t->ret || !t->parent) { mx_g_ctab_free(t); return MX_ERR; }
    /* ROOT and BASE are never followed (the closure stops at them) */
    t->ret[0] = t->ret[1] = -1;
    t->parent[0] = t->parent[1] = -1;
    t->n = 2;
    return MX_OK;
}

void mx_g_ctab_free(g_ctab *t) {
    free(t->ret);
    free(t->parent);
    free(t->hkey);
    free(t->hval);
    free(t->mkey);
    free(t->moff);
    free(t->mlen);
    free(t->mesc);
    free(t->skey);
    free(t->soff);
    free(t->slen);
    free(t->sh);
    free(t->tkey);
    free(t->tval);
    for (int i = 0; i < t->nrow; i++) free(t->row[i]);
    free(t->row);
    g_vec_free(&t->pool);
    g_vec_free(&t->spool);
    g_vec_free(&t->work);
    g_vec_free(&t->seen);
    g_vec_free(&t->tmp);
    g_vec_free(&t->adv);
    memset(t, 0, sizeof *t);
}

static int hash_grow(uint64_t **key, int32_t **val, uint32_t *cap) {
    uint32_t nc = *cap ? *cap * 2 : 1024;
    uint64_t *nk = mx_malloc(nc * sizeof *nk);
    int32_t *nv = mx_malloc(nc * sizeof *nv);
    if (!nk || !nv) { free(nk); free(nv); return MX_ERR; }
    memset(nk, 0xff, nc * sizeof *nk);
    for (uint32_t i = 0; i < *cap; i++) {
        if ((*key)[i] == EMPTY_KEY) continue;
        uint32_t k = mix((*key)[i]) & (nc - 1);
        while (nk[k] != EMPTY_KEY) k = (k + 1) & (nc - 1);
        nk[k] = (*key)[i];
        nv[k] = (*val)[i];
    }
    free(*key);
    free(*val);
    *key = nk;
    *val = nv;
    *cap = nc;
    return MX_OK;
}

/* The continuation "return to ret, then to parent". */
static int32_t intern(g_ctab *t, int32_t ret, int32_t parent) {
    if (t->hn * 2 >= t->hcap && hash_grow(&t->hkey, &t->hval, &t->hcap)) return -1;
    uint64_t key = G_KEY(ret, parent);
    uint32_t k = mix(key) & (t->hcap - 1);
    for (; t->hkey[k] != EMPTY_KEY; k = (k + 1) & (t->hcap - 1))
        if (t->hkey[k] == key) return t->hval[k];
    if (t->n == INT32_MAX - 1) { mx_set_err("grammar: too many parser states"); return -1; }
    if (t->n == t->cap) {
        int nc = t->cap * 2;
        int32_t *nr = mx_realloc(t->ret, (size_t)nc * sizeof *nr);
        if (!nr) return -1;
        t->ret = nr;
        int32_t *np = mx_realloc(t->parent, (size_t)nc * sizeof *np);
        if (!np) return -1;
        t->parent = np;
        t->cap = nc;
    }
    t->ret[t->n] = ret;
    t->parent[t->n] = parent;
    t->hkey[k] = key;
    t->hval[k] = t->n;
    t->hn++;
    return t->n++;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void sort_unique(g_vec *v) {
    if (v->n < 2) return;
    if (v->n <= 16) {
        for (int i = 1; i < v->n; i++) {
            uint64_t x = v->v[i];
            int j = i;
            while (j > 0 && v->v[j - 1] > x) { v->v[j] = v->v[j - 1]; j--; }
            v->v[j] = x;
        }
    } else qsort(v->v, (size_t)v->n, sizeof *v->v, cmp_u64);
    int m = 1;
    for (int i = 1; i < v->n; i++)
        if (v->v[i] != v->v[m - 1]) v->v[m++] = v->v[i];
    v->n = m;
}

/* Inserts into the visited set of one closure; false when already there. */
static int seen_add(g_ctab *t, uint64_t key, bool *fresh) {
    if ((uint32_t)t->seen.n * 2 >= t->scap2) {
        uint32_t nc = t->scap2 ? t->scap2 * 2 : 256;
        uint64_t *nk = mx_malloc(nc * sizeof *nk);
        if (!nk) return MX_ERR;
        memset(nk, 0xff, nc * sizeof *nk);
        for (int i = 0; i < t->seen.n; i++) {
            uint32_t k = mix(t->seen.v[i]) & (nc - 1);
            while (nk[k] != EMPTY_KEY) k = (k + 1) & (nc - 1);
            nk[k] = t->seen.v[i];
        }
        free(t->skey);
        t->skey = nk;
        t->scap2 = nc;
    }
    uint32_t k = mix(key) & (t->scap2 - 1);
    for (; t->skey[k] != EMPTY_KEY; k = (k + 1) & (t->scap2 - 1))
        if (t->skey[k] == key) { *fresh = false; return MX_OK; }
    t->skey[k] = key;
    *fresh = true;
    return g_vec_push(&t->seen, key);
}

static void seen_clear(g_ctab *t) {
    for (int i = 0; i < t->seen.n; i++) {
        uint32_t k = mix(t->seen.v[i]) & (t->scap2 - 1);
        while (t->skey[k] != t->seen.v[i]) k = (k + 1) & (t->scap2 - 1);
        t->skey[k] = EMPTY_KEY;
    }
    /* removal by tombstone-free clear: the probe chains of the keys removed
     * are only between themselves, so clearing all of them is exact */
    t->seen.n = 0;
}

/* Charges n units of parser work; an error once the budget is spent. */
static int charge(g_ctab *t, uint64_t n) {
    t->spent += n;
    if (t->spent <= G_MAX_WORK) return MX_OK;
    return mx_set_err("grammar: one step needs more than %llu units of parser work (the grammar is too ambiguous)",
                      (unsigned long long)G_MAX_WORK);
}

/* Uncached closure into out (appended, then sorted and de-duplicated). */
static int closure_raw(const mx_grammar *g, g_ctab *t, int32_t pos, int32_t ctx, g_vec *out, bool *esc) {
    int rc = MX_OK;
    t->work.n = 0;
    bool fresh;
    if (seen_add(t, G_KEY(pos, ctx), &fresh) || g_vec_push(&t->work, G_KEY(pos, ctx))) rc = MX_ERR;
    while (!rc && t->work.n) {
        uint64_t k = t->work.v[--t->work.n];
        int32_t p = G_POS(k), c = G_CTX(k);
        if ((rc = charge(t, 1))) break;
        int hops = 0;
        for (;;) {
            g_elem e = g->el[p];
            if (e.kind == GE_BYTES) { rc = g_vec_push(out, G_KEY(p, c)); break; }
            if (e.kind == GE_END) {
                if (c == G_CTX_ROOT) { rc = g_vec_push(out, G_KEY(G_ACCEPT, G_CTX_ROOT)); break; }
                if (c == G_CTX_BASE) { *esc = true; break; }
                int32_t r = t->ret[c];
                if (r <= G_BASE_OF(0)) {
                    /* the unknown bottom of the stack, below rule X: known only when X returns to one place */
                    int32_t site = g->ret_site[G_BASE_OF(r)];
                    if (site < 0 || ++hops > g->n_el) { *esc = true; break; }
                if ((rc = charge(t, 1))) break;
                    p = site;
                    c = site == G_START + 1 ? G_CTX_ROOT : intern(t, G_BASE_OF(g->rule_of[site]), G_CTX_BASE);
                    if (c < 0) { rc = MX_ERR; break; }
                    continue;
                }
                p = r;
                c = t->parent[c];
                if ((rc = charge(t, 1))) break;
                continue;
            }
            int32_t nc = g->el[p + 1].kind == GE_END ? c : intern(t, p + 1, c);
            if (nc < 0) { rc = MX_ERR; break; }
            if ((rc = charge(t, (uint64_t)(g->rule_alt[e.arg + 1] - g->rule_alt[e.arg])))) break;
            for (int a = g->rule_alt[e.arg]; a < g->rule_alt[e.arg + 1]; a++) {
                uint64_t nk = G_KEY(g->alt_start[a], nc);
                if ((rc = seen_add(t, nk, &fresh))) break;
                if (fresh && (rc = g_vec_push(&t->work, nk))) break;
            }
            break;
        }
        if (!rc && out->n > G_MAX_STACKS) rc = mx_set_err("grammar: a parser state has more than %d stacks (the grammar is too ambiguous)", G_MAX_STACKS);
    }
    seen_clear(t);
    if (!rc) sort_unique(out);
    return rc;
}

static const uint64_t *g_closure(const mx_grammar *g, g_ctab *t, int32_t pos, int32_t ctx, int *n, bool *esc) {
    if (t->mn * 2 >= t->mcap) {
        uint32_t nc = t->mcap ? t->mcap * 2 : 1024;
        uint64_t *nk = mx_malloc(nc * sizeof *nk);
        uint32_t *no = mx_malloc(nc * sizeof *no), *nl = mx_malloc(nc * sizeof *nl);
        uint8_t *ne = mx_malloc(nc);
        if (!nk || !no || !nl || !ne) { free(nk); free(no); free(nl); free(ne); return NULL; }
        memset(nk, 0xff, nc * sizeof *nk);
        for (uint32_t i = 0; i < t->mcap; i++) {
            if (t->mkey[i] == EMPTY_KEY) continue;
            uint32_t k = mix(t->mkey[i]) & (nc - 1);
            while (nk[k] != EMPTY_KEY) k = (k + 1) & (nc - 1);
            nk[k] = t->mkey[i]; no[k] = t->moff[i]; nl[k] = t->mlen[i]; ne[k] = t->mesc[i];
        }
        free(t->mkey); free(t->moff); free(t->mlen); free(t->mesc);
        t->mkey = nk; t->moff = no; t->mlen = nl; t->mesc = ne;
        t->mcap = nc;
    }
    uint64_t key = G_KEY(pos, ctx);
    uint32_t k = mix(key) & (t->mcap - 1);
    for (; t->mkey[k] != EMPTY_KEY; k = (k + 1) & (t->mcap - 1))
        if (t->mkey[k] == key) {
            *n = (int)t->mlen[k];
            if (t->mesc[k]) *esc = true;
            return t->pool.v + t->moff[k];
        }
    g_vec tmp = {0};
    bool e = false;
    if (closure_raw(g, t, pos, ctx, &tmp, &e) || (size_t)t->pool.n + (size_t)tmp.n > UINT32_MAX ||
        g_vec_reserve(&t->pool, t->pool.n + tmp.n)) {
        g_vec_free(&tmp);
        return NULL;
    }
    /* the probe slot is still free: closure_raw interns continuations but never memoizes */
    t->mkey[k] = key;
    t->moff[k] = (uint32_t)t->pool.n;
    t->mlen[k] = (uint32_t)tmp.n;
    t->mesc[k] = e;
    t->mn++;
    if (tmp.n) memcpy(t->pool.v + t->pool.n, tmp.v, (size_t)tmp.n * sizeof *tmp.v);
    t->pool.n += tmp.n;
    g_vec_free(&tmp);
    *n = (int)t->mlen[k];
    if (e) *esc = true;
    return t->pool.v + t->moff[k];
}

static int g_advance(const mx_grammar *g, g_ctab *t, const uint64_t *in, int n, uint8_t b, g_vec *out, bool *esc) {
    out->n = 0;
    if (charge(t, (uint64_t)n)) return MX_ERR;
    int sources = 0;
    for (int i = 0; i < n; i++) {
        int32_t p = G_POS(in[i]);
        if (!g_bset_has(&g->bs[g->el[p].arg], b)) continue;
        int m;
        const uint64_t *c = g_closure(g, t, p + 1, G_CTX(in[i]), &m, esc);
        if (!c || charge(t, (uint64_t)m) || g_vec_reserve(out, out->n + m)) return MX_ERR;
        /* the pool may have moved while out grew? no: out is separate */
        if (m) memcpy(out->v + out->n, c, (size_t)m * sizeof *c);
        out->n += m;
        sources++;
    }
    if (sources > 1) sort_unique(out);
    if (out->n > G_MAX_STACKS) return mx_set_err("grammar: a parser state has more than %d stacks (the grammar is too ambiguous)", G_MAX_STACKS);
    return MX_OK;
}

/* ---------- interned states and transitions ---------- */

static uint32_t hash_keys(const uint64_t *k, int n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) h = (h ^ k[i]) * 0x100000001b3ull + (h >> 29);
    return mix(h);
}

int32_t mx_g_state(g_ctab *t, const uint64_t *keys, int n) {
    if ((uint32_t)t->ns * 2 >= t->shcap) {
        uint32_t nc = t->shcap ? t->shcap * 2 : 1024;
        int32_t *nh = mx_malloc(nc * sizeof *nh);
        if (!nh) return G_FAIL;
        memset(nh, 0xff, nc * sizeof *nh);
        for (int i = 0; i < t->ns; i++) {
            uint32_t k = hash_keys(t->spool.v + t->soff[i], (int)t->slen[i]) & (nc - 1);
            while (nh[k] >= 0) k = (k + 1) & (nc - 1);
            nh[k] = i;
        }
        free(t->sh);
        t->sh = nh;
        t->shcap = nc;
    }
    uint32_t k = hash_keys(keys, n) & (t->shcap - 1);
    for (; t->sh[k] >= 0; k = (k + 1) & (t->shcap - 1)) {
        int32_t id = t->sh[k];
        if ((int)t->slen[id] == n && !memcmp(t->spool.v + t->soff[id], keys, (size_t)n * sizeof *keys)) return id;
    }
    if (t->ns == t->scap) {
        int nc = t->scap ? t->scap * 2 : 256;
        uint32_t *no = mx_realloc(t->soff, (size_t)nc * sizeof *no);
        if (!no) return G_FAIL;
        t->soff = no;
        uint32_t *nl = mx_realloc(t->slen, (size_t)nc * sizeof *nl);
        if (!nl) return G_FAIL;
        t->slen = nl;
        t->scap = nc;
    }
    if ((size_t)t->spool.n + (size_t)n > UINT32_MAX || g_vec_reserve(&t->spool, t->spool.n + n)) return G_FAIL;
    /* keys may point into spool: copy with memmove after the reserve */
    t->soff[t->ns] = (uint32_t)t->spool.n;
    t->slen[t->ns] = (uint32_t)n;
    memmove(t->spool.v + t->spool.n, keys, (size_t)n * sizeof *keys);
    t->spool.n += n;
    t->sh[k] = t->ns;
    return t->ns++;
}

static int32_t step_slow(const mx_grammar *g, g_ctab *t, int32_t s, uint8_t b, bool *esc);

int32_t mx_g_step(const mx_grammar *g, g_ctab *t, int32_t s, uint8_t b, bool *esc) {
    if (t->dense) {
        if (s < t->nrow && t->row[s]) {
            int32_t v = t->row[s][b];
            if (v) {
                if (v < 0) *esc = true;
                return (int32_t)(v & 0x7fffffff) - 2;
            }
        }
        bool e = false;
        int32_t id = step_slow(g, t, s, b, &e);
        if (id == G_FAIL) return G_FAIL;
        if (s >= t->nrow) {
            int nn = t->nrow ? t->nrow : 64;
            while (nn <= s) nn *= 2;
            int32_t **nr = mx_realloc(t->row, (size_t)nn * sizeof *nr);
            if (!nr) return G_FAIL;
            memset(nr + t->nrow, 0, (size_t)(nn - t->nrow) * sizeof *nr);
            t->row = nr;
            t->nrow = nn;
        }
        if (!t->row[s] && !(t->row[s] = mx_calloc(256, sizeof(int32_t)))) return G_FAIL;
        t->row[s][b] = (int32_t)((uint32_t)(id + 2) | (e ? 0x80000000u : 0));
        if (e) *esc = true;
        return id;
    }
    return step_slow(g, t, s, b, esc);
}

/* The transition by hash (any number of states), computed on a miss. */
static int32_t step_slow(const mx_grammar *g, g_ctab *t, int32_t s, uint8_t b, bool *esc) {
    uint64_t key = ((uint64_t)(uint32_t)s << 8) | b;
    if (t->dense) goto compute;
    if (t->tn * 2 >= t->tcap && hash_grow(&t->tkey, &t->tval, &t->tcap)) return G_FAIL;
    uint32_t k = mix(key) & (t->tcap - 1);
    for (; t->tkey[k] != EMPTY_KEY; k = (k + 1) & (t->tcap - 1))
        if (t->tkey[k] == key) {
            int32_t v = t->tval[k];
            if (v < 0) *esc = true;
            return (int32_t)(v & 0x7fffffff) - 1;
        }
compute:;
    int n;
    const uint64_t *in = g_keys(t, s, &n);
    /* stepping may intern states (moving spool): work on a copy */
    t->tmp.n = 0;
    if (g_vec_reserve(&t->tmp, n)) return G_FAIL;
    memcpy(t->tmp.v, in, (size_t)n * sizeof *in);
    bool e = false;
    int32_t id = G_DEAD;
    int rc = g_advance(g, t, t->tmp.v, n, b, &t->adv, &e);
    if (!rc && t->adv.n) id = mx_g_state(t, t->adv.v, t->adv.n);
    if (rc || id == G_FAIL) return G_FAIL;
    if (t->dense) {
        if (e) *esc = true;
        return id;
    }
    /* the transition table may have grown while interning: probe again */
    if (t->tn * 2 >= t->tcap && hash_grow(&t->tkey, &t->tval, &t->tcap)) return G_FAIL;
    k = mix(key) & (t->tcap - 1);
    while (t->tkey[k] != EMPTY_KEY) k = (k + 1) & (t->tcap - 1);
    t->tkey[k] = key;
    t->tval[k] = (int32_t)((uint32_t)(id + 1) | (e ? 0x80000000u : 0));
    t->tn++;
    if (e) *esc = true;
    return id;
}

/* ---------- grammar lifetime ---------- */

static void pcache_free(g_pcache *c) {
    if (!c) return;
    free(c->pairs);
    free(c->acc_bits);
    free(c->acc);
    free(c->unc);
    free(c);
}

void mx_g_grammar_free(mx_grammar *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->pccap; i++) pcache_free(g->pcval[i]);
    free(g->pckey);
    free(g->pcval);
    mx_g_ctab_free(&g->pre);
    pthread_mutex_destroy(&g->mu);
    free(g->el);
    free(g->bs);
    free(g->alt_start);
    free(g->rule_alt);
    free(g->rule_of);
    free(g->ret_site);
    free(g);
}

mx_grammar *mx_grammar_ref(mx_grammar *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void mx_grammar_unref(mx_grammar *g) {
    if (g && atomic_fetch_sub(&g->refs, 1) == 1) mx_g_grammar_free(g);
}

/* ---------- per-position precomputation ---------- */

typedef struct {
    const mx_gvocab *v;
    uint32_t *acc; /* accepted, by index into v->order */
    g_vec unc;     /* context-dependent: ranges [lo, hi) of v->order, packed */
} pwalk;

static void set_range(uint32_t *b, int lo, int hi) {
    for (; lo < hi && (lo & 31); lo++) b[lo >> 5] |= 1u << (lo & 31);
    for (; lo + 32 <= hi; lo += 32) b[lo >> 5] = UINT32_MAX;
    for (; lo < hi; lo++) b[lo >> 5] |= 1u << (lo & 31);
}

static int unc_range(pwalk *w, int lo, int hi) {
    return lo < hi ? g_vec_push(&w->unc, G_KEY(lo, hi)) : MX_OK;
}

/* Depth-first walk of the trie from the root in state s0 (iterative: the
 * depth is the longest token). esc: a stack escaped the known part of the
 * state on this path (the rest of a token then depends on the context). */
static int walk(mx_grammar *g, pwalk *w, int32_t s0) {
    const mx_gvocab *v = w->v;
    typedef struct { int32_t child, end, state; bool esc; } frame;
    frame *st = mx_malloc((size_t)(v->max_len + 2) * sizeof *st);
    if (!st) return MX_ERR;
    int sp = 0, rc = MX_OK;
    st[0] = (frame){1, v->end[0], s0, false};
    while (sp >= 0 && !rc) {
        frame *f = &st[sp];
        if (f->child >= f->end) { sp--; continue; }
        int32_t c = f->child;
        f->child = v->end[c];
        bool e = false;
        int32_t ns = mx_g_step(g, &g->pre, f->state, v->byte[c], &e);
        if (ns == G_FAIL) { rc = MX_ERR; break; }
        bool live = ns >= 0, esc = f->esc || e;
        int32_t lo = v->lo[c], own = lo + v->own[c], hi = v->lo[v->end[c]];
        /* tokens ending here: accepted when a stack survives or the known part just ended */
        if (live || e) set_range(w->acc, lo, own);
        else if (f->esc) rc = unc_range(w, lo, own);
        if (live) {
            if (c + 1 < v->end[c]) st[++sp] = (frame){c + 1, v->end[c], ns, esc};
        } else if (esc && !rc) rc = unc_range(w, own, hi);
    }
    free(st);
    return rc;
}

/* The tokens a parser state accepts, keyed by its stacks reduced to (position,
 * return position of the frame above it; 0 at the bottom of the stack):
 * what lies deeper is unknown when the walk is made (see G_BASE_OF). */
static g_pcache *precompute(mx_grammar *g, const uint64_t *pairs, int n) {
    const mx_gvocab *v = g->vocab;
    g_pcache *pc = mx_calloc(1, sizeof *pc);
    pwalk w = {v, mx_calloc(((size_t)v->n_order + 31) / 32 + 1, sizeof(uint32_t)), {0}};
    uint64_t *keys = mx_malloc((size_t)n * sizeof *keys);
    int32_t s0 = G_FAIL;
    if (!pc || !w.acc || !keys) goto fail;
    for (int i = 0; i < n; i++) {
        int32_t pos = G_POS(pairs[i]), ret1 = G_CTX(pairs[i]), ctx = G_CTX_ROOT;
        if (ret1) {
            /* the frame above pos returns into ret1's rule, whose own caller is unknown */
            int32_t base = intern(&g->pre, G_BASE_OF(g->rule_of[ret1]), G_CTX_BASE);
            ctx = base < 0 ? -1 : intern(&g->pre, ret1, base);
            if (ctx < 0) goto fail;
        }
        keys[i] = G_KEY(pos, ctx);
    }
    g_vec kv = {keys, n, n};
    sort_unique(&kv);
    mx_g_budget_reset(&g->pre);
    if ((s0 = mx_g_state(&g->pre, kv.v, kv.n)) == G_FAIL || walk(g, &w, s0)) goto fail;
    if (g->pre.spent > g->pre_spent_max) g->pre_spent_max = g->pre.spent;
    free(keys);
    keys = NULL;
    /* to token ids; a short list beats a bitmap when few tokens pass */
    int n_acc = 0;
    for (int i = 0; i < (v->n_order + 31) / 32; i++) n_acc += __builtin_popcount(w.acc[i]);
    if ((size_t)n_acc * 32 < (size_t)v->n_vocab) pc->acc = mx_malloc((size_t)(n_acc ? n_acc : 1) * sizeof *pc->acc);
    else pc->acc_bits = mx_calloc((size_t)v->n_words, sizeof *pc->acc_bits);
    if (!pc->acc && !pc->acc_bits) goto fail;
    for (int i = 0; i < (v->n_order + 31) / 32; i++)
        for (uint32_t m = w.acc[i]; m; m &= m - 1) {
            int32_t t = v->order[i * 32 + __builtin_ctz(m)];
            if (pc->acc_bits) pc->acc_bits[t >> 5] |= 1u << (t & 31);
            else pc->acc[pc->n_acc] = t;
            pc->n_acc++;
        }
    int n_unc = 0;
    for (int i = 0; i < w.unc.n; i++) n_unc += G_CTX(w.unc.v[i]) - G_POS(w.unc.v[i]);
    pc->unc = mx_malloc((size_t)(n_unc ? n_unc : 1) * sizeof *pc->unc);
    if (!pc->unc) goto fail;
    for (int i = 0; i < w.unc.n; i++)
        for (int k = G_POS(w.unc.v[i]); k < G_CTX(w.unc.v[i]); k++) pc->unc[pc->n_unc++] = v->order[k];
    free(w.acc);
    g_vec_free(&w.unc);
    return pc;
fail:
    free(keys);
    free(w.acc);
    g_vec_free(&w.unc);
    pcache_free(pc);
    return NULL;
}

static int pc_grow(mx_grammar *g) {
    uint32_t nc = g->pccap ? g->pccap * 2 : 256;
    uint32_t *nk = mx_malloc(nc * sizeof *nk);
    g_pcache **nv = mx_malloc(nc * sizeof *nv);
    if (!nk || !nv) { free(nk); free(nv); return MX_ERR; }
    memset(nv, 0, nc * sizeof *nv);
    for (uint32_t i = 0; i < g->pccap; i++) {
        if (!g->pcval[i]) continue;
        uint32_t k = g->pckey[i] & (nc - 1);
        while (nv[k]) k = (k + 1) & (nc - 1);
        nk[k] = g->pckey[i];
        nv[k] = g->pcval[i];
    }
    free(g->pckey);
    free(g->pcval);
    g->pckey = nk;
    g->pcval = nv;
    g->pccap = nc;
    return MX_OK;
}

/* The cache entry of a state's sorted (position, return position) pairs. */
static const g_pcache *pcache_get(mx_grammar *g, const uint64_t *pairs, int n) {
    uint32_t h = hash_keys(pairs, n);
    g_pcache *pc = NULL;
    pthread_mutex_lock(&g->mu);
    if (g->pccap) {
        for (uint32_t k = h & (g->pccap - 1); g->pcval[k]; k = (k + 1) & (g->pccap - 1))
            if (g->pckey[k] == h && g->pcval[k]->n_pairs == n && !memcmp(g->pcval[k]->pairs, pairs, (size_t)n * sizeof *pairs)) {
                pc = g->pcval[k];
                break;
            }
    }
    if (!pc && (g->pcn * 2 < g->pccap || !pc_grow(g)) && (pc = precompute(g, pairs, n))) {
        if (!(pc->pairs = mx_malloc((size_t)n * sizeof *pairs))) { pcache_free(pc); pc = NULL; }
        else {
            memcpy(pc->pairs, pairs, (size_t)n * sizeof *pairs);
            pc->n_pairs = n;
            uint32_t k = h & (g->pccap - 1);
            while (g->pcval[k]) k = (k + 1) & (g->pccap - 1);
            g->pckey[k] = h;
            g->pcval[k] = pc;
            g->pcn++;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return pc;
}

/* ---------- matcher ---------- */

struct mx_gmatch {
    mx_grammar *g;
    g_ctab t;
    int32_t cur; /* state */
    g_vec pairs; /* the current state as cache key */
    int32_t *hist; /* state before each accepted token (rollback) */
    int n_hist, cap_hist;
    bool ended;
};

static int push_hist(mx_gmatch *m) {
    if (m->n_hist == m->cap_hist) {
        int nc = m->cap_hist ? m->cap_hist * 2 : 64;
        int32_t *nh = mx_realloc(m->hist, (size_t)nc * sizeof *nh);
        if (!nh) return MX_ERR;
        m->hist = nh;
        m->cap_hist = nc;
    }
    m->hist[m->n_hist++] = m->ended ? -1 - m->cur : m->cur;
    return MX_OK;
}

int mx_gmatch_rollback(mx_gmatch *m, int n) {
    if (n < 0 || n > m->n_hist) return mx_set_err("grammar: cannot roll back %d tokens (%d accepted)", n, m->n_hist);
    for (; n > 0; n--) {
        int32_t h = m->hist[--m->n_hist];
        m->ended = h < 0;
        m->cur = h < 0 ? -1 - h : h;
    }
    return MX_OK;
}

mx_gmatch *mx_gmatch_new(mx_grammar *g) {
    mx_gmatch *m = mx_calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = mx_grammar_ref(g);
    int n;
    bool esc = false;
    const uint64_t *c;
    if (mx_g_ctab_init(&m->t) || !(c = g_closure(g, &m->t, G_START, G_CTX_ROOT, &n, &esc)) || (m->cur = mx_g_state(&m->t, c, n)) < 0) {
        mx_gmatch_free(m);
        return NULL;
    }
    return m;
}

void mx_gmatch_free(mx_gmatch *m) {
    if (!m) return;
    mx_g_ctab_free(&m->t);
    g_vec_free(&m->pairs);
    free(m->hist);
    mx_grammar_unref(m->g);
    free(m);
}

bool mx_gmatch_complete(const mx_gmatch *m) {
    int n;
    const uint64_t *k = g_keys(&m->t, m->cur, &n);
    return n && k[0] == G_KEY(G_ACCEPT, G_CTX_ROOT); /* the smallest key */
}

bool mx_gmatch_finished(const mx_gmatch *m) {
    int n;
    g_keys(&m->t, m->cur, &n);
    return m->ended || (n == 1 && mx_gmatch_complete(m));
}

/* The state after bytes s from state st; G_DEAD when they leave the grammar. */
static int32_t run_bytes(mx_gmatch *m, int32_t st, const uint8_t *s, size_t n) {
    bool esc = false;
    for (size_t i = 0; i < n && st >= 0; i++) st = mx_g_step(m->g, &m->t, st, s[i], &esc);
    return st;
}

int mx_gmatch_accept_bytes(mx_gmatch *m, const char *s, size_t n) {
    if (m->ended) return mx_set_err("grammar: the text continues after its end token");
    mx_g_budget_reset(&m->t);
    int32_t st = run_bytes(m, m->cur, (const uint8_t *)s, n);
    if (st == G_FAIL) return MX_ERR;
    if (st == G_DEAD) return mx_set_err("grammar: the text leaves the grammar");
    m->cur = st;
    return MX_OK;
}

static bool is_eos(const mx_gvocab *v, int32_t tok) {
    for (int i = 0; i < v->n_eos; i++)
        if (v->eos[i] == tok) return true;
    return false;
}

int mx_gmatch_accept_token(mx_gmatch *m, int32_t tok) {
    const mx_gvocab *v = m->g->vocab;
    if (!v || tok < 0 || tok >= v->n_vocab) return mx_set_err("grammar: token %d is out of range", (int)tok);
    if (m->ended) return mx_set_err("grammar: token %d follows the end token", (int)tok);
    if (is_eos(v, tok)) {
        if (!mx_gmatch_complete(m)) return mx_set_err("grammar: the end token %d comes before the grammar is complete", (int)tok);
        if (push_hist(m)) return MX_ERR;
        m->ended = true;
        return MX_OK;
    }
    if (!v->len[tok]) return mx_set_err("grammar: token %d is never allowed", (int)tok);
    mx_g_budget_reset(&m->t);
    int32_t st = run_bytes(m, m->cur, (const uint8_t *)v->bytes + v->off[tok], v->len[tok]);
    if (st == G_FAIL) return MX_ERR;
    if (st == G_DEAD) return mx_set_err("grammar: token %d does not continue the grammar here", (int)tok);
    if (push_hist(m)) return MX_ERR;
    m->cur = st;
    return MX_OK;
}

int mx_gmatch_mask(mx_gmatch *m, uint32_t *bits) {
    const mx_gvocab *v = m->g->vocab;
    if (!v) return mx_set_err("grammar: compiled without a vocabulary");
    memset(bits, 0, (size_t)v->n_words * sizeof *bits);
    if (m->ended) return 0;
    mx_g_budget_reset(&m->t);
    bool complete = false;
    int ns;
    const uint64_t *st = g_keys(&m->t, m->cur, &ns);
    m->pairs.n = 0;
    if (g_vec_reserve(&m->pairs, ns)) return MX_ERR;
    for (int i = 0; i < ns; i++) {
        int32_t p = G_POS(st[i]), c = G_CTX(st[i]);
        if (p == G_ACCEPT) { complete = true; continue; }
        m->pairs.v[m->pairs.n++] = G_KEY(p, c == G_CTX_ROOT ? 0 : m->t.ret[c]);
    }
    sort_unique(&m->pairs);
    if (m->pairs.n) {
        const g_pcache *pc = pcache_get(m->g, m->pairs.v, m->pairs.n);
        if (!pc) return MX_ERR;
        if (pc->acc_bits) memcpy(bits, pc->acc_bits, (size_t)v->n_words * sizeof *bits);
        else
            for (int j = 0; j < pc->n_acc; j++) bits[pc->acc[j] >> 5] |= 1u << (pc->acc[j] & 31);
        /* the context-dependent tokens, against the real stacks */
        for (int j = 0; j < pc->n_unc; j++) {
            int32_t t = pc->unc[j];
            int32_t s2 = run_bytes(m, m->cur, (const uint8_t *)v->bytes + v->off[t], v->len[t]);
            if (s2 == G_FAIL) return MX_ERR;
            if (s2 >= 0) bits[t >> 5] |= 1u << (t & 31);
        }
    }
    if (complete)
        for (int i = 0; i < v->n_eos; i++) bits[v->eos[i] >> 5] |= 1u << (v->eos[i] & 31);
    int n = 0;
    for (int w = 0; w < v->n_words; w++) n += __builtin_popcount(bits[w]);
    return n;
}

uint64_t mx_gmatch_work(const mx_gmatch *m) { return m->t.spent; }

uint64_t mx_grammar_precompute_work(mx_grammar *g) {
    pthread_mutex_lock(&g->mu);
    uint64_t w = g->pre_spent_max;
    pthread_mutex_unlock(&g->mu);
    return w;
}

void mx_gmask_apply(const uint32_t *bits, float *logits, int n) {
    for (int w = 0; w * 32 < n; w++) {
        uint32_t b = bits[w];
        if (b == UINT32_MAX) continue;
        int hi = MX_MIN(32, n - w * 32);
        for (int i = 0; i < hi; i++)
            if (!((b >> i) & 1)) logits[w * 32 + i] = -INFINITY;
    }
}
