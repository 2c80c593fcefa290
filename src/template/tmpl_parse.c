/* template lexer and parser: jinja2 syntax with trim_blocks and
 * lstrip_blocks, producing the AST of tmpl_int.h. */
#include "tmpl_int.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { T_EOF, T_DATA, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP };

typedef struct {
    uint8_t t;
    int line;
    const char *p; /* NUL-terminated for names, ops, strings */
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct {
    mx_tmpl *t;
    arena *ar;
    jmp_buf jb;
    char err[700];
    tok *toks;
    size_t ntok, cap, pos;
    int depth;
    int loop_depth;
    node *macros[64]; /* enclosing macro definitions (flags for caller/varargs/kwargs) */
    int nmacros;
} P;

static _Noreturn void perr(P *p, int line, const char *fmt, ...) MX_PRINTF(3, 4);
static void perr(P *p, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, sizeof p->err, "%s:%d: %s", p->t->name, line, msg);
    longjmp(p->jb, 1);
}

static void *palloc(P *p, size_t n) {
    void *r = tmpl_arena_alloc(p->ar, n);
    if (!r) perr(p, 0, "template too large");
    memset(r, 0, n);
    return r;
}

/* ---------------- lexer ---------------- */
static void emit(P *p, uint8_t t, int line, const char *s, size_t n) {
    if (p->ntok == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        tok *nt = palloc(p, cap * sizeof(tok));
        if (p->ntok) memcpy(nt, p->toks, p->ntok * sizeof(tok));
        p->toks = nt;
        p->cap = cap;
    }
    tok *k = &p->toks[p->ntok++];
    memset(k, 0, sizeof *k);
    k->t = t;
    k->line = line;
    k->p = s;
    k->n = n;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* Emits text s[0..n) after the whitespace control of the tag that follows it. */
static void emit_text(P *p, const char *s, size_t n, int line, char sign, bool lstrip_ok, bool line_starting) {
    if (sign == '-') {
        while (n && is_ws(s[n - 1])) n--;
    } else if (sign != '+' && lstrip_ok) {
        size_t l = n;
        while (l && s[l - 1] != '\n') l--;
        if (l > 0 || line_starting) {
            size_t k = l;
            while (k < n && is_ws(s[k])) k++;
            if (k == n) n = l;
        }
    }
    if (n) emit(p, T_DATA, line, s, n);
}

static char *decode_string(P *p, const char *s, size_t n, int line, size_t *outn) {
    char *o = palloc(p, n * 2 + 1), *w = o;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { *w++ = s[i]; continue; }
        char e = s[++i];
        uint32_t cp = 0;
        int nd = 0;
        switch (e) {
        case '\n': continue;
        case '\\': *w++ = '\\'; continue;
        case '\'': *w++ = '\''; continue;
        case '"': *w++ = '"'; continue;
        case 'a': *w++ = '\a'; continue;
        case 'b': *w++ = '\b'; continue;
        case 'f': *w++ = '\f'; continue;
        case 'n': *w++ = '\n'; continue;
        case 'r': *w++ = '\r'; continue;
        case 't': *w++ = '\t'; continue;
        case 'v': *w++ = '\v'; continue;
        case 'x': nd = 2; break;
        case 'u': nd = 4; break;
        case 'U': nd = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') { cp = cp * 8 + (uint32_t)(s[i] - '0'); i++; k++; }
                i--;
                nd = -1;
                break;
            }
            *w++ = '\\';
            *w++ = e;
            continue;
        }
        if (nd > 0) {
            for (int k = 0; k < nd; k++) {
                if (i + 1 >= n) perr(p, line, "truncated \\%c escape in string", e);
                char h = s[++i];
                int v = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (v < 0) perr(p, line, "truncated \\%c escape in string", e);
                cp = cp * 16 + (uint32_t)v;
            }
        }
        if (cp > 0x10FFFF) perr(p, line, "illegal Unicode character in string");
        /* UTF-8 encode */
        if (cp < 0x80) *w++ = (char)cp;
        else if (cp < 0x800) { *w++ = (char)(0xC0 | (cp >> 6)); *w++ = (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) { *w++ = (char)(0xE0 | (cp >> 12)); *w++ = (char)(0x80 | ((cp >> 6) & 0x3F)); *w++ = (char)(0x80 | (cp & 0x3F)); }
        else { *w++ = (char)(0xF0 | (cp >> 18)); *w++ = (char)(0x80 | ((cp >> 12) & 0x3F)); *w++ = (char)(0x80 | ((cp >> 6) & 0x3F)); *w++ = (char)(0x80 | (cp & 0x3F)); }
    }
    *w = 0;
    *outn = (size_t)(w - o);
    return o;
}

static const char *const g_ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                    "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};

/* Lexes the inside of a {{ }} or {% %} tag starting at *pos; returns the position after the end tag. */
static size_t lex_tag(P *p, const char *s, size_t n, size_t pos, int *line, bool block, bool *line_starting) {
    char stack[256];
    int sp = 0;
    int start_line = *line;
    for (;;) {
        while (pos < n && is_ws(s[pos])) { if (s[pos] == '\n') (*line)++; pos++; }
        if (pos >= n) perr(p, start_line, "unexpected end of template (unclosed '%s')", block ? "{%" : "{{");
        if (sp == 0) {
            const char *e = s + pos;
            size_t left = n - pos;
            if (block) {
                if (left >= 3 && (e[0] == '-' || e[0] == '+') && e[1] == '%' && e[2] == '}') {
                    emit(p, T_BEND, *line, e, 3);
                    pos += 3;
                    size_t st = pos;
                    if (e[0] == '-') while (pos < n && is_ws(s[pos])) pos++;
                    *line += count_nl(s + st, pos - st);
                    *line_starting = pos > st ? s[pos - 1] == '\n' : false;
                    return pos;
                }
                if (left >= 2 && e[0] == '%' && e[1] == '}') {
                    emit(p, T_BEND, *line, e, 2);
                    pos += 2;
                    *line_starting = false;
                    if (pos < n && s[pos] == '\n') { pos++; (*line)++; *line_starting = true; }
                    return pos;
                }
            } else {
                if (left >= 3 && e[0] == '-' && e[1] == '}' && e[2] == '}') {
                    emit(p, T_VEND, *line, e, 3);
                    pos += 3;
                    size_t st = pos;
                    while (pos < n && is_ws(s[pos])) pos++;
                    *line += count_nl(s + st, pos - st);
                    *line_starting = pos > st ? s[pos - 1] == '\n' : false;
                    return pos;
                }
                if (left >= 2 && e[0] == '}' && e[1] == '}') {
                    emit(p, T_VEND, *line, e, 2);
                    *line_starting = false;
                    return pos + 2;
                }
            }
        }
        char ch = s[pos];
        if (is_name0(ch)) {
            size_t st = pos;
            while (pos < n && (is_name0(s[pos]) || is_digit(s[pos]))) pos++;
            emit(p, T_NAME, *line, s + st, pos - st);
            continue;
        }
        if (is_digit(ch)) {
            size_t st = pos;
            bool after_dot = st > 0 && s[st - 1] == '.';
            while (pos < n && (is_digit(s[pos]) || s[pos] == '_')) pos++;
            bool isf = false;
            if (!after_dot && pos + 1 < n && s[pos] == '.' && is_digit(s[pos + 1])) {
                isf = true;
                pos++;
                while (pos < n && (is_digit(s[pos]) || s[pos] == '_')) pos++;
            }
            if (!after_dot && pos < n && (s[pos] == 'e' || s[pos] == 'E')) {
                size_t q = pos + 1;
                if (q < n && (s[q] == '+' || s[q] == '-')) q++;
                if (q < n && is_digit(s[q])) {
                    isf = true;
                    pos = q;
                    while (pos < n && (is_digit(s[pos]) || s[pos] == '_')) pos++;
                }
            }
            char buf[128];
            size_t k = 0;
            for (size_t i = st; i < pos && k < sizeof buf - 1; i++)
                if (s[i] != '_') buf[k++] = s[i];
            buf[k] = 0;
            emit(p, isf ? T_FLOAT : T_INT, *line, s + st, pos - st);
            tok *t = &p->toks[p->ntok - 1];
            if (isf) t->f = strtod(buf, NULL);
            else {
                char *end;
                unsigned long long v = strtoull(buf, &end, 10);
                if (v > INT64_MAX || k > 19) perr(p, *line, "integer literal too large");
                t->i = (int64_t)v;
            }
            continue;
        }
        if (ch == '\'' || ch == '"') {
            size_t st = ++pos;
            int l0 = *line;
            while (pos < n && s[pos] != ch) {
                if (s[pos] == '\\' && pos + 1 < n) pos++;
                if (s[pos] == '\n') (*line)++;
                pos++;
            }
            if (pos >= n) perr(p, l0, "unexpected char '%c' (unterminated string)", ch);
            size_t dn;
            char *d = decode_string(p, s + st, pos - st, l0, &dn);
            emit(p, T_STR, l0, d, dn);
            pos++;
            continue;
        }
        size_t oi;
        for (oi = 0; oi < MX_ARRAY_LEN(g_ops); oi++) {
            size_t ol = strlen(g_ops[oi]);
            if (n - pos >= ol && !memcmp(s + pos, g_ops[oi], ol)) break;
        }
        if (oi == MX_ARRAY_LEN(g_ops)) {
            if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f) perr(p, *line, "unexpected char '%c'", ch);
            perr(p, *line, "unexpected char 0x%02x", (unsigned char)ch);
        }
        const char *op = g_ops[oi];
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') {
            if (sp >= (int)sizeof stack) perr(p, *line, "too deeply nested");
            stack[sp++] = op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}';
        } else if (op[0] == ')' || op[0] == ']' || op[0] == '}') {
            if (!sp) perr(p, *line, "unexpected '%c'", op[0]);
            if (stack[sp - 1] != op[0]) perr(p, *line, "unexpected '%c', expected '%c'", op[0], stack[sp - 1]);
            sp--;
        }
        emit(p, T_OP, *line, op, strlen(op));
        pos += strlen(op);
    }
}

static void lex(P *p, const char *s, size_t n) {
    size_t pos = 0;
    int line = 1;
    bool line_starting = true;
    while (pos < n) {
        size_t k = pos;
        const char *q;
        for (;;) {
            q = k < n ? memchr(s + k, '{', n - k) : NULL;
            if (!q) { k = n; break; }
            k = (size_t)(q - s);
            if (k + 1 < n && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')) break;
            k++;
        }
        if (k >= n) {
            emit(p, T_DATA, line, s + pos, n - pos);
            break;
        }
        char kind = s[k + 1];
        char sign = (k + 2 < n && (s[k + 2] == '-' || s[k + 2] == '+')) ? s[k + 2] : 0;
        size_t after = k + 2 + (sign ? 1 : 0);
        /* raw block? */
        bool raw = false;
        size_t raw_end = 0;
        if (kind == '%') {
            size_t r = after;
            while (r < n && is_ws(s[r])) r++;
            if (n - r >= 3 && !memcmp(s + r, "raw", 3) && (r + 3 >= n || !(is_name0(s[r + 3]) || is_digit(s[r + 3])))) {
                r += 3;
                while (r < n && is_ws(s[r])) r++;
                if (n - r >= 3 && s[r] == '-' && s[r + 1] == '%' && s[r + 2] == '}') {
                    r += 3;
                    while (r < n && is_ws(s[r])) r++;
                    raw = true;
                } else if (n - r >= 2 && s[r] == '%' && s[r + 1] == '}') {
                    r += 2;
                    raw = true;
                }
                raw_end = r;
            }
        }
        emit_text(p, s + pos, k - pos, line, sign, kind != '{', line_starting);
        line += count_nl(s + pos, k - pos);
        line_starting = false;
        if (raw) {
            line += count_nl(s + k, raw_end - k);
            line_starting = s[raw_end - 1] == '\n';
            /* find {%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?) */
            size_t e = raw_end;
            for (;;) {
                const char *f = e < n ? memchr(s + e, '{', n - e) : NULL;
                if (!f) perr(p, line, "missing end of raw directive");
                e = (size_t)(f - s);
                if (e + 1 < n && s[e + 1] == '%') {
                    size_t r = e + 2;
                    char sg = (r < n && (s[r] == '-' || s[r] == '+')) ? s[r] : 0;
                    if (sg) r++;
                    while (r < n && is_ws(s[r])) r++;
                    if (n - r >= 6 && !memcmp(s + r, "endraw", 6)) {
                        r += 6;
                        while (r < n && is_ws(s[r])) r++;
                        size_t end = 0;
                        if (n - r >= 3 && s[r] == '+' && s[r + 1] == '%' && s[r + 2] == '}') end = r + 3;
                        else if (n - r >= 3 && s[r] == '-' && s[r + 1] == '%' && s[r + 2] == '}') {
                            end = r + 3;
                            while (end < n && is_ws(s[end])) end++;
                        } else if (n - r >= 2 && s[r] == '%' && s[r + 1] == '}') {
                            end = r + 2;
                            if (end < n && s[end] == '\n') end++;
                        }
                        if (end) {
                            emit_text(p, s + raw_end, e - raw_end, line, sg, true, line_starting);
                            line += count_nl(s + raw_end, end - raw_end);
                            line_starting = s[end - 1] == '\n';
                            pos = end;
                            break;
                        }
                    }
                }
                e++;
            }
            continue;
        }
        if (kind == '#') {
            size_t e = after;
            for (;;) {
                const char *f = e < n ? memchr(s + e, '#', n - e) : NULL;
                if (!f) perr(p, line, "missing end of comment tag");
                e = (size_t)(f - s);
                if (e + 1 < n && s[e + 1] == '}') break;
                e++;
            }
            size_t end = e + 2;
            char esign = e > after && (s[e - 1] == '-' || s[e - 1] == '+') ? s[e - 1] : 0;
            if (esign == '-') while (end < n && is_ws(s[end])) end++;
            else if (!esign && end < n && s[end] == '\n') end++;
            line += count_nl(s + k, end - k);
            line_starting = s[end - 1] == '\n';
            pos = end;
            continue;
        }
        emit(p, kind == '%' ? T_BBEGIN : T_VBEGIN, line, s + k, after - k);
        pos = lex_tag(p, s, n, after, &line, kind == '%', &line_starting);
    }
    emit(p, T_EOF, line, "", 0);
}

/* ---------------- parser ---------------- */
static tok *cur(P *p) { return &p->toks[p->pos]; }
static tok *peek(P *p, size_t k) { size_t i = p->pos + k; return i < p->ntok ? &p->toks[i] : &p->toks[p->ntok - 1]; }
static tok *next(P *p) { tok *t = cur(p); if (t->t != T_EOF) p->pos++; return t; }
static bool is_op(tok *t, const char *op) { return t->t == T_OP && !strcmp(t->p, op); }
static bool is_name(tok *t, const char *nm) { return t->t == T_NAME && t->n == strlen(nm) && !memcmp(t->p, nm, t->n); }

static const char *tok_desc(P *p, tok *t) {
    static _Thread_local char buf[64];
    switch (t->t) {
    case T_EOF: return "end of template";
    case T_BEND: return "end of statement block";
    case T_VEND: return "end of print statement";
    case T_STR: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    default: break;
    }
    (void)p;
    snprintf(buf, sizeof buf, "'%.*s'", (int)MX_MIN(t->n, 40), t->p);
    return buf;
}

static void expect_op(P *p, const char *op) {
    tok *t = cur(p);
    if (!is_op(t, op)) perr(p, t->line, "expected token '%s', got %s", op, tok_desc(p, t));
    next(p);
}
static bool skip_op(P *p, const char *op) {
    if (is_op(cur(p), op)) { next(p); return true; }
    return false;
}
static bool skip_name(P *p, const char *nm) {
    if (is_name(cur(p), nm)) { next(p); return true; }
    return false;
}

static node *mk(P *p, uint8_t kind, int line) {
    node *n = palloc(p, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}
static void nl_push(P *p, nlist *l, node *x) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        node **nv = palloc(p, (size_t)cap * sizeof(node *));
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof(node *));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}
static char *pstr(P *p, const char *s, size_t n) {
    char *r = palloc(p, n + 1);
    memcpy(r, s, n);
    return r;
}

static void enter(P *p) {
    if (++p->depth > 300) perr(p, cur(p)->line, "template nested too deeply");
}
static void leave(P *p) { p->depth--; }

static node *parse_expr(P *p, bool with_condexpr);
static node *parse_or(P *p);
static node *parse_unary(P *p, bool with_filter);
static node *parse_primary(P *p);
static node *parse_postfix(P *p, node *n);
static node *parse_filter_expr(P *p, node *n);
static node *parse_filter(P *p, node *n, bool start_inline);

static bool tuple_end(P *p, const char *extra) {
    tok *t = cur(p);
    if (t->t == T_VEND || t->t == T_BEND || t->t == T_EOF || is_op(t, ")")) return true;
    return extra && is_name(t, extra);
}

static node *parse_tuple(P *p, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_paren) {
    int line = cur(p)->line;
    node *tp = mk(p, E_TUPLE, line);
    bool is_tuple = false;
    for (;;) {
        if (tp->l1.n) expect_op(p, ",");
        if (tuple_end(p, extra_end)) break;
        node *x;
        if (simplified) x = parse_postfix(p, parse_primary(p));
        else x = parse_expr(p, with_condexpr);
        nl_push(p, &tp->l1, x);
        if (is_op(cur(p), ",")) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (tp->l1.n) return tp->l1.v[0];
        if (!explicit_paren) perr(p, line, "expected an expression, got %s", tok_desc(p, cur(p)));
    }
    return tp;
}

static node *parse_expr(P *p, bool with_condexpr) {
    enter(p);
    node *e = parse_or(p);
    if (with_condexpr) {
        while (is_name(cur(p), "if")) {
            int line = next(p)->line;
            node *cond = parse_or(p);
            node *ce = mk(p, E_COND, line);
            ce->a = cond;
            ce->b = e;
            if (skip_name(p, "else")) ce->c = parse_expr(p, true);
            e = ce;
        }
    }
    leave(p);
    return e;
}

static node *parse_not(P *p);
static node *parse_and(P *p) {
    node *l = parse_not(p);
    while (is_name(cur(p), "and")) {
        int line = next(p)->line;
        node *n = mk(p, E_AND, line);
        n->a = l;
        n->b = parse_not(p);
        l = n;
    }
    return l;
}
static node *parse_or(P *p) {
    node *l = parse_and(p);
    while (is_name(cur(p), "or")) {
        int line = next(p)->line;
        node *n = mk(p, E_OR, line);
        n->a = l;
        n->b = parse_and(p);
        l = n;
    }
    return l;
}
static node *parse_math1(P *p);
static node *parse_compare(P *p) {
    int line = cur(p)->line;
    node *e = parse_math1(p);
    node *cmp = NULL;
    for (;;) {
        tok *t = cur(p);
        uint8_t op = 0;
        if (is_op(t, "==")) op = OP_EQ;
        else if (is_op(t, "!=")) op = OP_NE;
        else if (is_op(t, "<")) op = OP_LT;
        else if (is_op(t, "<=")) op = OP_LE;
        else if (is_op(t, ">")) op = OP_GT;
        else if (is_op(t, ">=")) op = OP_GE;
        else if (is_name(t, "in")) op = OP_IN;
        else if (is_name(t, "not") && is_name(peek(p, 1), "in")) { op = OP_NOTIN; next(p); }
        else break;
        next(p);
        if (!cmp) {
            cmp = mk(p, E_CMP, line);
            nl_push(p, &cmp->l1, e);
        }
        nl_push(p, &cmp->l1, parse_math1(p));
        uint8_t *ops = palloc(p, (size_t)cmp->l1.n);
        if (cmp->ops) memcpy(ops, cmp->ops, (size_t)cmp->l1.n - 2);
        ops[cmp->l1.n - 2] = op;
        cmp->ops = ops;
    }
    return cmp ? cmp : e;
}
static node *parse_not(P *p) {
    if (is_name(cur(p), "not")) {
        int line = next(p)->line;
        enter(p);
        node *n = mk(p, E_NOT, line);
        n->a = parse_not(p);
        leave(p);
        return n;
    }
    return parse_compare(p);
}
static node *bin(P *p, int line, uint8_t op, node *a, node *b) {
    node *n = mk(p, E_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}
static node *parse_math2(P *p);
static node *parse_concat(P *p) {
    node *l = parse_math2(p);
    while (is_op(cur(p), "~")) {
        int line = next(p)->line;
        l = bin(p, line, OP_CONCAT, l, parse_math2(p));
    }
    return l;
}
static node *parse_math1(P *p) {
    node *l = parse_concat(p);
    for (;;) {
        tok *t = cur(p);
        uint8_t op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : 0;
        if (!op) break;
        next(p);
        l = bin(p, t->line, op, l, parse_concat(p));
    }
    return l;
}
static node *parse_pow(P *p) {
    node *l = parse_unary(p, true);
    while (is_op(cur(p), "**")) {
        int line = next(p)->line;
        l = bin(p, line, OP_POW, l, parse_unary(p, true));
    }
    return l;
}
static node *parse_math2(P *p) {
    node *l = parse_pow(p);
    for (;;) {
        tok *t = cur(p);
        uint8_t op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : 0;
        if (!op) break;
        next(p);
        l = bin(p, t->line, op, l, parse_pow(p));
    }
    return l;
}
static node *parse_unary(P *p, bool with_filter) {
    tok *t = cur(p);
    node *n;
    enter(p);
    if (is_op(t, "-") || is_op(t, "+")) {
        next(p);
        n = mk(p, is_op(t, "-") ? E_NEG : E_POS, t->line);
        n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    leave(p);
    return n;
}

static void mark_macro_name(P *p, const char *nm, size_t n) {
    uint8_t f = 0;
    if (n == 6 && !memcmp(nm, "caller", 6)) f = 1;
    else if (n == 7 && !memcmp(nm, "varargs", 7)) f = 2;
    else if (n == 6 && !memcmp(nm, "kwargs", 6)) f = 4;
    if (f)
        for (int i = 0; i < p->nmacros; i++) p->macros[i]->op |= f;
}

static node *parse_primary(P *p) {
    tok *t = cur(p);
    node *n;
    switch (t->t) {
    case T_NAME:
        next(p);
        n = mk(p, E_CONST, t->line);
        if (is_name(t, "true") || is_name(t, "True")) n->cv = v_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) n->cv = v_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) n->cv = v_none();
        else {
            n->kind = E_NAME;
            n->s = pstr(p, t->p, t->n);
            n->sn = t->n;
            mark_macro_name(p, t->p, t->n);
        }
        return n;
    case T_STR: {
        n = mk(p, E_CONST, t->line);
        next(p);
        if (cur(p)->t != T_STR) {
            n->cv = v_strn(t->p, t->n);
            return n;
        }
        size_t total = t->n;
        for (size_t i = p->pos; p->toks[i].t == T_STR; i++) total += p->toks[i].n;
        char *buf = palloc(p, total + 1), *w = buf;
        memcpy(w, t->p, t->n);
        w += t->n;
        while (cur(p)->t == T_STR) {
            memcpy(w, cur(p)->p, cur(p)->n);
            w += cur(p)->n;
            next(p);
        }
        n->cv = v_strn(buf, total);
        return n;
    }
    case T_INT: next(p); n = mk(p, E_CONST, t->line); n->cv = v_int(t->i); return n;
    case T_FLOAT: next(p); n = mk(p, E_CONST, t->line); n->cv = v_float(t->f); return n;
    case T_OP:
        if (is_op(t, "(")) {
            next(p);
            n = parse_tuple(p, false, true, NULL, true);
            expect_op(p, ")");
            return n;
        }
        if (is_op(t, "[")) {
            next(p);
            n = mk(p, E_LIST, t->line);
            while (!is_op(cur(p), "]")) {
                if (n->l1.n) expect_op(p, ",");
                if (is_op(cur(p), "]")) break;
                nl_push(p, &n->l1, parse_expr(p, true));
            }
            expect_op(p, "]");
            return n;
        }
        if (is_op(t, "{")) {
            next(p);
            n = mk(p, E_DICT, t->line);
            while (!is_op(cur(p), "}")) {
                if (n->l1.n) expect_op(p, ",");
                if (is_op(cur(p), "}")) break;
                nl_push(p, &n->l1, parse_expr(p, true));
                expect_op(p, ":");
                nl_push(p, &n->l2, parse_expr(p, true));
            }
            expect_op(p, "}");
            return n;
        }
        break;
    default: break;
    }
    perr(p, t->line, "unexpected %s", tok_desc(p, t));
}

static node *parse_subscribed(P *p) {
    int line = cur(p)->line;
    node *a[3] = {0};
    int k = 0;
    if (is_op(cur(p), ":")) {
        next(p);
        k = 1;
    } else {
        node *e = parse_expr(p, true);
        if (!is_op(cur(p), ":")) return e;
        next(p);
        a[0] = e;
        k = 1;
    }
    (void)k;
    if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ",")) a[1] = parse_expr(p, true);
    if (is_op(cur(p), ":")) {
        next(p);
        if (!is_op(cur(p), "]") && !is_op(cur(p), ",")) a[2] = parse_expr(p, true);
    }
    node *s = mk(p, E_SLICE, line);
    s->a = a[0];
    s->b = a[1];
    s->c = a[2];
    return s;
}

static void parse_call_args(P *p, node *call) {
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (call->l1.n || call->l2.n) {
            expect_op(p, ",");
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) perr(p, cur(p)->line, "*args and **kwargs are not supported");
        if (cur(p)->t == T_NAME && is_op(peek(p, 1), "=")) {
            tok *k = next(p);
            next(p);
            node *kw = mk(p, E_KW, k->line);
            kw->s = pstr(p, k->p, k->n);
            kw->sn = k->n;
            kw->a = parse_expr(p, true);
            nl_push(p, &call->l2, kw);
        } else {
            if (call->l2.n) perr(p, cur(p)->line, "invalid syntax for function call expression");
            nl_push(p, &call->l1, parse_expr(p, true));
        }
    }
    expect_op(p, ")");
}

static node *parse_postfix(P *p, node *n) {
    for (;;) {
        tok *t = cur(p);
        if (is_op(t, ".")) {
            next(p);
            tok *a = cur(p);
            if (a->t == T_NAME) {
                next(p);
                node *g = mk(p, E_ATTR, t->line);
                g->a = n;
                g->s = pstr(p, a->p, a->n);
                g->sn = a->n;
                n = g;
            } else if (a->t == T_INT) {
                next(p);
                node *g = mk(p, E_ITEM, t->line);
                g->a = n;
                g->b = mk(p, E_CONST, t->line);
                g->b->cv = v_int(a->i);
                n = g;
            } else perr(p, a->line, "expected name or number");
        } else if (is_op(t, "[")) {
            next(p);
            enter(p);
            node *g = mk(p, E_ITEM, t->line);
            g->a = n;
            node *tp = mk(p, E_TUPLE, t->line);
            while (!is_op(cur(p), "]")) {
                if (tp->l1.n) expect_op(p, ",");
                nl_push(p, &tp->l1, parse_subscribed(p));
            }
            expect_op(p, "]");
            if (tp->l1.n == 0) perr(p, t->line, "expected subscript expression");
            g->b = tp->l1.n == 1 ? tp->l1.v[0] : tp;
            if (g->b->kind == E_SLICE) {
                g->b->d = n; /* E_SLICE: d = object */
                n = g->b;
            } else n = g;
            leave(p);
        } else if (is_op(t, "(")) {
            enter(p);
            node *c = mk(p, E_CALL, t->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
            leave(p);
        } else break;
    }
    return n;
}

static node *parse_test(P *p, node *n) {
    int line = next(p)->line; /* 'is' */
    bool neg = skip_name(p, "not");
    tok *t = cur(p);
    if (t->t != T_NAME) perr(p, t->line, "expected test name, got %s", tok_desc(p, t));
    next(p);
    node *tn = mk(p, E_TEST, line);
    tn->a = n;
    tn->flag = neg;
    size_t len = t->n;
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s", (int)MX_MIN(len, 100), t->p);
    while (is_op(cur(p), ".") && peek(p, 1)->t == T_NAME) {
        next(p);
        tok *x = next(p);
        size_t bl = strlen(buf);
        snprintf(buf + bl, sizeof buf - bl, ".%.*s", (int)MX_MIN(x->n, 60), x->p);
    }
    tn->s = pstr(p, buf, strlen(buf));
    tn->sn = strlen(buf);
    tok *c = cur(p);
    if (is_op(c, "(")) {
        parse_call_args(p, tn);
    } else if ((c->t == T_NAME || c->t == T_STR || c->t == T_INT || c->t == T_FLOAT || is_op(c, "(") || is_op(c, "[") ||
                is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) perr(p, c->line, "You cannot chain multiple tests with is");
        nl_push(p, &tn->l1, parse_postfix(p, parse_primary(p)));
    }
    return tn;
}

static node *parse_filter(P *p, node *n, bool start_inline) {
    while (is_op(cur(p), "|") || start_inline) {
        if (!start_inline) next(p);
        start_inline = false;
        tok *t = cur(p);
        if (t->t != T_NAME) perr(p, t->line, "expected filter name, got %s", tok_desc(p, t));
        next(p);
        char buf[128];
        snprintf(buf, sizeof buf, "%.*s", (int)MX_MIN(t->n, 100), t->p);
        while (is_op(cur(p), ".") && peek(p, 1)->t == T_NAME) {
            next(p);
            tok *x = next(p);
            size_t bl = strlen(buf);
            snprintf(buf + bl, sizeof buf - bl, ".%.*s", (int)MX_MIN(x->n, 60), x->p);
        }
        node *f = mk(p, E_FILTER, t->line);
        f->a = n;
        f->s = pstr(p, buf, strlen(buf));
        f->sn = strlen(buf);
        if (is_op(cur(p), "(")) parse_call_args(p, f);
        n = f;
    }
    return n;
}

static node *parse_filter_expr(P *p, node *n) {
    for (;;) {
        tok *t = cur(p);
        if (is_op(t, "|")) n = parse_filter(p, n, false);
        else if (is_name(t, "is")) n = parse_test(p, n);
        else if (is_op(t, "(")) {
            node *c = mk(p, E_CALL, t->line);
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else break;
    }
    return n;
}

/* ---- statements ---- */
static nlist subparse(P *p, const char *const *ends);

static void expect_bend(P *p) {
    tok *t = cur(p);
    if (t->t != T_BEND) perr(p, t->line, "expected end of statement block, got %s", tok_desc(p, t));
    next(p);
}

static const char *g_open_tag; /* unused placeholder for readability */

static nlist parse_statements(P *p, const char *const *ends, bool drop_needle, const char *tagname, int line) {
    skip_op(p, ":");
    expect_bend(p);
    nlist body = subparse(p, ends);
    if (cur(p)->t == T_EOF)
        perr(p, line, "unexpected end of template: looking for '%s' to close the '%s' block", ends[0], tagname);
    if (drop_needle) next(p);
    return body;
}

static node *assign_target(P *p, bool with_tuple, bool name_only, const char *extra_end, bool with_ns) {
    tok *t = cur(p);
    node *n;
    if (with_ns && t->t == T_NAME && is_op(peek(p, 1), ".") && peek(p, 2)->t == T_NAME) {
        next(p);
        next(p);
        tok *a = next(p);
        n = mk(p, E_NSREF, t->line);
        n->s = pstr(p, t->p, t->n);
        n->sn = t->n;
        n->b = mk(p, E_CONST, a->line);
        n->b->cv = v_strn(pstr(p, a->p, a->n), a->n);
        return n;
    }
    if (name_only) {
        if (t->t != T_NAME) perr(p, t->line, "expected name, got %s", tok_desc(p, t));
        next(p);
        n = mk(p, E_NAME, t->line);
        n->s = pstr(p, t->p, t->n);
        n->sn = t->n;
        return n;
    }
    if (with_tuple) n = parse_tuple(p, true, true, extra_end, false);
    else n = parse_postfix(p, parse_primary(p));
    bool ok = n->kind == E_NAME;
    if (n->kind == E_TUPLE) {
        ok = true;
        for (int i = 0; i < n->l1.n; i++)
            if (n->l1.v[i]->kind != E_NAME) ok = false;
    }
    if (!ok) perr(p, t->line, "can't assign to this expression");
    return n;
}

static void parse_signature(P *p, node *m) {
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (m->l1.n) expect_op(p, ",");
        node *a = assign_target(p, false, true, NULL, false);
        node *def = NULL;
        if (skip_op(p, "=")) def = parse_expr(p, true);
        else if (m->l2.n && m->l2.v[m->l2.n - 1]) perr(p, a->line, "non-default argument follows default argument");
        nl_push(p, &m->l1, a);
        nl_push(p, &m->l2, def);
    }
    expect_op(p, ")");
}

static node *parse_statement(P *p) {
    tok *t = cur(p);
    int line = t->line;
    if (t->t != T_NAME) perr(p, line, "tag name expected");
    enter(p);
    node *n = NULL;
    if (is_name(t, "if")) {
        next(p);
        n = mk(p, S_IF, line);
        node *curif = n;
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        static const char *const ends2[] = {"endif", NULL};
        for (;;) {
            curif->a = parse_tuple(p, false, false, NULL, false);
            curif->l1 = parse_statements(p, ends, false, "if", line);
            tok *e = next(p);
            if (is_name(e, "elif")) {
                node *ei = mk(p, S_IF, e->line);
                curif->c = ei;
                curif = ei;
                continue;
            }
            if (is_name(e, "else")) {
                node *b = mk(p, S_BODY, e->line);
                b->l1 = parse_statements(p, ends2, true, "if", line);
                curif->c = b;
            }
            break;
        }
    } else if (is_name(t, "for")) {
        next(p);
        n = mk(p, S_FOR, line);
        n->a = assign_target(p, true, false, "in", false);
        if (!skip_name(p, "in")) perr(p, cur(p)->line, "expected 'in', got %s", tok_desc(p, cur(p)));
        n->b = parse_tuple(p, false, false, "recursive", false);
        if (skip_name(p, "if")) n->c = parse_expr(p, true);
        n->flag = skip_name(p, "recursive");
        static const char *const ends[] = {"endfor", "else", NULL};
        static const char *const ends2[] = {"endfor", NULL};
        p->loop_depth++;
        n->l1 = parse_statements(p, ends, false, "for", line);
        p->loop_depth--;
        if (!is_name(next(p), "endfor")) n->l2 = parse_statements(p, ends2, true, "for", line);
    } else if (is_name(t, "set")) {
        next(p);
        node *target = assign_target(p, true, false, NULL, true);
        if (skip_op(p, "=")) {
            n = mk(p, S_SET, line);
            n->a = target;
            n->b = parse_tuple(p, false, true, NULL, false);
        } else {
            n = mk(p, S_SETBLOCK, line);
            n->a = target;
            n->b = parse_filter(p, NULL, false);
            static const char *const ends[] = {"endset", NULL};
            n->l1 = parse_statements(p, ends, true, "set", line);
        }
    } else if (is_name(t, "macro")) {
        next(p);
        n = mk(p, S_MACRO, line);
        node *nm = assign_target(p, false, true, NULL, false);
        n->s = nm->s;
        n->sn = nm->sn;
        parse_signature(p, n);
        if (p->nmacros >= (int)MX_ARRAY_LEN(p->macros)) perr(p, line, "macros nested too deeply");
        p->macros[p->nmacros++] = n;
        int saved = p->loop_depth;
        p->loop_depth = 0;
        static const char *const ends[] = {"endmacro", NULL};
        n->l3 = parse_statements(p, ends, true, "macro", line);
        p->loop_depth = saved;
        p->nmacros--;
    } else if (is_name(t, "call")) {
        next(p);
        n = mk(p, S_CALLBLOCK, line);
        if (is_op(cur(p), "(")) parse_signature(p, n);
        n->a = parse_expr(p, true);
        if (n->a->kind != E_CALL) perr(p, line, "expected call");
        if (p->nmacros >= (int)MX_ARRAY_LEN(p->macros)) perr(p, line, "macros nested too deeply");
        p->macros[p->nmacros++] = n;
        int saved = p->loop_depth;
        p->loop_depth = 0;
        static const char *const ends[] = {"endcall", NULL};
        n->l3 = parse_statements(p, ends, true, "call", line);
        p->loop_depth = saved;
        p->nmacros--;
    } else if (is_name(t, "filter")) {
        next(p);
        n = mk(p, S_FILTERBLOCK, line);
        n->b = parse_filter(p, NULL, true);
        static const char *const ends[] = {"endfilter", NULL};
        n->l1 = parse_statements(p, ends, true, "filter", line);
    } else if (is_name(t, "with")) {
        next(p);
        n = mk(p, S_WITH, line);
        while (cur(p)->t != T_BEND) {
            if (n->l1.n) expect_op(p, ",");
            nl_push(p, &n->l1, assign_target(p, false, false, NULL, false));
            expect_op(p, "=");
            nl_push(p, &n->l2, parse_expr(p, true));
        }
        static const char *const ends[] = {"endwith", NULL};
        n->l3 = parse_statements(p, ends, true, "with", line);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!p->loop_depth) perr(p, line, "'%s' outside loop", is_name(t, "break") ? "break" : "continue");
        n = mk(p, is_name(t, "break") ? S_BREAK : S_CONTINUE, line);
        next(p);
    } else if (is_name(t, "generation")) {
        next(p);
        n = mk(p, S_BODY, line);
        static const char *const ends[] = {"endgeneration", NULL};
        n->l1 = parse_statements(p, ends, true, "generation", line);
    } else {
        static const char *const enders[] = {"endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "endwith",
                                             "endgeneration", "endraw", "else", "elif", NULL};
        for (int i = 0; enders[i]; i++)
            if (is_name(t, enders[i])) perr(p, line, "unexpected '%s'", enders[i]);
        perr(p, line, "unknown tag '%.*s'", (int)MX_MIN(t->n, 60), t->p);
    }
    leave(p);
    return n;
}

static nlist subparse(P *p, const char *const *ends) {
    nlist body = {0};
    for (;;) {
        tok *t = cur(p);
        if (t->t == T_EOF) return body;
        if (t->t == T_DATA) {
            node *n = mk(p, S_TEXT, t->line);
            n->s = t->p;
            n->sn = t->n;
            nl_push(p, &body, n);
            next(p);
        } else if (t->t == T_VBEGIN) {
            next(p);
            node *n = mk(p, S_OUT, t->line);
            n->a = parse_tuple(p, false, true, NULL, false);
            if (cur(p)->t != T_VEND) perr(p, cur(p)->line, "expected end of print statement, got %s", tok_desc(p, cur(p)));
            next(p);
            nl_push(p, &body, n);
        } else if (t->t == T_BBEGIN) {
            next(p);
            if (ends)
                for (int i = 0; ends[i]; i++)
                    if (is_name(cur(p), ends[i])) return body;
            nl_push(p, &body, parse_statement(p));
            expect_bend(p);
        } else {
            perr(p, t->line, "unexpected %s", tok_desc(p, t));
        }
    }
}

mx_tmpl *mx_tmpl_parse(const char *src, size_t len, const char *name) {
    (void)g_open_tag;
    if (!name) name = "template";
    mx_tmpl *t = mx_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->name = mx_strdup(name);
    t->src = mx_malloc(len + 1);
    if (!t->name || !t->src) { mx_tmpl_free(t); return NULL; }
    /* normalize newlines; drop one trailing newline (keep_trailing_newline=False) */
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            t->src[w++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else t->src[w++] = src[i];
    }
    if (w && t->src[w - 1] == '\n') w--;
    t->src[w] = 0;
    t->srclen = w;
    t->lim.max_output = (size_t)64 << 20;
    t->lim.max_memory = (size_t)256 << 20;
    t->lim.max_steps = 20000000ull;
    t->lim.max_depth = 1000;
    t->ar.limit = ((size_t)64 << 20) + w * 64;
    P *p = mx_calloc(1, sizeof *p);
    if (!p) { mx_tmpl_free(t); return NULL; }
    p->t = t;
    p->ar = &t->ar;
    if (setjmp(p->jb)) {
        mx_set_err("%s", p->err);
        free(p);
        mx_tmpl_free(t);
        return NULL;
    }
    lex(p, t->src, t->srclen);
    node *root = mk(p, S_BODY, 1);
    root->l1 = subparse(p, NULL);
    t->root = root;
    free(p);
    return t;
}

void mx_tmpl_free(mx_tmpl *t) {
    if (!t) return;
    tmpl_arena_free(&t->ar);
    free(t->name);
    free(t->src);
    free(t);
}

void mx_tmpl_set_limits(mx_tmpl *t, const mx_tmpl_limits *lim) {
    if (t && lim) t->lim = *lim;
}
