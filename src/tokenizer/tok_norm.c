/* tokenizer normalizers: Unicode forms, Lowercase, Strip, StripAccents,
 * Replace, Prepend, BertNormalizer, Precompiled (SentencePiece charsmap),
 * Nmt, ByteLevel, Sequence. Each maps valid UTF-8 to (valid) UTF-8. */
#include "tok_internal.h"
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int put_cp(mx_buf *o, int32_t c) {
    char t[4];
    return mx_buf_append(o, t, (size_t)tk_u8enc(c, t));
}

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

static int unicode_form(int type, const char *in, size_t n, mx_buf *out) {
    if (all_ascii(in, n)) return mx_buf_append(out, in, n);
    utf8proc_option_t o = UTF8PROC_STABLE;
    if (type == N_NFC || type == N_NFKC) o |= UTF8PROC_COMPOSE;
    else o |= UTF8PROC_DECOMPOSE;
    if (type == N_NFKC || type == N_NFKD) o |= UTF8PROC_COMPAT;
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)n, &r, o);
    if (m < 0) return mx_set_err("tokenizer: normalization failed: %s", utf8proc_errmsg(m));
    int rc = mx_buf_append(out, r, (size_t)m);
    free(r);
    return rc;
}

/* Per-character transform: fn returns the replacement code point, -1 to drop
 * it; lowercase may expand U+0130 to two characters. */
static int lower_str(const char *in, size_t n, mx_buf *out) {
    const uint8_t *s = (const uint8_t *)in;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            char ch = (char)((s[i] >= 'A' && s[i] <= 'Z') ? s[i] + 32 : s[i]);
            if (mx_buf_append(out, &ch, 1)) return MX_ERR;
            i++;
            continue;
        }
        int32_t c;
        int l = tk_u8dec(s + i, n - i, &c);
        i += (size_t)l;
        if (c < 0) c = 0xFFFD;
        if (c == 0x130) { if (put_cp(out, 'i') || put_cp(out, 0x307)) return MX_ERR; continue; }
        if (put_cp(out, utf8proc_tolower(c))) return MX_ERR;
    }
    return MX_OK;
}

static int bert_norm(const tk_norm *nm, tk_ctx *c, const char *in, size_t n, mx_buf *out) {
    mx_buf *t = &c->b[3];
    t->len = 0;
    const uint8_t *s = (const uint8_t *)in;
    for (size_t i = 0; i < n;) {
        int32_t ch;
        int l = tk_u8dec(s + i, n - i, &ch);
        i += (size_t)l;
        if (ch < 0) ch = 0xFFFD;
        if (nm->clean_text) {
            if (ch == 0 || ch == 0xFFFD) continue;
            if (ch != '\t' && ch != '\n' && ch != '\r' && tk_is_other(ch)) continue;
            if (tk_is_ws(ch)) ch = ' ';
        }
        if (nm->chinese && tk_is_cjk(ch)) {
            if (put_cp(t, ' ') || put_cp(t, ch) || put_cp(t, ' ')) return MX_ERR;
        } else if (put_cp(t, ch)) return MX_ERR;
    }
    const char *cur = t->data ? t->data : "";
    size_t cn = t->len;
    mx_buf u = {0};
    if (nm->strip_accents) {
        mx_buf d = {0};
        if (unicode_form(N_NFD, cur, cn, &d)) { mx_buf_free(&d); return MX_ERR; }
        const uint8_t *q = (const uint8_t *)(d.data ? d.data : "");
        for (size_t i = 0; i < d.len;) {
            int32_t ch;
            int l = tk_u8dec(q + i, d.len - i, &ch);
            if (ch >= 0 && !tk_is_mn(ch) && mx_buf_append(&u, q + i, (size_t)l)) { mx_buf_free(&d); mx_buf_free(&u); return MX_ERR; }
            i += (size_t)l;
        }
        mx_buf_free(&d);
        cur = u.data ? u.data : "";
        cn = u.len;
    }
    int rc = nm->lowercase ? lower_str(cur, cn, out) : mx_buf_append(out, cur, cn);
    mx_buf_free(&u);
    return rc;
}

static int nmt_norm(const char *in, size_t n, mx_buf *out) {
    const uint8_t *s = (const uint8_t *)in;
    for (size_t i = 0; i < n;) {
        int32_t c;
        int l = tk_u8dec(s + i, n - i, &c);
        i += (size_t)l;
        if (c < 0) c = 0xFFFD;
        if ((c >= 1 && c <= 8) || c == 0xB || (c >= 0xE && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F) continue;
        if (c == 9 || c == 0xA || c == 0xC || c == 0xD || c == 0x1680 || (c >= 0x200B && c <= 0x200F) || c == 0x2028 ||
            c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD)
            c = ' ';
        if (put_cp(out, c)) return MX_ERR;
    }
    return MX_OK;
}

/* ---- Precompiled: darts-clone double array + NUL-separated strings ---- */
int tk_precompiled_init(tk_norm *n, const uint8_t *blob, size_t len, const char *file) {
    if (len < 4) return mx_set_err("%s: precompiled_charsmap: too short", file);
    uint32_t ts = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
    if (ts % 4 || ts > len - 4) return mx_set_err("%s: precompiled_charsmap: bad trie size %u", file, ts);
    n->blob = mx_malloc(len + 4);
    if (!n->blob) return MX_ERR;
    memcpy(n->blob, blob, len);
    memset(n->blob + len, 0, 4);
    /* copy the units to an aligned array inside blob's allocation is not
     * guaranteed; keep a separate aligned copy */
    uint32_t *units = mx_malloc(ts ? ts : 4);
    if (!units) return MX_ERR;
    for (uint32_t i = 0; i < ts / 4; i++) {
        const uint8_t *u = blob + 4 + 4 * i;
        units[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
    }
    n->trie = units;
    n->trie_n = ts / 4;
    n->pool = n->blob + 4 + ts;
    n->pool_n = len - 4 - ts;
    return MX_OK;
}

/* Common prefix search; returns the number of results (values, lengths). */
static int dar_search(const tk_norm *n, const uint8_t *key, size_t klen, uint32_t *vals, size_t *lens, int maxr) {
    const uint32_t *a = n->trie;
    size_t na = n->trie_n, pos = 0;
    int nr = 0;
    if (!na) return 0;
#define OFFSET(u) (((u) >> 10) << (((u) & (1u << 9)) >> 6))
#define HAS_LEAF(u) (((u) >> 8) & 1)
#define LABEL(u) ((u) & ((1u << 31) | 0xFF))
#define VALUE(u) ((u) & ((1u << 31) - 1))
    uint32_t unit = a[0];
    pos ^= OFFSET(unit);
    for (size_t i = 0; i < klen; i++) {
        pos ^= key[i];
        if (pos >= na) break;
        unit = a[pos];
        if (LABEL(unit) != key[i]) break;
        pos ^= OFFSET(unit);
        if (pos >= na) break;
        if (HAS_LEAF(unit)) {
            if (nr < maxr) { vals[nr] = VALUE(a[pos]); lens[nr] = i + 1; }
            nr++;
        }
    }
    return nr < maxr ? nr : maxr;
}

static int pool_str(const tk_norm *n, uint32_t v, mx_buf *out) {
    if (v >= n->pool_n) return mx_buf_append(out, "\xEF\xBF\xBD", 3);
    const char *s = n->pool + v;
    const char *e = memchr(s, 0, n->pool_n - v);
    size_t l = e ? (size_t)(e - s) : n->pool_n - v;
    return mx_buf_append(out, s, l);
}

static int precompiled(const tk_norm *nm, const char *in, size_t n, mx_buf *out) {
    const uint8_t *s = (const uint8_t *)in;
    uint32_t vals[64];
    size_t lens[64];
    if (nm->sp_longest) { /* sentencepiece: longest match at each position */
        for (size_t i = 0; i < n;) {
            int r = dar_search(nm, s + i, n - i, vals, lens, 64);
            if (r > 0) {
                int best = 0;
                for (int k = 1; k < r; k++) if (lens[k] > lens[best]) best = k;
                if (pool_str(nm, vals[best], out)) return MX_ERR;
                i += lens[best];
                continue;
            }
            int32_t c;
            int l = tk_u8dec(s + i, n - i, &c);
            if (c < 0 ? mx_buf_append(out, "\xEF\xBF\xBD", 3) : mx_buf_append(out, s + i, (size_t)l)) return MX_ERR;
            i += (size_t)l;
        }
        return MX_OK;
    }
    /* HF: per extended grapheme cluster */
    size_t i = 0;
    while (i < n) {
        int32_t c, prev;
        utf8proc_int32_t state = 0;
        size_t g = i;
        int l = tk_u8dec(s + g, n - g, &prev);
        g += (size_t)l;
        if (prev < 0) prev = 0xFFFD;
        while (g < n) {
            int l2 = tk_u8dec(s + g, n - g, &c);
            if (c < 0) c = 0xFFFD;
            if (utf8proc_grapheme_break_stateful(prev, c, &state)) break;
            prev = c;
            g += (size_t)l2;
        }
        size_t glen = g - i;
        if (glen < 6 && dar_search(nm, s + i, glen, vals, lens, 1) > 0) {
            if (pool_str(nm, vals[0], out)) return MX_ERR;
            i = g;
            continue;
        }
        while (i < g) {
            int l3 = tk_u8dec(s + i, g - i, &c);
            if (dar_search(nm, s + i, (size_t)l3, vals, lens, 1) > 0) {
                if (pool_str(nm, vals[0], out)) return MX_ERR;
            } else if (mx_buf_append(out, s + i, (size_t)l3)) return MX_ERR;
            i += (size_t)l3;
        }
    }
    return MX_OK;
}

/* sentencepiece's remove_extra_whitespaces: leading and trailing spaces go
 * (a leading run stays as one space with keep_lead, as after slow Llama's
 * "<unk>" prefix; with nm->right a trailing "▁" goes too) and runs collapse. */
static int spws(const tk_norm *nm, const tk_ctx *c, const char *in, size_t n, mx_buf *out) {
    size_t i = 0, e = n;
    while (i < e && in[i] == ' ') i++;
    if (i && c->keep_lead) i--;
    for (;;) {
        if (e > i && in[e - 1] == ' ') e--;
        else if (nm->right && e >= i + 3 && !memcmp(in + e - 3, "\xE2\x96\x81", 3)) e -= 3;
        else break;
    }
    for (; i < e; i++) {
        if (in[i] == ' ' && i > 0 && in[i - 1] == ' ') continue;
        if (mx_buf_append(out, in + i, 1)) return MX_ERR;
    }
    return MX_OK;
}

int tk_norm_apply(const tk_norm *nm, tk_ctx *c, const char *in, size_t n, mx_buf *out) {
    out->len = 0;
    if (out->data) out->data[0] = 0;
    switch (nm->type) {
    case N_SEQ: {
        mx_buf a = {0};
        if (mx_buf_append(&a, in, n)) return MX_ERR;
        for (int i = 0; i < nm->nsub; i++) {
            if (tk_norm_apply(nm->sub[i], c, a.data, a.len, out)) { mx_buf_free(&a); return MX_ERR; }
            mx_buf t = a;
            a = *out;
            *out = t;
        }
        mx_buf t = a;
        a = *out;
        *out = t;
        mx_buf_free(&a);
        return out->data ? MX_OK : mx_buf_append(out, "", 0);
    }
    case N_NFC: case N_NFD: case N_NFKC: case N_NFKD: return unicode_form(nm->type, in, n, out);
    case N_LOWER: return lower_str(in, n, out);
    case N_STRIP: {
        size_t a = 0, b = n;
        const uint8_t *s = (const uint8_t *)in;
        if (nm->left)
            while (a < b) {
                int32_t ch;
                int l = tk_u8dec(s + a, b - a, &ch);
                if (!tk_is_ws(ch)) break;
                a += (size_t)l;
            }
        if (nm->right)
            while (b > a) {
                size_t k = b - 1;
                while (k > a && (s[k] & 0xC0) == 0x80) k--;
                int32_t ch;
                tk_u8dec(s + k, b - k, &ch);
                if (!tk_is_ws(ch)) break;
                b = k;
            }
        return mx_buf_append(out, in + a, b - a);
    }
    case N_STRIPACC: {
        const uint8_t *s = (const uint8_t *)in;
        for (size_t i = 0; i < n;) {
            int32_t ch;
            int l = tk_u8dec(s + i, n - i, &ch);
            if (!tk_is_mark(ch) && mx_buf_append(out, s + i, (size_t)l)) return MX_ERR;
            i += (size_t)l;
        }
        return mx_buf_append(out, "", 0);
    }
    case N_REPLACE: return tk_pat_replace(&nm->pat, c, in, n, nm->content, nm->clen, out);
    case N_PREPEND:
        if (n && mx_buf_append(out, nm->content, nm->clen)) return MX_ERR;
        return mx_buf_append(out, in, n);
    case N_BERT: return bert_norm(nm, c, in, n, out);
    case N_PRECOMP: if (mx_buf_append(out, "", 0)) return MX_ERR; return precompiled(nm, in, n, out);
    case N_NMT: if (mx_buf_append(out, "", 0)) return MX_ERR; return nmt_norm(in, n, out);
    case N_BYTELEVEL:
        if (mx_buf_append(out, "", 0)) return MX_ERR;
        for (size_t i = 0; i < n; i++) if (put_cp(out, tk_byte2cp[(unsigned char)in[i]])) return MX_ERR;
        return MX_OK;
    case N_SPWS: if (mx_buf_append(out, "", 0)) return MX_ERR; return spws(nm, c, in, n, out);
    }
    return mx_set_err("tokenizer: bad normalizer");
}

void tk_norm_free(tk_norm *n) {
    if (!n) return;
    for (int i = 0; i < n->nsub; i++) tk_norm_free(n->sub[i]);
    free(n->sub);
    tk_pat_free(&n->pat);
    free(n->content);
    free((void *)n->trie);
    free(n->blob);
    free(n);
}

static bool jbool(const tj *o, const char *k, bool def) {
    const tj *v = tk_json_get(o, k);
    if (!v || v->type == TJ_NULL) return def;
    return v->type == TJ_TRUE;
}

static int jstr(const tj *o, const char *k, const char *file, const char *what, char **out, size_t *len) {
    const tj *v = tk_json_get(o, k);
    if (!v || v->type != TJ_STR) return mx_set_err("%s: %s.%s: expected a string", file, what, k);
    *out = mx_strndup(v->v.str, v->n);
    *len = v->n;
    return *out ? MX_OK : MX_ERR;
}

tk_norm *tk_norm_parse(const tj *v, const char *file, int depth) {
    if (depth > TK_MAX_DEPTH) { mx_set_err("%s: normalizer: nested too deeply", file); return NULL; }
    if (!v || v->type != TJ_OBJ) { mx_set_err("%s: normalizer: expected an object", file); return NULL; }
    const tj *ty = tk_json_get(v, "type");
    if (!ty || ty->type != TJ_STR) { mx_set_err("%s: normalizer.type: expected a string", file); return NULL; }
    tk_norm *n = mx_calloc(1, sizeof *n);
    if (!n) return NULL;
    const char *t = ty->v.str;
    if (!strcmp(t, "Sequence")) {
        n->type = N_SEQ;
        const tj *arr = tk_json_get(v, "normalizers");
        if (!arr || arr->type != TJ_ARR) { mx_set_err("%s: normalizer.normalizers: expected an array", file); goto fail; }
        n->sub = mx_calloc(arr->n ? arr->n : 1, sizeof(tk_norm *));
        if (!n->sub) goto fail;
        for (uint32_t i = 0; i < arr->n; i++) {
            n->sub[i] = tk_norm_parse(&arr->v.kids[i], file, depth + 1);
            if (!n->sub[i]) goto fail;
            n->nsub++;
        }
    } else if (!strcmp(t, "NFC")) n->type = N_NFC;
    else if (!strcmp(t, "NFD")) n->type = N_NFD;
    else if (!strcmp(t, "NFKC")) n->type = N_NFKC;
    else if (!strcmp(t, "NFKD")) n->type = N_NFKD;
    else if (!strcmp(t, "Lowercase")) n->type = N_LOWER;
    else if (!strcmp(t, "Nmt")) n->type = N_NMT;
    else if (!strcmp(t, "ByteLevel")) n->type = N_BYTELEVEL;
    else if (!strcmp(t, "Strip")) {
        n->type = N_STRIP;
        n->left = jbool(v, "strip_left", true);
        n->right = jbool(v, "strip_right", true);
    } else if (!strcmp(t, "StripAccents")) n->type = N_STRIPACC;
    else if (!strcmp(t, "Replace")) {
        n->type = N_REPLACE;
        if (tk_pat_parse(&n->pat, tk_json_get(v, "pattern"), file, "normalizer Replace.pattern")) goto fail;
        if (jstr(v, "content", file, "normalizer Replace", &n->content, &n->clen)) goto fail;
    } else if (!strcmp(t, "Prepend")) {
        n->type = N_PREPEND;
        if (jstr(v, "prepend", file, "normalizer Prepend", &n->content, &n->clen)) goto fail;
    } else if (!strcmp(t, "BertNormalizer")) {
        n->type = N_BERT;
        n->clean_text = jbool(v, "clean_text", true);
        n->chinese = jbool(v, "handle_chinese_chars", true);
        n->lowercase = jbool(v, "lowercase", true);
        n->strip_accents = jbool(v, "strip_accents", n->lowercase);
    } else if (!strcmp(t, "Precompiled")) {
        n->type = N_PRECOMP;
        const tj *cm = tk_json_get(v, "precompiled_charsmap");
        if (!cm || cm->type == TJ_NULL) { n->type = N_SEQ; return n; } /* no charsmap: identity */
        if (cm->type != TJ_STR) { mx_set_err("%s: normalizer.precompiled_charsmap: expected a base64 string", file); goto fail; }
        uint8_t *blob;
        size_t bl;
        if (mx_b64_decode(cm->v.str, cm->n, &blob, &bl)) { mx_set_err("%s: normalizer.precompiled_charsmap: bad base64", file); goto fail; }
        int rc = bl ? tk_precompiled_init(n, blob, bl, file) : MX_OK;
        if (!bl) n->type = N_SEQ;
        free(blob);
        if (rc) goto fail;
    } else {
        mx_set_err("%s: normalizer.type: unsupported \"%s\"", file, t);
        goto fail;
    }
    return n;
fail:
    tk_norm_free(n);
    return NULL;
}
