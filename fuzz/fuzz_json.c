/* libFuzzer target: the tokenizer's JSON reader (tk_json_parse) and the
 * project's jansson wrapper (mx_json_parse + checked getters), on the same
 * input. Both must reject or accept without crashing, and agree on what is
 * valid JSON when the input is an object or array. tk_json_parse_lazy (with
 * root.model.vocab / merges lazy, as the tokenizer loads) must give the same
 * error or the same tree as tk_json_parse, its lazy containers read with tj_iter. */
#include "format/json.h"
#include "tokenizer/tok_internal.h"
#include <stdlib.h>
#include <string.h>

static void walk(const tj *v, int depth) {
    if (!v || depth > TK_MAX_DEPTH + 1) abort();
    if (v->type == TJ_ARR || v->type == TJ_OBJ)
        for (uint32_t i = 0; i < v->n; i++) walk(&v->v.kids[i], depth + 1);
    if (v->type == TJ_STR && (strlen(v->v.str) > v->n || !tk_u8_valid(v->v.str, v->n))) abort();
}

/* lz (from tk_json_parse_lazy) equals the built tree v */
static void same(tj_doc *ld, const tj *v, const tj *lz, int depth) {
    if (depth > TK_MAX_DEPTH + 1 || v->klen != lz->klen || (v->klen && memcmp(v->key, lz->key, v->klen))) abort();
    if (lz->type == TJ_LAZY) {
        if (v->type != lz->lazy_type || v->n != lz->n) abort();
        tj_iter it;
        tj m;
        uint32_t i = 0;
        int r;
        if (tk_json_iter_init(&it, ld, lz)) abort();
        while ((r = tk_json_iter_next(&it, &m)) > 0) {
            if (i >= v->n) abort();
            if (m.type == TJ_STR && (m.v.str[m.n] || !tk_u8_valid(m.v.str, m.n))) abort();
            same(ld, &v->v.kids[i++], &m, depth + 1);
        }
        if (r < 0 || i != v->n || tk_json_iter_init(&it, ld, lz) == MX_OK) abort(); /* read once */
        return;
    }
    if (v->type != lz->type || v->n != lz->n) abort();
    if (v->type == TJ_STR && memcmp(v->v.str, lz->v.str, v->n)) abort();
    if (v->type == TJ_NUM && memcmp(&v->v.num, &lz->v.num, sizeof(double))) abort();
    if (v->type == TJ_ARR || v->type == TJ_OBJ)
        for (uint32_t i = 0; i < v->n; i++) same(ld, &v->v.kids[i], &lz->v.kids[i], depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tj_doc *doc = NULL, *ldoc = NULL;
    const tj *root = tk_json_parse((const char *)data, size, "fuzz", &doc);
    char err[512];
    snprintf(err, sizeof err, "%s", root ? "" : mx_errmsg());
    char *copy = malloc(size + 1);
    if (!copy) abort();
    memcpy(copy, data, size);
    copy[size] = 0;
    const tj *lroot = tk_json_parse_lazy(copy, size, "fuzz", "model", (const char *const[]){"vocab", "merges", NULL}, &ldoc);
    if (!root != !lroot || (!lroot && strcmp(err, mx_errmsg()))) abort();
    if (root) {
        walk(root, 0);
        (void)tk_json_get(root, "model");
        same(ldoc, root, lroot, 0);
    }
    tk_json_free(doc);
    tk_json_free(ldoc);
    json_t *j = mx_json_parse((const char *)data, size, "fuzz");
    if (j) {
        mx_cfg c = {j, NULL, "fuzz"};
        int64_t i64;
        double d;
        bool b;
        int err = 0;
        (void)mx_cfg_int(&c, "a", 0, -10, 10, &i64);
        (void)mx_cfg_float(&c, "b", 0, -1, 1, &d);
        (void)mx_cfg_bool(&c, "c", false, &b);
        (void)mx_cfg_str(&c, "d", NULL, &err);
        json_decref(j);
    }
    return 0;
}
