/* POST /tokenize and /detokenize (llama.cpp server's shapes: content,
 * add_special, parse_special; tokens). */
#include "server_int.h"
#include "../base/base.h"
#include <stdlib.h>

int mx_route_tokenize(server *sv, mx_srv_req *rq, json_t *req) {
    json_t *content = json_object_get(req, "content");
    if (!content) content = json_object_get(req, "text");
    if (!json_is_string(content)) return mx_srv_bad_request(sv, rq, "'content' must be a string");
    json_t *as = json_object_get(req, "add_special"), *ps = json_object_get(req, "parse_special");
    if (as && !json_is_boolean(as)) return mx_srv_bad_request(sv, rq, "'add_special' must be a boolean");
    if (ps && !json_is_boolean(ps)) return mx_srv_bad_request(sv, rq, "'parse_special' must be a boolean");
    if (!sv->tok) return mx_srv_bad_request(sv, rq, "this model has no tokenizer");
    int32_t *ids = NULL;
    int n = 0;
    /* parse_special false: special tokens' text is read as text (llama-server's option) */
    mx_tok_opts o = {.add_special = json_is_true(as), .split_special = json_is_false(ps), .deadline = mx_now() + sv->o.prompt_budget};
    if (mx_tok_encode_ex(sv->tok, json_string_value(content), json_string_length(content), &o, &ids, &n))
        return mx_srv_bad_request(sv, rq, "%s", mx_errmsg());
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    free(ids);
    return mx_srv_json(rq, 200, json_pack("{s:o}", "tokens", arr));
}

int mx_route_detokenize(server *sv, mx_srv_req *rq, json_t *req) {
    json_t *toks = json_object_get(req, "tokens");
    if (!json_is_array(toks)) return mx_srv_bad_request(sv, rq, "'tokens' must be a list of token ids");
    if (!sv->tok) return mx_srv_bad_request(sv, rq, "this model has no tokenizer");
    size_t n = json_array_size(toks);
    int32_t *ids = calloc(n + 1, sizeof(int32_t));
    if (!ids) return mx_srv_error(sv, rq, 500, "server_error", "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(toks, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= mx_tok_vocab_size(sv->tok)) {
            free(ids);
            return mx_srv_bad_request(sv, rq, "tokens[%zu] is not a token id of this vocabulary", i);
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    mx_buf out = {0};
    int rc = mx_tok_decode(sv->tok, ids, (int)n, false, &out);
    free(ids);
    if (rc) { mx_buf_free(&out); return mx_srv_bad_request(sv, rq, "%s", mx_errmsg()); }
    json_t *s = json_stringn(out.data ? out.data : "", out.len);
    mx_buf_free(&out);
    if (!s) s = json_string("");
    return mx_srv_json(rq, 200, json_pack("{s:o}", "content", s));
}
