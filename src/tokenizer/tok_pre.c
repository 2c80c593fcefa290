/* tokenizer pre-tokenizers: ByteLevel, Split, Metaspace, Whitespace,
 * WhitespaceSplit, BertPreTokenizer, Punctuation, Digits,
 * CharDelimiterSplit, Sequence. Pieces carry flag 1 when they start at
 * offset 0 of the original text (Metaspace prepend_scheme "first"). */
#include "tok_internal.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

const int32_t tk_byte2cp[256] = {
    256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270, 271,
    272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287,
    288, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
    48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
    80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
    96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 289,
    290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305,
    306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321,
    322, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 323, 174, 175,
    176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191,
    192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207,
    208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
    224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255,
};

static int16_t g_cp_inv[324];
static void cp_inv_init(void) {
    for (int i = 0; i < 324; i++) g_cp_inv[i] = -1;
    for (int b = 0; b < 256; b++) g_cp_inv[tk_byte2cp[b]] = (int16_t)b;
}

int tk_cp2byte(int32_t cp) {
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* decoders run on many threads at once */
    pthread_once(&once, cp_inv_init);
    return (cp >= 0 && cp < 324) ? g_cp_inv[cp] : -1;
}

typedef struct { uint32_t s, e; uint8_t m; } span;

static int add_span(mx_buf *b, size_t s, size_t e, bool m) {
    span x = {(uint32_t)s, (uint32_t)e, (uint8_t)m};
    return mx_buf_append(b, &x, sizeof x);
}

/* Applies a split behavior to a list of (offsets, is_match) covering the piece
 * and appends the resulting non-empty pieces. */
static int emit_splits(const char *s, uint8_t flag, span *sp, size_t ns, int behavior, tk_pieces *out) {
    /* merge per behavior into sp in place (result has m = "remove") */
    size_t k = 0;
    bool prev = false;
    switch (behavior) {
    case B_REMOVED: break; /* m already means remove */
    case B_ISOLATED: for (size_t i = 0; i < ns; i++) sp[i].m = 0; k = ns; break;
    case B_CONTIG:
        for (size_t i = 0; i < ns; i++) {
            bool m = sp[i].m;
            if (k && m == prev) sp[k - 1].e = sp[i].e;
            else { sp[k] = sp[i]; sp[k].m = 0; k++; }
            prev = m;
        }
        break;
    case B_PREV:
        for (size_t i = 0; i < ns; i++) {
            bool m = sp[i].m;
            if (m && !prev && k) sp[k - 1].e = sp[i].e;
            else { sp[k] = sp[i]; sp[k].m = 0; k++; }
            prev = m;
        }
        break;
    case B_NEXT: {
        /* fold from the right */
        size_t w = ns;
        for (size_t ii = ns; ii-- > 0;) {
            bool m = sp[ii].m;
            if (m && !prev && w < ns) sp[w].s = sp[ii].s;
            else { w--; sp[w] = sp[ii]; sp[w].m = 0; }
            prev = m;
        }
        memmove(sp, sp + w, (ns - w) * sizeof(span));
        k = ns - w;
        break;
    }
    }
    if (behavior == B_REMOVED) k = ns;
    for (size_t i = 0; i < k; i++) {
        if (sp[i].m || sp[i].e <= sp[i].s) continue;
        if (tk_pieces_add(out, s + sp[i].s, sp[i].e - sp[i].s, (uint8_t)(flag && sp[i].s == 0))) return MX_ERR;
    }
    return MX_OK;
}

typedef bool (*cpred)(int32_t c, const tk_pre *p);
static bool pr_ws(int32_t c, const tk_pre *p) { (void)p; return tk_is_ws(c); }
static bool pr_punct(int32_t c, const tk_pre *p) { (void)p; return tk_is_punct(c); }
static bool pr_num(int32_t c, const tk_pre *p) { (void)p; return tk_is_numeric(c); }
static bool pr_char(int32_t c, const tk_pre *p) {
    int32_t r;
    tk_u8dec((const uint8_t *)p->repl, (size_t)p->repl_len, &r);
    return c == r;
}

static int split_pred(tk_ctx *c, const char *s, size_t n, uint8_t flag, cpred f, const tk_pre *p, int behavior, tk_pieces *out) {
    mx_buf *sb = &c->b[0];
    sb->len = 0;
    size_t last = 0;
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        int32_t ch;
        int l = tk_u8dec(u + i, n - i, &ch);
        if (f(ch, p)) {
            if (last < i && add_span(sb, last, i, false)) return MX_ERR;
            if (add_span(sb, i, i + (size_t)l, true)) return MX_ERR;
            last = i + (size_t)l;
        }
        i += (size_t)l;
    }
    if (last < n && add_span(sb, last, n, false)) return MX_ERR;
    return emit_splits(s, flag, (span *)sb->data, sb->len / sizeof(span), behavior, out);
}

static int split_pat(tk_ctx *c, const char *s, size_t n, uint8_t flag, const tk_pat *pat, bool invert, int behavior, tk_pieces *out) {
    mx_buf *sb = &c->b[0];
    sb->len = 0;
    if (!n) return MX_OK;
    size_t prev = 0, from = 0, ms, me;
    if (pat->re || pat->len) {
        for (;;) {
            int r = tk_pat_find(pat, c, s, n, from, &ms, &me);
            if (r < 0) return MX_ERR;
            if (!r) break;
            if (prev != ms && add_span(sb, prev, ms, invert)) return MX_ERR;
            if (add_span(sb, ms, me, !invert)) return MX_ERR;
            prev = me;
            if (me == ms) {
                if (me >= n) break;
                int32_t cp;
                from = me + (size_t)tk_u8dec((const uint8_t *)s + me, n - me, &cp);
            } else from = me;
        }
    }
    if (prev != n && add_span(sb, prev, n, invert)) return MX_ERR;
    return emit_splits(s, flag, (span *)sb->data, sb->len / sizeof(span), behavior, out);
}

static const char *GPT2_RE = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char *WS_RE = "\\w+|[^\\w\\s]+";

static int bytelevel_map(const char *s, size_t n, uint8_t flag, tk_pieces *out) {
    if (tk_pieces_add(out, "", 0, flag)) return MX_ERR;
    if (mx_buf_reserve(&out->text, n * 2)) return MX_ERR;
    char *o = out->text.data + out->text.len;
    for (size_t i = 0; i < n; i++) {
        int32_t cp = tk_byte2cp[(unsigned char)s[i]];
        if (cp < 0x80) *o++ = (char)cp;
        else { *o++ = (char)(0xC0 | (cp >> 6)); *o++ = (char)(0x80 | (cp & 0x3F)); }
    }
    size_t w = (size_t)(o - (out->text.data + out->text.len));
    out->text.len += w;
    out->text.data[out->text.len] = 0;
    out->len[out->n - 1] = (uint32_t)w;
    return MX_OK;
}

static int apply_one(const tk_pre *p, tk_ctx *c, const char *s, size_t n, uint8_t flag, tk_pieces *out) {
    switch (p->type) {
    case P_BYTELEVEL: {
        mx_buf *t = &c->b[1];
        t->len = 0;
        if (p->add_prefix_space && (n == 0 || s[0] != ' ')) {
            if (mx_buf_append(t, " ", 1)) return MX_ERR;
        }
        if (mx_buf_append(t, s, n)) return MX_ERR;
        if (!p->use_regex) return bytelevel_map(t->data, t->len, flag, out);
        tk_pieces tmp = {0};
        int rc = split_pat(c, t->data, t->len, flag, &p->pat, false, B_ISOLATED, &tmp);
        for (int i = 0; !rc && i < tmp.n; i++) rc = bytelevel_map(tk_piece(&tmp, i), tmp.len[i], tmp.flag[i], out);
        tk_pieces_free(&tmp);
        return rc;
    }
    case P_SPLIT: return split_pat(c, s, n, flag, &p->pat, p->invert, p->behavior, out);
    case P_WS: return split_pat(c, s, n, flag, &p->pat, true, B_REMOVED, out);
    case P_WSSPLIT: return split_pred(c, s, n, flag, pr_ws, p, B_REMOVED, out);
    case P_BERT: {
        tk_pieces tmp = {0};
        int rc = split_pred(c, s, n, flag, pr_ws, p, B_REMOVED, &tmp);
        for (int i = 0; !rc && i < tmp.n; i++) rc = split_pred(c, tk_piece(&tmp, i), tmp.len[i], tmp.flag[i], pr_punct, p, B_ISOLATED, out);
        tk_pieces_free(&tmp);
        return rc;
    }
    case P_PUNCT: return split_pred(c, s, n, flag, pr_punct, p, p->behavior, out);
    case P_DIGITS: return split_pred(c, s, n, flag, pr_num, p, p->individual ? B_ISOLATED : B_CONTIG, out);
    case P_CHARDELIM: return split_pred(c, s, n, flag, pr_char, p, B_REMOVED, out);
    case P_META: {
        mx_buf *t = &c->b[1];
        t->len = 0;
        /* replace ' ' first, then test the prefix (as HF does) */
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ') { if (mx_buf_append(t, p->repl, (size_t)p->repl_len)) return MX_ERR; }
            else if (mx_buf_append(t, s + i, 1)) return MX_ERR;
        }
        if (!t->data && mx_buf_append(t, "", 0)) return MX_ERR;
        bool starts = t->len >= (size_t)p->repl_len && !memcmp(t->data, p->repl, (size_t)p->repl_len);
        bool pre = !starts && (p->prepend == 0 || (p->prepend == 1 && flag));
        mx_buf *u = &c->b[2];
        u->len = 0;
        if (pre && mx_buf_append(u, p->repl, (size_t)p->repl_len)) return MX_ERR;
        if (mx_buf_append(u, t->data, t->len)) return MX_ERR;
        if (!p->split) return u->len ? tk_pieces_add(out, u->data, u->len, flag) : MX_OK;
        return split_pred(c, u->data, u->len, flag, pr_char, p, B_NEXT, out);
    }
    case P_SEQ: {
        tk_pieces a = {0}, b = {0};
        int rc = tk_pieces_add(&a, s, n, flag);
        for (int k = 0; !rc && k < p->nsub; k++) {
            tk_pieces_clear(&b);
            rc = tk_pre_apply(p->sub[k], c, &a, &b);
            tk_pieces t = a;
            a = b;
            b = t;
        }
        for (int i = 0; !rc && i < a.n; i++) rc = tk_pieces_add(out, tk_piece(&a, i), a.len[i], a.flag[i]);
        tk_pieces_free(&a);
        tk_pieces_free(&b);
        return rc;
    }
    }
    return mx_set_err("tokenizer: bad pre-tokenizer");
}

int tk_pre_apply(const tk_pre *p, tk_ctx *c, tk_pieces *in, tk_pieces *out) {
    for (int i = 0; i < in->n; i++)
        if (apply_one(p, c, tk_piece(in, i), in->len[i], in->flag[i], out)) return MX_ERR;
    return MX_OK;
}

void tk_pre_free(tk_pre *p) {
    if (!p) return;
    for (int i = 0; i < p->nsub; i++) tk_pre_free(p->sub[i]);
    free(p->sub);
    tk_pat_free(&p->pat);
    free(p);
}

static bool jbool(const tj *o, const char *k, bool def) {
    const tj *v = tk_json_get(o, k);
    if (!v || v->type == TJ_NULL) return def;
    return v->type == TJ_TRUE;
}

static int parse_behavior(const tj *v, const char *file, int def, int *out) {
    const tj *b = tk_json_get(v, "behavior");
    if (!b || b->type == TJ_NULL) { *out = def; return MX_OK; }
    if (b->type != TJ_STR) return mx_set_err("%s: pre_tokenizer.behavior: expected a string", file);
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++) if (!strcmp(b->v.str, names[i])) { *out = i; return MX_OK; }
    return mx_set_err("%s: pre_tokenizer.behavior: unknown \"%s\"", file, b->v.str);
}

/* Reads a one-character string (Metaspace replacement, delimiter). */
int tk_parse_char(const tj *v, const char *key, const char *file, const char *what, const char *def, char out[8], int *len);
int tk_parse_char(const tj *v, const char *key, const char *file, const char *what, const char *def, char out[8], int *len) {
    const tj *r = tk_json_get(v, key);
    const char *s = def;
    size_t n = def ? strlen(def) : 0;
    if (r && r->type != TJ_NULL) {
        if (r->type != TJ_STR) return mx_set_err("%s: %s.%s: expected a string", file, what, key);
        s = r->v.str;
        n = r->n;
    }
    if (!s) return mx_set_err("%s: %s.%s: missing", file, what, key);
    int32_t cp;
    if (n == 0 || (size_t)tk_u8dec((const uint8_t *)s, n, &cp) != n || cp < 0)
        return mx_set_err("%s: %s.%s: expected exactly one character", file, what, key);
    memcpy(out, s, n);
    out[n] = 0;
    *len = (int)n;
    return MX_OK;
}

int tk_parse_prepend(const tj *v, const char *file, int *out);
int tk_parse_prepend(const tj *v, const char *file, int *out) {
    const tj *ps = tk_json_get(v, "prepend_scheme");
    if (ps && ps->type == TJ_STR) {
        if (!strcmp(ps->v.str, "always")) *out = 0;
        else if (!strcmp(ps->v.str, "first")) *out = 1;
        else if (!strcmp(ps->v.str, "never")) *out = 2;
        else return mx_set_err("%s: Metaspace.prepend_scheme: unknown \"%s\"", file, ps->v.str);
        return MX_OK;
    }
    *out = jbool(v, "add_prefix_space", true) ? 0 : 2;
    return MX_OK;
}

tk_pre *tk_pre_parse(const tj *v, const char *file, int depth) {
    if (depth > TK_MAX_DEPTH) { mx_set_err("%s: pre_tokenizer: nested too deeply", file); return NULL; }
    if (!v || v->type != TJ_OBJ) { mx_set_err("%s: pre_tokenizer: expected an object", file); return NULL; }
    const tj *ty = tk_json_get(v, "type");
    if (!ty || ty->type != TJ_STR) { mx_set_err("%s: pre_tokenizer.type: expected a string", file); return NULL; }
    tk_pre *p = mx_calloc(1, sizeof *p);
    if (!p) return NULL;
    const char *t = ty->v.str;
    if (!strcmp(t, "Sequence")) {
        p->type = P_SEQ;
        const tj *arr = tk_json_get(v, "pretokenizers");
        if (!arr || arr->type != TJ_ARR) { mx_set_err("%s: pre_tokenizer.pretokenizers: expected an array", file); goto fail; }
        p->sub = mx_calloc(arr->n ? arr->n : 1, sizeof(tk_pre *));
        if (!p->sub) goto fail;
        for (uint32_t i = 0; i < arr->n; i++) {
            p->sub[i] = tk_pre_parse(&arr->v.kids[i], file, depth + 1);
            if (!p->sub[i]) goto fail;
            p->nsub++;
        }
    } else if (!strcmp(t, "ByteLevel")) {
        p->type = P_BYTELEVEL;
        p->add_prefix_space = jbool(v, "add_prefix_space", true);
        p->use_regex = jbool(v, "use_regex", true);
        if (p->use_regex && tk_pat_compile_regex(&p->pat, GPT2_RE, strlen(GPT2_RE), file, "ByteLevel")) goto fail;
    } else if (!strcmp(t, "Split")) {
        p->type = P_SPLIT;
        if (tk_pat_parse(&p->pat, tk_json_get(v, "pattern"), file, "pre_tokenizer Split.pattern")) goto fail;
        if (parse_behavior(v, file, B_REMOVED, &p->behavior)) goto fail;
        p->invert = jbool(v, "invert", false);
    } else if (!strcmp(t, "Metaspace")) {
        p->type = P_META;
        if (tk_parse_char(v, "replacement", file, "pre_tokenizer Metaspace", "\xE2\x96\x81", p->repl, &p->repl_len)) goto fail;
        if (tk_parse_prepend(v, file, &p->prepend)) goto fail;
        p->split = jbool(v, "split", true);
    } else if (!strcmp(t, "Whitespace")) {
        p->type = P_WS;
        if (tk_pat_compile_regex(&p->pat, WS_RE, strlen(WS_RE), file, "Whitespace")) goto fail;
    } else if (!strcmp(t, "WhitespaceSplit")) p->type = P_WSSPLIT;
    else if (!strcmp(t, "BertPreTokenizer")) p->type = P_BERT;
    else if (!strcmp(t, "Punctuation")) {
        p->type = P_PUNCT;
        if (parse_behavior(v, file, B_ISOLATED, &p->behavior)) goto fail;
    } else if (!strcmp(t, "Digits")) {
        p->type = P_DIGITS;
        p->individual = jbool(v, "individual_digits", false);
    } else if (!strcmp(t, "CharDelimiterSplit")) {
        p->type = P_CHARDELIM;
        if (tk_parse_char(v, "delimiter", file, "pre_tokenizer CharDelimiterSplit", NULL, p->repl, &p->repl_len)) goto fail;
    } else {
        mx_set_err("%s: pre_tokenizer.type: unsupported \"%s\"", file, t);
        goto fail;
    }
    return p;
fail:
    tk_pre_free(p);
    return NULL;
}
