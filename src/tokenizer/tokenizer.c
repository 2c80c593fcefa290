/* tokenizer: loading tokenizer.json / tokenizer_config.json, the added-token
 * split, the encode pipeline (added tokens -> normalizer -> normalized added
 * tokens -> pre-tokenizer -> model -> post-processor), decoding and
 * streaming detokenization. */
#define _GNU_SOURCE /* fileno */
#include "tok_internal.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int tk_cleanup(mx_buf *buf, bool wordpiece);

/* ---- added-token trie ---- */
int tk_trie_add(tk_trie *tr, const char *s, size_t n, int32_t val) {
    if (!tr->val) {
        tr->cap = 64;
        tr->val = mx_malloc(sizeof(int32_t) * (size_t)tr->cap);
        if (!tr->val) return MX_ERR;
        tr->val[0] = -1;
        tr->nnodes = 1;
    }
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t child;
        uint64_t key = (uint64_t)node << 8 | (uint8_t)s[i];
        if (!tk_umap_get(&tr->edge, key, &child, NULL)) {
            if (tr->nnodes == tr->cap) {
                if (tr->cap > (1 << 28)) return mx_set_err("tokenizer: added tokens too large");
                int32_t *v = mx_realloc(tr->val, sizeof(int32_t) * (size_t)tr->cap * 2);
                if (!v) return MX_ERR;
                tr->val = v;
                tr->cap *= 2;
            }
            child = (uint32_t)tr->nnodes;
            tr->val[tr->nnodes++] = -1;
            if (tk_umap_put(&tr->edge, key, child, 0)) return MX_ERR;
        }
        node = (int32_t)child;
    }
    if (n && tr->val[node] < 0) tr->val[node] = val; /* first one wins */
    return MX_OK;
}

void tk_trie_free(tk_trie *tr) {
    tk_umap_free(&tr->edge);
    free(tr->val);
    memset(tr, 0, sizeof *tr);
}

typedef struct { uint32_t s, e; int32_t added; } seg;

static int add_seg(mx_buf *b, size_t s, size_t e, int32_t a) {
    seg x = {(uint32_t)s, (uint32_t)e, a};
    return mx_buf_append(b, &x, sizeof x);
}

static int32_t prev_cp(const uint8_t *s, size_t at, size_t *start) {
    size_t k = at - 1;
    while (k > 0 && (s[k] & 0xC0) == 0x80) k--;
    int32_t cp;
    tk_u8dec(s + k, at - k, &cp);
    *start = k;
    return cp;
}

/* Where special tokens are read as such: everywhere, unless the options
 * split them (then only inside the markup ranges). */
typedef struct {
    const mx_tok_opts *o;
    bool none, all; /* no special token at all in this text / every one */
} special_ok;

static bool special_allowed(const special_ok *sp, size_t s, size_t e) {
    if (!sp->o || !sp->o->split_special) return true;
    if (sp->none || sp->all) return sp->all;
    const size_t *r = sp->o->markup;
    size_t lo = 0, hi = sp->o->n_markup;
    while (lo < hi) { /* the first range ending after s */
        size_t mid = (lo + hi) / 2;
        if (r[2 * mid + 1] <= s) lo = mid + 1;
        else hi = mid;
    }
    return lo < sp->o->n_markup && r[2 * lo] <= s && e <= r[2 * lo + 1];
}

/* The markup ranges of o after the slow classes' rewrite of text: prefix
 * bytes put before it and, with meta, each "▁" read as " " (3 bytes to 1).
 * A boundary inside a "▁" moves to its start. NULL when out of memory. */
static size_t *move_markup(const mx_tok_opts *o, const char *text, size_t len, size_t prefix, bool meta) {
    size_t nb = 2 * o->n_markup, *r = mx_malloc(nb * sizeof *r);
    if (!r) return NULL;
    size_t i = 0, shrink = 0; /* text before i is scanned; its "▁"s shrank it by shrink bytes */
    for (size_t k = 0; k < nb; k++) {
        size_t x = MX_MIN(o->markup[k], len), at = x;
        for (; i + 3 <= x; i++)
            if (meta && !memcmp(text + i, "\xE2\x96\x81", 3)) {
                shrink += 2;
                i += 2;
            }
        for (size_t j = i; meta && j < x; j++)
            if (j + 3 <= len && !memcmp(text + j, "\xE2\x96\x81", 3)) { at = j; break; }
        r[k] = prefix + at - shrink;
    }
    return r;
}

/* Splits s on the added tokens of trie tr (leftmost-longest, then the
 * single_word / lstrip / rstrip rules of HF). Appends segs to out. A special
 * token where sp does not allow one stays text (HF's split_special_tokens). */
static int split_added(const mx_tokenizer *t, const tk_trie *tr, const special_ok *sp, const char *s, size_t n, mx_buf *out) {
    const uint8_t *u = (const uint8_t *)s;
    size_t start_off = 0, i = 0;
    if (!tr->val || tr->nnodes <= 1) return n ? add_seg(out, 0, n, -1) : MX_OK;
    while (i < n) {
        /* longest match starting at i */
        int32_t node = 0, best = -1;
        size_t best_end = 0;
        for (size_t k = i; k < n; k++) {
            uint32_t child;
            if (!tk_umap_get(&tr->edge, (uint64_t)node << 8 | u[k], &child, NULL)) break;
            node = (int32_t)child;
            if (tr->val[node] >= 0) { best = tr->val[node]; best_end = k + 1; }
        }
        if (best < 0) { i++; continue; }
        const tk_added *a = &t->added[best];
        if (a->special && !special_allowed(sp, i, best_end)) { i = best_end; continue; }
        size_t ms = i, me = best_end;
        i = best_end;
        if (a->single_word) {
            size_t ps;
            bool start_ok = ms == 0 || !tk_is_word(prev_cp(u, ms, &ps));
            int32_t nc = -1;
            if (me < n) tk_u8dec(u + me, n - me, &nc);
            bool stop_ok = me == n || !tk_is_word(nc);
            if (!start_ok || !stop_ok) continue;
        }
        if (a->lstrip) {
            size_t ns = ms;
            while (ns > 0) {
                size_t ps;
                int32_t c = prev_cp(u, ns, &ps);
                if (!tk_is_ws(c)) break;
                ns = ps;
            }
            ms = ns > start_off ? ns : start_off;
        }
        if (a->rstrip) {
            while (me < n) {
                int32_t c;
                int l = tk_u8dec(u + me, n - me, &c);
                if (!tk_is_ws(c)) break;
                me += (size_t)l;
            }
        }
        if (ms < start_off) ms = start_off; /* overlapping after rstrip */
        if (start_off < ms && add_seg(out, start_off, ms, -1)) return MX_ERR;
        if (add_seg(out, ms, me, best)) return MX_ERR;
        start_off = me;
        if (i < me) i = me;
    }
    if (start_off < n && add_seg(out, start_off, n, -1)) return MX_ERR;
    return MX_OK;
}

/* Normalized part: normalized added tokens, pre-tokenizer, model. sp tells
 * whether special tokens may be read in it (offsets do not survive the
 * normalizer: the raw segment as a whole decides). */
static int encode_normalized(const mx_tokenizer *t, tk_ctx *c, const special_ok *sp, const char *s, size_t n, bool at_start, int32_t **ids,
                             int *nids, int *cap) {
    mx_buf segs = {0};
    tk_pieces in = {0}, out = {0};
    int rc = split_added(t, &t->norm_trie, sp, s, n, &segs);
    size_t nseg = segs.len / sizeof(seg);
    for (size_t k = 0; !rc && k < nseg; k++) {
        if ((rc = tk_over_budget(c))) break;
        seg g = ((seg *)(void *)segs.data)[k];
        if (g.added >= 0) { rc = tk_push_id(ids, nids, cap, t->added[g.added].id); continue; }
        tk_pieces_clear(&in);
        tk_pieces_clear(&out);
        rc = tk_pieces_add(&in, s + g.s, g.e - g.s, (uint8_t)(at_start && g.s == 0));
        tk_pieces *res = &in;
        if (!rc && t->pre) {
            rc = tk_pre_apply(t->pre, c, &in, &out);
            res = &out;
        }
        for (int i = 0; !rc && i < res->n; i++) {
            rc = tk_model_tokenize(t, c, tk_piece(res, i), res->len[i], ids, nids, cap);
            if (!rc) rc = tk_over_budget(c);
        }
    }
    mx_buf_free(&segs);
    tk_pieces_free(&in);
    tk_pieces_free(&out);
    return rc;
}

int mx_tok_encode(const mx_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids_out, int *n_out) {
    mx_tok_opts o = {.add_special = add_special};
    return mx_tok_encode_ex(t, text, len, &o, ids_out, n_out);
}

int mx_tok_encode_ex(const mx_tokenizer *t, const char *text, size_t len, const mx_tok_opts *o, int32_t **ids_out, int *n_out) {
    bool add_special = o->add_special;
    *ids_out = NULL;
    *n_out = 0;
    if (len > (size_t)INT32_MAX / 2) return mx_set_err("tokenizer: input of %zu bytes is too long", len);
    tk_ctx c;
    if (tk_ctx_init(&c)) return MX_ERR;
    c.deadline = o->deadline;
    mx_buf clean = {0}, segs = {0}, nb = {0}, nb2 = {0};
    int32_t *ids = NULL;
    int n = 0, cap = 0, rc = MX_OK;
    if (!text) text = "";
    special_ok sp = {o, false, false};
    size_t len0 = len;
    if (!tk_u8_valid(text, len)) {
        rc = tk_u8_lossy(text, len, &clean);
        text = clean.data;
        len = clean.len;
        /* markup offsets refer to the original bytes: only all-or-nothing survives */
        bool whole = o->n_markup == 1 && o->markup[0] == 0 && o->markup[1] >= len0;
        sp.all = whole;
        sp.none = !whole;
    }
    mx_tok_opts moved;
    size_t *moved_markup = NULL;
    if (!rc && (t->slow.space_prefix || (t->slow.llama && len))) { /* the slow classes' text rewrite (tok_slow.c) */
        size_t prefix = t->slow.space_prefix ? 1 : t->slow.meta_prefix ? 3 : 0;
        if (o->split_special && !sp.all && !sp.none && o->n_markup) { /* the markup moves with the bytes */
            if (!(moved_markup = move_markup(o, text, len, prefix, t->slow.llama))) rc = MX_ERR;
            moved = *o;
            moved.markup = moved_markup;
            sp.o = &moved;
        }
        if (!rc) rc = mx_buf_append(&nb2, t->slow.space_prefix ? " " : t->slow.meta_prefix ? "\xE2\x96\x81" : "", t->slow.space_prefix ? 1 : t->slow.meta_prefix ? 3 : 0);
        for (size_t i = 0; !rc && i < len; i++) {
            bool meta = t->slow.llama && i + 3 <= len && !memcmp(text + i, "\xE2\x96\x81", 3);
            rc = meta ? mx_buf_append(&nb2, " ", 1) : mx_buf_append(&nb2, text + i, 1);
            if (meta) i += 2;
        }
        mx_buf_free(&clean);
        clean = nb2;
        nb2 = (mx_buf){0};
        text = clean.data ? clean.data : "";
        len = clean.len;
    }
    for (int i = 0; !rc && add_special && i < t->npost_pre; i++) rc = tk_push_id(&ids, &n, &cap, t->post_pre[i]);
    int first = n;
    if (!rc) rc = split_added(t, &t->raw_trie, &sp, text, len, &segs);
    size_t nseg = segs.len / sizeof(seg);
    for (size_t k = 0; !rc && k < nseg; k++) {
        seg g = ((seg *)(void *)segs.data)[k];
        special_ok spn = {o, false, false};
        if (special_allowed(&sp, g.s, g.e)) spn.all = true;
        else spn.none = true;
        if (g.added >= 0) { rc = tk_push_id(&ids, &n, &cap, t->added[g.added].id); continue; }
        const char *s = text + g.s;
        size_t sl = g.e - g.s;
        if (t->norm) {
            c.keep_lead = t->slow.llama && (s[0] == ' ' || (sl >= 3 && !memcmp(s, "\xE2\x96\x81", 3)));
            rc = tk_norm_apply(t->norm, &c, s, sl, &nb);
            c.keep_lead = false;
            if (rc) break;
            if (!tk_u8_valid(nb.data, nb.len)) { /* a charsmap may produce anything */
                nb2.len = 0;
                if ((rc = tk_u8_lossy(nb.data, nb.len, &nb2))) break;
                mx_buf x = nb;
                nb = nb2;
                nb2 = x;
            }
            s = nb.data ? nb.data : "";
            sl = nb.len;
        }
        rc = encode_normalized(t, &c, &spn, s, sl, g.s == 0, &ids, &n, &cap);
    }
    /* slow Llama drops a lone leading "▁" before a special token */
    if (!rc && t->slow.llama && n > first + 1 && ids[first] == t->slow.meta_id && mx_tok_is_special(t, ids[first + 1])) {
        memmove(ids + first, ids + first + 1, sizeof(int32_t) * (size_t)(n - first - 1));
        n--;
    }
    for (int i = 0; !rc && add_special && i < t->npost_post; i++) rc = tk_push_id(&ids, &n, &cap, t->post_post[i]);
    free(moved_markup);
    mx_buf_free(&clean);
    mx_buf_free(&segs);
    mx_buf_free(&nb);
    mx_buf_free(&nb2);
    tk_ctx_free(&c);
    if (rc) { free(ids); return MX_ERR; }
    *ids_out = ids;
    *n_out = n;
    return MX_OK;
}

/* ---- decode ---- */
/* Decoder output of the pieces in `in`, appended to res. */
static int decode_run(const mx_tokenizer *t, tk_ctx *c, tk_pieces *in, tk_pieces *out, mx_buf *res) {
    int rc = MX_OK;
    tk_pieces_clear(out);
    if (t->dec) {
        rc = tk_dec_apply(t->dec, c, in, out);
        for (int i = 0; !rc && i < out->n; i++) rc = mx_buf_append(res, tk_piece(out, i), out->len[i]);
    } else
        for (int i = 0; !rc && i < in->n; i++) {
            if (i && (rc = mx_buf_append(res, " ", 1))) break;
            rc = mx_buf_append(res, tk_piece(in, i), in->len[i]);
        }
    return rc;
}

/* Slow tokenizers' decode: the runs between "brk" added tokens are decoded
 * apart, the added tokens are their text, all joined with "" or " ". */
static int decode_split(const mx_tokenizer *t, tk_ctx *c, const int32_t *ids, int n, bool skip_special, mx_buf *res) {
    tk_pieces in = {0}, out = {0};
    mx_buf run = {0};
    int rc = MX_OK, nsub = 0;
    for (int i = 0; !rc && i <= n; i++) {
        int32_t id = i < n ? ids[i] : -1;
        if (i < n && (id < 0 || id >= t->vocab_size || !t->id2str[id].s || (skip_special && mx_tok_is_special(t, id)))) continue;
        int32_t a = i < n ? t->id2added[id] : -1;
        if (i < n && (a < 0 || !t->added[a].brk)) { rc = tk_pieces_add(&in, t->id2str[id].s, t->id2str[id].len, 0); continue; }
        if (in.n) { /* flush the run (an empty one only counts at the end) */
            run.len = 0;
            rc = decode_run(t, c, &in, &out, &run);
            if (!rc && (run.len || i == n)) {
                if (nsub++ && t->slow.space_join) rc = mx_buf_append(res, " ", 1);
                if (!rc) rc = mx_buf_append(res, run.data ? run.data : "", run.len);
            }
            tk_pieces_clear(&in);
        }
        if (!rc && i < n) {
            if (nsub++ && t->slow.space_join) rc = mx_buf_append(res, " ", 1);
            if (!rc) rc = mx_buf_append(res, t->id2str[id].s, t->id2str[id].len);
        }
    }
    tk_pieces_free(&in);
    tk_pieces_free(&out);
    mx_buf_free(&run);
    return rc;
}

static int decode_into(const mx_tokenizer *t, tk_ctx *c, const int32_t *ids, int n, bool skip_special, bool cleanup, mx_buf *res) {
    tk_pieces in = {0}, out = {0};
    int rc = MX_OK;
    res->len = 0;
    if (t->slow.split_decode) {
        rc = decode_split(t, c, ids, n, skip_special, res);
        goto end;
    }
    for (int i = 0; !rc && i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->vocab_size || !t->id2str[id].s) continue;
        if (skip_special && mx_tok_is_special(t, id)) continue;
        rc = tk_pieces_add(&in, t->id2str[id].s, t->id2str[id].len, 0);
    }
    if (!rc) rc = decode_run(t, c, &in, &out, res);
end:
    if (!rc && !res->data) rc = mx_buf_append(res, "", 0);
    if (!rc && cleanup && t->cleanup) rc = tk_cleanup(res, false);
    tk_pieces_free(&in);
    tk_pieces_free(&out);
    return rc;
}

int mx_tok_decode(const mx_tokenizer *t, const int32_t *ids, int n, bool skip_special, mx_buf *out) {
    tk_ctx c;
    if (tk_ctx_init(&c)) return MX_ERR;
    mx_buf r = {0};
    int rc = decode_into(t, &c, ids, n, skip_special, true, &r);
    if (!rc) rc = mx_buf_append(out, r.data ? r.data : "", r.len);
    mx_buf_free(&r);
    tk_ctx_free(&c);
    return rc;
}

/* ---- streaming ----
 * The decoder output of the new ids is found as decode(context + new) minus
 * decode(context), where the context is the ids emitted last time, so that
 * first-token rules (Metaspace, Strip, WordPiece) cancel out. Text ending in
 * U+FFFD (an incomplete UTF-8 sequence) waits for the next id. The cleanup of
 * clean_up_tokenization_spaces is then applied to the raw text up to the last
 * point where it cannot interact with what follows: before a space that
 * neither ends " '" nor starts " '" (every cleanup pattern starts with a
 * space; " ' " -> "'" can join " n" and "'t" into " n't"). */
struct mx_detok {
    const mx_tokenizer *t;
    bool skip;
    int32_t *ids;
    int n, cap, nctx; /* ids[0..nctx) were emitted already (context) */
    mx_buf prev;      /* decode of the context */
    mx_buf cur;
    mx_buf pend;      /* raw text awaiting cleanup */
    tk_ctx c;
};

mx_detok *mx_detok_new(const mx_tokenizer *t, bool skip_special) {
    mx_detok *d = mx_calloc(1, sizeof *d);
    if (!d) return NULL;
    d->t = t;
    d->skip = skip_special;
    if (tk_ctx_init(&d->c) || mx_buf_append(&d->prev, "", 0) || mx_buf_append(&d->pend, "", 0)) { mx_detok_free(d); return NULL; }
    return d;
}

void mx_detok_free(mx_detok *d) {
    if (!d) return;
    free(d->ids);
    mx_buf_free(&d->prev);
    mx_buf_free(&d->cur);
    mx_buf_free(&d->pend);
    tk_ctx_free(&d->c);
    free(d);
}

static int emit_clean(mx_detok *d, const char *s, size_t n, mx_buf *out, bool final) {
    if (!d->t->cleanup) return mx_buf_append(out, s, n);
    if (mx_buf_append(&d->pend, s, n)) return MX_ERR;
    size_t cut = final ? d->pend.len : 0;
    if (!final)
        for (size_t p = d->pend.len; p-- > 1;)
            if (d->pend.data[p] == ' ' && p + 1 < d->pend.len && d->pend.data[p + 1] != '\'' &&
                !(p >= 2 && d->pend.data[p - 1] == '\'' && d->pend.data[p - 2] == ' ')) { cut = p; break; }
    if (!cut) return MX_OK;
    mx_buf c = {0};
    int rc = mx_buf_append(&c, d->pend.data, cut);
    if (!rc) rc = tk_cleanup(&c, false);
    if (!rc) rc = mx_buf_append(out, c.data, c.len);
    mx_buf_free(&c);
    memmove(d->pend.data, d->pend.data + cut, d->pend.len - cut);
    d->pend.len -= cut;
    d->pend.data[d->pend.len] = 0;
    return rc;
}

static int detok_step(mx_detok *d, mx_buf *out, bool final) {
    if (d->n > d->nctx) {
        if (decode_into(d->t, &d->c, d->ids, d->n, false, false, &d->cur)) return MX_ERR;
        if (d->cur.len >= d->prev.len && !memcmp(d->cur.data, d->prev.data, d->prev.len)) {
            const char *tail = d->cur.data + d->prev.len;
            size_t tl = d->cur.len - d->prev.len;
            bool wait = !final && (tl == 0 || (tl >= 3 && !memcmp(tail + tl - 3, "\xEF\xBF\xBD", 3)));
            if (!wait) {
                if (emit_clean(d, tail, tl, out, false)) return MX_ERR;
                /* the emitted ids become the context */
                int keep = d->n - d->nctx;
                memmove(d->ids, d->ids + d->nctx, sizeof(int32_t) * (size_t)keep);
                d->n = keep;
                d->nctx = keep;
                if (decode_into(d->t, &d->c, d->ids, d->n, false, false, &d->prev)) return MX_ERR;
            }
        }
    }
    return final ? emit_clean(d, "", 0, out, true) : MX_OK;
}

int mx_detok_push(mx_detok *d, int32_t id, mx_buf *out) {
    const mx_tokenizer *t = d->t;
    if (id < 0 || id >= t->vocab_size || !t->id2str[id].s) return MX_OK;
    if (d->skip && mx_tok_is_special(t, id)) return MX_OK;
    if (d->n == d->cap) {
        if (d->cap > (1 << 26)) return mx_set_err("detok: too many pending tokens");
        int nc = d->cap ? d->cap * 2 : 16;
        int32_t *p = mx_realloc(d->ids, sizeof(int32_t) * (size_t)nc);
        if (!p) return MX_ERR;
        d->ids = p;
        d->cap = nc;
    }
    d->ids[d->n++] = id;
    return detok_step(d, out, false);
}

int mx_detok_flush(mx_detok *d, mx_buf *out) { return detok_step(d, out, true); }

/* ---- accessors ---- */
const char *mx_tok_token_str(const mx_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->vocab_size || !t->id2str[id].s) return NULL;
    if (len) *len = t->id2str[id].len;
    return t->id2str[id].s;
}

int32_t mx_tok_token_id(const mx_tokenizer *t, const char *s, size_t len) {
    for (int i = 0; i < t->nadded; i++)
        if (t->added[i].len == len && !memcmp(t->added[i].s, s, len)) return t->added[i].id;
    return tk_smap_get(&t->model.map, t->model.vocab, s, len);
}

int mx_tok_vocab_size(const mx_tokenizer *t) { return t->vocab_size; }
int32_t mx_tok_bos(const mx_tokenizer *t) { return t->bos; }
int32_t mx_tok_eos(const mx_tokenizer *t) { return t->eos; }
int32_t mx_tok_pad(const mx_tokenizer *t) { return t->pad; }
int64_t mx_tok_model_max_length(const mx_tokenizer *t) { return t->model_max_length; }
size_t mx_tok_max_token_bytes(const mx_tokenizer *t) { return t->max_token_bytes; }

bool mx_tok_is_special(const mx_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->vocab_size) return false;
    int32_t a = t->id2added[id];
    return a >= 0 && t->added[a].special;
}

const char *mx_tok_special_str(const mx_tokenizer *t, const char *which) {
    for (int i = 0; i < t->nspec; i++) if (!strcmp(t->spec_name[i], which)) return t->spec_val[i];
    return NULL;
}

const char *mx_tok_chat_template(const mx_tokenizer *t, const char *name) {
    if (!t->ntmpl) return NULL;
    const char *want = name ? name : "default";
    for (int i = 0; i < t->ntmpl; i++) if (!strcmp(t->tmpl_name[i], want)) return t->tmpl_text[i];
    if (!name && t->ntmpl == 1) return t->tmpl_text[0];
    return NULL;
}

void mx_tok_free(mx_tokenizer *t) {
    if (!t) return;
    tk_model_free(&t->model);
    free(t->added);
    free(t->id2str);
    free(t->id2added);
    tk_trie_free(&t->raw_trie);
    tk_trie_free(&t->norm_trie);
    tk_norm_free(t->norm);
    tk_pre_free(t->pre);
    tk_dec_free(t->dec);
    free(t->post_pre);
    free(t->post_post);
    for (int i = 0; i < t->nspec; i++) { free(t->spec_name[i]); free(t->spec_val[i]); }
    free(t->spec_name);
    free(t->spec_val);
    for (int i = 0; i < t->ntmpl; i++) { free(t->tmpl_name[i]); free(t->tmpl_text[i]); }
    free(t->tmpl_name);
    free(t->tmpl_text);
    if (t->cache) {
        for (int i = 0; i < TK_CACHE_SIZE; i++) { free(t->cache[i].key); free(t->cache[i].ids); }
        free(t->cache);
        pthread_mutex_destroy(&t->cache_mu);
    }
    free(t->name);
    tk_arena_free(&t->arena);
    free(t);
}

/* ---- loading ---- */
static bool jbool(const tj *o, const char *k, bool def) {
    const tj *v = tk_json_get(o, k);
    if (!v || v->type == TJ_NULL) return def;
    return v->type == TJ_TRUE;
}

static int get_id(const tj *v, const char *file, const char *what, int32_t *out) {
    *out = -1;
    if (!v || v->type != TJ_NUM || v->v.num < 0 || v->v.num >= TK_MAX_VOCAB || v->v.num != (double)(int32_t)v->v.num)
        return mx_set_err("%s: %s: expected an id in [0, %d)", file, what, TK_MAX_VOCAB);
    *out = (int32_t)v->v.num;
    return MX_OK;
}

static int alloc_vocab(tk_model *m, int32_t n) {
    m->n = n;
    m->vocab = tk_alloc_big(sizeof(tk_str) * (size_t)(n ? n : 1), true);
    if (!m->vocab) return MX_ERR;
    return tk_smap_init(&m->map, (size_t)n);
}

/* [a, b]: 1 with a and b set, 0 when e is not an array of two, or MX_ERR */
static int pair(tj_doc *doc, const tj *e, tj *a, tj *b) {
    if (tj_type(e) != TJ_ARR || e->n != 2) return 0;
    tj_iter it;
    if (tk_json_iter_init(&it, doc, e)) return MX_ERR;
    int ra = tk_json_iter_next(&it, a), rb = ra > 0 ? tk_json_iter_next(&it, b) : 0;
    return ra < 0 || rb < 0 ? MX_ERR : ra && rb;
}

static int count_bad(const char *file, const char *what) { return mx_set_err("%s: %s: member count changed while reading", file, what); }

/* vocab as {"token": id, ...} */
int tk_load_vocab_dict(mx_tokenizer *t, tj_doc *doc, const tj *v, const char *file) {
    tk_model *m = &t->model;
    if (!v || tj_type(v) != TJ_OBJ) return mx_set_err("%s: model.vocab: expected an object of token: id", file);
    /* ids first (they size the tables), keeping the keys: a lazy object is read once */
    typedef struct { const char *s; uint32_t len; int32_t id; } ent;
    ent *E = tk_alloc_big(sizeof(ent) * (v->n ? v->n : 1), false);
    if (!E) return MX_ERR;
    int32_t maxid = -1;
    size_t k = 0, total = 0;
    tj_iter it;
    tj e;
    int r = tk_json_iter_init(&it, doc, v);
    while (!r && (r = tk_json_iter_next(&it, &e)) > 0) {
        int32_t id = -1;
        if (k == v->n) r = count_bad(file, "model.vocab");
        else if (get_id(&e, file, "model.vocab", &id)) r = MX_ERR;
        if (r < 0) break;
        E[k++] = (ent){e.key, e.klen, id};
        total += (size_t)e.klen + 1;
        if (id > maxid) maxid = id;
        r = 0;
    }
    /* all strings in one block of the arena */
    char *pool = NULL;
    if (r < 0 || alloc_vocab(m, maxid + 1) || (total && !(pool = tk_arena_alloc(&t->arena, total)))) { free(E); return MX_ERR; }
    for (size_t i = 0; i < k; i++) {
        if (i + 16 < k) tk_smap_prefetch(&m->map, E[i + 16].s, E[i + 16].len); /* a cache miss each on a big vocabulary */
        if (E[i].len > TK_MAX_TOKEN_LEN) {
            free(E);
            return mx_set_err("%s: model.vocab: token of %u bytes is too long", file, E[i].len);
        }
        memcpy(pool, E[i].s, E[i].len);
        pool[E[i].len] = 0;
        m->vocab[E[i].id].s = pool;
        m->vocab[E[i].id].len = E[i].len;
        pool += E[i].len + 1;
        if (tk_smap_put(&m->map, m->vocab, E[i].id)) { free(E); return MX_ERR; }
    }
    free(E);
    for (int32_t i = 0; i < m->n; i++) if (!m->vocab[i].s) m->vocab[i].s = tk_arena_dup(&t->arena, "", 0);
    return MX_OK;
}

static int opt_str(const tj *o, const char *k, const char *file, char **out, size_t *len) {
    const tj *v = tk_json_get(o, k);
    *out = NULL;
    *len = 0;
    if (!v || v->type == TJ_NULL) return MX_OK;
    if (v->type != TJ_STR) return mx_set_err("%s: model.%s: expected a string", file, k);
    if (!v->n) return MX_OK;
    *out = mx_strndup(v->v.str, v->n);
    *len = v->n;
    return *out ? MX_OK : MX_ERR;
}

static int load_model(mx_tokenizer *t, tj_doc *doc, const tj *mj, const char *file) {
    tk_model *m = &t->model;
    m->unk_id = -1;
    if (!mj || mj->type != TJ_OBJ) return mx_set_err("%s: model: expected an object", file);
    const tj *ty = tk_json_get(mj, "type"), *vocab = tk_json_get(mj, "vocab");
    const char *type = NULL;
    if (ty && ty->type == TJ_STR) type = ty->v.str;
    else if (ty && ty->type != TJ_NULL) return mx_set_err("%s: model.type: expected a string", file);
    else if (vocab && tj_type(vocab) == TJ_ARR) type = "Unigram"; /* old serialization */
    else if (tk_json_get(mj, "merges")) type = "BPE";
    else if (tk_json_get(mj, "continuing_subword_prefix") || tk_json_get(mj, "max_input_chars_per_word")) type = "WordPiece";
    else type = "WordLevel";
    if (!strcmp(type, "BPE")) {
        m->type = M_BPE;
        if (tk_load_vocab_dict(t, doc, vocab, file)) return MX_ERR;
        if (opt_str(mj, "continuing_subword_prefix", file, &m->csp, &m->csp_len)) return MX_ERR;
        if (opt_str(mj, "end_of_word_suffix", file, &m->eow, &m->eow_len)) return MX_ERR;
        m->byte_fallback = jbool(mj, "byte_fallback", false);
        m->fuse_unk = jbool(mj, "fuse_unk", false);
        m->ignore_merges = jbool(mj, "ignore_merges", false);
        const tj *unk = tk_json_get(mj, "unk_token");
        if (unk && unk->type == TJ_STR) m->unk_id = tk_smap_get(&m->map, m->vocab, unk->v.str, unk->n);
        else if (unk && unk->type != TJ_NULL) return mx_set_err("%s: model.unk_token: expected a string", file);
        const tj *mg = tk_json_get(mj, "merges");
        if (mg && tj_type(mg) != TJ_ARR && mg->type != TJ_NULL) return mx_set_err("%s: model.merges: expected an array", file);
        if (mg && tj_type(mg) == TJ_ARR) {
            if (tk_umap_init(&m->merges, mg->n)) return MX_ERR;
            /* pairs of strings go to tk_bpe_add_merges a batch at a time */
            tk_str pend[2 * TK_BATCH];
            int np = 0;
            uint32_t first = 0;
            tj_iter it;
            tj e, x, y;
            int r = tk_json_iter_init(&it, doc, mg);
            for (uint32_t i = 0; !r && (r = tk_json_iter_next(&it, &e)) > 0; i++) {
                tk_str *a = &pend[2 * np], *b = a + 1;
                int pr = 0;
                if (e.type == TJ_STR) {
                    const char *sp = memchr(e.v.str, ' ', e.n);
                    if (sp) {
                        *a = (tk_str){e.v.str, (uint32_t)(sp - e.v.str)};
                        *b = (tk_str){sp + 1, e.n - a->len - 1};
                    }
                    pr = sp != NULL;
                } else if ((pr = pair(doc, &e, &x, &y)) > 0 && x.type == TJ_STR && y.type == TJ_STR) {
                    *a = (tk_str){x.v.str, x.n};
                    *b = (tk_str){y.v.str, y.n};
                } else if (pr > 0) pr = 0;
                if (pr <= 0 || ++np == TK_BATCH) { /* the merges before come first, errors too */
                    if (np && tk_bpe_add_merges(m, pend, np, first, file)) return MX_ERR;
                    np = 0;
                    first = i + 1;
                }
                if (pr < 0) return MX_ERR;
                if (!pr && e.type == TJ_STR) return mx_set_err("%s: model.merges[%u]: expected \"a b\"", file, i);
                if (!pr) return mx_set_err("%s: model.merges[%u]: expected \"a b\" or [a, b]", file, i);
                r = 0;
            }
            if (r < 0 || (np && tk_bpe_add_merges(m, pend, np, first, file))) return MX_ERR;
        }
    } else if (!strcmp(type, "WordPiece") || !strcmp(type, "WordLevel")) {
        m->type = type[4] == 'P' ? M_WORDPIECE : M_WORDLEVEL;
        if (tk_load_vocab_dict(t, doc, vocab, file)) return MX_ERR;
        const tj *unk = tk_json_get(mj, "unk_token");
        if (unk && unk->type == TJ_STR) m->unk_id = tk_smap_get(&m->map, m->vocab, unk->v.str, unk->n);
        if (m->type == M_WORDPIECE) {
            const tj *p = tk_json_get(mj, "continuing_subword_prefix");
            if (p && p->type == TJ_STR) {
                m->csp = mx_strndup(p->v.str, p->n);
                m->csp_len = p->n;
            } else {
                m->csp = mx_strdup("##");
                m->csp_len = 2;
            }
            if (!m->csp) return MX_ERR;
            const tj *mc = tk_json_get(mj, "max_input_chars_per_word");
            m->max_chars = 100;
            if (mc && mc->type == TJ_NUM) m->max_chars = mc->v.num < 0 ? 0 : mc->v.num > 1e9 ? 1000000000 : (int)mc->v.num;
        }
    } else if (!strcmp(type, "Unigram")) {
        m->type = M_UNIGRAM;
        if (!vocab || tj_type(vocab) != TJ_ARR) return mx_set_err("%s: model.vocab: expected [[piece, score], ...]", file);
        if (vocab->n >= TK_MAX_VOCAB) return mx_set_err("%s: model.vocab: too many pieces", file);
        if (alloc_vocab(m, (int32_t)vocab->n)) return MX_ERR;
        m->score = mx_malloc(sizeof(double) * (vocab->n ? vocab->n : 1));
        if (!m->score) return MX_ERR;
        tj_iter it;
        tj e, x, y;
        uint32_t i = 0;
        int r = tk_json_iter_init(&it, doc, vocab);
        for (; !r && (r = tk_json_iter_next(&it, &e)) > 0; i++) {
            if (i == vocab->n) return count_bad(file, "model.vocab");
            int pr = pair(doc, &e, &x, &y);
            if (pr < 0) return MX_ERR;
            if (!pr || x.type != TJ_STR || y.type != TJ_NUM) return mx_set_err("%s: model.vocab[%u]: expected [piece, score]", file, i);
            if (x.n > TK_MAX_TOKEN_LEN) return mx_set_err("%s: model.vocab[%u]: piece too long", file, i);
            m->vocab[i].s = tk_arena_dup(&t->arena, x.v.str, x.n);
            if (!m->vocab[i].s) return MX_ERR;
            m->vocab[i].len = x.n;
            m->score[i] = y.v.num;
            if (tk_smap_put(&m->map, m->vocab, (int32_t)i)) return MX_ERR;
            r = 0;
        }
        if (r < 0) return MX_ERR;
        if (i != vocab->n) return count_bad(file, "model.vocab");
        const tj *u = tk_json_get(mj, "unk_id");
        if (u && u->type != TJ_NULL) {
            if (get_id(u, file, "model.unk_id", &m->unk_id)) return MX_ERR;
            if (m->unk_id >= m->n) return mx_set_err("%s: model.unk_id: %d is outside the vocabulary", file, m->unk_id);
        }
        m->byte_fallback = jbool(mj, "byte_fallback", false);
        m->fuse_unk = true;
    } else return mx_set_err("%s: model.type: unsupported \"%s\"", file, type);
    return tk_model_finish(m, file);
}

int tk_add_ids(int32_t **arr, int *n, const int32_t *ids, int k) {
    int32_t *p = mx_realloc(*arr, sizeof(int32_t) * (size_t)(*n + k + 1));
    if (!p) return MX_ERR;
    memcpy(p + *n, ids, sizeof(int32_t) * (size_t)k);
    *arr = p;
    *n += k;
    return MX_OK;
}

static int special_pair(const tj *v, const char *file, const char *what, int32_t *id) {
    if (!v || v->type != TJ_ARR || v->n != 2 || v->v.kids[0].type != TJ_STR) return mx_set_err("%s: post_processor.%s: expected [token, id]", file, what);
    return get_id(&v->v.kids[1], file, what, id);
}

static int load_post(mx_tokenizer *t, const tj *p, const char *file, int depth) {
    if (tj_is_null(p)) return MX_OK;
    if (depth > TK_MAX_DEPTH) return mx_set_err("%s: post_processor: nested too deeply", file);
    const tj *ty = tk_json_get(p, "type");
    if (!ty || ty->type != TJ_STR) return mx_set_err("%s: post_processor.type: expected a string", file);
    const char *type = ty->v.str;
    if (!strcmp(type, "ByteLevel")) return MX_OK;
    if (!strcmp(type, "Sequence")) {
        const tj *arr = tk_json_get(p, "processors");
        if (!arr || arr->type != TJ_ARR) return mx_set_err("%s: post_processor.processors: expected an array", file);
        for (uint32_t i = 0; i < arr->n; i++) if (load_post(t, &arr->v.kids[i], file, depth + 1)) return MX_ERR;
        return MX_OK;
    }
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        int32_t cls, sep;
        if (special_pair(tk_json_get(p, "cls"), file, "cls", &cls) || special_pair(tk_json_get(p, "sep"), file, "sep", &sep)) return MX_ERR;
        return tk_add_ids(&t->post_pre, &t->npost_pre, &cls, 1) || tk_add_ids(&t->post_post, &t->npost_post, &sep, 1) ? MX_ERR : MX_OK;
    }
    if (!strcmp(type, "TemplateProcessing")) {
        const tj *single = tk_json_get(p, "single"), *sp = tk_json_get(p, "special_tokens");
        if (!single || single->type != TJ_ARR) return mx_set_err("%s: post_processor.single: expected an array", file);
        bool after = false;
        for (uint32_t i = 0; i < single->n; i++) {
            const tj *it = &single->v.kids[i];
            const tj *st = tk_json_get(it, "SpecialToken"), *sq = tk_json_get(it, "Sequence");
            if (sq) { after = true; continue; }
            const tj *name = st ? tk_json_get(st, "id") : NULL;
            if (!name || name->type != TJ_STR) return mx_set_err("%s: post_processor.single[%u]: expected SpecialToken or Sequence", file, i);
            const tj *def = NULL;
            if (sp && sp->type == TJ_OBJ)
                for (uint32_t k = 0; k < sp->n; k++)
                    if (sp->v.kids[k].klen == name->n && !memcmp(sp->v.kids[k].key, name->v.str, name->n)) def = &sp->v.kids[k];
            const tj *ids = def ? tk_json_get(def, "ids") : NULL;
            if (!ids || ids->type != TJ_ARR)
                return mx_set_err("%s: post_processor.special_tokens: \"%.*s\" has no ids", file, (int)MX_MIN(name->n, 64u), name->v.str);
            for (uint32_t k = 0; k < ids->n; k++) {
                int32_t id;
                if (get_id(&ids->v.kids[k], file, "post_processor.special_tokens.ids", &id)) return MX_ERR;
                if (after ? tk_add_ids(&t->post_post, &t->npost_post, &id, 1) : tk_add_ids(&t->post_pre, &t->npost_pre, &id, 1)) return MX_ERR;
            }
        }
        return MX_OK;
    }
    return mx_set_err("%s: post_processor.type: unsupported \"%s\"", file, type);
}

static int load_added(mx_tokenizer *t, const tj *arr, const char *file) {
    if (tj_is_null(arr)) return MX_OK;
    if (arr->type != TJ_ARR) return mx_set_err("%s: added_tokens: expected an array", file);
    t->added = mx_calloc(arr->n ? arr->n : 1, sizeof(tk_added));
    if (!t->added) return MX_ERR;
    for (uint32_t i = 0; i < arr->n; i++) {
        const tj *e = &arr->v.kids[i];
        const tj *c = tk_json_get(e, "content");
        tk_added *a = &t->added[t->nadded];
        if (get_id(tk_json_get(e, "id"), file, "added_tokens[].id", &a->id)) return MX_ERR;
        if (!c || c->type != TJ_STR) return mx_set_err("%s: added_tokens[%u].content: expected a string", file, i);
        if (c->n > TK_MAX_TOKEN_LEN) return mx_set_err("%s: added_tokens[%u].content: too long", file, i);
        a->s = tk_arena_dup(&t->arena, c->v.str, c->n);
        if (!a->s) return MX_ERR;
        a->len = c->n;
        a->special = jbool(e, "special", false);
        a->normalized = jbool(e, "normalized", !a->special);
        a->lstrip = jbool(e, "lstrip", false);
        a->rstrip = jbool(e, "rstrip", false);
        a->single_word = jbool(e, "single_word", false);
        t->nadded++;
    }
    return MX_OK;
}

/* After the model and added tokens: id tables and tries. */
int tk_finish(mx_tokenizer *t, const char *file) {
    int32_t vs = t->model.n;
    for (int i = 0; i < t->nadded; i++) if (t->added[i].id + 1 > vs) vs = t->added[i].id + 1;
    t->vocab_size = vs;
    t->id2str = tk_alloc_big(sizeof(tk_str) * (size_t)(vs ? vs : 1), true);
    t->id2added = tk_alloc_big(sizeof(int32_t) * (size_t)(vs ? vs : 1), false);
    if (!t->id2str || !t->id2added) return MX_ERR;
    for (int32_t i = 0; i < vs; i++) t->id2added[i] = -1;
    for (int32_t i = 0; i < t->model.n; i++) t->id2str[i] = t->model.vocab[i];
    tk_ctx c;
    if (tk_ctx_init(&c)) return MX_ERR;
    mx_buf nb = {0};
    int rc = MX_OK;
    for (int i = 0; !rc && i < t->nadded; i++) {
        tk_added *a = &t->added[i];
        t->id2str[a->id].s = a->s;
        t->id2str[a->id].len = (uint32_t)a->len;
        t->id2added[a->id] = i;
        if (!a->normalized || !t->norm) rc = tk_trie_add(a->normalized ? &t->norm_trie : &t->raw_trie, a->s, a->len, i);
        else {
            rc = tk_norm_apply(t->norm, &c, a->s, a->len, &nb);
            if (!rc) rc = tk_trie_add(&t->norm_trie, nb.data ? nb.data : "", nb.len, i);
        }
    }
    mx_buf_free(&nb);
    tk_ctx_free(&c);
    if (rc) return rc;
    for (int32_t i = 0; i < vs; i++) t->max_token_bytes = MX_MAX(t->max_token_bytes, (size_t)t->id2str[i].len);
    if (t->model.type == M_BPE) {
        t->cache = mx_calloc(TK_CACHE_SIZE, sizeof(tk_cache_ent));
        if (!t->cache) return MX_ERR;
        pthread_mutex_init(&t->cache_mu, NULL);
    }
    (void)file;
    return MX_OK;
}

/* ---- tokenizer_config.json ---- */
static int add_spec(mx_tokenizer *t, const char *name, const char *val, size_t n) {
    char **a = mx_realloc(t->spec_name, sizeof(char *) * (size_t)(t->nspec + 1));
    if (!a) return MX_ERR;
    t->spec_name = a;
    char **b = mx_realloc(t->spec_val, sizeof(char *) * (size_t)(t->nspec + 1));
    if (!b) return MX_ERR;
    t->spec_val = b;
    a[t->nspec] = mx_strdup(name);
    b[t->nspec] = mx_strndup(val, n);
    if (!a[t->nspec] || !b[t->nspec]) { free(a[t->nspec]); free(b[t->nspec]); return MX_ERR; }
    t->nspec++;
    return MX_OK;
}

static int add_tmpl(mx_tokenizer *t, const char *name, size_t nl, const char *text, size_t n) {
    char **a = mx_realloc(t->tmpl_name, sizeof(char *) * (size_t)(t->ntmpl + 1));
    if (!a) return MX_ERR;
    t->tmpl_name = a;
    char **b = mx_realloc(t->tmpl_text, sizeof(char *) * (size_t)(t->ntmpl + 1));
    if (!b) return MX_ERR;
    t->tmpl_text = b;
    a[t->ntmpl] = mx_strndup(name, nl);
    b[t->ntmpl] = mx_strndup(text, n);
    if (!a[t->ntmpl] || !b[t->ntmpl]) { free(a[t->ntmpl]); free(b[t->ntmpl]); return MX_ERR; }
    t->ntmpl++;
    return MX_OK;
}

static int load_config(mx_tokenizer *t, const tj *cfg, const char *file, bool *add_bos, bool *add_eos, bool *have_bos_key, bool *have_eos_key) {
    if (!cfg) return MX_OK;
    if (cfg->type != TJ_OBJ) return mx_set_err("%s: expected an object", file);
    for (uint32_t i = 0; i < cfg->n; i++) {
        const tj *e = &cfg->v.kids[i];
        if (e->klen > 6 && !memcmp(e->key + e->klen - 6, "_token", 6) && memchr(e->key, 0, e->klen) == NULL) {
            const tj *v = e;
            if (v->type == TJ_OBJ) v = tk_json_get(v, "content");
            if (v && v->type == TJ_STR && add_spec(t, e->key, v->v.str, v->n)) return MX_ERR;

        }
    }
    const tj *ct = tk_json_get(cfg, "chat_template");
    if (ct && ct->type == TJ_STR) { if (add_tmpl(t, "default", 7, ct->v.str, ct->n)) return MX_ERR; }
    else if (ct && ct->type == TJ_ARR) {
        for (uint32_t i = 0; i < ct->n; i++) {
            const tj *nm = tk_json_get(&ct->v.kids[i], "name"), *tx = tk_json_get(&ct->v.kids[i], "template");
            if (!nm || nm->type != TJ_STR || !tx || tx->type != TJ_STR)
                return mx_set_err("%s: chat_template[%u]: expected {\"name\": ..., \"template\": ...}", file, i);
            if (add_tmpl(t, nm->v.str, nm->n, tx->v.str, tx->n)) return MX_ERR;
        }
    } else if (ct && ct->type != TJ_NULL) return mx_set_err("%s: chat_template: expected a string or a list", file);
    const tj *ml = tk_json_get(cfg, "model_max_length");
    if (ml && ml->type == TJ_NUM) t->model_max_length = ml->v.num <= 0 ? 0 : ml->v.num >= 9.2e18 ? INT64_MAX : (int64_t)ml->v.num;
    const tj *cu = tk_json_get(cfg, "clean_up_tokenization_spaces");
    if (cu && cu->type != TJ_NULL && cu->type != TJ_TRUE && cu->type != TJ_FALSE)
        return mx_set_err("%s: clean_up_tokenization_spaces: expected true or false", file);
    t->cleanup = cu && cu->type == TJ_TRUE;
    const tj *ab = tk_json_get(cfg, "add_bos_token"), *ae = tk_json_get(cfg, "add_eos_token");
    *have_bos_key = ab && (ab->type == TJ_TRUE || ab->type == TJ_FALSE);
    *have_eos_key = ae && (ae->type == TJ_TRUE || ae->type == TJ_FALSE);
    if (*have_bos_key) *add_bos = ab->type == TJ_TRUE;
    if (*have_eos_key) *add_eos = ae->type == TJ_TRUE;
    return MX_OK;
}

static int32_t spec_id(const mx_tokenizer *t, const char *which) {
    const char *s = mx_tok_special_str(t, which);
    return s ? mx_tok_token_id(t, s, strlen(s)) : -1;
}

mx_tokenizer *tk_new(const char *name) {
    mx_tokenizer *t = mx_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->name = mx_strdup(name ? name : "tokenizer");
    t->bos = t->eos = t->pad = -1;
    t->model.unk_id = -1;
    if (!t->name) { free(t); return NULL; }
    return t;
}

static bool class_is(const tj *cfg, const char *a, const char *b) {
    const tj *c = tk_json_get(cfg, "tokenizer_class");
    if (!c || c->type != TJ_STR) return false;
    return strstr(c->v.str, a) || (b && strstr(c->v.str, b));
}

int tk_common_tail(mx_tokenizer *t, const tj *cfg, const char *cfgname, bool spm, bool spm_bos, bool spm_eos) {
    bool add_bos = spm_bos, add_eos = spm_eos, hb = false, he = false;
    if (load_config(t, cfg, cfgname, &add_bos, &add_eos, &hb, &he)) return MX_ERR;
    t->bos = spec_id(t, "bos_token");
    t->eos = spec_id(t, "eos_token");
    t->pad = spec_id(t, "pad_token");
    if (spm) {
        if (t->bos < 0) t->bos = mx_tok_token_id(t, "<s>", 3);
        if (t->eos < 0) t->eos = mx_tok_token_id(t, "</s>", 4);
    }
    /* transformers' Llama/Gemma fast tokenizers rebuild the template from
     * add_bos_token / add_eos_token */
    if (spm || ((hb || he) && class_is(cfg, "Llama", "Gemma"))) {
        t->npost_pre = t->npost_post = 0;
        if (add_bos && t->bos >= 0 && tk_add_ids(&t->post_pre, &t->npost_pre, &t->bos, 1)) return MX_ERR;
        if (add_eos && t->eos >= 0 && tk_add_ids(&t->post_post, &t->npost_post, &t->eos, 1)) return MX_ERR;
    }
    return MX_OK;
}

static mx_tokenizer *load_json(char *json, size_t len, const char *config, size_t config_len, const char *file,
                               const char *cfgname_in) { /* takes json (malloc'ed) */
    char *cfgname = mx_strdup(cfgname_in);
    if (!cfgname) { free(json); return NULL; }
    mx_tokenizer *t = tk_new(file);
    tj_doc *doc = NULL, *cdoc = NULL;
    const tj *root = NULL, *cfg = NULL;
    if (!t) { free(json); goto fail; }
    /* the big containers are read straight into the tables, not built as nodes */
    root = tk_json_parse_lazy(json, len, file, "model", (const char *const[]){"vocab", "merges", NULL}, &doc);
    if (!root) goto fail;
    if (root->type != TJ_OBJ) { mx_set_err("%s: expected an object", file); goto fail; }
    if (config) {
        cfg = tk_json_parse(config, config_len, cfgname, &cdoc);
        if (!cfg) goto fail;
    }
    if (load_model(t, doc, tk_json_get(root, "model"), file)) goto fail;
    if (load_added(t, tk_json_get(root, "added_tokens"), file)) goto fail;
    for (int i = 0; i < t->nadded; i++)
        if (t->added[i].id >= TK_MAX_VOCAB) { mx_set_err("%s: added_tokens: id too large", file); goto fail; }
    const tj *nj = tk_json_get(root, "normalizer");
    if (!tj_is_null(nj) && !(t->norm = tk_norm_parse(nj, file, 0))) goto fail;
    const tj *pj = tk_json_get(root, "pre_tokenizer");
    if (!tj_is_null(pj) && !(t->pre = tk_pre_parse(pj, file, 0))) goto fail;
    const tj *dj = tk_json_get(root, "decoder");
    if (!tj_is_null(dj) && !(t->dec = tk_dec_parse(dj, file, 0))) goto fail;
    if (tk_finish(t, file)) goto fail;
    if (load_post(t, tk_json_get(root, "post_processor"), file, 0)) goto fail;
    for (int i = 0; i < t->npost_pre; i++) if (t->post_pre[i] >= t->vocab_size) { mx_set_err("%s: post_processor: id %d outside the vocabulary", file, t->post_pre[i]); goto fail; }
    for (int i = 0; i < t->npost_post; i++) if (t->post_post[i] >= t->vocab_size) { mx_set_err("%s: post_processor: id %d outside the vocabulary", file, t->post_post[i]); goto fail; }
    if (tk_common_tail(t, cfg, cfgname, false, true, false)) goto fail;
    tk_json_free(doc);
    tk_json_free(cdoc);
    free(cfgname);
    return t;
fail:
    tk_json_free(doc);
    tk_json_free(cdoc);
    free(cfgname);
    mx_tok_free(t);
    return NULL;
}

mx_tokenizer *mx_tok_load_json(const char *json, size_t len, const char *config, size_t config_len, const char *name) {
    const char *file = name ? name : "tokenizer.json";
    char *cfgname = mx_asprintf("%s (tokenizer_config.json)", file);
    if (!cfgname) return NULL;
    char *copy = tk_alloc_big(len + 1, false);
    mx_tokenizer *t = NULL;
    if (copy) {
        memcpy(copy, json, len);
        copy[len] = 0;
        t = load_json(copy, len, config, config_len, file, cfgname);
    }
    free(cfgname);
    return t;
}

/* mx_read_file into a tk_alloc_big buffer (tokenizer.json can be 33 MB) */
static void *alloc_big(size_t n) { return tk_alloc_big(n, false); }
static int read_big(const char *path, size_t max, char **data, size_t *len) { return mx_read_file_with(path, max, alloc_big, data, len); }

mx_tokenizer *mx_tok_load(const char *dir) {
    char *jp = mx_path_join(dir, "tokenizer.json"), *cp = mx_path_join(dir, "tokenizer_config.json");
    char *data = NULL, *cdata = NULL;
    size_t len = 0, clen = 0;
    mx_tokenizer *t = NULL;
    if (!jp || !cp) goto done;
    if (!mx_file_exists(jp)) { t = tk_load_slow(dir); goto done; }
    if (mx_file_exists(cp) && mx_read_file(cp, 64u << 20, &cdata, &clen)) goto done;
    if (read_big(jp, TK_MAX_FILE, &data, &len)) goto done;
    t = load_json(data, len, cdata, clen, jp, cp);
    data = NULL; /* taken */
done:
    free(data);
    free(cdata);
    free(jp);
    free(cp);
    return t;
}
