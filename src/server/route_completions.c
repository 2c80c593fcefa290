/* POST /v1/completions: a raw prompt (text or token ids), generated in the
 * OpenAI text_completion shape. */
#include "gen.h"
#include "../base/base.h"
#include <stdint.h>
#include <stdlib.h>

bool mx_completion_parse(server *sv, json_t *req, mx_gen_params *g, char *err, size_t errn) {
    static const char *const fields[] = {"prompt", "logprobs", NULL};
    if (!mx_gen_check_fields(req, fields, err, errn) || !mx_gen_parse_common(sv, req, g, err, errn)) return false;
    int lp = -1;
    if (!mx_opt_int(req, "logprobs", 0, MX_MAX_TOP_LOGPROBS, &lp, err, errn)) return false;
    if (lp >= 0) { g->logprobs = true; g->p.top_logprobs = lp; }
    json_t *prompt = json_object_get(req, "prompt");
    if (json_is_array(prompt) && json_array_size(prompt) == 1 && json_is_string(json_array_get(prompt, 0))) prompt = json_array_get(prompt, 0);
    if (json_is_string(prompt)) {
        if (!sv->tm.tok) { snprintf(err, errn, "this model has no tokenizer: send 'prompt' as a list of token ids"); return false; }
        /* what cannot fit is refused before it is tokenized; tokenizing has the prompt's time budget */
        int64_t least = mx_textmodel_min_tokens(&sv->tm, json_string_length(prompt));
        if (least >= sv->o.ctx_size) {
            snprintf(err, errn, "the prompt has at least %lld tokens (%zu bytes); the context size is %d", (long long)least,
                     json_string_length(prompt), sv->o.ctx_size);
            return false;
        }
        int n = 0;
        mx_tok_opts to = {.add_special = true, .deadline = mx_now() + sv->o.prompt_budget};
        if (mx_tok_encode_ex(sv->tm.tok, json_string_value(prompt), json_string_length(prompt), &to, &g->prompt, &n)) {
            snprintf(err, errn, "%s", mx_errmsg());
            return false;
        }
        g->p.n_prompt = n;
    } else if (json_is_array(prompt) && json_array_size(prompt)) {
        size_t n = json_array_size(prompt);
        if (!(g->prompt = calloc(n, sizeof(int32_t)))) { snprintf(err, errn, "out of memory"); return false; }
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(prompt, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
                snprintf(err, errn, "'prompt' must be a string or a list of token ids");
                return false;
            }
            g->prompt[i] = (int32_t)json_integer_value(v);
        }
        g->p.n_prompt = (int)n;
    } else {
        snprintf(err, errn, "'prompt' must be a non-empty string or list of token ids");
        return false;
    }
    if (!g->p.n_prompt) { snprintf(err, errn, "the prompt is empty"); return false; }
    if (!sv->tm.tok) { snprintf(err, errn, "this model has no tokenizer to turn generated ids into text"); return false; }
    if (g->logprobs) { /* text_offset counts characters from the prompt's start */
        mx_buf t = {0};
        if (json_is_string(prompt)) mx_buf_append(&t, json_string_value(prompt), json_string_length(prompt));
        else mx_tok_decode(sv->tm.tok, g->prompt, g->p.n_prompt, false, &t);
        for (size_t i = 0; i < t.len; i++) g->text_offset += ((unsigned char)t.data[i] & 0xc0) != 0x80;
        mx_buf_free(&t);
    }
    return mx_gen_parse_grammar(sv, req, g, err, errn);
}

int mx_route_completions(server *sv, mx_srv_req *rq, json_t *req) {
    char err[1024] = "";
    mx_gen_params g = {0};
    if (!mx_completion_parse(sv, req, &g, err, sizeof err)) {
        mx_gen_params_free(&g);
        return mx_srv_bad_request(sv, rq, "%s", err);
    }
    return mx_gen_run(sv, rq, &g, &mx_oai_completion_format);
}
