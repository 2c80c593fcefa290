/* template interpreter: scopes, expressions, statements, macros, render entry. */
#define _GNU_SOURCE
#include "tmpl_int.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char g_raised[900];
static _Thread_local bool g_has_raised;
const char *mx_tmpl_raised(void) { return g_has_raised ? g_raised : NULL; }

static void step(rctx *c) {
    if (++c->steps > c->t->lim.max_steps) tmpl_rx_fail(c, "RuntimeError", "template step limit exceeded");
    if (c->deadline && !(c->steps & 1023) && mx_now() > c->deadline) tmpl_rx_fail(c, "RuntimeError", "template time limit exceeded");
}
static void enter(rctx *c) {
    if (++c->depth > c->t->lim.max_depth) tmpl_rx_fail(c, "RecursionError", "maximum recursion depth exceeded");
}
static void leave(rctx *c) { c->depth--; }

/* ---- scopes ---- */
static scope *new_scope(rctx *c, scope *parent) {
    scope *s = tmpl_rx_alloc(c, sizeof *s);
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}
static void scope_set(rctx *c, scope *s, const char *name, size_t n, val v) { tmpl_dict_set(c, &s->vars, v_strn(name, n), v); }
static val lookup(rctx *c, scope *s, const char *name, size_t n) {
    for (; s; s = s->parent) {
        val *p = tmpl_dict_gets(&s->vars, name, n);
        if (p) return *p;
    }
    bool found = false;
    val g = tmpl_find_global(c, name, n, &found);
    if (found) return g;
    return tmpl_v_undef_msg(c, NULL, "'%.*s' is undefined", (int)MX_MIN(n, 200), name);
}

static void out_put(rctx *c, const char *p, size_t n) {
    tmpl_sb_put(c, c->out, p, n);
    if (c->out->n > c->t->lim.max_output) tmpl_rx_fail(c, "RuntimeError", "template output limit exceeded");
}

static val eval(rctx *c, node *n, scope *s);
static void exec_list(rctx *c, nlist *l, scope *s);

/* ---- arguments ---- */
static void build_args(rctx *c, node *n, scope *s, args *a, val *extra_first) {
    int off = extra_first ? 1 : 0;
    a->npos = n->l1.n + off;
    a->pos = tmpl_rx_alloc(c, (size_t)(a->npos + 1) * sizeof(val));
    if (extra_first) a->pos[0] = *extra_first;
    for (int i = 0; i < n->l1.n; i++) a->pos[i + off] = eval(c, n->l1.v[i], s);
    a->nkw = n->l2.n;
    a->kwn = tmpl_rx_alloc(c, (size_t)(a->nkw + 1) * sizeof(char *));
    a->kwv = tmpl_rx_alloc(c, (size_t)(a->nkw + 1) * sizeof(val));
    for (int i = 0; i < n->l2.n; i++) {
        a->kwn[i] = n->l2.v[i]->s;
        a->kwv[i] = eval(c, n->l2.v[i]->a, s);
    }
}

/* ---- attribute / item access ---- */
static val loop_attr(rctx *c, tloop *lp, const char *name, size_t n, bool *found);

val tmpl_op_getattr(rctx *c, val obj, const char *name, size_t n) {
    if (obj.t == V_UNDEF) tmpl_undef_fail(c, obj);
    bool found = false;
    if (obj.t == V_NS) {
        val *p = tmpl_dict_gets(obj.d, name, n);
        if (p) return *p;
    } else if (obj.t == V_LOOP) {
        val r = loop_attr(c, obj.lp, name, n, &found);
        if (found) return r;
    } else {
        val m = tmpl_find_method(c, obj, name, n, &found);
        if (found) return m;
        if (obj.t == V_DICT) {
            val *p = tmpl_dict_gets(obj.d, name, n);
            if (p) return *p;
        }
    }
    return tmpl_v_undef_msg(c, NULL, "'%s' has no attribute '%.*s'", tmpl_obj_type_repr(obj), (int)MX_MIN(n, 200), name);
}

static bool as_index(val k, int64_t *i) {
    if (k.t == V_INT) { *i = k.i; return true; }
    if (k.t == V_BOOL) { *i = k.b; return true; }
    return false;
}

val tmpl_op_getitem(rctx *c, val obj, val key) {
    if (obj.t == V_UNDEF) tmpl_undef_fail(c, obj);
    if (obj.t == V_DICT) {
        val *p = tmpl_dict_get(obj.d, key);
        if (p) return *p;
    } else if (obj.t == V_LIST || obj.t == V_TUPLE) {
        int64_t i;
        if (as_index(key, &i)) {
            int64_t n = (int64_t)obj.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.l->v[i];
        }
    } else if (obj.t == V_STR) {
        int64_t i;
        if (as_index(key, &i)) {
            int64_t n = (int64_t)tmpl_utf8_count(obj.s.p, obj.s.n);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t a = tmpl_utf8_offset(obj.s.p, obj.s.n, i), b = tmpl_utf8_offset(obj.s.p, obj.s.n, i + 1);
                return v_strn(obj.s.p + a, b - a);
            }
        }
    }
    if (key.t == V_STR) {
        if (obj.t == V_DICT) {
            bool found = false;
            val m = tmpl_find_method(c, obj, key.s.p, key.s.n, &found);
            if (found) return m;
            return tmpl_v_undef_msg(c, NULL, "'%s' has no attribute '%.*s'", tmpl_obj_type_repr(obj), (int)MX_MIN(key.s.n, 200), key.s.p);
        }
        return tmpl_op_getattr(c, obj, key.s.p, key.s.n);
    }
    sbuf b = {0};
    tmpl_v_repr(c, key, &b, 0);
    return tmpl_v_undef_msg(c, NULL, "'%s' has no element %.*s", tmpl_obj_type_repr(obj), (int)MX_MIN(b.n, 200), b.p ? b.p : "");
}

static int64_t slice_idx(rctx *c, val v, bool *none) {
    *none = false;
    if (v.t == V_NONE || v.t == V_UNDEF) { *none = true; return 0; }
    int64_t i;
    if (as_index(v, &i)) return i;
    tmpl_rx_fail(c, "TypeError", "slice indices must be integers or None or have an __index__ method");
}

static val do_slice(rctx *c, val obj, val vs, val ve, val vst) {
    if (obj.t == V_UNDEF) tmpl_undef_fail(c, obj);
    bool ns, ne, nst;
    int64_t st = slice_idx(c, vst, &nst);
    if (nst) st = 1;
    if (st == 0) tmpl_rx_fail(c, "ValueError", "slice step cannot be zero");
    int64_t start = slice_idx(c, vs, &ns), stop = slice_idx(c, ve, &ne);
    int64_t n;
    size_t *offs = NULL;
    if (obj.t == V_STR) {
        n = (int64_t)tmpl_utf8_count(obj.s.p, obj.s.n);
        offs = tmpl_rx_alloc(c, (size_t)(n + 1) * sizeof(size_t));
        int64_t k = 0;
        for (size_t i = 0; i < obj.s.n; i++)
            if (((unsigned char)obj.s.p[i] & 0xC0) != 0x80) offs[k++] = i;
        offs[n] = obj.s.n;
    } else if (obj.t == V_LIST || obj.t == V_TUPLE) {
        n = (int64_t)obj.l->n;
    } else {
        return tmpl_v_undef_msg(c, NULL, "'%s' has no element slice", tmpl_obj_type_repr(obj));
    }
    /* python PySlice_AdjustIndices */
    if (ns) start = st < 0 ? n - 1 : 0;
    else {
        if (start < 0) { start += n; if (start < 0) start = st < 0 ? -1 : 0; }
        else if (start >= n) start = st < 0 ? n - 1 : n;
    }
    if (ne) stop = st < 0 ? -1 : n;
    else {
        if (stop < 0) { stop += n; if (stop < 0) stop = st < 0 ? -1 : 0; }
        else if (stop >= n) stop = st < 0 ? n - 1 : n;
    }
    if (obj.t == V_STR) {
        if (st == 1) {
            if (stop <= start) return v_strn("", 0);
            return v_strn(obj.s.p + offs[start], offs[stop] - offs[start]);
        }
        sbuf b = {0};
        for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st)
            tmpl_sb_put(c, &b, obj.s.p + offs[i], offs[i + 1] - offs[i]);
        return tmpl_sb_val(&b);
    }
    val r = tmpl_v_list(c, 0);
    for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st) tmpl_list_push(c, r.l, obj.l->v[i]);
    r.t = obj.t;
    return r;
}

/* ---- arithmetic ---- */
static bool isnum(val v) { return v.t == V_INT || v.t == V_BOOL || v.t == V_FLOAT; }
static double fv(val v) { return v.t == V_FLOAT ? v.f : v.t == V_INT ? (double)v.i : (double)v.b; }
static int64_t iv(val v) { return v.t == V_INT ? v.i : (int64_t)v.b; }

static const char *opname(int op) {
    switch (op) {
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_FLOORDIV: return "//";
    case OP_MOD: return "%";
    case OP_POW: return "** or pow()";
    }
    return "?";
}

static _Noreturn void unsupported(rctx *c, int op, val a, val b) {
    tmpl_rx_fail(c, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'", opname(op), tmpl_type_name(a), tmpl_type_name(b));
}

static val repeat(rctx *c, val seq, int64_t k) {
    if (k < 0) k = 0;
    if (seq.t == V_STR) {
        if (seq.s.n && (uint64_t)k > (c->t->lim.max_memory / seq.s.n)) tmpl_rx_fail(c, "MemoryError", "string too large");
        sbuf b = {0};
        for (int64_t i = 0; i < k; i++) tmpl_sb_put(c, &b, seq.s.p, seq.s.n);
        val r = tmpl_sb_val(&b);
        r.markup = seq.markup;
        return r;
    }
    if (seq.l->n && (uint64_t)k > (c->t->lim.max_memory / (seq.l->n * sizeof(val)))) tmpl_rx_fail(c, "MemoryError", "list too large");
    val r = tmpl_v_list(c, seq.l->n * (size_t)k);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < seq.l->n; j++) tmpl_list_push(c, r.l, seq.l->v[j]);
    r.t = seq.t;
    return r;
}

val tmpl_op_binary(rctx *c, int op, val a, val b) {
    if (op == OP_CONCAT) {
        sbuf s = {0};
        tmpl_v_to_str(c, a, &s);
        tmpl_v_to_str(c, b, &s);
        return tmpl_sb_val(&s);
    }
    if (a.t == V_UNDEF) tmpl_undef_fail(c, a);
    if (b.t == V_UNDEF) tmpl_undef_fail(c, b);
    if (isnum(a) && isnum(b)) {
        bool fl = a.t == V_FLOAT || b.t == V_FLOAT;
        if (!fl) {
            int64_t x = iv(a), y = iv(b), r;
            switch (op) {
            case OP_ADD: if (__builtin_add_overflow(x, y, &r)) goto ovf; return v_int(r);
            case OP_SUB: if (__builtin_sub_overflow(x, y, &r)) goto ovf; return v_int(r);
            case OP_MUL: if (__builtin_mul_overflow(x, y, &r)) goto ovf; return v_int(r);
            case OP_DIV:
                if (y == 0) tmpl_rx_fail(c, "ZeroDivisionError", "division by zero");
                return v_float((double)x / (double)y);
            case OP_FLOORDIV: case OP_MOD: {
                if (y == 0) tmpl_rx_fail(c, "ZeroDivisionError", "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto ovf;
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
                return v_int(op == OP_MOD ? m : q);
            }
            case OP_POW: {
                if (y < 0) {
                    if (x == 0) tmpl_rx_fail(c, "ZeroDivisionError", "0.0 cannot be raised to a negative power");
                    return v_float(pow((double)x, (double)y));
                }
                int64_t res = 1, base = x;
                while (y) {
                    if (y & 1) if (__builtin_mul_overflow(res, base, &res)) goto ovf;
                    y >>= 1;
                    if (y && __builtin_mul_overflow(base, base, &base)) goto ovf;
                }
                return v_int(res);
            }
            }
        } else {
            double x = fv(a), y = fv(b);
            switch (op) {
            case OP_ADD: return v_float(x + y);
            case OP_SUB: return v_float(x - y);
            case OP_MUL: return v_float(x * y);
            case OP_DIV:
                if (y == 0) tmpl_rx_fail(c, "ZeroDivisionError", "float division by zero");
                return v_float(x / y);
            case OP_FLOORDIV: case OP_MOD: {
                if (y == 0) tmpl_rx_fail(c, "ZeroDivisionError", "float %s", op == OP_MOD ? "modulo" : "floor division by zero");
                double m = fmod(x, y), d = (x - m) / y, q;
                if (m != 0) {
                    if ((y < 0) != (m < 0)) { m += y; d -= 1.0; }
                } else m = copysign(0.0, y);
                if (d != 0) {
                    q = floor(d);
                    if (d - q > 0.5) q += 1.0;
                } else q = copysign(0.0, x / y);
                return v_float(op == OP_MOD ? m : q);
            }
            case OP_POW:
                if (x == 0 && y < 0) tmpl_rx_fail(c, "ZeroDivisionError", "0.0 cannot be raised to a negative power");
                return v_float(pow(x, y));
            }
        }
    }
    switch (op) {
    case OP_ADD:
        if (a.t == V_STR && b.t == V_STR) {
            if (a.markup || b.markup) {
                if (!a.markup) a = tmpl_html_escape(c, a);
                if (!b.markup) b = tmpl_html_escape(c, b);
            }
            sbuf s = {0};
            tmpl_sb_put(c, &s, a.s.p, a.s.n);
            tmpl_sb_put(c, &s, b.s.p, b.s.n);
            val r = tmpl_sb_val(&s);
            r.markup = a.markup || b.markup;
            return r;
        }
        if (a.t == V_STR) tmpl_rx_fail(c, "TypeError", "can only concatenate str (not \"%s\") to str", tmpl_type_name(b));
        if ((a.t == V_LIST && b.t == V_LIST) || (a.t == V_TUPLE && b.t == V_TUPLE)) {
            val r = tmpl_v_list(c, a.l->n + b.l->n);
            for (size_t i = 0; i < a.l->n; i++) tmpl_list_push(c, r.l, a.l->v[i]);
            for (size_t i = 0; i < b.l->n; i++) tmpl_list_push(c, r.l, b.l->v[i]);
            r.t = a.t;
            return r;
        }
        if (a.t == V_LIST || a.t == V_TUPLE)
            tmpl_rx_fail(c, "TypeError", "can only concatenate %s (not \"%s\") to %s", tmpl_type_name(a), tmpl_type_name(b), tmpl_type_name(a));
        unsupported(c, op, a, b);
    case OP_MUL:
        if ((a.t == V_STR || a.t == V_LIST || a.t == V_TUPLE) && (b.t == V_INT || b.t == V_BOOL)) return repeat(c, a, iv(b));
        if ((b.t == V_STR || b.t == V_LIST || b.t == V_TUPLE) && (a.t == V_INT || a.t == V_BOOL)) return repeat(c, b, iv(a));
        if (a.t == V_STR || a.t == V_LIST || a.t == V_TUPLE || b.t == V_STR || b.t == V_LIST || b.t == V_TUPLE)
            tmpl_rx_fail(c, "TypeError", "can't multiply sequence by non-int of type '%s'", tmpl_type_name(a.t == V_STR || a.t == V_LIST || a.t == V_TUPLE ? b : a));
        unsupported(c, op, a, b);
    case OP_MOD:
        if (a.t == V_STR) return tmpl_str_percent_format(c, a, b);
        unsupported(c, op, a, b);
    default:
        unsupported(c, op, a, b);
    }
ovf:
    tmpl_rx_fail(c, "OverflowError", "integer result too large");
}

bool tmpl_op_contains(rctx *c, val item, val cont) {
    switch (cont.t) {
    case V_STR:
        if (item.t != V_STR) tmpl_rx_fail(c, "TypeError", "'in <string>' requires string as left operand, not %s", tmpl_type_name(item));
        if (!item.s.n) return true;
        if (item.s.n > cont.s.n) return false;
        return memmem(cont.s.p, cont.s.n, item.s.p, item.s.n) != NULL;
    case V_LIST: case V_TUPLE: case V_GEN:
        if (cont.t == V_GEN && cont.l->err) tmpl_rx_raise(c, "%s", cont.l->err);
        for (size_t i = 0; i < cont.l->n; i++)
            if (tmpl_v_eq(c, cont.l->v[i], item, 0)) return true;
        return false;
    case V_DICT:
        if (item.t == V_LIST || item.t == V_DICT || item.t == V_NS || (item.t == V_GEN && item.l->gen_name && !strncmp(item.l->gen_name, "dict_", 5)))
            tmpl_rx_fail(c, "TypeError", "unhashable type: '%s'", tmpl_type_name(item));
        return tmpl_dict_get(cont.d, item) != NULL;
    case V_UNDEF:
        if (cont.u && cont.u->exc) tmpl_undef_fail(c, cont);
        return false;
    default:
        tmpl_rx_fail(c, "TypeError", "argument of type '%s' is not iterable", tmpl_type_name(cont));
    }
}

static bool compare(rctx *c, int op, val a, val b) {
    switch (op) {
    case OP_EQ: return tmpl_v_eq(c, a, b, 0);
    case OP_NE: return !tmpl_v_eq(c, a, b, 0);
    case OP_LT: return tmpl_v_cmp(c, a, b, "<") < 0;
    case OP_LE: return tmpl_v_cmp(c, a, b, "<=") <= 0;
    case OP_GT: return tmpl_v_cmp(c, a, b, ">") > 0;
    case OP_GE: return tmpl_v_cmp(c, a, b, ">=") >= 0;
    case OP_IN: return tmpl_op_contains(c, a, b);
    case OP_NOTIN: return !tmpl_op_contains(c, a, b);
    }
    return false;
}

/* ---- macros ---- */
static val render_body(rctx *c, nlist *body, scope *s) {
    sbuf buf = {0}, *saved = c->out;
    c->out = &buf;
    exec_list(c, body, s);
    c->out = saved;
    return tmpl_sb_val(&buf);
}

static val call_macro(rctx *c, tmacro *m, args *a) {
    node *def = m->def;
    scope *s = new_scope(c, m->closure);
    int np = def->l1.n;
    const char *mname = m->name ? m->name : "caller";
    if (a->npos > np && !m->uses_varargs)
        tmpl_rx_fail(c, "TypeError", "macro '%s' takes not more than %d argument(s)", mname, np);
    val kwargs = tmpl_v_dict(c);
    bool *used = tmpl_rx_alloc(c, (size_t)(a->nkw + 1));
    memset(used, 0, (size_t)(a->nkw + 1));
    for (int i = 0; i < np; i++) {
        node *pn = def->l1.v[i];
        val v;
        bool have = false;
        if (i < a->npos) { v = a->pos[i]; have = true; }
        for (int k = 0; k < a->nkw; k++)
            if (!strcmp(a->kwn[k], pn->s)) {
                if (have) tmpl_rx_fail(c, "TypeError", "macro '%s' got multiple values for argument '%s'", mname, pn->s);
                v = a->kwv[k];
                have = true;
                used[k] = true;
            }
        if (!have) {
            if (def->l2.v[i]) v = eval(c, def->l2.v[i], s);
            else v = tmpl_v_undef_msg(c, NULL, "parameter '%s' was not provided", pn->s);
        }
        scope_set(c, s, pn->s, pn->sn, v);
    }
    for (int k = 0; k < a->nkw; k++) {
        if (used[k]) continue;
        if (!strcmp(a->kwn[k], "caller") && m->uses_caller) { scope_set(c, s, "caller", 6, a->kwv[k]); continue; }
        if (!m->uses_kwargs) tmpl_rx_fail(c, "TypeError", "macro '%s' takes no keyword argument '%s'", mname, a->kwn[k]);
        tmpl_dict_set(c, kwargs.d, tmpl_v_cstr(a->kwn[k]), a->kwv[k]);
    }
    val varargs = tmpl_v_list(c, 0);
    for (int i = np; i < a->npos; i++) tmpl_list_push(c, varargs.l, a->pos[i]);
    varargs.t = V_TUPLE;
    if (m->uses_varargs) scope_set(c, s, "varargs", 7, varargs);
    if (m->uses_kwargs) scope_set(c, s, "kwargs", 6, kwargs);
    if (m->caller.t == V_MACRO) scope_set(c, s, "caller", 6, m->caller);
    enter(c);
    int saved_ctl = c->loopctl;
    val r = render_body(c, &def->l3, s);
    c->loopctl = saved_ctl;
    leave(c);
    return r;
}

static val make_macro(rctx *c, node *def, scope *s, const char *name) {
    tmacro *m = tmpl_rx_alloc(c, sizeof *m);
    memset(m, 0, sizeof *m);
    m->def = def;
    m->closure = s;
    for (scope *x = s; x; x = x->parent) x->captured = true;
    m->name = name;
    m->caller = v_undef();
    m->uses_caller = def->op & 1;
    m->uses_varargs = def->op & 2;
    m->uses_kwargs = def->op & 4;
    val v = v_undef();
    v.t = V_MACRO;
    v.m = m;
    return v;
}

/* ---- loops ---- */
static void bind_target(rctx *c, node *target, val v, scope *s) {
    if (target->kind == E_NAME) {
        scope_set(c, s, target->s, target->sn, v);
        return;
    }
    /* tuple unpacking */
    tlist *items = tmpl_v_iter(c, v);
    int want = target->l1.n;
    if ((int64_t)items->n > want) tmpl_rx_fail(c, "ValueError", "too many values to unpack (expected %d)", want);
    if ((int64_t)items->n < want) tmpl_rx_fail(c, "ValueError", "not enough values to unpack (expected %d, got %zu)", want, items->n);
    for (int i = 0; i < want; i++) bind_target(c, target->l1.v[i], items->v[i], s);
}

static val lp_cycle(rctx *c, val self, args *a) {
    if (a->npos == 0) tmpl_rx_fail(c, "TypeError", "no items for cycling given");
    return a->pos[self.lp->idx % a->npos];
}
static val lp_changed(rctx *c, val self, args *a) {
    val cur = tmpl_v_list(c, (size_t)a->npos);
    for (int i = 0; i < a->npos; i++) tmpl_list_push(c, cur.l, a->pos[i]);
    if (self.lp->has_changed && tmpl_v_eq(c, self.lp->last_changed, cur, 0)) return v_bool(false);
    self.lp->last_changed = cur;
    self.lp->has_changed = true;
    return v_bool(true);
}

static val loop_attr(rctx *c, tloop *lp, const char *name, size_t n, bool *found) {
    int64_t len = (int64_t)lp->items->n, i = lp->idx;
    *found = true;
#define IS(s) (n == sizeof(s) - 1 && !memcmp(name, s, n))
    if (IS("index")) return v_int(i + 1);
    if (IS("index0")) return v_int(i);
    if (IS("revindex")) return v_int(len - i);
    if (IS("revindex0")) return v_int(len - i - 1);
    if (IS("first")) return v_bool(i == 0);
    if (IS("last")) return v_bool(i == len - 1);
    if (IS("length")) return v_int(len);
    if (IS("depth")) return v_int(lp->depth0 + 1);
    if (IS("depth0")) return v_int(lp->depth0);
    if (IS("previtem")) return i > 0 ? lp->items->v[i - 1] : tmpl_v_undef_msg(c, NULL, "there is no previous item");
    if (IS("nextitem")) return i + 1 < len ? lp->items->v[i + 1] : tmpl_v_undef_msg(c, NULL, "there is no next item");
    val self = v_undef();
    self.t = V_LOOP;
    self.lp = lp;
    if (IS("cycle")) return tmpl_v_func(c, lp_cycle, self, "cycle");
    if (IS("changed")) return tmpl_v_func(c, lp_changed, self, "changed");
#undef IS
    *found = false;
    return v_undef();
}

static void run_for(rctx *c, node *n, val iterable, scope *s, int depth0) {
    tlist *items = tmpl_v_iter(c, iterable);
    if (n->c) { /* for x in y if cond */
        val f = tmpl_v_list(c, 0);
        for (size_t i = 0; i < items->n; i++) {
            step(c);
            scope *fs = new_scope(c, s);
            bind_target(c, n->a, items->v[i], fs);
            if (tmpl_truthy(c, eval(c, n->c, fs))) tmpl_list_push(c, f.l, items->v[i]);
        }
        items = f.l;
    } else {
        /* snapshot: the loop sees the items as they were */
        val cp = tmpl_v_list(c, items->n);
        for (size_t i = 0; i < items->n; i++) tmpl_list_push(c, cp.l, items->v[i]);
        items = cp.l;
    }
    tloop *lp = tmpl_rx_alloc(c, sizeof *lp);
    memset(lp, 0, sizeof *lp);
    lp->items = items;
    lp->depth0 = depth0;
    lp->forn = n;
    lp->sc = s;
    val lv = v_undef();
    lv.t = V_LOOP;
    lv.lp = lp;
    scope *is = NULL;
    for (size_t i = 0; i < items->n; i++) {
        step(c);
        lp->idx = (int64_t)i;
        /* a fresh scope per iteration; the previous one is recycled unless a macro captured it */
        if (is && !is->captured) tmpl_dict_clear(&is->vars);
        else is = new_scope(c, s);
        bind_target(c, n->a, items->v[i], is);
        scope_set(c, is, "loop", 4, lv);
        exec_list(c, &n->l1, is);
        if (c->loopctl == 1) { c->loopctl = 0; break; }
        c->loopctl = 0;
    }
    if (!items->n && n->l2.n) exec_list(c, &n->l2, new_scope(c, s));
}

/* ---- calls ---- */
val tmpl_call_value(rctx *c, val fn, args *a) {
    step(c);
    switch (fn.t) {
    case V_FUNC: return fn.fn->fn(c, fn.fn->self, a);
    case V_MACRO: return call_macro(c, fn.m, a);
    case V_LOOP: {
        tloop *lp = fn.lp;
        if (!lp->forn->flag) tmpl_rx_fail(c, "TypeError", "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
        if (a->npos != 1) tmpl_rx_fail(c, "TypeError", "loop() takes exactly one argument");
        sbuf buf = {0}, *saved = c->out;
        c->out = &buf;
        enter(c);
        run_for(c, lp->forn, a->pos[0], lp->sc, lp->depth0 + 1);
        leave(c);
        c->out = saved;
        return tmpl_sb_val(&buf);
    }
    case V_UNDEF: tmpl_undef_fail(c, fn);
    default: tmpl_rx_fail(c, "TypeError", "'%s' object is not callable", tmpl_type_name(fn));
    }
}

static val apply_filter(rctx *c, node *f, val in, scope *s) {
    filter_fn fn = tmpl_find_filter(f->s);
    if (!fn) tmpl_rx_fail(c, "TemplateAssertionError", "No filter named '%s'.", f->s);
    args a;
    build_args(c, f, s, &a, NULL);
    c->line = f->line;
    step(c);
    static const char *const lazy[] = {"select", "reject", "selectattr", "rejectattr", "map", "items", "batch", "slice", "unique", NULL};
    bool is_lazy = false;
    for (int i = 0; lazy[i] && !is_lazy; i++) is_lazy = !strcmp(lazy[i], f->s);
    if (!is_lazy) return fn(c, in, &a);
    /* python evaluates these generators lazily: an error surfaces only when the result is iterated */
    jmp_buf saved;
    memcpy(saved, c->jb, sizeof saved);
    int depth = c->depth, loopctl = c->loopctl;
    sbuf *out = c->out;
    volatile val r = v_undef();
    if (!setjmp(c->jb)) {
        r = fn(c, in, &a);
        memcpy(c->jb, saved, sizeof saved);
        return r;
    }
    memcpy(c->jb, saved, sizeof saved);
    if (c->is_raise || strstr(c->err, "limit exceeded") || strstr(c->err, "MemoryError") || strstr(c->err, "RecursionError"))
        longjmp(c->jb, 1);
    c->depth = depth;
    c->loopctl = loopctl;
    c->out = out;
    val g = tmpl_v_list(c, 0);
    g.t = V_GEN;
    g.l->gen_name = "generator";
    g.l->err = tmpl_rx_strndup(c, c->err, strlen(c->err));
    return g;
}

/* Applies a filter chain parsed with a NULL innermost operand (filter blocks, set blocks). */
static val apply_chain(rctx *c, node *f, val in, scope *s) {
    if (!f) return in;
    val inner = apply_chain(c, f->a, in, s);
    return apply_filter(c, f, inner, s);
}

/* ---- expressions ---- */
static val eval(rctx *c, node *n, scope *s) {
    enter(c);
    c->line = n->line;
    val r;
    switch (n->kind) {
    case E_CONST: r = n->cv; break;
    case E_NAME: r = lookup(c, s, n->s, n->sn); break;
    case E_LIST: case E_TUPLE:
        r = tmpl_v_list(c, (size_t)n->l1.n);
        for (int i = 0; i < n->l1.n; i++) tmpl_list_push(c, r.l, eval(c, n->l1.v[i], s));
        if (n->kind == E_TUPLE) r.t = V_TUPLE;
        break;
    case E_DICT:
        r = tmpl_v_dict(c);
        for (int i = 0; i < n->l1.n; i++) {
            val k = eval(c, n->l1.v[i], s);
            if (k.t == V_LIST || k.t == V_DICT || k.t == V_UNDEF || k.t == V_NS)
                tmpl_rx_fail(c, "TypeError", "unhashable type: '%s'", tmpl_type_name(k));
            tmpl_dict_set(c, r.d, k, eval(c, n->l2.v[i], s));
        }
        break;
    case E_ATTR: r = tmpl_op_getattr(c, eval(c, n->a, s), n->s, n->sn); break;
    case E_ITEM: {
        val o = eval(c, n->a, s);
        r = tmpl_op_getitem(c, o, eval(c, n->b, s));
        break;
    }
    case E_SLICE: {
        if (!n->d) tmpl_rx_fail(c, "TypeError", "slices are only supported as subscripts");
        val o = eval(c, n->d, s);
        val a = n->a ? eval(c, n->a, s) : v_none();
        val b = n->b ? eval(c, n->b, s) : v_none();
        val st = n->c ? eval(c, n->c, s) : v_none();
        r = do_slice(c, o, a, b, st);
        break;
    }
    case E_CALL: {
        val fn = eval(c, n->a, s);
        args a;
        build_args(c, n, s, &a, NULL);
        c->line = n->line;
        r = tmpl_call_value(c, fn, &a);
        break;
    }
    case E_FILTER: {
        val in = n->a ? eval(c, n->a, s) : v_undef();
        r = apply_filter(c, n, in, s);
        break;
    }
    case E_TEST: {
        val in = eval(c, n->a, s);
        test_fn fn = tmpl_find_test(n->s);
        if (!fn) tmpl_rx_fail(c, "TemplateAssertionError", "No test named '%s'.", n->s);
        args a;
        build_args(c, n, s, &a, NULL);
        c->line = n->line;
        bool b = fn(c, in, &a);
        r = v_bool(n->flag ? !b : b);
        break;
    }
    case E_NEG: case E_POS: {
        val x = eval(c, n->a, s);
        if (x.t == V_UNDEF) tmpl_undef_fail(c, x);
        if (x.t == V_INT || x.t == V_BOOL) {
            int64_t i = iv(x);
            if (n->kind == E_NEG && i == INT64_MIN) tmpl_rx_fail(c, "OverflowError", "integer result too large");
            r = v_int(n->kind == E_NEG ? -i : i);
        } else if (x.t == V_FLOAT) r = v_float(n->kind == E_NEG ? -x.f : x.f);
        else tmpl_rx_fail(c, "TypeError", "bad operand type for unary %c: '%s'", n->kind == E_NEG ? '-' : '+', tmpl_type_name(x));
        break;
    }
    case E_NOT: r = v_bool(!tmpl_truthy(c, eval(c, n->a, s))); break;
    case E_AND: {
        val a = eval(c, n->a, s);
        r = tmpl_truthy(c, a) ? eval(c, n->b, s) : a;
        break;
    }
    case E_OR: {
        val a = eval(c, n->a, s);
        r = tmpl_truthy(c, a) ? a : eval(c, n->b, s);
        break;
    }
    case E_COND:
        if (tmpl_truthy(c, eval(c, n->a, s))) r = eval(c, n->b, s);
        else if (n->c) r = eval(c, n->c, s);
        else r = tmpl_v_undef_msg(c, NULL, "the inline if-expression on line %d evaluated to false and no else section was defined.", n->line);
        break;
    case E_BIN: {
        val a = eval(c, n->a, s);
        val b = eval(c, n->b, s);
        c->line = n->line;
        r = tmpl_op_binary(c, n->op, a, b);
        break;
    }
    case E_CMP: {
        val a = eval(c, n->l1.v[0], s);
        r = v_bool(true);
        for (int i = 1; i < n->l1.n; i++) {
            val b = eval(c, n->l1.v[i], s);
            c->line = n->line;
            if (!compare(c, n->ops[i - 1], a, b)) { r = v_bool(false); break; }
            a = b;
        }
        break;
    }
    default: tmpl_rx_fail(c, "RuntimeError", "cannot evaluate node");
    }
    leave(c);
    return r;
}

/* ---- statements ---- */
static void assign(rctx *c, node *target, val v, scope *s) {
    if (target->kind == E_NSREF) {
        val ns = lookup(c, s, target->s, target->sn);
        if (ns.t != V_NS) tmpl_rx_fail(c, "TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        tmpl_dict_set(c, ns.d, target->b->cv, v);
        return;
    }
    bind_target(c, target, v, s);
}

static void exec_node(rctx *c, node *n, scope *s) {
    step(c);
    c->line = n->line;
    switch (n->kind) {
    case S_TEXT: out_put(c, n->s, n->sn); break;
    case S_OUT: {
        val v = eval(c, n->a, s);
        if (v.t == V_STR) out_put(c, v.s.p, v.s.n);
        else {
            sbuf b = {0};
            tmpl_v_to_str(c, v, &b);
            out_put(c, b.p, b.n);
        }
        break;
    }
    case S_IF:
        for (node *x = n; x;) {
            if (x->kind == S_BODY) { exec_list(c, &x->l1, s); break; }
            c->line = x->line;
            if (tmpl_truthy(c, eval(c, x->a, s))) { exec_list(c, &x->l1, s); break; }
            x = x->c;
        }
        break;
    case S_FOR: run_for(c, n, eval(c, n->b, s), s, 0); break;
    case S_SET: assign(c, n->a, eval(c, n->b, s), s); break;
    case S_SETBLOCK: {
        val body = render_body(c, &n->l1, s);
        assign(c, n->a, apply_chain(c, n->b, body, s), s);
        break;
    }
    case S_MACRO: scope_set(c, s, n->s, n->sn, make_macro(c, n, s, n->s)); break;
    case S_CALLBLOCK: {
        node *call = n->a;
        val fn = eval(c, call->a, s);
        val caller = make_macro(c, n, s, NULL);
        args a;
        build_args(c, call, s, &a, NULL);
        c->line = n->line;
        val r;
        if (fn.t == V_MACRO) {
            tmacro *m = tmpl_rx_alloc(c, sizeof *m);
            *m = *fn.m;
            m->caller = caller;
            r = call_macro(c, m, &a);
        } else {
            /* pass caller as a keyword argument */
            args b = a;
            b.kwn = tmpl_rx_alloc(c, (size_t)(a.nkw + 1) * sizeof(char *));
            b.kwv = tmpl_rx_alloc(c, (size_t)(a.nkw + 1) * sizeof(val));
            for (int i = 0; i < a.nkw; i++) { b.kwn[i] = a.kwn[i]; b.kwv[i] = a.kwv[i]; }
            b.kwn[a.nkw] = "caller";
            b.kwv[a.nkw] = caller;
            b.nkw = a.nkw + 1;
            r = tmpl_call_value(c, fn, &b);
        }
        sbuf o = {0};
        tmpl_v_to_str(c, r, &o);
        out_put(c, o.p, o.n);
        break;
    }
    case S_FILTERBLOCK: {
        val body = render_body(c, &n->l1, s);
        val r = apply_chain(c, n->b, body, s);
        sbuf o = {0};
        tmpl_v_to_str(c, r, &o);
        out_put(c, o.p, o.n);
        break;
    }
    case S_BREAK: c->loopctl = 1; break;
    case S_CONTINUE: c->loopctl = 2; break;
    case S_WITH: {
        scope *ws = new_scope(c, s);
        for (int i = 0; i < n->l1.n; i++) bind_target(c, n->l1.v[i], eval(c, n->l2.v[i], s), ws);
        exec_list(c, &n->l3, ws);
        break;
    }
    case S_BODY: exec_list(c, &n->l1, s); break;
    default: tmpl_rx_fail(c, "RuntimeError", "cannot execute node");
    }
}

static void exec_list(rctx *c, nlist *l, scope *s) {
    enter(c);
    for (int i = 0; i < l->n && !c->loopctl; i++) exec_node(c, l->v[i], s);
    leave(c);
}

/* ---- entry ---- */
int mx_tmpl_render(const mx_tmpl *t, json_t *context, mx_buf *out) { return mx_tmpl_render_ex(t, context, NULL, out); }

static void set_vars(rctx *c, scope *root, json_t *vars, bool trusted) {
    if (!vars || !json_is_object(vars)) return;
    void *it;
    for (it = json_object_iter(vars); it; it = json_object_iter_next(vars, it)) {
        const char *k = json_object_iter_key(it);
        if (trusted && tmpl_dict_gets(&root->vars, k, strlen(k))) continue;
        val v = tmpl_v_from_json(c, json_object_iter_value(it), 0);
        scope_set(c, root, k, strlen(k), trusted ? tmpl_mk_trusted(c, v) : v);
    }
}

int mx_tmpl_render_ex(const mx_tmpl *t, json_t *context, const mx_tmpl_opts *o, mx_buf *out) {
    g_has_raised = false;
    g_raised[0] = 0;
    if (!t) return mx_set_err("no template");
    rctx *c = mx_calloc(1, sizeof *c);
    arena *ar = mx_calloc(1, sizeof *ar);
    if (!c || !ar) { free(c); free(ar); return MX_ERR; }
    ar->limit = o && o->max_memory ? o->max_memory : t->lim.max_memory;
    ar->track = o && o->markup;
    c->t = t;
    c->ar = ar;
    c->line = 1;
    c->deadline = o ? o->deadline : 0;
    if (setjmp(c->jb)) {
        if (c->is_raise) {
            snprintf(g_raised, sizeof g_raised, "%s", c->raised);
            g_has_raised = true;
        }
        mx_set_err("%s:%d: %s", t->name, c->line, c->err);
        tmpl_arena_free(ar);
        free(ar);
        free(c);
        return MX_ERR;
    }
    if (ar->track) tmpl_mk_init(c, t);
    sbuf *ob = tmpl_rx_alloc(c, sizeof *ob);
    memset(ob, 0, sizeof *ob);
    c->out = ob;
    scope *root = new_scope(c, NULL);
    set_vars(c, root, context, false);
    if (o) set_vars(c, root, o->trusted, true);
    exec_list(c, &t->root->l1, root);
    if (ar->track) tmpl_mk_ranges(c, ob->p, ob->n, out->len, o->markup);
    int rc = mx_buf_append(out, ob->p ? ob->p : "", ob->n);
    tmpl_arena_free(ar);
    free(ar);
    free(c);
    return rc;
}
