/* mlxcel generate: one prompt in, tokens out (see README for the contract). */
#include "cli.h"
#include "args.h"
#include "../base/base.h"
#include "../runtime/generate.h"
#include "../runtime/outparse.h"
#include "../runtime/textmodel.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STOPS 16
typedef struct {
    const char *model, *prompt, *prompt_ids, *logits_out, *format, *system, *tmpl_name, *tmpl_file;
    const char *stops[MAX_STOPS];
    int n_stops;
    int n_new, chunk, threads, ctx_size;
    bool ignore_eos, no_template;
    mx_sampling samp;
} gen_opts;

/* Prompt ids from -p: through the chat template when the model has one. */
static int encode_prompt(const mx_textmodel *tm, const gen_opts *o, int32_t **ids, int *n) {
    if (!tm->tok) return mx_set_err("%s has no tokenizer (tokenizer.json or tokenizer.model): use --prompt-ids", o->model);
    /* the model's template, or one the user named (the plain fallback too); else raw text */
    bool chat = !o->no_template && (tm->tmpl || o->tmpl_name || o->tmpl_file);
    if (!chat) {
        if (o->system && o->no_template) return mx_set_err("--system needs a chat template, and --no-chat-template turns it off");
        if (o->system) return mx_set_err("--system needs a chat template and %s has none: give --chat-template NAME or --chat-template-file F", o->model);
        return mx_textmodel_encode(tm, o->prompt, strlen(o->prompt), true, ids, n);
    }
    json_t *msgs = json_array();
    if (o->system) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", o->system));
    json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", o->prompt));
    json_t *ctx = json_pack("{s:o,s:b}", "messages", msgs, "add_generation_prompt", 1);
    mx_buf text = {0};
    int rc = mx_textmodel_render(tm, ctx, &text);
    if (!rc) rc = mx_textmodel_encode_chat(tm, text.data ? text.data : "", text.len, ids, n);
    json_decref(ctx);
    mx_buf_free(&text);
    return rc;
}

static int write_logits(const char *path, const float *prompt, int T, const float *steps, int N, int V) {
    mx_st_out ts[2] = {
        {"logits", MX_DT_F32, 2, {T, V}, prompt, (size_t)T * V * 4},
        {"step_logits", MX_DT_F32, 2, {N, V}, steps, (size_t)N * V * 4},
    };
    return mx_st_write(path, ts, 2, "{\"format\":\"pt\"}");
}

static void print_ids(FILE *f, const int32_t *ids, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
    fputc(']', f);
}

int cmd_generate(int argc, char **argv) {
    gen_opts o = {.n_new = 64, .chunk = 512, .format = "text"};
    mx_sampling_defaults(&o.samp);
    o.threads = mx_default_threads();
    mx_args a = {"generate", argc, 1, argv};
    for (; a.i < argc; a.i++) {
        bool ok = true;
        if (mx_arg_is(&a, "-m", "--model")) ok = (o.model = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-p", "--prompt")) ok = (o.prompt = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--prompt-ids", NULL)) ok = (o.prompt_ids = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-n", "--n-predict")) ok = mx_arg_int(&a, 0, 1 << 24, &o.n_new);
        else if (mx_arg_is(&a, "-t", "--threads")) ok = mx_arg_int(&a, 1, 1024, &o.threads);
        else if (mx_arg_is(&a, "-c", "--ctx-size")) ok = mx_arg_int(&a, 1, 1 << 24, &o.ctx_size);
        else if (mx_arg_is(&a, "--prefill-chunk", NULL)) ok = mx_arg_int(&a, 1, 1 << 16, &o.chunk);
        else if (mx_arg_is(&a, "--temp", "--temperature")) ok = mx_arg_float(&a, 0, 100, &o.samp.temperature);
        else if (mx_arg_is(&a, "--top-k", NULL)) ok = mx_arg_int(&a, 0, 1 << 24, &o.samp.top_k);
        else if (mx_arg_is(&a, "--top-p", NULL)) ok = mx_arg_float(&a, 0, 1, &o.samp.top_p);
        else if (mx_arg_is(&a, "--min-p", NULL)) ok = mx_arg_float(&a, 0, 1, &o.samp.min_p);
        else if (mx_arg_is(&a, "--repeat-penalty", "--repetition-penalty")) ok = mx_arg_float(&a, 0.01, 100, &o.samp.repetition_penalty);
        else if (mx_arg_is(&a, "--presence-penalty", NULL)) ok = mx_arg_float(&a, -100, 100, &o.samp.presence_penalty);
        else if (mx_arg_is(&a, "--frequency-penalty", NULL)) ok = mx_arg_float(&a, -100, 100, &o.samp.frequency_penalty);
        else if (mx_arg_is(&a, "--repeat-last-n", NULL)) ok = mx_arg_int(&a, -1, 1 << 24, &o.samp.penalty_last_n);
        else if (mx_arg_is(&a, "--seed", "-s")) ok = mx_arg_u64(&a, &o.samp.seed);
        else if (mx_arg_is(&a, "--ignore-eos", NULL)) o.ignore_eos = true;
        else if (mx_arg_is(&a, "--no-chat-template", NULL)) o.no_template = true;
        else if (mx_arg_is(&a, "--system", NULL)) ok = (o.system = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--chat-template", NULL)) ok = (o.tmpl_name = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--chat-template-file", NULL)) ok = (o.tmpl_file = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--stop", NULL)) {
            if (o.n_stops == MAX_STOPS) { fprintf(stderr, "mlxcel generate: at most %d --stop strings\n", MAX_STOPS); return 2; }
            ok = (o.stops[o.n_stops] = mx_arg_val(&a)) != NULL;
            if (ok && !o.stops[o.n_stops][0]) { fprintf(stderr, "mlxcel generate: --stop needs a non-empty string\n"); return 2; }
            o.n_stops++;
        }
        else if (mx_arg_is(&a, "--logits-out", NULL)) ok = (o.logits_out = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--output-format", NULL)) {
            ok = (o.format = mx_arg_val(&a)) != NULL;
            if (ok && strcmp(o.format, "text") && strcmp(o.format, "json")) {
                fprintf(stderr, "mlxcel generate: --output-format must be text or json\n");
                return 2;
            }
        } else return mx_arg_unknown(&a);
        if (!ok) return 2;
    }
    if (!o.model) { fprintf(stderr, "mlxcel generate: -m DIR is required\n"); return 2; }
    if (!o.prompt && !o.prompt_ids) { fprintf(stderr, "mlxcel generate: give -p TEXT or --prompt-ids IDS\n"); return 2; }
    if (o.prompt && o.prompt_ids) { fprintf(stderr, "mlxcel generate: give either -p or --prompt-ids, not both\n"); return 2; }
    if (o.tmpl_name && o.tmpl_file) { fprintf(stderr, "mlxcel generate: give --chat-template or --chat-template-file, not both\n"); return 2; }
    int32_t *ids = NULL;
    int T = 0;
    if (o.prompt_ids && !mx_parse_ids("generate", "--prompt-ids", o.prompt_ids, &ids, &T)) return 2;
    double t0 = mx_now();
    mx_textmodel tm;
    if (mx_textmodel_open(o.model, &tm)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); free(ids); return 1; }
    if ((o.tmpl_name || o.tmpl_file) && mx_textmodel_set_template(&tm, o.tmpl_name, o.tmpl_file)) {
        fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        free(ids);
        mx_textmodel_close(&tm);
        return 1;
    }
    mx_engine *e = &tm.e;
    double t_load = mx_now() - t0;
    if (o.prompt && encode_prompt(&tm, &o, &ids, &T)) {
        fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        mx_textmodel_close(&tm);
        return 1;
    }
    if (T == 0) { fprintf(stderr, "mlxcel generate: the prompt is empty\n"); free(ids); mx_textmodel_close(&tm); return 2; }
    int V = e->model.arch.vocab, rc = 1;
    int ctx = o.ctx_size ? o.ctx_size : T + o.n_new;
    mx_pool *pool = mx_pool_new(o.threads);
    mx_session s;
    mx_sampler *smp = NULL;
    float *plog = NULL, *slog = NULL, *last = NULL;
    int32_t *gen = malloc(sizeof(int32_t) * (size_t)(o.n_new ? o.n_new : 1));
    int ng = 0;
    mx_detok *dt = tm.tok ? mx_detok_new(tm.tok, true) : NULL;
    mx_outparse op;
    mx_out_init(&op, false, false, false, o.stops, o.n_stops);
    mx_buf all = {0}, piece = {0}, vis = {0}, unused = {0};
    if (T + o.n_new > ctx) {
        fprintf(stderr, "mlxcel generate: prompt (%d tokens) + %d new tokens exceed the context size %d\n", T, o.n_new, ctx);
        goto out_engine;
    }
    if (mx_session_init(&s, e, ctx, o.chunk, pool)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out_engine; }
    smp = mx_sampler_new(&o.samp, V);
    last = malloc(sizeof(float) * V);
    if (o.logits_out) {
        plog = malloc(sizeof(float) * (size_t)T * V);
        slog = malloc(sizeof(float) * (size_t)(o.n_new ? o.n_new : 1) * V);
    }
    if (!smp || !last || !gen || (o.logits_out && (!plog || !slog))) { fprintf(stderr, "mlxcel generate: out of memory\n"); goto out; }
    double t1 = mx_now();
    if (mx_session_feed(&s, ids, T, plog, last)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
    double t_prefill = mx_now() - t1, t2 = mx_now();
    bool text = !strcmp(o.format, "text");
    for (ng = 0; ng < o.n_new;) {
        if (slog) memcpy(slog + (size_t)ng * V, last, sizeof(float) * V);
        int32_t tok = mx_sampler_sample(smp, last, s.history, s.n_history);
        gen[ng++] = tok;
        bool eos = !o.ignore_eos && mx_textmodel_is_eos(&tm, tok);
        if (dt && !eos) {
            piece.len = vis.len = 0;
            mx_detok_push(dt, tok, &piece);
            bool stop = piece.len && mx_out_push(&op, piece.data, piece.len, &vis, &unused);
            mx_buf_append(&all, vis.data, vis.len);
            if (text && vis.len) { fwrite(vis.data, 1, vis.len, stdout); fflush(stdout); }
            if (stop) break;
        } else if (!dt && text) { printf("%s%d", ng > 1 ? " " : "", tok); fflush(stdout); }
        if (eos || ng == o.n_new) break;
        if (mx_session_feed(&s, &tok, 1, NULL, last)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
    }
    if (dt && !op.stopped) {
        piece.len = vis.len = 0;
        mx_detok_flush(dt, &piece);
        if (piece.len) mx_out_push(&op, piece.data, piece.len, &vis, &unused);
        json_t *calls = NULL;
        mx_out_finish(&op, &vis, &unused, &calls);
        json_decref(calls);
        mx_buf_append(&all, vis.data, vis.len);
        if (text && vis.len) fwrite(vis.data, 1, vis.len, stdout);
    }
    double t_decode = mx_now() - t2;
    if (text) printf("\n");
    if (o.logits_out && write_logits(o.logits_out, plog, T, slog, ng, V)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
    if (!text) {
        printf("{\"prompt_ids\":");
        print_ids(stdout, ids, T);
        printf(",\"generated_ids\":");
        print_ids(stdout, gen, ng);
        json_t *jt = json_stringn(all.data ? all.data : "", all.len);
        char *ts = jt ? json_dumps(jt, JSON_ENCODE_ANY) : NULL;
        printf(",\"text\":%s,\"timings\"", ts ? ts : "\"\"");
        free(ts);
        json_decref(jt);
        printf(":{\"load_ms\":%.3f,\"prefill_ms\":%.3f,\"decode_ms\":%.3f,\"prompt_tps\":%.3f,\"gen_tps\":%.3f}}\n",
               t_load * 1e3, t_prefill * 1e3, t_decode * 1e3, T / (t_prefill > 0 ? t_prefill : 1e-9),
               ng > 1 ? (ng - 1) / (t_decode > 0 ? t_decode : 1e-9) : 0.0);
    } else {
        fprintf(stderr, "prompt: %d tokens, %.1f t/s | generation: %d tokens, %.1f t/s\n", T, T / (t_prefill > 0 ? t_prefill : 1e-9), ng,
                ng > 1 ? (ng - 1) / (t_decode > 0 ? t_decode : 1e-9) : 0.0);
    }
    rc = 0;
out:
    mx_session_free(&s);
out_engine:
    mx_detok_free(dt);
    mx_out_free(&op);
    mx_buf_free(&all); mx_buf_free(&piece); mx_buf_free(&vis); mx_buf_free(&unused);
    mx_sampler_free(smp);
    free(plog); free(slog); free(last); free(gen); free(ids);
    mx_pool_free(pool);
    mx_textmodel_close(&tm);
    return rc;
}
