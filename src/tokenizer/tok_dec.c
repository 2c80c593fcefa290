/* tokenizer decoders: ByteLevel, Metaspace, WordPiece, ByteFallback, Fuse,
 * Strip, Replace, BPEDecoder, CTC, Sequence. They map a list of token
 * strings to a list of strings that the caller concatenates. */
#include "tok_internal.h"
#include <stdlib.h>
#include <string.h>

static int replace_all(const char *s, size_t n, const char *a, size_t an, const char *b, size_t bn, mx_buf *out) {
    size_t i = 0, run = 0;
    if (!an) return mx_buf_append(out, s, n);
    while (i + an <= n) {
        if (s[i] == a[0] && !memcmp(s + i, a, an)) {
            if (mx_buf_append(out, s + run, i - run) || mx_buf_append(out, b, bn)) return MX_ERR;
            i += an;
            run = i;
        } else i++;
    }
    return mx_buf_append(out, s + run, n - run);
}

/* Applies a list of (from, to) replacements in order to buf. */
int tk_cleanup(mx_buf *buf, bool wordpiece);
int tk_cleanup(mx_buf *buf, bool wordpiece) {
    static const char *pairs[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                                     {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    if (!buf->len) return MX_OK;
    mx_buf t = {0};
    for (size_t k = 0; k < MX_ARRAY_LEN(pairs); k++) {
        if (!wordpiece && k == 7) continue;
        size_t an = strlen(pairs[k][0]);
        bool found = false;
        for (size_t i = 0; i + an <= buf->len; i++)
            if (buf->data[i] == ' ' && !memcmp(buf->data + i, pairs[k][0], an)) { found = true; break; }
        if (!found) continue;
        t.len = 0;
        if (replace_all(buf->data, buf->len, pairs[k][0], an, pairs[k][1], strlen(pairs[k][1]), &t)) { mx_buf_free(&t); return MX_ERR; }
        mx_buf x = *buf;
        *buf = t;
        t = x;
    }
    mx_buf_free(&t);
    return MX_OK;
}

static int add_buf(tk_pieces *out, mx_buf *b) { return tk_pieces_add(out, b->data ? b->data : "", b->len, 0); }

static int dec_one(const tk_dec *d, tk_ctx *c, tk_pieces *in, tk_pieces *out) {
    mx_buf *t = &c->b[1];
    switch (d->type) {
    case D_BYTELEVEL: {
        mx_buf *raw = &c->b[2];
        raw->len = 0;
        for (int i = 0; i < in->n; i++) {
            const uint8_t *s = (const uint8_t *)tk_piece(in, i);
            size_t n = in->len[i], start = raw->len;
            bool ok = true;
            for (size_t k = 0; k < n;) {
                int32_t cp;
                int l = tk_u8dec(s + k, n - k, &cp);
                int b = tk_cp2byte(cp);
                if (b < 0) { ok = false; break; }
                char ch = (char)b;
                if (mx_buf_append(raw, &ch, 1)) return MX_ERR;
                k += (size_t)l;
            }
            if (!ok) {
                raw->len = start;
                if (mx_buf_append(raw, s, n)) return MX_ERR;
            }
        }
        if (c->mid) return add_buf(out, raw);
        t->len = 0;
        if (tk_u8_lossy(raw->data ? raw->data : "", raw->len, t)) return MX_ERR;
        return add_buf(out, t);
    }
    case D_META:
        for (int i = 0; i < in->n; i++) {
            t->len = 0;
            const char *s = tk_piece(in, i);
            size_t n = in->len[i];
            for (size_t k = 0; k < n;) {
                if (k + (size_t)d->repl_len <= n && !memcmp(s + k, d->repl, (size_t)d->repl_len)) {
                    if (!(i == 0 && d->prepend && !c->mid) && mx_buf_append(t, " ", 1)) return MX_ERR;
                    k += (size_t)d->repl_len;
                } else {
                    if (mx_buf_append(t, s + k, 1)) return MX_ERR;
                    k++;
                }
            }
            if (add_buf(out, t)) return MX_ERR;
        }
        return MX_OK;
    case D_WORDPIECE:
        for (int i = 0; i < in->n; i++) {
            t->len = 0;
            const char *s = tk_piece(in, i);
            size_t n = in->len[i];
            if (i != 0 || c->mid) {
                if (n >= d->prefix_len && !memcmp(s, d->prefix, d->prefix_len)) { s += d->prefix_len; n -= d->prefix_len; }
                else if (mx_buf_append(t, " ", 1)) return MX_ERR;
            }
            if (mx_buf_append(t, s, n)) return MX_ERR;
            if (d->cleanup && tk_cleanup(t, true)) return MX_ERR;
            if (add_buf(out, t)) return MX_ERR;
        }
        return MX_OK;
    case D_BYTEFB: {
        mx_buf *bytes = &c->b[2];
        bytes->len = 0;
        for (int i = 0; i <= in->n; i++) {
            const char *s = i < in->n ? tk_piece(in, i) : NULL;
            int b = -1;
            if (s && in->len[i] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
                int v = 0, k;
                for (k = 3; k < 5; k++) {
                    char ch = s[k];
                    int h = (ch >= '0' && ch <= '9') ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10 : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
                    if (h < 0) break;
                    v = v * 16 + h;
                }
                if (k == 5) b = v;
            }
            if (b >= 0) {
                char ch = (char)b;
                if (mx_buf_append(bytes, &ch, 1)) return MX_ERR;
                continue;
            }
            if (bytes->len) {
                if (c->mid || tk_u8_valid(bytes->data, bytes->len)) { if (tk_pieces_add(out, bytes->data, bytes->len, 0)) return MX_ERR; }
                else for (size_t k = 0; k < bytes->len; k++) if (tk_pieces_add(out, "\xEF\xBF\xBD", 3, 0)) return MX_ERR;
                bytes->len = 0;
            }
            if (s && tk_pieces_add(out, s, in->len[i], 0)) return MX_ERR;
        }
        return MX_OK;
    }
    case D_FUSE:
        if (tk_pieces_add(out, "", 0, 0)) return MX_ERR;
        for (int i = 0; i < in->n; i++) if (tk_pieces_append_last(out, tk_piece(in, i), in->len[i])) return MX_ERR;
        return MX_OK;
    case D_STRIP:
        for (int i = 0; i < in->n; i++) {
            if (c->mid) { if (tk_pieces_add(out, tk_piece(in, i), in->len[i], 0)) return MX_ERR; continue; }
            const uint8_t *s = (const uint8_t *)tk_piece(in, i);
            size_t n = in->len[i], a = 0, e = n;
            for (int k = 0; k < d->start && a < n; k++) {
                int32_t cp;
                int l = tk_u8dec(s + a, n - a, &cp);
                if (cp != d->strip_cp) break;
                a += (size_t)l;
            }
            for (int k = 0; k < d->stop && e > a; k++) {
                size_t q = e - 1;
                while (q > a && (s[q] & 0xC0) == 0x80) q--;
                int32_t cp;
                tk_u8dec(s + q, e - q, &cp);
                if (cp != d->strip_cp) break;
                e = q;
            }
            if (tk_pieces_add(out, (const char *)s + a, e - a, 0)) return MX_ERR;
        }
        return MX_OK;
    case D_REPLACE:
        for (int i = 0; i < in->n; i++) {
            t->len = 0;
            if (tk_pat_replace(&d->pat, c, tk_piece(in, i), in->len[i], d->content, d->clen, t)) return MX_ERR;
            if (add_buf(out, t)) return MX_ERR;
        }
        return MX_OK;
    case D_BPE:
        for (int i = 0; i < in->n; i++) {
            t->len = 0;
            const char *rep = i == in->n - 1 && !c->mid ? "" : " ";
            if (replace_all(tk_piece(in, i), in->len[i], d->prefix, d->prefix_len, rep, strlen(rep), t)) return MX_ERR;
            if (add_buf(out, t)) return MX_ERR;
        }
        return MX_OK;
    case D_CTC:
        for (int i = 0; i < in->n; i++) {
            if (i > 0 && in->len[i] == in->len[i - 1] && !memcmp(tk_piece(in, i), tk_piece(in, i - 1), in->len[i])) continue;
            t->len = 0;
            if (replace_all(tk_piece(in, i), in->len[i], d->prefix, d->prefix_len, "", 0, t)) return MX_ERR;
            if (d->cleanup) {
                if (tk_cleanup(t, true)) return MX_ERR;
                mx_buf u = {0};
                if (replace_all(t->data ? t->data : "", t->len, d->delim, d->delim_len, " ", 1, &u)) { mx_buf_free(&u); return MX_ERR; }
                t->len = 0;
                int rc = mx_buf_append(t, u.data ? u.data : "", u.len);
                mx_buf_free(&u);
                if (rc) return MX_ERR;
            }
            if (t->len && add_buf(out, t)) return MX_ERR;
        }
        return MX_OK;
    case D_SEQ: {
        tk_pieces a = {0}, b = {0};
        int rc = MX_OK;
        for (int i = 0; !rc && i < in->n; i++) rc = tk_pieces_add(&a, tk_piece(in, i), in->len[i], 0);
        for (int k = 0; !rc && k < d->nsub; k++) {
            tk_pieces_clear(&b);
            rc = tk_dec_apply(d->sub[k], c, &a, &b);
            tk_pieces t2 = a;
            a = b;
            b = t2;
        }
        for (int i = 0; !rc && i < a.n; i++) rc = tk_pieces_add(out, tk_piece(&a, i), a.len[i], 0);
        tk_pieces_free(&a);
        tk_pieces_free(&b);
        return rc;
    }
    }
    return mx_set_err("tokenizer: bad decoder");
}

int tk_dec_apply(const tk_dec *d, tk_ctx *c, tk_pieces *in, tk_pieces *out) { return dec_one(d, c, in, out); }

void tk_dec_free(tk_dec *d) {
    if (!d) return;
    for (int i = 0; i < d->nsub; i++) tk_dec_free(d->sub[i]);
    free(d->sub);
    free(d->prefix);
    free(d->delim);
    free(d->content);
    tk_pat_free(&d->pat);
    free(d);
}

static bool jbool(const tj *o, const char *k, bool def) {
    const tj *v = tk_json_get(o, k);
    if (!v || v->type == TJ_NULL) return def;
    return v->type == TJ_TRUE;
}

static int jstr(const tj *o, const char *k, const char *def, const char *file, char **out, size_t *len) {
    const tj *v = tk_json_get(o, k);
    if (!v || v->type == TJ_NULL) {
        if (!def) return mx_set_err("%s: decoder.%s: missing", file, k);
        *out = mx_strdup(def);
        *len = strlen(def);
        return *out ? MX_OK : MX_ERR;
    }
    if (v->type != TJ_STR) return mx_set_err("%s: decoder.%s: expected a string", file, k);
    *out = mx_strndup(v->v.str, v->n);
    *len = v->n;
    return *out ? MX_OK : MX_ERR;
}

static int jint(const tj *o, const char *k, int def, const char *file, int *out) {
    const tj *v = tk_json_get(o, k);
    if (!v || v->type == TJ_NULL) { *out = def; return MX_OK; }
    if (v->type != TJ_NUM || v->v.num < 0 || v->v.num > 1e6 || v->v.num != (int)v->v.num)
        return mx_set_err("%s: decoder.%s: expected a small non-negative integer", file, k);
    *out = (int)v->v.num;
    return MX_OK;
}

int tk_parse_char(const tj *v, const char *key, const char *file, const char *what, const char *def, char out[8], int *len);
int tk_parse_prepend(const tj *v, const char *file, int *out);

tk_dec *tk_dec_parse(const tj *v, const char *file, int depth) {
    if (depth > TK_MAX_DEPTH) { mx_set_err("%s: decoder: nested too deeply", file); return NULL; }
    if (!v || v->type != TJ_OBJ) { mx_set_err("%s: decoder: expected an object", file); return NULL; }
    const tj *ty = tk_json_get(v, "type");
    if (!ty || ty->type != TJ_STR) { mx_set_err("%s: decoder.type: expected a string", file); return NULL; }
    tk_dec *d = mx_calloc(1, sizeof *d);
    if (!d) return NULL;
    const char *t = ty->v.str;
    if (!strcmp(t, "Sequence")) {
        d->type = D_SEQ;
        const tj *arr = tk_json_get(v, "decoders");
        if (!arr || arr->type != TJ_ARR) { mx_set_err("%s: decoder.decoders: expected an array", file); goto fail; }
        d->sub = mx_calloc(arr->n ? arr->n : 1, sizeof(tk_dec *));
        if (!d->sub) goto fail;
        for (uint32_t i = 0; i < arr->n; i++) {
            d->sub[i] = tk_dec_parse(&arr->v.kids[i], file, depth + 1);
            if (!d->sub[i]) goto fail;
            d->nsub++;
        }
    } else if (!strcmp(t, "ByteLevel")) d->type = D_BYTELEVEL;
    else if (!strcmp(t, "Metaspace")) {
        d->type = D_META;
        int ps;
        if (tk_parse_char(v, "replacement", file, "decoder Metaspace", "\xE2\x96\x81", d->repl, &d->repl_len)) goto fail;
        if (tk_parse_prepend(v, file, &ps)) goto fail;
        d->prepend = ps != 2;
    } else if (!strcmp(t, "WordPiece")) {
        d->type = D_WORDPIECE;
        if (jstr(v, "prefix", "##", file, &d->prefix, &d->prefix_len)) goto fail;
        d->cleanup = jbool(v, "cleanup", true);
    } else if (!strcmp(t, "ByteFallback")) d->type = D_BYTEFB;
    else if (!strcmp(t, "Fuse")) d->type = D_FUSE;
    else if (!strcmp(t, "Strip")) {
        d->type = D_STRIP;
        char ch[8];
        int cl;
        if (tk_parse_char(v, "content", file, "decoder Strip", " ", ch, &cl)) goto fail;
        tk_u8dec((const uint8_t *)ch, (size_t)cl, &d->strip_cp);
        if (jint(v, "start", 0, file, &d->start) || jint(v, "stop", 0, file, &d->stop)) goto fail;
    } else if (!strcmp(t, "Replace")) {
        d->type = D_REPLACE;
        if (tk_pat_parse(&d->pat, tk_json_get(v, "pattern"), file, "decoder Replace.pattern")) goto fail;
        if (jstr(v, "content", NULL, file, &d->content, &d->clen)) goto fail;
    } else if (!strcmp(t, "BPEDecoder")) {
        d->type = D_BPE;
        if (jstr(v, "suffix", "</w>", file, &d->prefix, &d->prefix_len)) goto fail;
    } else if (!strcmp(t, "CTC")) {
        d->type = D_CTC;
        if (jstr(v, "pad_token", "<pad>", file, &d->prefix, &d->prefix_len)) goto fail;
        if (jstr(v, "word_delimiter_token", "|", file, &d->delim, &d->delim_len)) goto fail;
        d->cleanup = jbool(v, "cleanup", true);
    } else {
        mx_set_err("%s: decoder.type: unsupported \"%s\"", file, t);
        goto fail;
    }
    return d;
fail:
    tk_dec_free(d);
    return NULL;
}

int mx_tok_token_bytes(const mx_tokenizer *t, int32_t id, mx_buf *out) {
    if (id < 0 || id >= t->vocab_size || !t->id2str[id].s) return MX_OK;
    const char *s = t->id2str[id].s;
    size_t n = t->id2str[id].len;
    if (!t->dec) return mx_buf_append(out, " ", 1) || mx_buf_append(out, s, n) ? MX_ERR : MX_OK;
    tk_ctx c;
    if (tk_ctx_init(&c)) return MX_ERR;
    c.mid = true;
    tk_pieces in = {0}, res = {0};
    int rc = tk_pieces_add(&in, s, n, 0);
    if (!rc) rc = tk_dec_apply(t->dec, &c, &in, &res);
    for (int i = 0; !rc && i < res.n; i++) rc = mx_buf_append(out, tk_piece(&res, i), res.len[i]);
    tk_pieces_free(&in);
    tk_pieces_free(&res);
    tk_ctx_free(&c);
    return rc;
}
