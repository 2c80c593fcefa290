#define _GNU_SOURCE
/* mlxcel chat (also mlxcel run): an interactive multi-turn chat. The KV cache
 * is kept between turns: each turn renders the whole conversation, and only
 * the tokens after the longest common prefix with the cache are prefilled. */
#include "cli.h"
#include "args.h"
#include "../base/base.h"
#include "../runtime/generate.h"
#include "../runtime/outparse.h"
#include "../runtime/textmodel.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_chat(int argc, char **argv) {
    const char *model = NULL, *system = NULL, *tmpl_name = NULL, *tmpl_file = NULL;
    int n_max = 1024, threads = mx_default_threads(), ctx = 4096;
    mx_sampling samp;
    mx_sampling_defaults(&samp);
    samp.temperature = 0.7f;
    samp.top_p = 0.95f;
    mx_args a = {"chat", argc, 1, argv};
    for (; a.i < argc; a.i++) {
        bool ok = true;
        if (mx_arg_is(&a, "-m", "--model")) ok = (model = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--system", NULL)) ok = (system = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-n", "--n-predict")) ok = mx_arg_int(&a, 1, 1 << 24, &n_max);
        else if (mx_arg_is(&a, "-t", "--threads")) ok = mx_arg_int(&a, 1, 1024, &threads);
        else if (mx_arg_is(&a, "-c", "--ctx-size")) ok = mx_arg_int(&a, 16, 1 << 24, &ctx);
        else if (mx_arg_is(&a, "--temp", "--temperature")) ok = mx_arg_float(&a, 0, 100, &samp.temperature);
        else if (mx_arg_is(&a, "--top-k", NULL)) ok = mx_arg_int(&a, 0, 1 << 24, &samp.top_k);
        else if (mx_arg_is(&a, "--top-p", NULL)) ok = mx_arg_float(&a, 0, 1, &samp.top_p);
        else if (mx_arg_is(&a, "--min-p", NULL)) ok = mx_arg_float(&a, 0, 1, &samp.min_p);
        else if (mx_arg_is(&a, "--seed", "-s")) ok = mx_arg_u64(&a, &samp.seed);
        else if (mx_arg_is(&a, "--chat-template", NULL)) ok = (tmpl_name = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--chat-template-file", NULL)) ok = (tmpl_file = mx_arg_val(&a)) != NULL;
        else return mx_arg_unknown(&a);
        if (!ok) return 2;
    }
    if (!model) { fprintf(stderr, "mlxcel chat: -m DIR is required\n"); return 2; }
    if (tmpl_name && tmpl_file) { fprintf(stderr, "mlxcel chat: give --chat-template or --chat-template-file, not both\n"); return 2; }
    mx_textmodel tm;
    if (mx_textmodel_open(model, &tm)) { fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg()); return 1; }
    if (!tm.tok) { fprintf(stderr, "mlxcel chat: %s has no tokenizer (tokenizer.json or tokenizer.model)\n", model); mx_textmodel_close(&tm); return 1; }
    if ((tmpl_name || tmpl_file) && mx_textmodel_set_template(&tm, tmpl_name, tmpl_file)) {
        fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
        mx_textmodel_close(&tm);
        return 1;
    }
    mx_textmodel_warn_plain(&tm, "mlxcel chat");
    /* the plain format's next turn marks the end of a reply */
    const char *plain_stop[] = {mx_textmodel_plain_stop};
    bool plain = mx_textmodel_plain_chat(&tm);
    mx_pool *pool = mx_pool_new(threads);
    mx_session s;
    int V = tm.e.model.arch.vocab, rc = 1;
    float *last = malloc(sizeof(float) * V);
    mx_sampler *smp = mx_sampler_new(&samp, V);
    json_t *msgs = json_array();
    if (system) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system));
    if (!last || !smp || mx_session_init(&s, &tm.e, ctx, 512, pool)) { fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg()); goto out_nosess; }
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        fprintf(stderr, "> ");
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0) break;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!len) continue;
        json_array_append_new(msgs, json_pack("{s:s,s:s%}", "role", "user", "content", line, (size_t)len));
        json_t *c = json_pack("{s:O,s:b}", "messages", msgs, "add_generation_prompt", 1);
        mx_buf text = {0};
        int32_t *ids = NULL;
        int n = 0;
        if (mx_textmodel_render(&tm, c, &text) || mx_textmodel_encode_chat(&tm, text.data ? text.data : "", text.len, &ids, &n)) {
            fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
            json_decref(c);
            mx_buf_free(&text);
            goto out;
        }
        json_decref(c);
        mx_buf_free(&text);
        int keep = 0;
        while (keep < n - 1 && keep < s.n_history && s.history[keep] == ids[keep]) keep++;
        mx_session_truncate(&s, keep);
        keep = s.n_history; /* a recurrent model restarts from 0 */
        if (n + n_max > ctx) { fprintf(stderr, "mlxcel chat: the conversation no longer fits the context (%d tokens)\n", ctx); free(ids); break; }
        if (mx_session_feed(&s, ids + keep, n - keep, NULL, last)) { fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg()); free(ids); goto out; }
        free(ids);
        mx_detok *dt = mx_detok_new(tm.tok, true);
        mx_outparse op;
        mx_out_init(&op, false, false, false, plain ? plain_stop : NULL, plain ? 1 : 0);
        mx_buf reply = {0}, piece = {0}, vis = {0}, unused = {0};
        for (int i = 0; i < n_max; i++) {
            int32_t tok = mx_sampler_sample(smp, last, s.history, s.n_history);
            if (mx_textmodel_is_eos(&tm, tok)) break;
            piece.len = vis.len = 0;
            mx_detok_push(dt, tok, &piece);
            bool stop = piece.len && mx_out_push(&op, piece.data, piece.len, &vis, &unused);
            if (vis.len) fwrite(vis.data, 1, vis.len, stdout);
            fflush(stdout);
            mx_buf_append(&reply, vis.data, vis.len);
            if (stop) break;
            if (mx_session_feed(&s, &tok, 1, NULL, last)) { fprintf(stderr, "\nmlxcel chat: %s\n", mx_errmsg()); break; }
        }
        if (!op.stopped) {
            piece.len = vis.len = 0;
            mx_detok_flush(dt, &piece);
            if (piece.len) mx_out_push(&op, piece.data, piece.len, &vis, &unused);
            json_t *calls = NULL;
            mx_out_finish(&op, &vis, &unused, &calls);
            json_decref(calls);
            if (vis.len) fwrite(vis.data, 1, vis.len, stdout);
            mx_buf_append(&reply, vis.data, vis.len);
        }
        printf("\n");
        mx_out_free(&op);
        mx_buf_free(&vis);
        mx_buf_free(&unused);
        mx_detok_free(dt);
        /* the plain format writes "Assistant: " itself: keep the reply without the space the model put after the colon */
        size_t skip = 0;
        while (plain && skip < reply.len && reply.data[skip] == ' ') skip++;
        json_array_append_new(msgs, json_pack("{s:s,s:s%}", "role", "assistant", "content", reply.data ? reply.data + skip : "", reply.len - skip));
        mx_buf_free(&reply);
        mx_buf_free(&piece);
    }
    rc = 0;
out:
    free(line);
    mx_session_free(&s);
out_nosess:
    json_decref(msgs);
    mx_sampler_free(smp);
    free(last);
    mx_pool_free(pool);
    mx_textmodel_close(&tm);
    return rc;
}
