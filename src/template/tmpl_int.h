/* Internal types of the template engine: arena, values, AST, render state.
 * Errors inside the parser and renderer longjmp to the entry point; all
 * memory of a parse or a render lives in an arena freed as a whole. */
#ifndef MX_TMPL_INT_H
#define MX_TMPL_INT_H
#include "template.h"
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- arena ---- */
typedef struct achunk achunk;
typedef struct {
    achunk *head;
    size_t total, limit;
    /* provenance (a render with markup tracking): the chunks by address,
     * each with a bit per byte set where the byte is markup */
    bool track;
    achunk **by_addr;
    size_t n_by_addr, cap_by_addr;
} arena;
void *tmpl_arena_alloc(arena *a, size_t n); /* NULL past the limit or on OOM */
void tmpl_arena_free(arena *a);

/* ---- values ---- */
enum {
    V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR,
    V_LIST, V_TUPLE, V_GEN, V_DICT, V_NS, V_MACRO, V_FUNC, V_LOOP,
};
typedef struct tlist tlist;
typedef struct tdict tdict;
typedef struct tmacro tmacro;
typedef struct tfunc tfunc;
typedef struct tloop tloop;
typedef struct tundef tundef;

typedef struct val {
    uint8_t t;
    uint8_t markup; /* V_STR: a jinja2 Markup (safe) string */
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s;
        tlist *l;   /* V_LIST, V_TUPLE, V_GEN */
        tdict *d;   /* V_DICT, V_NS */
        tmacro *m;
        tfunc *fn;
        tloop *lp;
        tundef *u;  /* may be NULL */
    };
} val;

/* V_GEN: a consumed-lazily python iterator (generator, dict view, reversed...);
 * err: the error its lazy evaluation raised, re-raised when it is iterated. */
struct tlist { size_t n, cap; val *v; const char *gen_name; const char *err; };
/* Keys in insertion order; past a few keys an open-addressing index
 * (slot = position + 1, 0 = empty) makes lookups constant time, so
 * scopes with thousands of variables stay linear to build. */
struct tdict { size_t n, cap; val *k, *v; uint32_t *idx; size_t icap; };
/* Undefined: why it is undefined, for the error raised when it is used. */
struct tundef { const char *msg; const char *exc; };

typedef struct rctx rctx;
typedef struct args {
    val *pos; int npos;
    const char **kwn; val *kwv; int nkw;
} args;
typedef val (*builtin_fn)(rctx *c, val self, args *a);
struct tfunc { builtin_fn fn; val self; const char *name; };

/* ---- AST ---- */
enum {
    /* expressions */
    E_CONST, E_NAME, E_LIST, E_TUPLE, E_DICT, E_ATTR, E_ITEM, E_SLICE, E_CALL,
    E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_BIN, E_AND, E_OR, E_COND, E_CMP, E_KW,
    E_NSREF,
    /* statements */
    S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_CALLBLOCK, S_FILTERBLOCK,
    S_BREAK, S_CONTINUE, S_WITH, S_BODY,
};
/* binary / comparison operators */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef struct node node;
typedef struct { node **v; int n, cap; } nlist;
struct node {
    uint8_t kind, op;
    bool flag;       /* E_TEST: negated; S_FOR: recursive */
    int line;
    val cv;          /* E_CONST */
    const char *s;   /* name / attr / filter / test / text (NUL-terminated) */
    size_t sn;
    node *a, *b, *c, *d;
    nlist l1, l2, l3;
    uint8_t *ops;    /* E_CMP: operator per l1 element after the first */
};

struct mx_tmpl {
    arena ar;
    char *name;
    char *src;       /* normalized source */
    size_t srclen;
    node *root;
    mx_tmpl_limits lim;
};

/* ---- macro, loop ---- */
typedef struct scope scope;
struct scope { scope *parent; tdict vars; bool captured; /* a macro closes over it */ };
struct tmacro {
    node *def;       /* S_MACRO (or S_CALLBLOCK for caller) */
    scope *closure;
    const char *name;
    val caller;      /* V_MACRO or V_UNDEF */
    bool uses_caller, uses_varargs, uses_kwargs;
};
struct tloop {
    tlist *items;
    int64_t idx;     /* index0 */
    int depth0;
    node *forn;      /* for recursive loop() */
    scope *sc;
    val last_changed; bool has_changed;
};

/* ---- render context ---- */
typedef struct { char *p; size_t n, cap; } sbuf;
/* Markup tracking: bytes of the template's own text (the source and the
 * parse arena: static regions) and of trusted variables (special tokens)
 * are markup; a copy of markup bytes is markup (tmpl_sb_put, tmpl_rx_strndup);
 * everything else (the context's strings, bytes a filter computes) is not. */
typedef struct { const char *a, *b; } mregion;
typedef struct { mregion *stat; size_t nstat; } tmarks;
struct rctx {
    const mx_tmpl *t;
    arena *ar;
    jmp_buf jb;
    int line;
    int depth;
    uint64_t steps;
    int loopctl; /* 1 break, 2 continue */
    sbuf *out;
    size_t out_total;
    scope *globals;
    char err[900];
    char raised[900];
    bool is_raise;
    double deadline;   /* mx_now() past which the render fails; 0 = none */
    tmarks *mk;        /* NULL unless markup is tracked */
};

/* errors: never return */
_Noreturn void tmpl_rx_raise(rctx *c, const char *fmt, ...) MX_PRINTF(2, 3);
_Noreturn void tmpl_rx_fail(rctx *c, const char *exc, const char *fmt, ...) MX_PRINTF(3, 4);
void *tmpl_rx_alloc(rctx *c, size_t n);
char *tmpl_rx_strndup(rctx *c, const char *s, size_t n);
/* markup tracking (no-ops unless c->mk): tmpl_mk_init starts it for a render of
 * t; tmpl_mk_copy: dst[0..n) was copied from src */
void tmpl_mk_init(rctx *c, const mx_tmpl *t);
val tmpl_mk_trusted(rctx *c, val v);
void tmpl_mk_copy(rctx *c, const char *dst, const char *src, size_t n);
void tmpl_mk_set(rctx *c, const char *dst, size_t n);
/* the markup ranges of p[0..n) (an arena buffer) as size_t pairs, offset by base */
void tmpl_mk_ranges(rctx *c, const char *p, size_t n, size_t base, mx_buf *out);

/* string buffers in the arena */
void tmpl_sb_put(rctx *c, sbuf *b, const char *p, size_t n);
void tmpl_sb_puts(rctx *c, sbuf *b, const char *s);
void tmpl_sb_putc(rctx *c, sbuf *b, char ch);
void tmpl_sb_printf(rctx *c, sbuf *b, const char *fmt, ...) MX_PRINTF(3, 4);
val tmpl_sb_val(sbuf *b);

/* constructors */
static inline val v_undef(void) { val v = {0}; v.t = V_UNDEF; return v; }
static inline val v_none(void) { val v = {0}; v.t = V_NONE; return v; }
static inline val v_bool(bool b) { val v = {0}; v.t = V_BOOL; v.b = b; return v; }
static inline val v_int(int64_t i) { val v = {0}; v.t = V_INT; v.i = i; return v; }
static inline val v_float(double f) { val v = {0}; v.t = V_FLOAT; v.f = f; return v; }
static inline val v_strn(const char *p, size_t n) { val v = {0}; v.t = V_STR; v.s.p = p; v.s.n = n; return v; }
val tmpl_v_cstr(const char *s);
val tmpl_v_undef_msg(rctx *c, const char *exc, const char *fmt, ...) MX_PRINTF(3, 4);
val tmpl_v_list(rctx *c, size_t cap);
val tmpl_v_tuple2(rctx *c, val a, val b);
val tmpl_v_dict(rctx *c);
val tmpl_v_func(rctx *c, builtin_fn fn, val self, const char *name);
void tmpl_list_push(rctx *c, tlist *l, val x);
val *tmpl_dict_get(tdict *d, val key);
val *tmpl_dict_gets(tdict *d, const char *k, size_t n);
void tmpl_dict_set(rctx *c, tdict *d, val key, val x);
void tmpl_dict_clear(tdict *d);
/* merge sort of items by keys (both rearranged), stable like python's sorted */
void tmpl_v_stable_sort(rctx *c, val *items, val *keys, size_t n, bool reverse);

/* python semantics */
const char *tmpl_type_name(val v);
const char *tmpl_obj_type_repr(val v); /* "dict object" */
bool tmpl_truthy(rctx *c, val v);
void tmpl_v_to_str(rctx *c, val v, sbuf *b);
void tmpl_v_repr(rctx *c, val v, sbuf *b, int depth);
val tmpl_v_str(rctx *c, val v); /* python str() */
bool tmpl_v_eq(rctx *c, val a, val b, int depth);
int tmpl_v_cmp(rctx *c, val a, val b, const char *op);
void tmpl_fmt_float(double f, char *buf, size_t cap);
tlist *tmpl_v_iter(rctx *c, val v); /* materialized iteration; raises when not iterable */
int64_t tmpl_v_len(rctx *c, val v);
size_t tmpl_utf8_count(const char *p, size_t n);
size_t tmpl_utf8_offset(const char *p, size_t n, int64_t cp); /* byte offset of code point cp */
val tmpl_v_from_json(rctx *c, json_t *j, int depth);
void tmpl_v_tojson(rctx *c, val v, sbuf *b, const char *indent, int level, const char *item_sep,
              const char *key_sep, bool sort_keys, int depth);
_Noreturn void tmpl_undef_fail(rctx *c, val u);
val tmpl_html_escape(rctx *c, val s);

/* operations (tmpl_eval.c) */
val tmpl_op_getattr(rctx *c, val obj, const char *name, size_t n);
val tmpl_op_getitem(rctx *c, val obj, val key);
val tmpl_op_binary(rctx *c, int op, val a, val b);
val tmpl_call_value(rctx *c, val fn, args *a);
bool tmpl_op_contains(rctx *c, val item, val cont);
val tmpl_str_percent_format(rctx *c, val fmt, val args);

/* builtins (tmpl_builtins.c) */
typedef val (*filter_fn)(rctx *c, val in, args *a);
typedef bool (*test_fn)(rctx *c, val in, args *a);
filter_fn tmpl_find_filter(const char *name);
test_fn tmpl_find_test(const char *name);
val tmpl_find_method(rctx *c, val obj, const char *name, size_t n, bool *found);
val tmpl_find_global(rctx *c, const char *name, size_t n, bool *found);
val tmpl_arg_get(rctx *c, args *a, int idx, const char *name, val def, bool *present);
void tmpl_args_check(rctx *c, args *a, int maxpos, const char *const *kwnames, const char *fname);
/* python str helpers shared by filters and methods */
bool tmpl_py_isspace(uint32_t cp);
uint32_t tmpl_utf8_decode(const char *p, size_t n, size_t *adv);
void tmpl_utf8_encode(rctx *c, sbuf *b, uint32_t cp);
val tmpl_str_strip(rctx *c, val s, val chars, int which); /* which: 1 left, 2 right, 3 both */
val tmpl_str_lower(rctx *c, val s);
val tmpl_str_upper(rctx *c, val s);
val tmpl_str_replace(rctx *c, val s, val old, val new_, int64_t count);
tlist *tmpl_str_splitlines(rctx *c, val s, bool keepends);
#endif
