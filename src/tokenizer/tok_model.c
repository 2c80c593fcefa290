/* tokenizer models: BPE (priority-queue merges over a linked list of
 * symbols, merge ranks in a hash keyed by the id pair, word cache), WordPiece
 * (greedy longest match), Unigram (Viterbi over bytes, f64 scores) and
 * WordLevel. */
#include "tok_internal.h"
#include <stdlib.h>
#include <string.h>

/* A batch at a time: its table lookups overlap (tk_smap_get_batch). */
#define MERGE_BATCH (TK_BATCH / 2)
static int add_merges(tk_model *m, const tk_str *pair, int n, uint32_t rank0, const char *file) {
    int32_t id[2 * MERGE_BATCH], cid[MERGE_BATCH];
    tk_str cat[MERGE_BATCH];
    tk_smap_get_batch(&m->map, m->vocab, pair, 2 * n, id);
    int nv = 0; /* merges before the first whose a or b is unknown */
    while (nv < n && id[2 * nv] >= 0 && id[2 * nv + 1] >= 0) nv++;
    /* a + b, less b's continuing_subword_prefix, must be in the vocabulary too */
    size_t total = 0;
    for (int k = 0; k < nv; k++) total += m->vocab[id[2 * k]].len + m->vocab[id[2 * k + 1]].len;
    char stackbuf[4096];
    char *buf = total <= sizeof stackbuf ? stackbuf : mx_malloc(total);
    if (!buf) return MX_ERR;
    size_t off = 0;
    for (int k = 0; k < nv; k++) {
        const tk_str *A = &m->vocab[id[2 * k]], *B = &m->vocab[id[2 * k + 1]];
        size_t skip = 0;
        if (m->csp_len && B->len >= m->csp_len && !memcmp(B->s, m->csp, m->csp_len)) skip = m->csp_len;
        memcpy(buf + off, A->s, A->len);
        memcpy(buf + off + A->len, B->s + skip, B->len - skip);
        cat[k].s = buf + off;
        cat[k].len = (uint32_t)(A->len + B->len - skip);
        off += cat[k].len;
    }
    tk_smap_get_batch(&m->map, m->vocab, cat, nv, cid);
    for (int k = 0; k < nv; k++) tk_umap_prefetch(&m->merges, (uint64_t)(uint32_t)id[2 * k] << 32 | (uint32_t)id[2 * k + 1]);
    int rc = MX_OK;
    for (int k = 0; k < nv && !rc; k++) {
        const tk_str *A = &m->vocab[id[2 * k]], *B = &m->vocab[id[2 * k + 1]];
        if (cid[k] < 0)
            rc = mx_set_err("%s: model.merges[%u]: \"%.*s\" + \"%.*s\" is not in the vocabulary", file, rank0 + (uint32_t)k,
                            (int)MX_MIN(A->len, 64u), A->s, (int)MX_MIN(B->len, 64u), B->s);
        else rc = tk_umap_put(&m->merges, (uint64_t)(uint32_t)id[2 * k] << 32 | (uint32_t)id[2 * k + 1], rank0 + (uint32_t)k, cid[k]);
    }
    if (buf != stackbuf) free(buf);
    if (!rc && nv < n) {
        const tk_str *x = &pair[2 * nv + (id[2 * nv] >= 0)];
        rc = mx_set_err("%s: model.merges[%u]: \"%.*s\" is not in the vocabulary", file, rank0 + (uint32_t)nv, (int)MX_MIN(x->len, 64u), x->s);
    }
    return rc;
}

int tk_bpe_add_merges(tk_model *m, const tk_str *pair, int n, uint32_t rank0, const char *file) {
    for (int k = 0; k < n; k += MERGE_BATCH)
        if (add_merges(m, pair + 2 * k, MX_MIN(n - k, MERGE_BATCH), rank0 + (uint32_t)k, file)) return MX_ERR;
    return MX_OK;
}

int tk_model_finish(tk_model *m, const char *file) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        static const char hx[] = "0123456789ABCDEF";
        memcpy(name, "<0x", 3);
        name[3] = hx[b >> 4];
        name[4] = hx[b & 15];
        name[5] = '>';
        m->byte_id[b] = tk_smap_get(&m->map, m->vocab, name, 6);
    }
    m->all_bytes = true;
    for (int b = 0; b < 256; b++) if (m->byte_id[b] < 0) m->all_bytes = false;
    m->max_len = 0;
    for (int32_t i = 0; i < m->n; i++) if (m->vocab[i].len > m->max_len) m->max_len = m->vocab[i].len;
    if (m->type == M_UNIGRAM) {
        m->min_score = 0;
        for (int32_t i = 0; i < m->n; i++) if (i == 0 || m->score[i] < m->min_score) m->min_score = m->score[i];
        size_t total = 1;
        for (int32_t i = 0; i < m->n; i++) total += m->vocab[i].len;
        if (total > (size_t)INT32_MAX) return mx_set_err("%s: model.vocab: too large", file);
        m->trie_val = mx_malloc(sizeof(int32_t) * total);
        if (!m->trie_val) return MX_ERR;
        m->trie_val[0] = -1;
        int32_t nn = 1;
        if (tk_umap_init(&m->trie, total)) return MX_ERR;
        for (int32_t i = 0; i < m->n; i++) {
            int32_t node = 0;
            const uint8_t *s = (const uint8_t *)m->vocab[i].s;
            for (uint32_t k = 0; k < m->vocab[i].len; k++) {
                uint32_t child;
                uint64_t key = (uint64_t)node << 8 | s[k];
                if (!tk_umap_get(&m->trie, key, &child, NULL)) {
                    child = (uint32_t)nn;
                    m->trie_val[nn++] = -1;
                    if (tk_umap_put(&m->trie, key, child, 0)) return MX_ERR;
                }
                node = (int32_t)child;
            }
            if (m->vocab[i].len) m->trie_val[node] = i;
        }
    }
    return MX_OK;
}

void tk_model_free(tk_model *m) {
    free(m->vocab);
    tk_smap_free(&m->map);
    tk_umap_free(&m->merges);
    free(m->csp);
    free(m->eow);
    free(m->score);
    tk_umap_free(&m->trie);
    free(m->trie_val);
}

/* ---- BPE ---- */
typedef struct { int32_t id, prev, next; uint32_t len; } sym;
typedef struct { uint32_t rank; int32_t pos, new_id; } mrg;

static inline bool mrg_less(const mrg *a, const mrg *b) { return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos); }

static void heap_push(mrg *h, int *n, mrg x) {
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!mrg_less(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static mrg heap_pop(mrg *h, int *n) {
    mrg top = h[0], x = h[--(*n)];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const mrg *best = &x;
        if (l < *n && mrg_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && mrg_less(&h[r], best)) { m = r; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0) h[i] = x;
    return top;
}

static int bpe_word(const tk_model *m, tk_ctx *c, const char *w, size_t n, int32_t **ids, int *nids, int *cap) {
    mx_buf *sb = &c->b[2];
    sb->len = 0;
    size_t maxsym = n * (1 + m->csp_len + m->eow_len) + 2;
    if (mx_buf_reserve(sb, (maxsym + 1) * sizeof(sym) + 2 * maxsym * sizeof(mrg) + 64)) return MX_ERR;
    sym *S = (sym *)(void *)(((uintptr_t)sb->data + 15) & ~(uintptr_t)15);
    int ns = 0;
    int32_t unk = -1;
    uint32_t unk_len = 0;
    bool have_unk = false;
    char tmp[512];
    const uint8_t *u = (const uint8_t *)w;
#define ADD_SYM(ID, L) do { S[ns].id = (ID); S[ns].len = (L); S[ns].prev = ns - 1; S[ns].next = ns + 1; ns++; } while (0)
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t l = (size_t)tk_u8dec(u + i, n - i, &cp);
        bool first = i == 0, last = i + l == n;
        const char *s = w + i;
        size_t sl = l;
        if ((!first && m->csp_len) || (last && m->eow_len)) {
            size_t need = (first ? 0 : m->csp_len) + l + (last ? m->eow_len : 0);
            if (need <= sizeof tmp) {
                size_t k = 0;
                if (!first && m->csp_len) { memcpy(tmp, m->csp, m->csp_len); k = m->csp_len; } /* csp may be NULL */
                memcpy(tmp + k, w + i, l);
                k += l;
                if (last && m->eow_len) { memcpy(tmp + k, m->eow, m->eow_len); k += m->eow_len; }
                s = tmp;
                sl = k;
            }
        }
        int32_t id = tk_smap_get(&m->map, m->vocab, s, sl);
        if (id >= 0) {
            if (have_unk) { ADD_SYM(unk, unk_len); have_unk = false; }
            ADD_SYM(id, (uint32_t)l);
        } else {
            bool done = false;
            if (m->byte_fallback) {
                bool all = true;
                for (size_t k = 0; k < sl; k++) if (m->byte_id[(uint8_t)s[k]] < 0) { all = false; break; }
                if (all) {
                    for (size_t k = 0; k < sl; k++) ADD_SYM(m->byte_id[(uint8_t)s[k]], 1);
                    done = true;
                }
            }
            if (!done && m->unk_id >= 0) {
                if (have_unk && m->fuse_unk) unk_len += (uint32_t)l;
                else {
                    if (have_unk) ADD_SYM(unk, unk_len);
                    unk = m->unk_id;
                    unk_len = (uint32_t)l;
                    have_unk = true;
                }
            }
        }
        i += l;
    }
    if (have_unk) ADD_SYM(unk, unk_len);
#undef ADD_SYM
    if (!ns) return MX_OK;
    S[ns - 1].next = -1;
    /* heap after the symbols */
    mrg *H = (mrg *)(void *)(S + ns + 1);
    int nh = 0;
    size_t hcap = (size_t)((sb->cap - (size_t)((char *)H - sb->data)) / sizeof(mrg));
    for (int i = 0; i + 1 < ns; i++) {
        uint32_t r;
        int32_t nid;
        if (tk_umap_get(&m->merges, (uint64_t)(uint32_t)S[i].id << 32 | (uint32_t)S[i + 1].id, &r, &nid))
            heap_push(H, &nh, (mrg){r, i, nid});
    }
    while (nh > 0) {
        mrg top = heap_pop(H, &nh);
        sym *a = &S[top.pos];
        if (a->len == 0 || a->next < 0) continue;
        sym *b = &S[a->next];
        uint32_t r;
        int32_t nid;
        if (!tk_umap_get(&m->merges, (uint64_t)(uint32_t)a->id << 32 | (uint32_t)b->id, &r, &nid) || nid != top.new_id) continue;
        a->id = top.new_id;
        a->len += b->len;
        b->len = 0;
        int32_t bn = b->next;
        a->next = bn;
        if (bn >= 0) S[bn].prev = top.pos;
        /* the heap can hold at most 2 pushes per merge plus the initial pairs */
        if ((size_t)nh + 2 > hcap) {
            size_t off = (size_t)((char *)S - sb->data), hoff = (size_t)((char *)H - sb->data);
            if (mx_buf_reserve(sb, sb->cap)) return MX_ERR;
            S = (sym *)(void *)(sb->data + off);
            H = (mrg *)(void *)(sb->data + hoff);
            hcap = (sb->cap - hoff) / sizeof(mrg);
            a = &S[top.pos];
        }
        if (a->prev >= 0) {
            sym *p = &S[a->prev];
            if (tk_umap_get(&m->merges, (uint64_t)(uint32_t)p->id << 32 | (uint32_t)a->id, &r, &nid))
                heap_push(H, &nh, (mrg){r, a->prev, nid});
        }
        if (a->next >= 0) {
            if (tk_umap_get(&m->merges, (uint64_t)(uint32_t)a->id << 32 | (uint32_t)S[a->next].id, &r, &nid))
                heap_push(H, &nh, (mrg){r, top.pos, nid});
        }
    }
    for (int i = 0; i >= 0; i = S[i].next)
        if (tk_push_id(ids, nids, cap, S[i].id)) return MX_ERR;
    return MX_OK;
}

/* ---- word cache (BPE) ---- */
static bool cache_get(const mx_tokenizer *t, uint64_t h, const char *s, size_t n, int32_t **ids, int *nids, int *cap) {
    if (!t->cache) return false;
    pthread_mutex_t *mu = (pthread_mutex_t *)&t->cache_mu;
    pthread_mutex_lock(mu);
    const tk_cache_ent *e = &t->cache[h & (TK_CACHE_SIZE - 1)];
    bool hit = e->key && e->h == h && e->klen == n && !memcmp(e->key, s, n);
    int rc = MX_OK;
    if (hit)
        for (int i = 0; i < e->n && !rc; i++) rc = tk_push_id(ids, nids, cap, e->ids[i]);
    pthread_mutex_unlock(mu);
    return hit && !rc;
}

static void cache_put(const mx_tokenizer *t, uint64_t h, const char *s, size_t n, const int32_t *ids, int nids) {
    if (!t->cache) return;
    char *k = malloc(n ? n : 1);
    int32_t *v = malloc(sizeof(int32_t) * (size_t)(nids ? nids : 1));
    if (!k || !v) { free(k); free(v); return; }
    memcpy(k, s, n);
    if (nids) memcpy(v, ids, sizeof(int32_t) * (size_t)nids);
    pthread_mutex_t *mu = (pthread_mutex_t *)&t->cache_mu;
    pthread_mutex_lock(mu);
    tk_cache_ent *e = (tk_cache_ent *)&t->cache[h & (TK_CACHE_SIZE - 1)];
    free(e->key);
    free(e->ids);
    e->h = h;
    e->key = k;
    e->klen = (uint32_t)n;
    e->ids = v;
    e->n = nids;
    pthread_mutex_unlock(mu);
}

/* ---- Unigram ---- */
static int unigram(const tk_model *m, tk_ctx *c, const char *w, size_t n, int32_t **ids, int *nids, int *cap) {
    typedef struct { double score; int32_t start, id; } node;
    mx_buf *sb = &c->b[2];
    sb->len = 0;
    if (mx_buf_reserve(sb, (n + 1) * sizeof(node) + 16)) return MX_ERR;
    node *B = (node *)(void *)(((uintptr_t)sb->data + 15) & ~(uintptr_t)15);
    for (size_t i = 0; i <= n; i++) { B[i].score = 0; B[i].start = -1; B[i].id = -1; }
    double unk_score = m->min_score - 10.0;
    const uint8_t *u = (const uint8_t *)w;
    for (size_t st = 0; st < n;) {
        double base = B[st].score;
        int32_t cp;
        size_t mb = (size_t)tk_u8dec(u + st, n - st, &cp);
        bool single = false;
        int32_t node_i = 0;
        for (size_t k = st; k < n; k++) {
            uint32_t child;
            if (!tk_umap_get(&m->trie, (uint64_t)node_i << 8 | u[k], &child, NULL)) break;
            node_i = (int32_t)child;
            int32_t id = m->trie_val[node_i];
            if (id < 0) continue;
            size_t end = k + 1;
            double sc = m->score[id] + base;
            if (B[end].start < 0 || sc > B[end].score) { B[end].score = sc; B[end].start = (int32_t)st; B[end].id = id; }
            if (end - st == mb) single = true;
        }
        if (!single) {
            size_t end = st + mb;
            double sc = unk_score + base;
            if (B[end].start < 0 || sc > B[end].score) { B[end].score = sc; B[end].start = (int32_t)st; B[end].id = m->unk_id; }
        }
        st += mb;
    }
    /* backtrack into (start, end, id) triples, fusing unknowns */
    size_t nt = 0;
    int32_t *tr = mx_malloc(sizeof(int32_t) * 3 * (n + 1));
    if (!tr) return MX_ERR;
    size_t e = n;
    while (e > 0) {
        int32_t s0 = B[e].start;
        if (s0 < 0) break; /* cannot happen */
        bool is_unk = m->unk_id >= 0 && B[e].id == m->unk_id;
        if (is_unk && nt > 0 && tr[3 * (nt - 1) + 2] == -2) tr[3 * (nt - 1)] = s0; /* extend the fused unk */
        else {
            tr[3 * nt] = s0;
            tr[3 * nt + 1] = (int32_t)e;
            tr[3 * nt + 2] = is_unk ? -2 : B[e].id;
            nt++;
        }
        e = (size_t)s0;
    }
    int rc = MX_OK;
    for (size_t k = nt; k-- > 0 && !rc;) {
        int32_t s0 = tr[3 * k], e0 = tr[3 * k + 1], id = tr[3 * k + 2];
        if (id == -2) id = tk_smap_get(&m->map, m->vocab, w + s0, (size_t)(e0 - s0));
        if (id >= 0) { rc = tk_push_id(ids, nids, cap, id); continue; }
        if (m->byte_fallback) {
            bool all = true;
            for (int32_t q = s0; q < e0; q++) if (m->byte_id[u[q]] < 0) all = false;
            if (all) {
                for (int32_t q = s0; q < e0 && !rc; q++) rc = tk_push_id(ids, nids, cap, m->byte_id[u[q]]);
                continue;
            }
        }
        if (m->unk_id < 0) { rc = mx_set_err("tokenizer: Unigram: unknown piece and no unk_id"); break; }
        rc = tk_push_id(ids, nids, cap, m->unk_id);
    }
    free(tr);
    return rc;
}

/* ---- WordPiece ---- */
static int wordpiece(const tk_model *m, tk_ctx *c, const char *w, size_t n, int32_t **ids, int *nids, int *cap) {
    const uint8_t *u = (const uint8_t *)w;
    size_t nch = 0;
    for (size_t i = 0; i < n; i++) nch += (u[i] & 0xC0) != 0x80;
    if ((int64_t)nch > m->max_chars) return m->unk_id >= 0 ? tk_push_id(ids, nids, cap, m->unk_id) : MX_OK;
    int start_n = *nids;
    mx_buf *t = &c->b[2];
    size_t st = 0;
    while (st < n) {
        size_t end = n;
        if (end - st > m->max_len) { /* no vocabulary entry is longer */
            end = st + m->max_len;
            while (end > st && (u[end] & 0xC0) == 0x80) end--;
        }
        int32_t found = -1;
        while (st < end) {
            t->len = 0;
            if (st > 0 && m->csp_len && mx_buf_append(t, m->csp, m->csp_len)) return MX_ERR;
            if (mx_buf_append(t, w + st, end - st)) return MX_ERR;
            found = tk_smap_get(&m->map, m->vocab, t->data, t->len);
            if (found >= 0) break;
            end--;
            while (end > st && (u[end] & 0xC0) == 0x80) end--;
        }
        if (found < 0) {
            *nids = start_n;
            return m->unk_id >= 0 ? tk_push_id(ids, nids, cap, m->unk_id) : MX_OK;
        }
        if (tk_push_id(ids, nids, cap, found)) return MX_ERR;
        st = end;
    }
    return MX_OK;
}

int tk_model_tokenize(const mx_tokenizer *t, tk_ctx *c, const char *s, size_t n, int32_t **ids, int *nids, int *cap) {
    const tk_model *m = &t->model;
    if (!n) return MX_OK;
    switch (m->type) {
    case M_BPE: {
        if (m->ignore_merges) {
            int32_t id = tk_smap_get(&m->map, m->vocab, s, n);
            if (id >= 0) return tk_push_id(ids, nids, cap, id);
        }
        bool cacheable = n <= 256;
        uint64_t h = cacheable ? tk_hash(s, n) : 0;
        if (cacheable && cache_get(t, h, s, n, ids, nids, cap)) return MX_OK;
        int before = *nids;
        if (bpe_word(m, c, s, n, ids, nids, cap)) return MX_ERR;
        if (cacheable) cache_put(t, h, s, n, *nids > before ? *ids + before : NULL, *nids - before); /* *ids may be NULL */
        return MX_OK;
    }
    case M_WORDPIECE: return wordpiece(m, c, s, n, ids, nids, cap);
    case M_UNIGRAM: return unigram(m, c, s, n, ids, nids, cap);
    case M_WORDLEVEL: {
        int32_t id = tk_smap_get(&m->map, m->vocab, s, n);
        if (id < 0) id = m->unk_id;
        if (id < 0) return mx_set_err("tokenizer: WordLevel: unknown word and no unk_token");
        return tk_push_id(ids, nids, cap, id);
    }
    }
    return mx_set_err("tokenizer: bad model");
}
