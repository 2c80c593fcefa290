/* libFuzzer target: the tokenizer's JSON reader (tj_parse) and the
 * project's jansson wrapper (mx_json_parse + checked getters), on the same
 * input. Both must reject or accept without crashing, and agree on what is
 * valid JSON when the input is an object or array. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tj_doc *doc = NULL;
    const tj *root = tj_parse((const char *)data, size, "fuzz", &doc);
    if (root) {
        walk(root, 0);
        (void)tj_get(root, "model");
    }
    tj_free(doc);
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
