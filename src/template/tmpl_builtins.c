/* template builtins: filters, tests, methods of str/dict/list, globals,
 * python string helpers and %-formatting. */
#define _GNU_SOURCE
#include "tmpl_int.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

/* ---------------- arguments ---------------- */
val tmpl_arg_get(rctx *c, args *a, int idx, const char *name, val def, bool *present) {
    (void)c;
    if (present) *present = true;
    if (idx >= 0 && idx < a->npos) return a->pos[idx];
    if (name)
        for (int i = 0; i < a->nkw; i++)
            if (!strcmp(a->kwn[i], name)) return a->kwv[i];
    if (present) *present = false;
    return def;
}

void tmpl_args_check(rctx *c, args *a, int maxpos, const char *const *kwnames, const char *fname) {
    if (a->npos > maxpos) tmpl_rx_fail(c, "TypeError", "%s() takes at most %d argument%s (%d given)", fname, maxpos, maxpos == 1 ? "" : "s", a->npos);
    for (int i = 0; i < a->nkw; i++) {
        bool ok = false;
        for (int k = 0; kwnames && kwnames[k]; k++)
            if (!strcmp(kwnames[k], a->kwn[i])) {
                if (k < a->npos) tmpl_rx_fail(c, "TypeError", "%s() got multiple values for argument '%s'", fname, a->kwn[i]);
                ok = true;
            }
        if (!ok) tmpl_rx_fail(c, "TypeError", "%s() got an unexpected keyword argument '%s'", fname, a->kwn[i]);
    }
}
#define ARGS(a, maxpos, fname, ...) do { static const char *const kw_[] = {__VA_ARGS__, NULL}; tmpl_args_check(c, a, maxpos, kw_, fname); } while (0)
#define NOARGS(a, fname) tmpl_args_check(c, a, 0, NULL, fname)

static int64_t want_int(rctx *c, val v, const char *what) {
    if (v.t == V_INT) return v.i;
    if (v.t == V_BOOL) return v.b;
    if (v.t == V_UNDEF) tmpl_undef_fail(c, v);
    tmpl_rx_fail(c, "TypeError", "%s: an integer is required, not '%s'", what, tmpl_type_name(v));
}
static val want_str(rctx *c, val v, const char *what) {
    if (v.t == V_STR) return v;
    if (v.t == V_UNDEF) tmpl_undef_fail(c, v);
    tmpl_rx_fail(c, "TypeError", "%s must be str, not %s", what, tmpl_type_name(v));
}

/* ---------------- python str helpers ---------------- */
bool tmpl_py_isspace(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

typedef struct { uint32_t *cp; size_t *off; size_t n; } cps;
static cps decode_all(rctx *c, val s) {
    cps r;
    r.cp = tmpl_rx_alloc(c, (s.s.n + 1) * sizeof(uint32_t));
    r.off = tmpl_rx_alloc(c, (s.s.n + 1) * sizeof(size_t));
    r.n = 0;
    size_t i = 0;
    while (i < s.s.n) {
        size_t adv;
        uint32_t cp = tmpl_utf8_decode(s.s.p + i, s.s.n - i, &adv);
        if (adv > s.s.n - i) adv = s.s.n - i;
        r.off[r.n] = i;
        r.cp[r.n++] = cp;
        i += adv;
    }
    r.off[r.n] = s.s.n;
    return r;
}

static bool in_set(cps *set, uint32_t cp) {
    for (size_t i = 0; i < set->n; i++)
        if (set->cp[i] == cp) return true;
    return false;
}

val tmpl_str_strip(rctx *c, val s, val chars, int which) {
    cps d = decode_all(c, s);
    cps set = {0};
    bool ws = chars.t == V_NONE || chars.t == V_UNDEF;
    if (!ws) set = decode_all(c, want_str(c, chars, "strip arg"));
    size_t a = 0, b = d.n;
    if (which & 1) while (a < b && (ws ? tmpl_py_isspace(d.cp[a]) : in_set(&set, d.cp[a]))) a++;
    if (which & 2) while (b > a && (ws ? tmpl_py_isspace(d.cp[b - 1]) : in_set(&set, d.cp[b - 1]))) b--;
    return v_strn(s.s.p + d.off[a], d.off[b] - d.off[a]);
}

static val map_case(rctx *c, val s, int mode) { /* 0 lower, 1 upper, 2 swapcase */
    sbuf b = {0};
    size_t i = 0;
    while (i < s.s.n) {
        unsigned char ch = (unsigned char)s.s.p[i];
        if (ch < 0x80) {
            char o = (char)ch;
            if ((mode == 0 || (mode == 2 && ch >= 'A' && ch <= 'Z')) && ch >= 'A' && ch <= 'Z') o = (char)(ch + 32);
            else if ((mode == 1 || mode == 2) && ch >= 'a' && ch <= 'z') o = (char)(ch - 32);
            tmpl_sb_putc(c, &b, o);
            i++;
            continue;
        }
        size_t adv;
        uint32_t cp = tmpl_utf8_decode(s.s.p + i, s.s.n - i, &adv);
        if (mode == 2) cp = utf8proc_isupper((utf8proc_int32_t)cp) ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp) : (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp);
        else if (mode == 0) {
            if (cp == 0x130) { tmpl_sb_put(c, &b, "i\xcc\x87", 3); i += adv; continue; }
            cp = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
        } else {
            if (cp == 0xdf) { tmpl_sb_put(c, &b, "SS", 2); i += adv; continue; }
            cp = (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp);
        }
        tmpl_utf8_encode(c, &b, cp);
        i += adv;
    }
    return tmpl_sb_val(&b);
}
val tmpl_str_lower(rctx *c, val s) { return map_case(c, s, 0); }
val tmpl_str_upper(rctx *c, val s) { return map_case(c, s, 1); }

static bool is_cased(uint32_t cp) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

static val py_title(rctx *c, val s) {
    cps d = decode_all(c, s);
    sbuf b = {0};
    bool prev_cased = false;
    for (size_t i = 0; i < d.n; i++) {
        uint32_t cp = d.cp[i];
        bool cased = is_cased(cp);
        if (cased) cp = prev_cased ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp) : (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp);
        tmpl_utf8_encode(c, &b, cp);
        prev_cased = cased;
    }
    return tmpl_sb_val(&b);
}

static val py_capitalize(rctx *c, val s) {
    cps d = decode_all(c, s);
    sbuf b = {0};
    for (size_t i = 0; i < d.n; i++)
        tmpl_utf8_encode(c, &b, i == 0 ? (uint32_t)utf8proc_totitle((utf8proc_int32_t)d.cp[i]) : (uint32_t)utf8proc_tolower((utf8proc_int32_t)d.cp[i]));
    return tmpl_sb_val(&b);
}

val tmpl_str_replace(rctx *c, val s, val old, val nw, int64_t count) {
    sbuf b = {0};
    if (!old.s.n) {
        cps d = decode_all(c, s);
        int64_t k = 0;
        for (size_t i = 0; i <= d.n; i++) {
            if (count < 0 || k < count) { tmpl_sb_put(c, &b, nw.s.p, nw.s.n); k++; }
            if (i < d.n) tmpl_sb_put(c, &b, s.s.p + d.off[i], d.off[i + 1] - d.off[i]);
        }
        return tmpl_sb_val(&b);
    }
    size_t i = 0;
    int64_t k = 0;
    while (i < s.s.n) {
        const char *f = (count < 0 || k < count) ? memmem(s.s.p + i, s.s.n - i, old.s.p, old.s.n) : NULL;
        if (!f) break;
        size_t at = (size_t)(f - s.s.p);
        tmpl_sb_put(c, &b, s.s.p + i, at - i);
        tmpl_sb_put(c, &b, nw.s.p, nw.s.n);
        i = at + old.s.n;
        k++;
    }
    tmpl_sb_put(c, &b, s.s.p + i, s.s.n - i);
    return tmpl_sb_val(&b);
}

static bool is_linebreak(uint32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e || cp == 0x85 ||
           cp == 0x2028 || cp == 0x2029;
}

tlist *tmpl_str_splitlines(rctx *c, val s, bool keepends) {
    cps d = decode_all(c, s);
    val l = tmpl_v_list(c, 0);
    size_t st = 0, i = 0;
    while (i < d.n) {
        if (is_linebreak(d.cp[i])) {
            size_t e = i + 1;
            if (d.cp[i] == '\r' && i + 1 < d.n && d.cp[i + 1] == '\n') e++;
            size_t end = keepends ? e : i;
            tmpl_list_push(c, l.l, v_strn(s.s.p + d.off[st], d.off[end] - d.off[st]));
            st = i = e;
        } else i++;
    }
    if (st < d.n) tmpl_list_push(c, l.l, v_strn(s.s.p + d.off[st], d.off[d.n] - d.off[st]));
    return l.l;
}

static val py_split(rctx *c, val s, val sep, int64_t maxsplit, bool right) {
    val l = tmpl_v_list(c, 0);
    if (sep.t == V_NONE || sep.t == V_UNDEF) {
        cps d = decode_all(c, s);
        if (!right) {
            size_t i = 0;
            int64_t k = 0;
            for (;;) {
                while (i < d.n && tmpl_py_isspace(d.cp[i])) i++;
                if (i >= d.n) break;
                if (maxsplit >= 0 && k >= maxsplit) {
                    size_t e = d.n;
                    while (e > i && tmpl_py_isspace(d.cp[e - 1])) e--;
                    tmpl_list_push(c, l.l, v_strn(s.s.p + d.off[i], d.off[e] - d.off[i]));
                    break;
                }
                size_t j = i;
                while (j < d.n && !tmpl_py_isspace(d.cp[j])) j++;
                tmpl_list_push(c, l.l, v_strn(s.s.p + d.off[i], d.off[j] - d.off[i]));
                k++;
                i = j;
            }
        } else {
            size_t i = d.n;
            int64_t k = 0;
            val tmp = tmpl_v_list(c, 0);
            for (;;) {
                while (i > 0 && tmpl_py_isspace(d.cp[i - 1])) i--;
                if (i == 0) break;
                if (maxsplit >= 0 && k >= maxsplit) {
                    size_t b = 0;
                    while (b < i && tmpl_py_isspace(d.cp[b])) b++;
                    tmpl_list_push(c, tmp.l, v_strn(s.s.p + d.off[b], d.off[i] - d.off[b]));
                    break;
                }
                size_t j = i;
                while (j > 0 && !tmpl_py_isspace(d.cp[j - 1])) j--;
                tmpl_list_push(c, tmp.l, v_strn(s.s.p + d.off[j], d.off[i] - d.off[j]));
                k++;
                i = j;
            }
            for (size_t q = tmp.l->n; q > 0; q--) tmpl_list_push(c, l.l, tmp.l->v[q - 1]);
        }
        return l;
    }
    sep = want_str(c, sep, "separator");
    if (!sep.s.n) tmpl_rx_fail(c, "ValueError", "empty separator");
    if (!right) {
        size_t i = 0;
        int64_t k = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || k < maxsplit) ? memmem(s.s.p + i, s.s.n - i, sep.s.p, sep.s.n) : NULL;
            if (!f) { tmpl_list_push(c, l.l, v_strn(s.s.p + i, s.s.n - i)); break; }
            size_t at = (size_t)(f - s.s.p);
            tmpl_list_push(c, l.l, v_strn(s.s.p + i, at - i));
            i = at + sep.s.n;
            k++;
        }
    } else {
        val tmp = tmpl_v_list(c, 0);
        size_t end = s.s.n;
        int64_t k = 0;
        for (;;) {
            size_t found = SIZE_MAX;
            if ((maxsplit < 0 || k < maxsplit) && end >= sep.s.n)
                for (size_t j = end - sep.s.n + 1; j-- > 0;)
                    if (!memcmp(s.s.p + j, sep.s.p, sep.s.n)) { found = j; break; }
            if (found == SIZE_MAX) { tmpl_list_push(c, tmp.l, v_strn(s.s.p, end)); break; }
            tmpl_list_push(c, tmp.l, v_strn(s.s.p + found + sep.s.n, end - found - sep.s.n));
            end = found;
            k++;
        }
        for (size_t q = tmp.l->n; q > 0; q--) tmpl_list_push(c, l.l, tmp.l->v[q - 1]);
    }
    return l;
}

static bool starts_ends(rctx *c, val s, val pre, bool end) {
    if (pre.t == V_TUPLE || pre.t == V_LIST) {
        for (size_t i = 0; i < pre.l->n; i++)
            if (starts_ends(c, s, pre.l->v[i], end)) return true;
        return false;
    }
    if (pre.t != V_STR)
        tmpl_rx_fail(c, "TypeError", "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", tmpl_type_name(pre));
    if (pre.s.n > s.s.n) return false;
    return !memcmp(end ? s.s.p + s.s.n - pre.s.n : s.s.p, pre.s.p, pre.s.n);
}

/* ---------------- %-formatting ---------------- */
static void pad_out(rctx *c, sbuf *b, const char *s, size_t n, int width, bool left, char padch) {
    int len = (int)tmpl_utf8_count(s, n);
    if (!left && width > len) {
        if (padch == '0' && n && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) { tmpl_sb_putc(c, b, s[0]); s++; n--; }
        for (int i = len; i < width; i++) tmpl_sb_putc(c, b, padch);
    }
    tmpl_sb_put(c, b, s, n);
    if (left) for (int i = len; i < width; i++) tmpl_sb_putc(c, b, ' ');
}

val tmpl_str_percent_format(rctx *c, val fmt, val argv) {
    sbuf b = {0};
    val *items;
    size_t nitems, ai = 0;
    bool is_map = argv.t == V_DICT;
    if (argv.t == V_TUPLE) { items = argv.l->v; nitems = argv.l->n; }
    else { items = &argv; nitems = 1; }
    const char *p = fmt.s.p, *e = p + fmt.s.n;
    bool used_map = false;
    while (p < e) {
        const char *q = memchr(p, '%', (size_t)(e - p));
        if (!q) { tmpl_sb_put(c, &b, p, (size_t)(e - p)); break; }
        tmpl_sb_put(c, &b, p, (size_t)(q - p));
        p = q + 1;
        if (p >= e) tmpl_rx_fail(c, "ValueError", "incomplete format");
        val arg = v_undef();
        bool have_arg = false;
        if (*p == '(') {
            const char *k = memchr(p, ')', (size_t)(e - p));
            if (!k) tmpl_rx_fail(c, "ValueError", "incomplete format key");
            if (!is_map) tmpl_rx_fail(c, "TypeError", "format requires a mapping");
            val *x = tmpl_dict_gets(argv.d, p + 1, (size_t)(k - p - 1));
            if (!x) tmpl_rx_fail(c, "KeyError", "'%.*s'", (int)MX_MIN(k - p - 1, 100), p + 1);
            arg = *x;
            have_arg = true;
            used_map = true;
            p = k + 1;
        }
        char flags[8];
        int nf = 0;
        bool left = false, zero = false;
        while (p < e && strchr("-+ #0", *p)) {
            if (*p == '-') left = true;
            if (*p == '0') zero = true;
            if (nf < 6) flags[nf++] = *p;
            p++;
        }
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (p < e && *p == '*') {
            if (ai >= nitems) tmpl_rx_fail(c, "TypeError", "not enough arguments for format string");
            width = (int)want_int(c, items[ai++], "* wants int");
            p++;
        } else if (p < e && *p >= '0' && *p <= '9') {
            width = 0;
            while (p < e && *p >= '0' && *p <= '9') { width = width * 10 + (*p - '0'); if (width > 100000) tmpl_rx_fail(c, "ValueError", "width too big"); p++; }
        }
        if (p < e && *p == '.') {
            p++;
            prec = 0;
            if (p < e && *p == '*') {
                if (ai >= nitems) tmpl_rx_fail(c, "TypeError", "not enough arguments for format string");
                prec = (int)want_int(c, items[ai++], "* wants int");
                p++;
            } else
                while (p < e && *p >= '0' && *p <= '9') { prec = prec * 10 + (*p - '0'); if (prec > 100000) tmpl_rx_fail(c, "ValueError", "precision too big"); p++; }
        }
        while (p < e && (*p == 'l' || *p == 'h' || *p == 'L')) p++;
        if (p >= e) tmpl_rx_fail(c, "ValueError", "incomplete format");
        char conv = *p++;
        if (width < 0) { if (width < -100000) width = -1; }
        if (width < -1) { left = true; width = -width; }
        if (conv == '%') { tmpl_sb_putc(c, &b, '%'); continue; }
        if (!have_arg) {
            if (is_map) arg = argv;
            else {
                if (ai >= nitems) tmpl_rx_fail(c, "TypeError", "not enough arguments for format string");
                arg = items[ai++];
            }
        }
        sbuf t = {0};
        char cf[32], tmp[400];
        switch (conv) {
        case 's': case 'r': case 'a': {
            if (conv == 's') tmpl_v_to_str(c, arg, &t); else tmpl_v_repr(c, arg, &t, 0);
            size_t n = t.n;
            if (prec >= 0) n = tmpl_utf8_offset(t.p ? t.p : "", t.n, prec);
            pad_out(c, &b, t.p ? t.p : "", n, width, left, ' ');
            break;
        }
        case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': case 'c': {
            int64_t iv;
            if (arg.t == V_FLOAT && conv != 'c' && conv != 'x' && conv != 'X' && conv != 'o') {
                if (!isfinite(arg.f)) tmpl_rx_fail(c, "OverflowError", "cannot convert float infinity to integer");
                iv = (int64_t)arg.f;
            } else if (arg.t == V_INT || arg.t == V_BOOL) iv = arg.t == V_INT ? arg.i : arg.b;
            else if (conv == 'c' && arg.t == V_STR && tmpl_utf8_count(arg.s.p, arg.s.n) == 1) { pad_out(c, &b, arg.s.p, arg.s.n, width, left, ' '); break; }
            else tmpl_rx_fail(c, "TypeError", "%%%c format: a real number is required, not %s", conv, tmpl_type_name(arg));
            if (conv == 'c') {
                sbuf cb = {0};
                if (iv < 0 || iv > 0x10FFFF) tmpl_rx_fail(c, "OverflowError", "%%c arg not in range(0x110000)");
                tmpl_utf8_encode(c, &cb, (uint32_t)iv);
                pad_out(c, &b, cb.p, cb.n, width, left, ' ');
                break;
            }
            char cc = conv == 'i' || conv == 'u' ? 'd' : conv;
            snprintf(cf, sizeof cf, "%%%s%s%s%s", flags, width >= 0 ? "*" : "", prec >= 0 ? ".*" : "", cc == 'd' ? "lld" : cc == 'x' ? "llx" : cc == 'X' ? "llX" : "llo");
            if (conv == 'o' && strchr(flags, '#')) { /* python: 0o prefix */
                snprintf(tmp, sizeof tmp, "%s0o%llo", iv < 0 ? "-" : "", (unsigned long long)(iv < 0 ? -(uint64_t)iv : (uint64_t)iv));
                pad_out(c, &b, tmp, strlen(tmp), width, left, zero ? '0' : ' ');
                break;
            }
            bool neg = iv < 0 && (cc == 'x' || cc == 'X' || cc == 'o');
            unsigned long long mag = iv < 0 ? -(uint64_t)iv : (uint64_t)iv;
            char *w = tmp;
            if (neg) *w++ = '-';
            size_t room = sizeof tmp - 1;
            if (width >= 0 && prec >= 0) snprintf(w, room, cf, neg ? 0 : width, prec, neg ? mag : (unsigned long long)iv);
            else if (width >= 0) snprintf(w, room, cf, neg ? 0 : width, neg ? mag : (unsigned long long)iv);
            else if (prec >= 0) snprintf(w, room, cf, prec, neg ? mag : (unsigned long long)iv);
            else snprintf(w, room, cf, neg ? mag : (unsigned long long)iv);
            if (width > (int)sizeof tmp - 40 || neg) pad_out(c, &b, tmp, strlen(tmp), width, left, zero ? '0' : ' ');
            else tmpl_sb_puts(c, &b, tmp);
            break;
        }
        case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
            double fv;
            if (arg.t == V_FLOAT) fv = arg.f;
            else if (arg.t == V_INT) fv = (double)arg.i;
            else if (arg.t == V_BOOL) fv = arg.b;
            else tmpl_rx_fail(c, "TypeError", "must be real number, not %s", tmpl_type_name(arg));
            if (prec < 0) prec = 6;
            if (prec > 300) prec = 300;
            snprintf(cf, sizeof cf, "%%%s.*%c", flags, conv);
            char *big = tmpl_rx_alloc(c, 700);
            snprintf(big, 700, cf, prec, fv);
            pad_out(c, &b, big, strlen(big), width, left, zero && !left ? '0' : ' ');
            break;
        }
        default:
            tmpl_rx_fail(c, "ValueError", "unsupported format character '%c' (0x%x)", conv, (unsigned char)conv);
        }
    }
    if (!is_map && !used_map && ai < nitems && argv.t == V_TUPLE)
        tmpl_rx_fail(c, "TypeError", "not all arguments converted during string formatting");
    /* python: a non-tuple argument with __getitem__ (list, dict) may go unused */
    if (!is_map && argv.t != V_TUPLE && argv.t != V_LIST && ai == 0 && nitems == 1)
        tmpl_rx_fail(c, "TypeError", "not all arguments converted during string formatting");
    return tmpl_sb_val(&b);
}

/* ---------------- str.format ---------------- */
static void format_spec(rctx *c, sbuf *b, val v, const char *spec, size_t sn) {
    char fill = ' ', align = 0, sign = 0, type = 0;
    int width = -1, prec = -1;
    size_t i = 0;
    bool alt = false, zero = false, comma = false;
    if (sn >= 2 && strchr("<>^=", spec[1])) { fill = spec[0]; align = spec[1]; i = 2; }
    else if (sn >= 1 && strchr("<>^=", spec[0])) { align = spec[0]; i = 1; }
    if (i < sn && strchr("+- ", spec[i])) sign = spec[i++];
    if (i < sn && spec[i] == '#') { alt = true; i++; }
    if (i < sn && spec[i] == '0') { zero = true; i++; }
    while (i < sn && spec[i] >= '0' && spec[i] <= '9') { width = (width < 0 ? 0 : width) * 10 + (spec[i++] - '0'); if (width > 100000) tmpl_rx_fail(c, "ValueError", "Too many decimal digits in format string"); }
    if (i < sn && (spec[i] == ',' || spec[i] == '_')) { comma = true; i++; }
    if (i < sn && spec[i] == '.') { i++; prec = 0; while (i < sn && spec[i] >= '0' && spec[i] <= '9') { prec = prec * 10 + (spec[i++] - '0'); if (prec > 300) prec = 300; } }
    if (i < sn) type = spec[i++];
    if (i < sn) tmpl_rx_fail(c, "ValueError", "Invalid format specifier");
    (void)alt;
    (void)comma;
    sbuf t = {0};
    bool numeric = false;
    if (v.t == V_STR || (!type && v.t != V_INT && v.t != V_FLOAT && v.t != V_BOOL) || type == 's') {
        if (type && type != 's') tmpl_rx_fail(c, "ValueError", "Unknown format code '%c' for object of type '%s'", type, tmpl_type_name(v));
        tmpl_v_to_str(c, v, &t);
        if (prec >= 0) t.n = tmpl_utf8_offset(t.p ? t.p : "", t.n, prec);
    } else {
        if (v.t != V_INT && v.t != V_FLOAT && v.t != V_BOOL)
            tmpl_rx_fail(c, "ValueError", "Unknown format code '%c' for object of type '%s'", type, tmpl_type_name(v));
        numeric = true;
        double f = v.t == V_FLOAT ? v.f : v.t == V_INT ? (double)v.i : (double)v.b;
        char cf[16], tmp[700];
        if (!type && (v.t == V_INT || v.t == V_BOOL)) type = 'd';
        if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
            if (v.t == V_FLOAT) tmpl_rx_fail(c, "ValueError", "Unknown format code '%c' for object of type 'float'", type);
            int64_t x = v.t == V_INT ? v.i : v.b;
            unsigned long long m = x < 0 ? -(uint64_t)x : (uint64_t)x;
            if (type == 'b') {
                char bits[70];
                int k = 0;
                do { bits[k++] = (char)('0' + (m & 1)); m >>= 1; } while (m);
                int w = 0;
                if (x < 0) tmp[w++] = '-';
                while (k) tmp[w++] = bits[--k];
                tmp[w] = 0;
            } else snprintf(tmp, sizeof tmp, type == 'd' ? "%s%llu" : type == 'x' ? "%s%llx" : type == 'X' ? "%s%llX" : "%s%llo", x < 0 ? "-" : "", m);
        } else if (!type && prec < 0) {
            tmpl_fmt_float(f, tmp, sizeof tmp);
        } else {
            char ty = type ? type : 'g';
            if (ty == '%') { f *= 100; ty = 'f'; }
            if (!strchr("eEfFgGn", ty)) tmpl_rx_fail(c, "ValueError", "Unknown format code '%c' for object of type 'float'", type);
            if (ty == 'n') ty = 'g';
            snprintf(cf, sizeof cf, "%%.*%c", ty);
            snprintf(tmp, sizeof tmp, cf, prec < 0 ? 6 : prec, f);
            if (type == '%') strcat(tmp, "%");
        }
        if (sign && tmp[0] != '-') { tmpl_sb_putc(c, &t, sign == ' ' ? ' ' : sign == '+' ? '+' : 0); if (sign == '-') t.n--; }
        tmpl_sb_puts(c, &t, tmp);
    }
    if (!align) align = numeric ? '>' : '<';
    if (zero && !align) { fill = '0'; align = '='; }
    if (zero && numeric) { fill = '0'; if (align == '>') align = '='; }
    int len = (int)tmpl_utf8_count(t.p ? t.p : "", t.n);
    int padn = width > len ? width - len : 0;
    const char *tp = t.p ? t.p : "";
    size_t tn = t.n;
    if (align == '=' && tn && (tp[0] == '-' || tp[0] == '+' || tp[0] == ' ')) { tmpl_sb_putc(c, b, tp[0]); tp++; tn--; }
    int lp = align == '<' ? 0 : align == '^' ? padn / 2 : padn, rp = padn - lp;
    for (int k = 0; k < lp; k++) tmpl_sb_putc(c, b, fill);
    tmpl_sb_put(c, b, tp, tn);
    for (int k = 0; k < rp; k++) tmpl_sb_putc(c, b, fill);
}

static val str_format(rctx *c, val fmt, args *a) {
    sbuf b = {0};
    const char *p = fmt.s.p, *e = p + fmt.s.n;
    int auto_idx = 0;
    while (p < e) {
        char ch = *p;
        if (ch == '}') {
            if (p + 1 < e && p[1] == '}') { tmpl_sb_putc(c, &b, '}'); p += 2; continue; }
            tmpl_rx_fail(c, "ValueError", "Single '}' encountered in format string");
        }
        if (ch != '{') { tmpl_sb_putc(c, &b, ch); p++; continue; }
        if (p + 1 < e && p[1] == '{') { tmpl_sb_putc(c, &b, '{'); p += 2; continue; }
        const char *q = p + 1;
        int nest = 0;
        while (q < e && (*q != '}' || nest)) { if (*q == '{') nest++; else if (*q == '}') nest--; q++; }
        if (q >= e) tmpl_rx_fail(c, "ValueError", "expected '}' before end of string");
        const char *f = p + 1, *fe = q;
        const char *colon = memchr(f, ':', (size_t)(fe - f));
        const char *bang = memchr(f, '!', (size_t)((colon ? colon : fe) - f));
        const char *ne = bang ? bang : colon ? colon : fe;
        /* field name: first part up to . or [ */
        const char *k = f;
        while (k < ne && *k != '.' && *k != '[') k++;
        val v;
        if (k == f) {
            if (auto_idx >= a->npos) tmpl_rx_fail(c, "IndexError", "Replacement index %d out of range for positional args tuple", auto_idx);
            v = a->pos[auto_idx++];
        } else if (*f >= '0' && *f <= '9') {
            int idx = atoi(f);
            if (idx >= a->npos) tmpl_rx_fail(c, "IndexError", "Replacement index %d out of range for positional args tuple", idx);
            v = a->pos[idx];
        } else {
            bool found = false;
            for (int i = 0; i < a->nkw; i++)
                if (strlen(a->kwn[i]) == (size_t)(k - f) && !memcmp(a->kwn[i], f, (size_t)(k - f))) { v = a->kwv[i]; found = true; }
            if (!found) tmpl_rx_fail(c, "KeyError", "'%.*s'", (int)MX_MIN(k - f, 100), f);
        }
        while (k < ne) {
            if (*k == '.') {
                const char *s = ++k;
                while (k < ne && *k != '.' && *k != '[') k++;
                v = tmpl_op_getattr(c, v, s, (size_t)(k - s));
            } else {
                const char *s = ++k;
                while (k < ne && *k != ']') k++;
                val key = v_strn(s, (size_t)(k - s));
                bool dig = k > s;
                for (const char *x = s; x < k; x++) if (*x < '0' || *x > '9') dig = false;
                if (dig) key = v_int(atoll(s));
                v = tmpl_op_getitem(c, v, key);
                if (k < ne) k++;
            }
        }
        if (bang && bang + 1 < fe) {
            char conv = bang[1];
            sbuf t = {0};
            if (conv == 'r' || conv == 'a') tmpl_v_repr(c, v, &t, 0); else tmpl_v_to_str(c, v, &t);
            v = tmpl_sb_val(&t);
        }
        if (colon) format_spec(c, &b, v, colon + 1, (size_t)(fe - colon - 1));
        else tmpl_v_to_str(c, v, &b);
        p = q + 1;
    }
    return tmpl_sb_val(&b);
}

/* ---------------- methods ---------------- */
static val self_str(val s) { return s; }
#define STR_METHOD(fname) static val fname(rctx *c, val self, args *a)

STR_METHOD(m_strip) { ARGS(a, 1, "strip", "chars"); return tmpl_str_strip(c, self_str(self), tmpl_arg_get(c, a, 0, NULL, v_none(), NULL), 3); }
STR_METHOD(m_lstrip) { ARGS(a, 1, "lstrip", "chars"); return tmpl_str_strip(c, self, tmpl_arg_get(c, a, 0, NULL, v_none(), NULL), 1); }
STR_METHOD(m_rstrip) { ARGS(a, 1, "rstrip", "chars"); return tmpl_str_strip(c, self, tmpl_arg_get(c, a, 0, NULL, v_none(), NULL), 2); }
STR_METHOD(m_upper) { NOARGS(a, "upper"); return tmpl_str_upper(c, self); }
STR_METHOD(m_lower) { NOARGS(a, "lower"); return tmpl_str_lower(c, self); }
STR_METHOD(m_casefold) { NOARGS(a, "casefold"); return tmpl_str_lower(c, self); }
STR_METHOD(m_swapcase) { NOARGS(a, "swapcase"); return map_case(c, self, 2); }
STR_METHOD(m_title) { NOARGS(a, "title"); return py_title(c, self); }
STR_METHOD(m_capitalize) { NOARGS(a, "capitalize"); return py_capitalize(c, self); }
STR_METHOD(m_split) {
    ARGS(a, 2, "split", "sep", "maxsplit");
    return py_split(c, self, tmpl_arg_get(c, a, 0, "sep", v_none(), NULL), want_int(c, tmpl_arg_get(c, a, 1, "maxsplit", v_int(-1), NULL), "maxsplit"), false);
}
STR_METHOD(m_rsplit) {
    ARGS(a, 2, "rsplit", "sep", "maxsplit");
    return py_split(c, self, tmpl_arg_get(c, a, 0, "sep", v_none(), NULL), want_int(c, tmpl_arg_get(c, a, 1, "maxsplit", v_int(-1), NULL), "maxsplit"), true);
}
STR_METHOD(m_splitlines) {
    ARGS(a, 1, "splitlines", "keepends");
    val r = v_undef();
    r.t = V_LIST;
    r.l = tmpl_str_splitlines(c, self, tmpl_truthy(c, tmpl_arg_get(c, a, 0, "keepends", v_bool(false), NULL)));
    return r;
}
STR_METHOD(m_startswith) { ARGS(a, 1, "startswith", "prefix"); if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "startswith() takes at least 1 argument (0 given)"); return v_bool(starts_ends(c, self, a->pos[0], false)); }
STR_METHOD(m_endswith) { ARGS(a, 1, "endswith", "suffix"); if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "endswith() takes at least 1 argument (0 given)"); return v_bool(starts_ends(c, self, a->pos[0], true)); }
STR_METHOD(m_replace) {
    ARGS(a, 3, "replace", "old", "new", "count");
    if (a->npos < 2) tmpl_rx_fail(c, "TypeError", "replace expected at least 2 arguments, got %d", a->npos);
    return tmpl_str_replace(c, self, want_str(c, a->pos[0], "replace() argument 1"), want_str(c, a->pos[1], "replace() argument 2"),
                       want_int(c, tmpl_arg_get(c, a, 2, "count", v_int(-1), NULL), "count"));
}
static int64_t find_impl(rctx *c, val self, args *a, bool rev, const char *fname) {
    tmpl_args_check(c, a, 3, NULL, fname);
    if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "%s() takes at least 1 argument (0 given)", fname);
    val sub = want_str(c, a->pos[0], "must be str");
    int64_t ncp = (int64_t)tmpl_utf8_count(self.s.p, self.s.n);
    int64_t st = a->npos > 1 && a->pos[1].t != V_NONE ? want_int(c, a->pos[1], "slice index") : 0;
    int64_t en = a->npos > 2 && a->pos[2].t != V_NONE ? want_int(c, a->pos[2], "slice index") : ncp;
    if (st < 0) { st += ncp; if (st < 0) st = 0; }
    if (en < 0) { en += ncp; if (en < 0) en = 0; }
    if (en > ncp) en = ncp;
    if (st > en) return -1;
    size_t bs = tmpl_utf8_offset(self.s.p, self.s.n, st), be = tmpl_utf8_offset(self.s.p, self.s.n, en);
    const char *hay = self.s.p + bs;
    size_t hn = be - bs;
    if (sub.s.n > hn) return -1;
    size_t pos = SIZE_MAX;
    if (!rev) {
        const char *f = sub.s.n ? memmem(hay, hn, sub.s.p, sub.s.n) : hay;
        if (f) pos = (size_t)(f - hay);
    } else {
        for (size_t j = hn - sub.s.n + 1; j-- > 0;)
            if (!memcmp(hay + j, sub.s.p, sub.s.n)) { pos = j; break; }
    }
    if (pos == SIZE_MAX) return -1;
    return st + (int64_t)tmpl_utf8_count(hay, pos);
}
STR_METHOD(m_find) { return v_int(find_impl(c, self, a, false, "find")); }
STR_METHOD(m_rfind) { return v_int(find_impl(c, self, a, true, "rfind")); }
STR_METHOD(m_index) { int64_t r = find_impl(c, self, a, false, "index"); if (r < 0) tmpl_rx_fail(c, "ValueError", "substring not found"); return v_int(r); }
STR_METHOD(m_rindex) { int64_t r = find_impl(c, self, a, true, "rindex"); if (r < 0) tmpl_rx_fail(c, "ValueError", "substring not found"); return v_int(r); }
STR_METHOD(m_count) {
    ARGS(a, 1, "count", "x");
    if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "count() takes at least 1 argument (0 given)");
    val sub = want_str(c, a->pos[0], "must be str");
    if (!sub.s.n) return v_int((int64_t)tmpl_utf8_count(self.s.p, self.s.n) + 1);
    int64_t k = 0;
    size_t i = 0;
    const char *f;
    while (i <= self.s.n && (f = memmem(self.s.p + i, self.s.n - i, sub.s.p, sub.s.n))) { k++; i = (size_t)(f - self.s.p) + sub.s.n; }
    return v_int(k);
}
STR_METHOD(m_join) {
    ARGS(a, 1, "join", "iterable");
    if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "join() takes exactly one argument (0 given)");
    tlist *l = tmpl_v_iter(c, a->pos[0]);
    sbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].t != V_STR) tmpl_rx_fail(c, "TypeError", "sequence item %zu: expected str instance, %s found", i, tmpl_type_name(l->v[i]));
        if (i) tmpl_sb_put(c, &b, self.s.p, self.s.n);
        tmpl_sb_put(c, &b, l->v[i].s.p, l->v[i].s.n);
    }
    return tmpl_sb_val(&b);
}
static val str_pred(rctx *c, val self, int kind) {
    cps d = decode_all(c, self);
    if (!d.n) return v_bool(false);
    bool any_cased = false;
    for (size_t i = 0; i < d.n; i++) {
        uint32_t cp = d.cp[i];
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
        bool alpha = k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT || k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
        bool digit = k == UTF8PROC_CATEGORY_ND;
        bool numeric = digit || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
        switch (kind) {
        case 0: if (!digit) return v_bool(false); break;
        case 1: if (!alpha) return v_bool(false); break;
        case 2: if (!alpha && !numeric) return v_bool(false); break;
        case 3: if (!tmpl_py_isspace(cp)) return v_bool(false); break;
        case 4: if (k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT) return v_bool(false); if (k == UTF8PROC_CATEGORY_LU) any_cased = true; break;
        case 5: if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) return v_bool(false); if (k == UTF8PROC_CATEGORY_LL) any_cased = true; break;
        case 6: if (!numeric) return v_bool(false); break;
        }
    }
    if (kind == 4 || kind == 5) return v_bool(any_cased);
    return v_bool(true);
}
STR_METHOD(m_isdigit) { NOARGS(a, "isdigit"); return str_pred(c, self, 0); }
STR_METHOD(m_isalpha) { NOARGS(a, "isalpha"); return str_pred(c, self, 1); }
STR_METHOD(m_isalnum) { NOARGS(a, "isalnum"); return str_pred(c, self, 2); }
STR_METHOD(m_isspace) { NOARGS(a, "isspace"); return str_pred(c, self, 3); }
STR_METHOD(m_isupper) { NOARGS(a, "isupper"); return str_pred(c, self, 4); }
STR_METHOD(m_islower) { NOARGS(a, "islower"); return str_pred(c, self, 5); }
STR_METHOD(m_isnumeric) { NOARGS(a, "isnumeric"); return str_pred(c, self, 6); }
STR_METHOD(m_format) { return str_format(c, self, a); }
static val pad_str(rctx *c, val self, args *a, int mode, const char *fname) {
    tmpl_args_check(c, a, 2, NULL, fname);
    if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "%s expected at least 1 argument, got 0", fname);
    int64_t w = want_int(c, a->pos[0], fname);
    val fill = a->npos > 1 ? want_str(c, a->pos[1], "fill character") : tmpl_v_cstr(" ");
    if (tmpl_utf8_count(fill.s.p, fill.s.n) != 1) tmpl_rx_fail(c, "TypeError", "The fill character must be exactly one character long");
    int64_t len = (int64_t)tmpl_utf8_count(self.s.p, self.s.n);
    if (w > 10000000) tmpl_rx_fail(c, "MemoryError", "width too large");
    if (w <= len) return self;
    int64_t pad = w - len, l = mode == 0 ? pad / 2 + (pad & w & 1) : mode == 1 ? 0 : pad, r = pad - l;
    if (mode == 3) { l = pad; r = 0; }
    sbuf b = {0};
    if (mode == 3 && self.s.n && (self.s.p[0] == '-' || self.s.p[0] == '+')) { tmpl_sb_putc(c, &b, self.s.p[0]); self.s.p++; self.s.n--; }
    for (int64_t i = 0; i < l; i++) tmpl_sb_put(c, &b, fill.s.p, fill.s.n);
    tmpl_sb_put(c, &b, self.s.p, self.s.n);
    for (int64_t i = 0; i < r; i++) tmpl_sb_put(c, &b, fill.s.p, fill.s.n);
    return tmpl_sb_val(&b);
}
STR_METHOD(m_center) { return pad_str(c, self, a, 0, "center"); }
STR_METHOD(m_ljust) { return pad_str(c, self, a, 1, "ljust"); }
STR_METHOD(m_rjust) { return pad_str(c, self, a, 2, "rjust"); }
STR_METHOD(m_zfill) {
    tmpl_args_check(c, a, 1, NULL, "zfill");
    args b = *a;
    val z[2] = {a->npos ? a->pos[0] : v_int(0), tmpl_v_cstr("0")};
    b.pos = z;
    b.npos = 2;
    return pad_str(c, self, &b, 3, "zfill");
}
static val partition(rctx *c, val self, args *a, bool rev) {
    if (a->npos != 1) tmpl_rx_fail(c, "TypeError", "partition() takes exactly one argument");
    val sep = want_str(c, a->pos[0], "must be str");
    if (!sep.s.n) tmpl_rx_fail(c, "ValueError", "empty separator");
    val r = tmpl_v_list(c, 3);
    r.t = V_TUPLE;
    size_t pos = SIZE_MAX;
    if (!rev) { const char *f = memmem(self.s.p, self.s.n, sep.s.p, sep.s.n); if (f) pos = (size_t)(f - self.s.p); }
    else if (self.s.n >= sep.s.n) for (size_t j = self.s.n - sep.s.n + 1; j-- > 0;) if (!memcmp(self.s.p + j, sep.s.p, sep.s.n)) { pos = j; break; }
    if (pos == SIZE_MAX) {
        if (!rev) { tmpl_list_push(c, r.l, self); tmpl_list_push(c, r.l, tmpl_v_cstr("")); tmpl_list_push(c, r.l, tmpl_v_cstr("")); }
        else { tmpl_list_push(c, r.l, tmpl_v_cstr("")); tmpl_list_push(c, r.l, tmpl_v_cstr("")); tmpl_list_push(c, r.l, self); }
        return r;
    }
    tmpl_list_push(c, r.l, v_strn(self.s.p, pos));
    tmpl_list_push(c, r.l, sep);
    tmpl_list_push(c, r.l, v_strn(self.s.p + pos + sep.s.n, self.s.n - pos - sep.s.n));
    return r;
}
STR_METHOD(m_partition) { return partition(c, self, a, false); }
STR_METHOD(m_rpartition) { return partition(c, self, a, true); }
STR_METHOD(m_removeprefix) {
    if (a->npos != 1) tmpl_rx_fail(c, "TypeError", "removeprefix() takes exactly one argument");
    val p = want_str(c, a->pos[0], "must be str");
    if (p.s.n <= self.s.n && !memcmp(self.s.p, p.s.p, p.s.n)) return v_strn(self.s.p + p.s.n, self.s.n - p.s.n);
    return self;
}
STR_METHOD(m_removesuffix) {
    if (a->npos != 1) tmpl_rx_fail(c, "TypeError", "removesuffix() takes exactly one argument");
    val p = want_str(c, a->pos[0], "must be str");
    if (p.s.n && p.s.n <= self.s.n && !memcmp(self.s.p + self.s.n - p.s.n, p.s.p, p.s.n)) return v_strn(self.s.p, self.s.n - p.s.n);
    return self;
}

/* dict methods */
STR_METHOD(m_get) {
    ARGS(a, 2, "get", "key", "default");
    if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "get expected at least 1 argument, got 0");
    val *p = tmpl_dict_get(self.d, a->pos[0]);
    return p ? *p : tmpl_arg_get(c, a, 1, NULL, v_none(), NULL);
}
static val dict_items_list(rctx *c, tdict *d) {
    val l = tmpl_v_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) tmpl_list_push(c, l.l, tmpl_v_tuple2(c, d->k[i], d->v[i]));
    return l;
}
static val view(val l, const char *name) { l.t = V_GEN; l.l->gen_name = name; return l; }
STR_METHOD(m_items) { NOARGS(a, "items"); return view(dict_items_list(c, self.d), "dict_items"); }
STR_METHOD(m_keys) {
    NOARGS(a, "keys");
    val l = tmpl_v_list(c, self.d->n);
    for (size_t i = 0; i < self.d->n; i++) tmpl_list_push(c, l.l, self.d->k[i]);
    return view(l, "dict_keys");
}
STR_METHOD(m_values) {
    NOARGS(a, "values");
    val l = tmpl_v_list(c, self.d->n);
    for (size_t i = 0; i < self.d->n; i++) tmpl_list_push(c, l.l, self.d->v[i]);
    return view(l, "dict_values");
}
STR_METHOD(m_dcopy) {
    NOARGS(a, "copy");
    val d = tmpl_v_dict(c);
    for (size_t i = 0; i < self.d->n; i++) tmpl_dict_set(c, d.d, self.d->k[i], self.d->v[i]);
    return d;
}
/* list methods */
STR_METHOD(m_lindex) {
    if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "index expected at least 1 argument, got 0");
    for (size_t i = 0; i < self.l->n; i++)
        if (tmpl_v_eq(c, self.l->v[i], a->pos[0], 0)) return v_int((int64_t)i);
    tmpl_rx_fail(c, "ValueError", "value is not in list");
}
STR_METHOD(m_lcount) {
    if (a->npos != 1) tmpl_rx_fail(c, "TypeError", "count() takes exactly one argument");
    int64_t k = 0;
    for (size_t i = 0; i < self.l->n; i++) k += tmpl_v_eq(c, self.l->v[i], a->pos[0], 0);
    return v_int(k);
}
STR_METHOD(m_lcopy) {
    NOARGS(a, "copy");
    val l = tmpl_v_list(c, self.l->n);
    for (size_t i = 0; i < self.l->n; i++) tmpl_list_push(c, l.l, self.l->v[i]);
    return l;
}

typedef struct { const char *name; builtin_fn fn; } mdef;
static const mdef g_str_methods[] = {
    {"strip", m_strip}, {"lstrip", m_lstrip}, {"rstrip", m_rstrip}, {"upper", m_upper}, {"lower", m_lower},
    {"casefold", m_casefold}, {"swapcase", m_swapcase}, {"title", m_title}, {"capitalize", m_capitalize},
    {"split", m_split}, {"rsplit", m_rsplit}, {"splitlines", m_splitlines}, {"startswith", m_startswith},
    {"endswith", m_endswith}, {"replace", m_replace}, {"find", m_find}, {"rfind", m_rfind}, {"index", m_index},
    {"rindex", m_rindex}, {"count", m_count}, {"join", m_join}, {"isdigit", m_isdigit}, {"isalpha", m_isalpha},
    {"isalnum", m_isalnum}, {"isspace", m_isspace}, {"isupper", m_isupper}, {"islower", m_islower},
    {"isnumeric", m_isnumeric}, {"isdecimal", m_isdigit}, {"format", m_format}, {"center", m_center},
    {"ljust", m_ljust}, {"rjust", m_rjust}, {"zfill", m_zfill}, {"partition", m_partition},
    {"rpartition", m_rpartition}, {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix}, {NULL, NULL}};
static const mdef g_dict_methods[] = {{"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"copy", m_dcopy}, {NULL, NULL}};
static const mdef g_list_methods[] = {{"index", m_lindex}, {"count", m_lcount}, {"copy", m_lcopy}, {NULL, NULL}};
static const char *const g_dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", "fromkeys", NULL};
static const char *const g_list_unsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", NULL};

val tmpl_find_method(rctx *c, val obj, const char *name, size_t n, bool *found) {
    const mdef *tab = NULL;
    const char *const *unsafe = NULL;
    if (obj.t == V_STR) tab = g_str_methods;
    else if (obj.t == V_DICT) { tab = g_dict_methods; unsafe = g_dict_unsafe; }
    else if (obj.t == V_LIST) { tab = g_list_methods; unsafe = g_list_unsafe; }
    else if (obj.t == V_TUPLE) tab = g_list_methods + 2 - 2; /* index, count */
    *found = false;
    if (!tab) return v_undef();
    for (int i = 0; tab[i].name; i++)
        if (strlen(tab[i].name) == n && !memcmp(tab[i].name, name, n)) {
            if (obj.t == V_TUPLE && tab[i].fn == m_lcopy) break;
            *found = true;
            return tmpl_v_func(c, tab[i].fn, obj, tab[i].name);
        }
    for (int i = 0; unsafe && unsafe[i]; i++)
        if (strlen(unsafe[i]) == n && !memcmp(unsafe[i], name, n)) {
            *found = true;
            return tmpl_v_undef_msg(c, "SecurityError", "access to attribute '%s' of '%s' object is unsafe.", unsafe[i], tmpl_type_name(obj));
        }
    return v_undef();
}

/* ---------------- globals ---------------- */
static val g_range(rctx *c, val self, args *a) {
    (void)self;
    if (a->nkw) tmpl_rx_fail(c, "TypeError", "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3) tmpl_rx_fail(c, "TypeError", "range expected at least 1 argument, got %d", a->npos);
    int64_t st = 0, en, sp = 1;
    if (a->npos == 1) en = want_int(c, a->pos[0], "range");
    else { st = want_int(c, a->pos[0], "range"); en = want_int(c, a->pos[1], "range"); }
    if (a->npos == 3) sp = want_int(c, a->pos[2], "range");
    if (sp == 0) tmpl_rx_fail(c, "ValueError", "range() arg 3 must not be zero");
    double cnt = sp > 0 ? ceil(((double)en - (double)st) / (double)sp) : ceil(((double)st - (double)en) / (double)-sp);
    if (cnt < 0) cnt = 0;
    if (cnt > 100000) tmpl_rx_fail(c, "OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    val l = tmpl_v_list(c, (size_t)cnt);
    for (int64_t i = 0; i < (int64_t)cnt; i++) tmpl_list_push(c, l.l, v_int(st + i * sp));
    return l;
}
static val g_namespace(rctx *c, val self, args *a) {
    (void)self;
    val d = tmpl_v_dict(c);
    for (int i = 0; i < a->npos; i++) {
        val x = a->pos[i];
        if (x.t == V_DICT || x.t == V_NS) for (size_t k = 0; k < x.d->n; k++) tmpl_dict_set(c, d.d, x.d->k[k], x.d->v[k]);
        else {
            tlist *l = tmpl_v_iter(c, x);
            for (size_t k = 0; k < l->n; k++) {
                tlist *pair = tmpl_v_iter(c, l->v[k]);
                if (pair->n != 2) tmpl_rx_fail(c, "ValueError", "dictionary update sequence element #%zu has length %zu; 2 is required", k, pair->n);
                tmpl_dict_set(c, d.d, pair->v[0], pair->v[1]);
            }
        }
    }
    for (int i = 0; i < a->nkw; i++) tmpl_dict_set(c, d.d, tmpl_v_cstr(a->kwn[i]), a->kwv[i]);
    d.t = V_NS;
    return d;
}
static val g_dict(rctx *c, val self, args *a) {
    val d = g_namespace(c, self, a);
    d.t = V_DICT;
    return d;
}
static val g_raise(rctx *c, val self, args *a) {
    (void)self;
    val m = a->npos ? tmpl_v_str(c, a->pos[0]) : tmpl_v_cstr("");
    snprintf(c->raised, sizeof c->raised, "%.*s", (int)MX_MIN(m.s.n, sizeof c->raised - 1), m.s.p);
    c->is_raise = true;
    tmpl_rx_raise(c, "%s", c->raised);
}
static val g_strftime(rctx *c, val self, args *a) {
    (void)self;
    if (a->npos != 1) tmpl_rx_fail(c, "TypeError", "strftime_now() takes exactly one argument");
    val f = want_str(c, a->pos[0], "format");
    if (f.s.n > 1000) tmpl_rx_fail(c, "ValueError", "format too long");
    time_t now = time(NULL);
    struct tm tmv;
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    if (sde && *sde) {
        now = (time_t)strtoll(sde, NULL, 10);
        gmtime_r(&now, &tmv);
    } else localtime_r(&now, &tmv);
    char fmt[1100];
    memcpy(fmt, f.s.p, f.s.n);
    fmt[f.s.n] = 0;
    if (!f.s.n) return tmpl_v_cstr("");
    size_t cap = 256;
    for (;;) {
        char *buf = tmpl_rx_alloc(c, cap);
        size_t n = strftime(buf, cap, fmt, &tmv);
        if (n > 0) return v_strn(buf, n);
        if (cap > 65536) return tmpl_v_cstr("");
        cap *= 4;
    }
}
val tmpl_find_global(rctx *c, const char *name, size_t n, bool *found) {
    static const mdef g[] = {{"range", g_range}, {"namespace", g_namespace}, {"dict", g_dict}, {"raise_exception", g_raise},
                             {"strftime_now", g_strftime}, {NULL, NULL}};
    *found = false;
    for (int i = 0; g[i].name; i++)
        if (strlen(g[i].name) == n && !memcmp(g[i].name, name, n)) {
            *found = true;
            return tmpl_v_func(c, g[i].fn, v_undef(), g[i].name);
        }
    return v_undef();
}

/* ---------------- filters ---------------- */
#define FILTER(fname) static val fname(rctx *c, val in, args *a)

static val soft_str(rctx *c, val v) { return tmpl_v_str(c, v); }
static val mkgen(rctx *c, val l, const char *name) {
    l.t = V_GEN;
    l.l->gen_name = name;
    (void)c;
    return l;
}

/* attribute path getter: "a.b.0" with environment.getitem semantics */
static val attr_path(rctx *c, val item, val attr) {
    if (attr.t == V_INT) return tmpl_op_getitem(c, item, attr);
    val s = tmpl_v_str(c, attr);
    const char *p = s.s.p, *e = p + s.s.n;
    while (p <= e) {
        const char *q = memchr(p, '.', (size_t)(e - p));
        if (!q) q = e;
        val key = v_strn(p, (size_t)(q - p));
        bool dig = q > p;
        for (const char *x = p; x < q; x++) if (*x < '0' || *x > '9') dig = false;
        if (dig && q - p < 18) key = v_int(atoll(p));
        item = tmpl_op_getitem(c, item, key);
        p = q + 1;
    }
    return item;
}

FILTER(f_length) { NOARGS(a, "length"); if (in.t == V_NS) tmpl_rx_fail(c, "TypeError", "object of type 'Namespace' has no len()"); return v_int(tmpl_v_len(c, in)); }
FILTER(f_first) {
    NOARGS(a, "first");
    tlist *l = tmpl_v_iter(c, in);
    return l->n ? l->v[0] : tmpl_v_undef_msg(c, NULL, "No first item, sequence was empty.");
}
FILTER(f_last) {
    NOARGS(a, "last");
    if (in.t == V_GEN) tmpl_rx_fail(c, "TypeError", "'%s' object is not reversible", tmpl_type_name(in));
    tlist *l = tmpl_v_iter(c, in);
    return l->n ? l->v[l->n - 1] : tmpl_v_undef_msg(c, NULL, "No last item, sequence was empty.");
}
FILTER(f_join) {
    ARGS(a, 2, "join", "d", "attribute");
    val d = tmpl_v_str(c, tmpl_arg_get(c, a, 0, "d", tmpl_v_cstr(""), NULL));
    bool has_attr;
    val attr = tmpl_arg_get(c, a, 1, "attribute", v_none(), &has_attr);
    tlist *l = tmpl_v_iter(c, in);
    sbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i) tmpl_sb_put(c, &b, d.s.p, d.s.n);
        val x = l->v[i];
        if (has_attr && attr.t != V_NONE) x = attr_path(c, x, attr);
        tmpl_v_to_str(c, x, &b);
    }
    return tmpl_sb_val(&b);
}
FILTER(f_upper) { NOARGS(a, "upper"); return tmpl_str_upper(c, soft_str(c, in)); }
FILTER(f_lower) { NOARGS(a, "lower"); return tmpl_str_lower(c, soft_str(c, in)); }
FILTER(f_capitalize) { NOARGS(a, "capitalize"); return py_capitalize(c, soft_str(c, in)); }
FILTER(f_title) {
    NOARGS(a, "title");
    val s = soft_str(c, in);
    cps d = decode_all(c, s);
    sbuf b = {0};
    /* split on runs of [-\s({[<]; each other piece: first char upper, rest lower */
    size_t i = 0;
    while (i < d.n) {
        size_t j = i;
        bool sep = d.cp[i] == '-' || tmpl_py_isspace(d.cp[i]) || d.cp[i] == '(' || d.cp[i] == '{' || d.cp[i] == '[' || d.cp[i] == '<';
        while (j < d.n && (d.cp[j] == '-' || tmpl_py_isspace(d.cp[j]) || d.cp[j] == '(' || d.cp[j] == '{' || d.cp[j] == '[' || d.cp[j] == '<') == sep) j++;
        val piece = v_strn(s.s.p + d.off[i], d.off[j] - d.off[i]);
        if (sep) tmpl_sb_put(c, &b, piece.s.p, piece.s.n);
        else {
            val first = v_strn(piece.s.p, d.off[i + 1] - d.off[i]);
            val rest = v_strn(piece.s.p + first.s.n, piece.s.n - first.s.n);
            first = tmpl_str_upper(c, first);
            rest = tmpl_str_lower(c, rest);
            tmpl_sb_put(c, &b, first.s.p, first.s.n);
            tmpl_sb_put(c, &b, rest.s.p, rest.s.n);
        }
        i = j;
    }
    return tmpl_sb_val(&b);
}
FILTER(f_trim) { ARGS(a, 1, "trim", "chars"); return tmpl_str_strip(c, soft_str(c, in), tmpl_arg_get(c, a, 0, "chars", v_none(), NULL), 3); }
FILTER(f_replace) {
    ARGS(a, 3, "replace", "old", "new", "count");
    val old = tmpl_v_str(c, tmpl_arg_get(c, a, 0, "old", v_undef(), NULL)), nw = tmpl_v_str(c, tmpl_arg_get(c, a, 1, "new", v_undef(), NULL));
    val cnt = tmpl_arg_get(c, a, 2, "count", v_none(), NULL);
    return tmpl_str_replace(c, soft_str(c, in), old, nw, cnt.t == V_NONE ? -1 : want_int(c, cnt, "count"));
}
FILTER(f_default) {
    ARGS(a, 2, "default", "default_value", "boolean");
    val def = tmpl_arg_get(c, a, 0, "default_value", tmpl_v_cstr(""), NULL);
    bool boolean = tmpl_truthy(c, tmpl_arg_get(c, a, 1, "boolean", v_bool(false), NULL));
    if (in.t == V_UNDEF || (boolean && !tmpl_truthy(c, in))) return def;
    return in;
}
FILTER(f_list) {
    NOARGS(a, "list");
    tlist *l = tmpl_v_iter(c, in);
    val r = tmpl_v_list(c, l->n);
    for (size_t i = 0; i < l->n; i++) tmpl_list_push(c, r.l, l->v[i]);
    return r;
}
FILTER(f_string) { NOARGS(a, "string"); return soft_str(c, in); }
static bool parse_py_int(const char *p, size_t n, int base, int64_t *out) {
    char buf[80];
    size_t k = 0;
    while (n && tmpl_py_isspace((unsigned char)*p)) { p++; n--; }
    while (n && tmpl_py_isspace((unsigned char)p[n - 1])) n--;
    if (!n || n > 70) return false;
    bool prev_us = true;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '_') { if (prev_us) return false; prev_us = true; continue; }
        prev_us = p[i] == '+' || p[i] == '-';
        buf[k++] = p[i];
    }
    if (prev_us && k && buf[k - 1] != '_') { /* trailing underscore */ }
    if (p[n - 1] == '_') return false;
    buf[k] = 0;
    char *end;
    const char *s = buf;
    if (base == 16 && k > 2 && (s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) s += 2;
    long long v = strtoll(s, &end, base);
    if (*end || end == s) return false;
    *out = v;
    return true;
}
FILTER(f_int) {
    ARGS(a, 2, "int", "default", "base");
    val def = tmpl_arg_get(c, a, 0, "default", v_int(0), NULL);
    int64_t base = want_int(c, tmpl_arg_get(c, a, 1, "base", v_int(10), NULL), "base");
    if (base < 2 || base > 36) base = 10;
    int64_t r;
    switch (in.t) {
    case V_INT: return in;
    case V_BOOL: return v_int(in.b);
    case V_FLOAT:
        if (!isfinite(in.f)) tmpl_rx_fail(c, "OverflowError", "cannot convert float infinity to integer");
        if (fabs(in.f) >= 9.2e18) tmpl_rx_fail(c, "OverflowError", "integer too large");
        return v_int((int64_t)in.f);
    case V_STR:
        if (parse_py_int(in.s.p, in.s.n, (int)base, &r)) return v_int(r);
        else {
            char buf[64];
            if (in.s.n < sizeof buf) {
                memcpy(buf, in.s.p, in.s.n);
                buf[in.s.n] = 0;
                char *end;
                double f = strtod(buf, &end);
                while (*end && tmpl_py_isspace((unsigned char)*end)) end++;
                if (!*end && end != buf && isfinite(f) && fabs(f) < 9.2e18) return v_int((int64_t)f);
            }
        }
        return def;
    default: return def;
    }
}
FILTER(f_float) {
    ARGS(a, 1, "float", "default");
    val def = tmpl_arg_get(c, a, 0, "default", v_float(0.0), NULL);
    switch (in.t) {
    case V_FLOAT: return in;
    case V_INT: return v_float((double)in.i);
    case V_BOOL: return v_float(in.b);
    case V_STR: {
        char buf[128];
        if (in.s.n >= sizeof buf) return def;
        memcpy(buf, in.s.p, in.s.n);
        buf[in.s.n] = 0;
        char *st = buf;
        while (*st && tmpl_py_isspace((unsigned char)*st)) st++;
        char *end;
        double f = strtod(st, &end);
        while (*end && tmpl_py_isspace((unsigned char)*end)) end++;
        if (*end || end == st) return def;
        return v_float(f);
    }
    default: return def;
    }
}
FILTER(f_abs) {
    NOARGS(a, "abs");
    if (in.t == V_INT) { if (in.i == INT64_MIN) tmpl_rx_fail(c, "OverflowError", "integer too large"); return v_int(in.i < 0 ? -in.i : in.i); }
    if (in.t == V_BOOL) return v_int(in.b);
    if (in.t == V_FLOAT) return v_float(fabs(in.f));
    if (in.t == V_UNDEF) tmpl_undef_fail(c, in);
    tmpl_rx_fail(c, "TypeError", "bad operand type for abs(): '%s'", tmpl_type_name(in));
}
static double py_round(double x, int64_t nd) {
    if (!isfinite(x)) return x;
    if (nd > 300) return x;
    if (nd >= 0) {
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)nd, x);
        return strtod(buf, NULL);
    }
    if (nd < -308) return 0.0 * x;
    double p = pow(10.0, (double)-nd), y = x / p, r = nearbyint(y);
    return r * p;
}
FILTER(f_round) {
    ARGS(a, 2, "round", "precision", "method");
    int64_t prec = want_int(c, tmpl_arg_get(c, a, 0, "precision", v_int(0), NULL), "precision");
    val method = tmpl_arg_get(c, a, 1, "method", tmpl_v_cstr("common"), NULL);
    method = tmpl_v_str(c, method);
    bool common = method.s.n == 6 && !memcmp(method.s.p, "common", 6);
    bool ceil_ = method.s.n == 4 && !memcmp(method.s.p, "ceil", 4);
    bool floor_ = method.s.n == 5 && !memcmp(method.s.p, "floor", 5);
    if (!common && !ceil_ && !floor_) tmpl_rx_fail(c, "FilterArgumentError", "method must be common, ceil or floor");
    if (in.t == V_UNDEF) tmpl_undef_fail(c, in);
    if (in.t != V_INT && in.t != V_BOOL && in.t != V_FLOAT) tmpl_rx_fail(c, "TypeError", "type %s doesn't define __round__ method", tmpl_type_name(in));
    if (common) {
        if (in.t != V_FLOAT) {
            if (prec >= 0) return v_int(in.t == V_INT ? in.i : in.b);
            double r = py_round((double)(in.t == V_INT ? in.i : in.b), prec);
            return v_int((int64_t)r);
        }
        return v_float(py_round(in.f, prec));
    }
    double x = in.t == V_FLOAT ? in.f : in.t == V_INT ? (double)in.i : in.b;
    if (prec > 300) prec = 300;
    if (prec < -300) prec = -300;
    double p = pow(10.0, (double)prec);
    return v_float((ceil_ ? ceil(x * p) : floor(x * p)) / p);
}
FILTER(f_tojson) {
    ARGS(a, 4, "tojson", "ensure_ascii", "indent", "separators", "sort_keys");
    bool ensure_ascii = tmpl_truthy(c, tmpl_arg_get(c, a, 0, "ensure_ascii", v_bool(false), NULL));
    val ind = tmpl_arg_get(c, a, 1, "indent", v_none(), NULL);
    val seps = tmpl_arg_get(c, a, 2, "separators", v_none(), NULL);
    bool sort_keys = tmpl_truthy(c, tmpl_arg_get(c, a, 3, "sort_keys", v_bool(false), NULL));
    const char *indent = NULL;
    if (ind.t == V_INT || ind.t == V_BOOL) {
        int64_t k = ind.t == V_INT ? ind.i : ind.b;
        if (k > 1000) tmpl_rx_fail(c, "ValueError", "indent too large");
        char *sp = tmpl_rx_alloc(c, (size_t)(k > 0 ? k : 0) + 1);
        memset(sp, ' ', (size_t)(k > 0 ? k : 0));
        sp[k > 0 ? k : 0] = 0;
        indent = sp;
    } else if (ind.t == V_STR) indent = tmpl_rx_strndup(c, ind.s.p, ind.s.n);
    else if (ind.t != V_NONE) tmpl_rx_fail(c, "TypeError", "can't multiply sequence by non-int of type '%s'", tmpl_type_name(ind));
    const char *item_sep = indent ? "," : ", ", *key_sep = ": ";
    if (seps.t == V_TUPLE || seps.t == V_LIST) {
        if (seps.l->n != 2) tmpl_rx_fail(c, "ValueError", "separators must be a pair");
        val x = want_str(c, seps.l->v[0], "separator"), y = want_str(c, seps.l->v[1], "separator");
        item_sep = tmpl_rx_strndup(c, x.s.p, x.s.n);
        key_sep = tmpl_rx_strndup(c, y.s.p, y.s.n);
    } else if (seps.t != V_NONE) tmpl_rx_fail(c, "ValueError", "separators must be a pair");
    sbuf b = {0};
    tmpl_v_tojson(c, in, &b, indent, 0, item_sep, key_sep, sort_keys, 0);
    if (!ensure_ascii) return tmpl_sb_val(&b);
    sbuf o = {0};
    for (size_t i = 0; i < b.n;) {
        unsigned char ch = (unsigned char)b.p[i];
        if (ch < 0x80) { tmpl_sb_putc(c, &o, (char)ch); i++; continue; }
        size_t adv;
        uint32_t cp = tmpl_utf8_decode(b.p + i, b.n - i, &adv);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            tmpl_sb_printf(c, &o, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
        } else tmpl_sb_printf(c, &o, "\\u%04x", cp);
        i += adv;
    }
    return tmpl_sb_val(&o);
}
FILTER(f_items) {
    NOARGS(a, "items");
    if (in.t == V_UNDEF) return mkgen(c, tmpl_v_list(c, 0), "generator");
    if (in.t != V_DICT) tmpl_rx_fail(c, "TypeError", "Can only get item pairs from a mapping.");
    val l = tmpl_v_list(c, in.d->n);
    for (size_t i = 0; i < in.d->n; i++) tmpl_list_push(c, l.l, tmpl_v_tuple2(c, in.d->k[i], in.d->v[i]));
    return mkgen(c, l, "generator");
}
FILTER(f_safe) { NOARGS(a, "safe"); val s = soft_str(c, in); s.markup = 1; return s; }
FILTER(f_escape) { NOARGS(a, "escape"); return tmpl_html_escape(c, in); }
FILTER(f_forceescape) { NOARGS(a, "forceescape"); val s = soft_str(c, in); s.markup = 0; return tmpl_html_escape(c, s); }

static bool run_test(rctx *c, const char *name, val x, args *a);

/* select/reject/selectattr/rejectattr */
static val select_impl(rctx *c, val in, args *a, bool attr, bool reject) {
    val out = tmpl_v_list(c, 0);
    if (!tmpl_truthy(c, in)) return mkgen(c, out, "generator");
    int k = 0;
    val attrname = v_undef();
    if (attr) {
        if (a->npos < 1) tmpl_rx_fail(c, "FilterArgumentError", "Missing parameter for attribute name");
        attrname = a->pos[k++];
    }
    const char *test = NULL;
    args ta = {0};
    if (a->npos > k) {
        val tn = want_str(c, a->pos[k++], "test name");
        test = tmpl_rx_strndup(c, tn.s.p, tn.s.n);
        ta.pos = a->pos + k;
        ta.npos = a->npos - k;
        ta.kwn = a->kwn;
        ta.kwv = a->kwv;
        ta.nkw = a->nkw;
    }
    tlist *l = tmpl_v_iter(c, in);
    for (size_t i = 0; i < l->n; i++) {
        val x = attr ? attr_path(c, l->v[i], attrname) : l->v[i];
        bool r = test ? run_test(c, test, x, &ta) : tmpl_truthy(c, x);
        if (r != reject) tmpl_list_push(c, out.l, l->v[i]);
    }
    return mkgen(c, out, "generator");
}
FILTER(f_select) { return select_impl(c, in, a, false, false); }
FILTER(f_reject) { return select_impl(c, in, a, false, true); }
FILTER(f_selectattr) { return select_impl(c, in, a, true, false); }
FILTER(f_rejectattr) { return select_impl(c, in, a, true, true); }

FILTER(f_map) {
    val out = tmpl_v_list(c, 0);
    if (!tmpl_truthy(c, in)) return mkgen(c, out, "generator");
    tlist *l = tmpl_v_iter(c, in);
    bool has_attr;
    val attr = tmpl_arg_get(c, a, -1, "attribute", v_undef(), &has_attr);
    if (a->npos == 0 && has_attr) {
        bool has_def;
        val def = tmpl_arg_get(c, a, -1, "default", v_undef(), &has_def);
        for (size_t i = 0; i < l->n; i++) {
            val x = attr_path(c, l->v[i], attr);
            if (has_def && x.t == V_UNDEF) x = def;
            tmpl_list_push(c, out.l, x);
        }
        return mkgen(c, out, "generator");
    }
    if (a->npos < 1) tmpl_rx_fail(c, "FilterArgumentError", "map requires a filter argument");
    val fname = want_str(c, a->pos[0], "filter name");
    char *fn = tmpl_rx_strndup(c, fname.s.p, fname.s.n);
    filter_fn f = tmpl_find_filter(fn);
    if (!f) tmpl_rx_fail(c, "TemplateRuntimeError", "No filter named '%s' found.", fn);
    args fa = *a;
    fa.pos = a->pos + 1;
    fa.npos = a->npos - 1;
    for (size_t i = 0; i < l->n; i++) tmpl_list_push(c, out.l, f(c, l->v[i], &fa));
    return mkgen(c, out, "generator");
}

static val sort_key(rctx *c, val x, val attr, bool case_sensitive) {
    if (attr.t != V_UNDEF && attr.t != V_NONE) x = attr_path(c, x, attr);
    if (!case_sensitive && x.t == V_STR) x = tmpl_str_lower(c, x);
    return x;
}
void tmpl_v_stable_sort(rctx *c, val *items, val *keys, size_t n, bool reverse) {
    /* merge sort by keys (stable) */
    if (n < 2) return;
    val *ti = tmpl_rx_alloc(c, n * sizeof(val)), *tk = tmpl_rx_alloc(c, n * sizeof(val));
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = MX_MIN(lo + w, n), hi = MX_MIN(lo + 2 * w, n), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int r = tmpl_v_cmp(c, keys[j], keys[i], "<");
                bool take_right = reverse ? (tmpl_v_cmp(c, keys[i], keys[j], "<") < 0) : r < 0;
                if (take_right) { ti[k] = items[j]; tk[k++] = keys[j++]; }
                else { ti[k] = items[i]; tk[k++] = keys[i++]; }
            }
            while (i < mid) { ti[k] = items[i]; tk[k++] = keys[i++]; }
            while (j < hi) { ti[k] = items[j]; tk[k++] = keys[j++]; }
        }
        memcpy(items, ti, n * sizeof(val));
        memcpy(keys, tk, n * sizeof(val));
    }
}
FILTER(f_sort) {
    ARGS(a, 3, "sort", "reverse", "case_sensitive", "attribute");
    bool reverse = tmpl_truthy(c, tmpl_arg_get(c, a, 0, "reverse", v_bool(false), NULL));
    bool cs = tmpl_truthy(c, tmpl_arg_get(c, a, 1, "case_sensitive", v_bool(false), NULL));
    val attr = tmpl_arg_get(c, a, 2, "attribute", v_none(), NULL);
    tlist *l = tmpl_v_iter(c, in);
    val r = tmpl_v_list(c, l->n);
    val *keys = tmpl_rx_alloc(c, (l->n + 1) * sizeof(val));
    for (size_t i = 0; i < l->n; i++) { tmpl_list_push(c, r.l, l->v[i]); keys[i] = sort_key(c, l->v[i], attr, cs); }
    tmpl_v_stable_sort(c, r.l->v, keys, r.l->n, reverse);
    return r;
}
FILTER(f_dictsort) {
    ARGS(a, 3, "dictsort", "case_sensitive", "by", "reverse");
    bool cs = tmpl_truthy(c, tmpl_arg_get(c, a, 0, "case_sensitive", v_bool(false), NULL));
    val by = tmpl_v_str(c, tmpl_arg_get(c, a, 1, "by", tmpl_v_cstr("key"), NULL));
    bool reverse = tmpl_truthy(c, tmpl_arg_get(c, a, 2, "reverse", v_bool(false), NULL));
    int pos;
    if (by.s.n == 3 && !memcmp(by.s.p, "key", 3)) pos = 0;
    else if (by.s.n == 5 && !memcmp(by.s.p, "value", 5)) pos = 1;
    else tmpl_rx_fail(c, "FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
    if (in.t == V_UNDEF) tmpl_undef_fail(c, in);
    if (in.t != V_DICT) tmpl_rx_fail(c, "AttributeError", "'%s' object has no attribute 'items'", tmpl_type_name(in));
    val r = dict_items_list(c, in.d);
    val *keys = tmpl_rx_alloc(c, (r.l->n + 1) * sizeof(val));
    for (size_t i = 0; i < r.l->n; i++) {
        val k = r.l->v[i].l->v[pos];
        keys[i] = (!cs && k.t == V_STR) ? tmpl_str_lower(c, k) : k;
    }
    tmpl_v_stable_sort(c, r.l->v, keys, r.l->n, reverse);
    return r;
}
FILTER(f_unique) {
    ARGS(a, 2, "unique", "case_sensitive", "attribute");
    bool cs = tmpl_truthy(c, tmpl_arg_get(c, a, 0, "case_sensitive", v_bool(false), NULL));
    val attr = tmpl_arg_get(c, a, 1, "attribute", v_none(), NULL);
    tlist *l = tmpl_v_iter(c, in);
    val out = tmpl_v_list(c, 0), seen = tmpl_v_list(c, 0);
    for (size_t i = 0; i < l->n; i++) {
        val k = sort_key(c, l->v[i], attr, cs);
        bool dup = false;
        for (size_t j = 0; j < seen.l->n && !dup; j++) dup = tmpl_v_eq(c, seen.l->v[j], k, 0);
        if (dup) continue;
        tmpl_list_push(c, seen.l, k);
        tmpl_list_push(c, out.l, l->v[i]);
    }
    return mkgen(c, out, "generator");
}
static val minmax(rctx *c, val in, args *a, bool max) {
    ARGS(a, 2, max ? "max" : "min", "case_sensitive", "attribute");
    bool cs = tmpl_truthy(c, tmpl_arg_get(c, a, 0, "case_sensitive", v_bool(false), NULL));
    val attr = tmpl_arg_get(c, a, 1, "attribute", v_none(), NULL);
    tlist *l = tmpl_v_iter(c, in);
    if (!l->n) return tmpl_v_undef_msg(c, NULL, "No aggregated item, sequence was empty.");
    size_t best = 0;
    val bk = sort_key(c, l->v[0], attr, cs);
    for (size_t i = 1; i < l->n; i++) {
        val k = sort_key(c, l->v[i], attr, cs);
        int r = tmpl_v_cmp(c, k, bk, max ? ">" : "<");
        if (max ? r > 0 : r < 0) { best = i; bk = k; }
    }
    return l->v[best];
}
FILTER(f_min) { return minmax(c, in, a, false); }
FILTER(f_max) { return minmax(c, in, a, true); }
FILTER(f_sum) {
    ARGS(a, 2, "sum", "attribute", "start");
    val attr = tmpl_arg_get(c, a, 0, "attribute", v_none(), NULL);
    val acc = tmpl_arg_get(c, a, 1, "start", v_int(0), NULL);
    tlist *l = tmpl_v_iter(c, in);
    for (size_t i = 0; i < l->n; i++) {
        val x = attr.t != V_NONE ? attr_path(c, l->v[i], attr) : l->v[i];
        if (acc.t == V_STR) tmpl_rx_fail(c, "TypeError", "sum() can't sum strings [use ''.join(seq) instead]");
        acc = tmpl_op_binary(c, OP_ADD, acc, x);
    }
    return acc;
}
FILTER(f_reverse) {
    NOARGS(a, "reverse");
    if (in.t == V_STR) {
        cps d = decode_all(c, in);
        sbuf b = {0};
        for (size_t i = d.n; i-- > 0;) tmpl_sb_put(c, &b, in.s.p + d.off[i], d.off[i + 1] - d.off[i]);
        return tmpl_sb_val(&b);
    }
    tlist *l = tmpl_v_iter(c, in);
    val r = tmpl_v_list(c, l->n);
    for (size_t i = l->n; i-- > 0;) tmpl_list_push(c, r.l, l->v[i]);
    if (in.t == V_LIST) return mkgen(c, r, "list_reverseiterator");
    if (in.t == V_TUPLE) return mkgen(c, r, "reversed");
    if (in.t == V_DICT) return mkgen(c, r, "dict_reversekeyiterator");
    return r;
}
FILTER(f_batch) {
    ARGS(a, 2, "batch", "linecount", "fill_with");
    int64_t n = want_int(c, tmpl_arg_get(c, a, 0, "linecount", v_undef(), NULL), "linecount");
    bool has_fill;
    val fill = tmpl_arg_get(c, a, 1, "fill_with", v_none(), &has_fill);
    if (n <= 0) tmpl_rx_fail(c, "ValueError", "batch size must be positive");
    tlist *l = tmpl_v_iter(c, in);
    val out = tmpl_v_list(c, 0), cur = tmpl_v_list(c, 0);
    for (size_t i = 0; i < l->n; i++) {
        if ((int64_t)cur.l->n == n) { tmpl_list_push(c, out.l, cur); cur = tmpl_v_list(c, 0); }
        tmpl_list_push(c, cur.l, l->v[i]);
    }
    if (cur.l->n) {
        if (has_fill && fill.t != V_NONE) while ((int64_t)cur.l->n < n) tmpl_list_push(c, cur.l, fill);
        tmpl_list_push(c, out.l, cur);
    }
    return mkgen(c, out, "generator");
}
FILTER(f_slice) {
    ARGS(a, 2, "slice", "slices", "fill_with");
    int64_t slices = want_int(c, tmpl_arg_get(c, a, 0, "slices", v_undef(), NULL), "slices");
    bool has_fill;
    val fill = tmpl_arg_get(c, a, 1, "fill_with", v_none(), &has_fill);
    if (slices <= 0) tmpl_rx_fail(c, "ZeroDivisionError", "integer division or modulo by zero");
    if (slices > 100000) tmpl_rx_fail(c, "ValueError", "too many slices");
    tlist *l = tmpl_v_iter(c, in);
    int64_t len = (int64_t)l->n, per = len / slices, extra = len % slices, offset = 0;
    val out = tmpl_v_list(c, 0);
    for (int64_t i = 0; i < slices; i++) {
        int64_t start = offset + i * per;
        if (i < extra) offset++;
        int64_t end = offset + (i + 1) * per;
        val tmp = tmpl_v_list(c, 0);
        for (int64_t k = start; k < end; k++) tmpl_list_push(c, tmp.l, l->v[k]);
        if (has_fill && fill.t != V_NONE && i >= extra) tmpl_list_push(c, tmp.l, fill);
        tmpl_list_push(c, out.l, tmp);
    }
    return mkgen(c, out, "generator");
}
FILTER(f_indent) {
    ARGS(a, 3, "indent", "width", "first", "blank");
    val w = tmpl_arg_get(c, a, 0, "width", v_int(4), NULL);
    bool first = tmpl_truthy(c, tmpl_arg_get(c, a, 1, "first", v_bool(false), NULL));
    bool blank = tmpl_truthy(c, tmpl_arg_get(c, a, 2, "blank", v_bool(false), NULL));
    val ind;
    if (w.t == V_STR) ind = w;
    else {
        int64_t k = want_int(c, w, "width");
        if (k > 10000) tmpl_rx_fail(c, "MemoryError", "indent too large");
        sbuf sb = {0};
        for (int64_t i = 0; i < k; i++) tmpl_sb_putc(c, &sb, ' ');
        ind = tmpl_sb_val(&sb);
    }
    if (in.t == V_UNDEF) tmpl_undef_fail(c, in);
    if (in.t == V_LIST) tmpl_rx_fail(c, "AttributeError", "'list' object has no attribute 'splitlines'");
    if (in.t != V_STR) tmpl_rx_fail(c, "TypeError", "unsupported operand type(s) for +=: '%s' and 'str'", tmpl_type_name(in));
    val s = in;
    sbuf t = {0};
    tmpl_sb_put(c, &t, s.s.p, s.s.n);
    tmpl_sb_putc(c, &t, '\n');
    tlist *lines = tmpl_str_splitlines(c, tmpl_sb_val(&t), false);
    sbuf b = {0};
    if (first) tmpl_sb_put(c, &b, ind.s.p, ind.s.n);
    for (size_t i = 0; i < lines->n; i++) {
        val ln = lines->v[i];
        if (i) {
            tmpl_sb_putc(c, &b, '\n');
            if (blank || ln.s.n) tmpl_sb_put(c, &b, ind.s.p, ind.s.n);
        }
        tmpl_sb_put(c, &b, ln.s.p, ln.s.n);
    }
    return tmpl_sb_val(&b);
}
FILTER(f_center) {
    ARGS(a, 1, "center", "width");
    val w = tmpl_arg_get(c, a, 0, "width", v_int(80), NULL);
    args b = {.pos = &w, .npos = 1};
    return m_center(c, soft_str(c, in), &b);
}
FILTER(f_wordcount) {
    NOARGS(a, "wordcount");
    val s = soft_str(c, in);
    cps d = decode_all(c, s);
    int64_t k = 0;
    bool inw = false;
    for (size_t i = 0; i < d.n; i++) {
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)d.cp[i]);
        bool w = d.cp[i] == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                 cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
        if (w && !inw) k++;
        inw = w;
    }
    return v_int(k);
}
FILTER(f_truncate) {
    ARGS(a, 4, "truncate", "length", "killwords", "end", "leeway");
    int64_t length = want_int(c, tmpl_arg_get(c, a, 0, "length", v_int(255), NULL), "length");
    bool kill = tmpl_truthy(c, tmpl_arg_get(c, a, 1, "killwords", v_bool(false), NULL));
    val end = tmpl_v_str(c, tmpl_arg_get(c, a, 2, "end", tmpl_v_cstr("..."), NULL));
    val lw = tmpl_arg_get(c, a, 3, "leeway", v_none(), NULL);
    int64_t leeway = lw.t == V_NONE ? 5 : want_int(c, lw, "leeway");
    if (in.t != V_STR && tmpl_v_len(c, in) <= length + leeway) return in; /* python: len(s) of the value itself */
    val s = soft_str(c, in);
    int64_t n = (int64_t)tmpl_utf8_count(s.s.p, s.s.n), en = (int64_t)tmpl_utf8_count(end.s.p, end.s.n);
    if (length < en) tmpl_rx_fail(c, "AssertionError", "expected length >= %lld, got %lld", (long long)en, (long long)length);
    if (leeway < 0) tmpl_rx_fail(c, "AssertionError", "expected leeway >= 0, got %lld", (long long)leeway);
    if (n <= length + leeway) return s;
    size_t cut = tmpl_utf8_offset(s.s.p, s.s.n, length - en);
    sbuf b = {0};
    if (kill) tmpl_sb_put(c, &b, s.s.p, cut);
    else {
        size_t k = cut;
        while (k > 0 && s.s.p[k - 1] != ' ') k--;
        tmpl_sb_put(c, &b, s.s.p, k ? k - 1 : cut);
    }
    tmpl_sb_put(c, &b, end.s.p, end.s.n);
    return tmpl_sb_val(&b);
}
FILTER(f_format) {
    if (a->npos && a->nkw) tmpl_rx_fail(c, "FilterArgumentError", "can't handle positional and keyword arguments at the same time");
    val s = soft_str(c, in);
    if (a->nkw) {
        val d = tmpl_v_dict(c);
        for (int i = 0; i < a->nkw; i++) tmpl_dict_set(c, d.d, tmpl_v_cstr(a->kwn[i]), a->kwv[i]);
        return tmpl_str_percent_format(c, s, d);
    }
    val t = tmpl_v_list(c, (size_t)a->npos);
    for (int i = 0; i < a->npos; i++) tmpl_list_push(c, t.l, a->pos[i]);
    t.t = V_TUPLE;
    return tmpl_str_percent_format(c, s, t);
}
FILTER(f_attr) {
    ARGS(a, 1, "attr", "name");
    val n = want_str(c, tmpl_arg_get(c, a, 0, "name", v_undef(), NULL), "attribute name");
    if (in.t == V_DICT) {
        bool found;
        val m = tmpl_find_method(c, in, n.s.p, n.s.n, &found);
        if (found) return m;
        return tmpl_v_undef_msg(c, NULL, "'%s' has no attribute '%.*s'", tmpl_obj_type_repr(in), (int)MX_MIN(n.s.n, 200), n.s.p);
    }
    return tmpl_op_getattr(c, in, n.s.p, n.s.n);
}
FILTER(f_striptags) {
    NOARGS(a, "striptags");
    val s = soft_str(c, in);
    sbuf b = {0};
    bool intag = false;
    for (size_t i = 0; i < s.s.n; i++) {
        char ch = s.s.p[i];
        if (ch == '<') intag = true;
        else if (ch == '>' && intag) intag = false;
        else if (!intag) tmpl_sb_putc(c, &b, ch);
    }
    /* collapse whitespace */
    val r = tmpl_sb_val(&b);
    val parts = py_split(c, r, v_none(), -1, false);
    args ja = {.pos = &parts, .npos = 1};
    return m_join(c, tmpl_v_cstr(" "), &ja);
}
FILTER(f_pprint) { NOARGS(a, "pprint"); sbuf b = {0}; tmpl_v_repr(c, in, &b, 0); return tmpl_sb_val(&b); }

typedef struct { const char *name; filter_fn fn; } fdef;
static const fdef g_filters[] = {
    {"length", f_length}, {"count", f_length}, {"first", f_first}, {"last", f_last}, {"join", f_join},
    {"upper", f_upper}, {"lower", f_lower}, {"title", f_title}, {"capitalize", f_capitalize}, {"trim", f_trim},
    {"replace", f_replace}, {"default", f_default}, {"d", f_default}, {"list", f_list}, {"string", f_string},
    {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"tojson", f_tojson},
    {"items", f_items}, {"safe", f_safe}, {"escape", f_escape}, {"e", f_escape}, {"forceescape", f_forceescape},
    {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
    {"map", f_map}, {"sort", f_sort}, {"dictsort", f_dictsort}, {"unique", f_unique}, {"min", f_min},
    {"max", f_max}, {"sum", f_sum}, {"reverse", f_reverse}, {"batch", f_batch}, {"slice", f_slice},
    {"indent", f_indent}, {"center", f_center}, {"wordcount", f_wordcount}, {"truncate", f_truncate},
    {"format", f_format}, {"attr", f_attr}, {"striptags", f_striptags}, {"pprint", f_pprint}, {NULL, NULL}};

filter_fn tmpl_find_filter(const char *name) {
    for (int i = 0; g_filters[i].name; i++)
        if (!strcmp(g_filters[i].name, name)) return g_filters[i].fn;
    return NULL;
}

/* ---------------- tests ---------------- */
#define TEST(fname) static bool fname(rctx *c, val x, args *a)
static val targ(rctx *c, args *a, const char *tname) {
    if (a->npos < 1) tmpl_rx_fail(c, "TypeError", "test_%s() missing 1 required positional argument", tname);
    return a->pos[0];
}
TEST(t_defined) { (void)c; (void)a; return x.t != V_UNDEF; }
TEST(t_undefined) { (void)c; (void)a; return x.t == V_UNDEF; }
TEST(t_none) { (void)c; (void)a; return x.t == V_NONE; }
TEST(t_boolean) { (void)c; (void)a; return x.t == V_BOOL; }
TEST(t_false) { (void)c; (void)a; return x.t == V_BOOL && !x.b; }
TEST(t_true) { (void)c; (void)a; return x.t == V_BOOL && x.b; }
TEST(t_integer) { (void)c; (void)a; return x.t == V_INT; }
TEST(t_float) { (void)c; (void)a; return x.t == V_FLOAT; }
TEST(t_number) { (void)c; (void)a; return x.t == V_INT || x.t == V_FLOAT || x.t == V_BOOL; }
TEST(t_string) { (void)c; (void)a; return x.t == V_STR; }
TEST(t_mapping) { (void)c; (void)a; return x.t == V_DICT; }
TEST(t_iterable) { (void)c; (void)a; return x.t == V_STR || x.t == V_LIST || x.t == V_TUPLE || x.t == V_DICT || x.t == V_GEN || x.t == V_UNDEF; }
TEST(t_sequence) { (void)c; (void)a; return x.t == V_STR || x.t == V_LIST || x.t == V_TUPLE || x.t == V_DICT || x.t == V_UNDEF; }
TEST(t_callable) { (void)c; (void)a; return x.t == V_MACRO || x.t == V_FUNC || x.t == V_LOOP || x.t == V_UNDEF; }
TEST(t_escaped) { (void)c; (void)a; return x.t == V_STR && x.markup; }
TEST(t_sameas) {
    val y = targ(c, a, "sameas");
    if (x.t != y.t) return false;
    switch (x.t) {
    case V_NONE: case V_UNDEF: return true;
    case V_BOOL: return x.b == y.b;
    case V_INT: return x.i == y.i && x.i >= -5 && x.i <= 256;
    case V_STR: return x.s.p == y.s.p && x.s.n == y.s.n;
    case V_LIST: case V_TUPLE: case V_GEN: return x.l == y.l;
    case V_DICT: case V_NS: return x.d == y.d;
    default: return tmpl_v_eq(c, x, y, 0);
    }
}
TEST(t_eq) { return tmpl_v_eq(c, x, targ(c, a, "eq"), 0); }
TEST(t_ne) { return !tmpl_v_eq(c, x, targ(c, a, "ne"), 0); }
TEST(t_lt) { return tmpl_v_cmp(c, x, targ(c, a, "lt"), "<") < 0; }
TEST(t_le) { return tmpl_v_cmp(c, x, targ(c, a, "le"), "<=") <= 0; }
TEST(t_gt) { return tmpl_v_cmp(c, x, targ(c, a, "gt"), ">") > 0; }
TEST(t_ge) { return tmpl_v_cmp(c, x, targ(c, a, "ge"), ">=") >= 0; }
TEST(t_in) { return tmpl_op_contains(c, x, targ(c, a, "in")); }
TEST(t_divisibleby) {
    val n = targ(c, a, "divisibleby");
    if ((n.t == V_INT || n.t == V_BOOL) && (x.t == V_INT || x.t == V_BOOL)) {
        int64_t d = n.t == V_INT ? n.i : n.b, v = x.t == V_INT ? x.i : x.b;
        if (d == 0) tmpl_rx_fail(c, "ZeroDivisionError", "integer division or modulo by zero");
        if (d == -1) return true;
        return v % d == 0;
    }
    val r = tmpl_op_binary(c, OP_MOD, x, n);
    return !tmpl_truthy(c, r);
}
TEST(t_even) { (void)a; return tmpl_v_eq(c, tmpl_op_binary(c, OP_MOD, x, v_int(2)), v_int(0), 0); }
TEST(t_odd) { (void)a; return tmpl_v_eq(c, tmpl_op_binary(c, OP_MOD, x, v_int(2)), v_int(1), 0); }
TEST(t_lower) { (void)a; return tmpl_truthy(c, str_pred(c, soft_str(c, x), 5)); }
TEST(t_upper) { (void)a; return tmpl_truthy(c, str_pred(c, soft_str(c, x), 4)); }
TEST(t_filter) { (void)a; if (x.t != V_STR) return false; return tmpl_find_filter(tmpl_rx_strndup(c, x.s.p, x.s.n)) != NULL; }
TEST(t_test) { (void)a; if (x.t != V_STR) return false; return tmpl_find_test(tmpl_rx_strndup(c, x.s.p, x.s.n)) != NULL; }

typedef struct { const char *name; test_fn fn; } tdef;
static const tdef g_tests[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
    {"false", t_false}, {"true", t_true}, {"integer", t_integer}, {"float", t_float}, {"number", t_number},
    {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence},
    {"callable", t_callable}, {"escaped", t_escaped}, {"sameas", t_sameas}, {"eq", t_eq}, {"equalto", t_eq},
    {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le},
    {"<=", t_le}, {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in},
    {"divisibleby", t_divisibleby}, {"even", t_even}, {"odd", t_odd}, {"lower", t_lower}, {"upper", t_upper},
    {"filter", t_filter}, {"test", t_test}, {NULL, NULL}};

test_fn tmpl_find_test(const char *name) {
    for (int i = 0; g_tests[i].name; i++)
        if (!strcmp(g_tests[i].name, name)) return g_tests[i].fn;
    return NULL;
}

static bool run_test(rctx *c, const char *name, val x, args *a) {
    test_fn t = tmpl_find_test(name);
    if (!t) tmpl_rx_fail(c, "TemplateRuntimeError", "No test named '%s' found.", name);
    return t(c, x, a);
}
