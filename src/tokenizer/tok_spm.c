/* tokenizer: a SentencePiece tokenizer.model on its own. The ModelProto is
 * read with a small protobuf wire-format reader; the pipeline built from it
 * is the one transformers' converters write into tokenizer.json
 * (charsmap -> whitespace rules -> "▁" prefix/escaping; BPE with merges in
 * score order, or Unigram; ByteFallback/Fuse/Strip decoder). */
#include "tok_internal.h"
#include <stdlib.h>
#include <string.h>

typedef struct { const uint8_t *p, *e; } pb;

static int pb_varint(pb *b, uint64_t *v) {
    uint64_t r = 0;
    for (int s = 0; s < 64; s += 7) {
        if (b->p >= b->e) return MX_ERR;
        uint8_t c = *b->p++;
        r |= (uint64_t)(c & 0x7F) << s;
        if (c < 0x80) { *v = r; return MX_OK; }
    }
    return MX_ERR;
}

/* Reads one field; for LEN fields sets sub to the payload. */
static int pb_field(pb *b, uint32_t *field, uint32_t *wt, uint64_t *val, pb *sub) {
    uint64_t key;
    if (pb_varint(b, &key)) return MX_ERR;
    *field = (uint32_t)(key >> 3);
    *wt = (uint32_t)(key & 7);
    switch (*wt) {
    case 0: return pb_varint(b, val);
    case 1: if (b->e - b->p < 8) return MX_ERR; memcpy(val, b->p, 8); b->p += 8; return MX_OK;
    case 5: {
        if (b->e - b->p < 4) return MX_ERR;
        uint32_t x;
        memcpy(&x, b->p, 4);
        *val = x;
        b->p += 4;
        return MX_OK;
    }
    case 2: {
        uint64_t l;
        if (pb_varint(b, &l) || l > (uint64_t)(b->e - b->p)) return MX_ERR;
        sub->p = b->p;
        sub->e = b->p + l;
        b->p += l;
        return MX_OK;
    }
    }
    return MX_ERR;
}

typedef struct { const char *s; uint32_t len; float score; int type; } piece;

typedef struct { float score; int32_t id; } ord;
static int cmp_ord(const void *a, const void *b) {
    const ord *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static tk_norm *mk_norm(int type) {
    tk_norm *n = mx_calloc(1, sizeof *n);
    if (n) n->type = type;
    return n;
}

static tk_dec *mk_dec(int type) {
    tk_dec *d = mx_calloc(1, sizeof *d);
    if (d) d->type = type;
    return d;
}

#define BAD(what) do { mx_set_err("%s: %s", file, what); goto fail; } while (0)

int tk_load_spm(mx_tokenizer *t, const char *data, size_t len, const char *file, bool no_dummy, int strip_first) {
    pb b = {(const uint8_t *)data, (const uint8_t *)data + len};
    piece *P = NULL;
    int np = 0, cap = 0;
    int model_type = 1;
    bool byte_fallback = false, dummy = true, extra_ws = true, escape = true;
    int64_t unk_id = 0;
    pb charsmap = {0};
    ord *order = NULL;
    while (b.p < b.e) {
        uint32_t f, wt;
        uint64_t v = 0;
        pb sub = {0};
        if (pb_field(&b, &f, &wt, &v, &sub)) BAD("truncated or malformed protobuf");
        if (f == 1 && wt == 2) {
            if (np == cap) {
                if (np >= TK_MAX_VOCAB) BAD("pieces: too many");
                cap = cap ? cap * 2 : 1024;
                piece *q = mx_realloc(P, sizeof(piece) * (size_t)cap);
                if (!q) goto fail;
                P = q;
            }
            piece *x = &P[np];
            memset(x, 0, sizeof *x);
            x->type = 1;
            bool have = false;
            while (sub.p < sub.e) {
                uint32_t g, w2;
                uint64_t v2 = 0;
                pb s2 = {0};
                if (pb_field(&sub, &g, &w2, &v2, &s2)) BAD("pieces: malformed SentencePiece");
                if (g == 1 && w2 == 2) {
                    if (s2.e - s2.p > (ptrdiff_t)TK_MAX_TOKEN_LEN) BAD("pieces.piece: too long");
                    if (!tk_u8_valid((const char *)s2.p, (size_t)(s2.e - s2.p))) BAD("pieces.piece: invalid UTF-8");
                    x->s = (const char *)s2.p;
                    x->len = (uint32_t)(s2.e - s2.p);
                    have = true;
                } else if (g == 2 && w2 == 5) {
                    uint32_t u = (uint32_t)v2;
                    memcpy(&x->score, &u, 4);
                    if (!(x->score == x->score)) x->score = 0;
                } else if (g == 3 && w2 == 0) {
                    x->type = (int)(v2 > 6 ? 1 : v2);
                }
            }
            if (!have) BAD("pieces: a piece has no string");
            np++;
        } else if (f == 2 && wt == 2) {
            while (sub.p < sub.e) {
                uint32_t g, w2;
                uint64_t v2 = 0;
                pb s2 = {0};
                if (pb_field(&sub, &g, &w2, &v2, &s2)) BAD("trainer_spec: malformed");
                if (g == 3 && w2 == 0) model_type = (int)(v2 > 4 ? 0 : v2);
                else if (g == 35 && w2 == 0) byte_fallback = v2 != 0;
                else if (g == 40 && w2 == 0) unk_id = (int64_t)(int32_t)v2;
            }
        } else if (f == 3 && wt == 2) {
            while (sub.p < sub.e) {
                uint32_t g, w2;
                uint64_t v2 = 0;
                pb s2 = {0};
                if (pb_field(&sub, &g, &w2, &v2, &s2)) BAD("normalizer_spec: malformed");
                if (g == 2 && w2 == 2) charsmap = s2;
                else if (g == 3 && w2 == 0) dummy = v2 != 0;
                else if (g == 4 && w2 == 0) extra_ws = v2 != 0;
                else if (g == 5 && w2 == 0) escape = v2 != 0;
            }
        }
    }
    if (!np) BAD("pieces: none");
    if (strip_first < 0) strip_first = dummy;
    if (no_dummy) dummy = false;
    if (model_type != 1 && model_type != 2) BAD("trainer_spec.model_type: only unigram (1) and bpe (2) are supported");
    tk_model *m = &t->model;
    m->type = model_type == 2 ? M_BPE : M_UNIGRAM;
    m->n = np;
    m->vocab = mx_calloc((size_t)np, sizeof(tk_str));
    if (!m->vocab || tk_smap_init(&m->map, (size_t)np)) goto fail;
    for (int i = 0; i < np; i++) {
        m->vocab[i].s = tk_arena_dup(&t->arena, P[i].s, P[i].len);
        if (!m->vocab[i].s) goto fail;
        m->vocab[i].len = P[i].len;
        if (tk_smap_put(&m->map, m->vocab, i)) goto fail;
    }
    m->unk_id = (unk_id >= 0 && unk_id < np) ? (int32_t)unk_id : -1;
    m->byte_fallback = byte_fallback;
    m->fuse_unk = true;
    if (m->type == M_UNIGRAM) {
        m->score = mx_malloc(sizeof(double) * (size_t)np);
        if (!m->score) goto fail;
        for (int i = 0; i < np; i++) m->score[i] = P[i].type == 1 || P[i].type == 4 ? P[i].score : 0;
    } else {
        /* merges: every split of a normal piece into two pieces; rank by score
         * (equal scores share a rank, so ties go to the leftmost pair as in
         * sentencepiece) */
        order = mx_malloc(sizeof(ord) * (size_t)np);
        if (!order) goto fail;
        int no = 0;
        for (int i = 0; i < np; i++) if (P[i].type == 1) { order[no].score = P[i].score; order[no++].id = i; }
        qsort(order, (size_t)no, sizeof(ord), cmp_ord);
        if (tk_umap_init(&m->merges, (size_t)np * 2)) goto fail;
        uint32_t rank = 0;
        for (int k = 0; k < no; k++) {
            int32_t id = order[k].id;
            if (k > 0 && order[k - 1].score != order[k].score) rank = (uint32_t)k;
            const char *s = P[id].s;
            for (uint32_t cut = 1; cut < P[id].len; cut++) {
                if (((uint8_t)s[cut] & 0xC0) == 0x80) continue;
                int32_t a = tk_smap_get(&m->map, m->vocab, s, cut), c = tk_smap_get(&m->map, m->vocab, s + cut, P[id].len - cut);
                if (a < 0 || c < 0) continue;
                uint32_t r0;
                if (tk_umap_get(&m->merges, (uint64_t)(uint32_t)a << 32 | (uint32_t)c, &r0, NULL) && r0 <= rank) continue;
                if (tk_umap_put(&m->merges, (uint64_t)(uint32_t)a << 32 | (uint32_t)c, rank, id)) goto fail;
            }
        }
    }
    if (tk_model_finish(m, file)) goto fail;
    /* added tokens: control and unknown pieces (special), user-defined ones */
    t->added = mx_calloc((size_t)np, sizeof(tk_added));
    if (!t->added) goto fail;
    for (int i = 0; i < np; i++) {
        if (P[i].type != 2 && P[i].type != 3 && P[i].type != 4) continue;
        tk_added *a = &t->added[t->nadded++];
        a->id = i;
        a->s = (char *)m->vocab[i].s;
        a->len = m->vocab[i].len;
        a->special = P[i].type != 4;
        a->normalized = false;
    }
    /* normalizer */
    tk_norm *seq = mk_norm(N_SEQ);
    if (!seq) goto fail;
    t->norm = seq;
    seq->sub = mx_calloc(4, sizeof(tk_norm *));
    if (!seq->sub) goto fail;
    if (charsmap.e > charsmap.p) {
        tk_norm *pc = mk_norm(N_PRECOMP);
        if (!pc) goto fail;
        seq->sub[seq->nsub++] = pc;
        pc->sp_longest = true;
        if (tk_precompiled_init(pc, charsmap.p, (size_t)(charsmap.e - charsmap.p), file)) goto fail;
    }
    if (extra_ws) {
        tk_norm *w = mk_norm(N_SPWS);
        if (!w) goto fail;
        seq->sub[seq->nsub++] = w;
        w->right = escape; /* a trailing "▁" of the input goes too: it is a space once escaped */
    }
    if (dummy) {
        tk_norm *p = mk_norm(N_PREPEND);
        if (!p) goto fail;
        seq->sub[seq->nsub++] = p;
        p->content = mx_strdup(escape ? "\xE2\x96\x81" : " ");
        if (!p->content) goto fail;
        p->clen = strlen(p->content);
    }
    if (escape) {
        tk_norm *r = mk_norm(N_REPLACE);
        if (!r) goto fail;
        seq->sub[seq->nsub++] = r;
        r->pat.str = mx_strdup(" ");
        r->pat.len = 1;
        r->content = mx_strdup("\xE2\x96\x81");
        if (!r->pat.str || !r->content) goto fail;
        r->clen = 3;
    }
    /* decoder */
    tk_dec *ds = mk_dec(D_SEQ);
    if (!ds) goto fail;
    t->dec = ds;
    ds->sub = mx_calloc(4, sizeof(tk_dec *));
    if (!ds->sub) goto fail;
    tk_dec *rp = mk_dec(D_REPLACE);
    if (!rp) goto fail;
    ds->sub[ds->nsub++] = rp;
    rp->pat.str = mx_strdup("\xE2\x96\x81");
    rp->pat.len = 3;
    rp->content = mx_strdup(" ");
    rp->clen = 1;
    if (!rp->pat.str || !rp->content) goto fail;
    if (!(ds->sub[ds->nsub++] = mk_dec(D_BYTEFB))) goto fail;
    if (!(ds->sub[ds->nsub++] = mk_dec(D_FUSE))) goto fail;
    if (strip_first) {
        tk_dec *st = mk_dec(D_STRIP);
        if (!st) goto fail;
        ds->sub[ds->nsub++] = st;
        st->strip_cp = ' ';
        st->start = 1;
    }
    free(P);
    free(order);
    return MX_OK;
fail:
    free(P);
    free(order);
    return MX_ERR;
}
