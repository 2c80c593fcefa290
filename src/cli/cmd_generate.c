/* mlxcel generate: one prompt in, tokens out (see README for the contract). */
#include "cli.h"
#include "args.h"
#include "../base/base.h"
#include "../dist/dist.h"
#include "../runtime/constrain.h"
#include "../runtime/generate.h"
#include "../runtime/outparse.h"
#include "../runtime/sampling_opts.h"
#include "../runtime/textmodel.h"
#include "../runtime/vlprompt.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *prompt, *prompt_file, *prompt_ids, *logits_out, *format, *system, *tmpl_name, *tmpl_file, *json_schema, *grammar, *audio;
    mx_strlist stops, images;
    int n_new, chunk, threads, ctx_size, tp, pp, pp_micro;
    bool ignore_eos, no_template, verbose;
    mx_sampling samp;
    cli_spec_opts spec;
    cli_kv_opts kv;
    bool fast;
    char *prompt_buf; /* -p - or -f FILE */
} gen_opts;

static void gen_init(void *p) {
    gen_opts *o = p;
    o->n_new = 64;
    o->chunk = 512;
    o->format = "text";
    o->threads = mx_default_threads();
    o->tp = o->pp = 1;
    o->spec.draft_max = CLI_SPEC_DEFAULT_MAX;
    mx_sampling_defaults(&o->samp);
}

int cli_spec_open(const char *cmd, const cli_spec_opts *o, const mx_textmodel *target, mx_textmodel *draft, mx_spec_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->draft_max = o->draft_max;
    if (o->draft_model && o->lookup_ngram) { fprintf(stderr, "mlxcel %s: give --draft-model or --lookup-ngram, not both\n", cmd); return 1; }
    if (o->lookup_ngram) { cfg->kind = MX_DRAFT_NGRAM; cfg->ngram = o->lookup_ngram; }
    if (!o->draft_model) return 0;
    char *dir = cli_model_dir(cmd, o->draft_model);
    if (!dir) return 1;
    int rc = mx_textmodel_open_local(dir, draft); /* whole, on rank 0 alone in a distributed run */
    free(dir);
    if (rc) { fprintf(stderr, "mlxcel %s: draft model: %s\n", cmd, mx_errmsg()); return 1; }
    if (mx_spec_check_vocab(target, draft)) {
        fprintf(stderr, "mlxcel %s: %s\n", cmd, mx_errmsg());
        mx_textmodel_close(draft);
        return 1;
    }
    cfg->kind = draft->e.model.arch.mtp.on ? MX_DRAFT_MTP : MX_DRAFT_MODEL; /* a next-n module (split-mtp) */
    cfg->draft = &draft->e;
    return 0;
}

static const mx_opt gen_tab[] = {
    OPT_MODEL(gen_opts, model),
    {"-p", "--prompt", NULL, OPT_STR, "TEXT", 0, 0, offsetof(gen_opts, prompt),
     "the prompt ('-' reads it from standard input); through the chat template when the model has one", NULL, 0},
    {"-f", "--file", NULL, OPT_STR, "FILE", 0, 0, offsetof(gen_opts, prompt_file), "read the prompt from FILE", NULL, 0},
    {NULL, "--prompt-ids", NULL, OPT_STR, "IDS", 0, 0, offsetof(gen_opts, prompt_ids), "the prompt as token ids: 1,2,3", NULL, 0},
    {"-n", "--max-tokens", "--n-predict", OPT_INT, "N", 0, 1 << 24, offsetof(gen_opts, n_new), "generate at most N tokens", NULL, 0},
    {NULL, "--system-prompt", "--system", OPT_STR, "TEXT", 0, 0, offsetof(gen_opts, system), "a system message (needs a chat template)", NULL, 0},
    {NULL, "--ignore-chat-template", "--no-chat-template", OPT_FLAG, NULL, 0, 0, offsetof(gen_opts, no_template),
     "feed -p as raw text even when the model has a chat template", NULL, 0},
    OPT_TEMPLATES(gen_opts, tmpl_name, tmpl_file),
    {NULL, "--stop", NULL, OPT_LIST, "STR", 0, 0, offsetof(gen_opts, stops), "stop before STR (repeatable, at most 16)", NULL, 0},
    {NULL, "--image", NULL, OPT_LIST, "FILE", 0, 0, offsetof(gen_opts, images),
     "an image (PNG, JPEG, WebP) for a vision-language model (repeatable); -p TEXT's image placeholders take them in order, "
     "or they go first", NULL, 0},
    {NULL, "--ignore-eos", NULL, OPT_FLAG, NULL, 0, 0, offsetof(gen_opts, ignore_eos), "go on past the end-of-sequence token", NULL, 0},
    {NULL, "--json-schema", NULL, OPT_STR, "FILE", 0, 0, offsetof(gen_opts, json_schema),
     "constrain the output to JSON valid against the JSON Schema in FILE (see Structured output)", NULL, 0},
    {NULL, "--grammar", "--grammar-file", OPT_STR, "FILE", 0, 0, offsetof(gen_opts, grammar),
     "constrain the output to the GBNF grammar in FILE (llama.cpp's format)", NULL, 0},
    {"-c", "--ctx-size", NULL, OPT_INT, "N", 1, 1 << 24, offsetof(gen_opts, ctx_size), "context size (default: prompt + -n)", NULL, 0},
    {NULL, "--prefill-chunk", NULL, OPT_INT, "K", 1, 1 << 16, offsetof(gen_opts, chunk),
     "prompt tokens per forward pass (1 walks the prompt through the decode path)", NULL, 0},
    OPT_THREADS(gen_opts, threads),
    {NULL, "--output-format", NULL, OPT_CHOICE, NULL, 0, 0, offsetof(gen_opts, format),
     "json: one object on the last line with prompt_ids, generated_ids, text and timings", "text|json", 0},
    {NULL, "--logits-out", NULL, OPT_STR, "FILE", 0, 0, offsetof(gen_opts, logits_out),
     "write F32 logits [T, V] for every prompt position and step_logits [N, V] for every generated token (safetensors)", NULL, 0},
    {"-v", "--verbose", NULL, OPT_FLAG, NULL, 0, 0, offsetof(gen_opts, verbose), "print the time of each phase", NULL, 0},
    OPT_SPEC(gen_opts, spec),
    OPT_KV(gen_opts, kv),
    OPT_FAST(gen_opts, fast),
    {NULL, "--tp", NULL, OPT_INT, "T", 1, 4096, offsetof(gen_opts, tp),
     "tensor parallelism: split every attention's heads and MLP's width among T processes (under mpirun; see Distributed runs)", NULL, 0},
    {NULL, "--pp", NULL, OPT_INT, "P", 1, 4096, offsetof(gen_opts, pp),
     "pipeline parallelism: split the layers into P ranges, one per group of --tp processes (under mpirun)", NULL, 0},
    {NULL, "--pp-micro", NULL, OPT_INT, "N", 1, 64, offsetof(gen_opts, pp_micro), "micro-batches per pass under --pp: each stage computes one while the next stage takes the one before (default: --pp, twice as many for a pass of 256 tokens or more; 1: none)", NULL, 0},
    {NULL, "--audio", NULL, OPT_STR, "FILE", 0, 0, offsetof(gen_opts, audio),
     "a speech model (Whisper): encode FILE (one 30 s window) and run the decoder on --prompt-ids, without decoding rules", NULL, 0},
    {0},
};

static int gen_run(void *p);
const mx_cmd mx_cmd_generate = {
    .name = "generate",
    .summary = "generate text from a prompt or prompt ids",
    .usage = "-m MODEL (-p TEXT | -f FILE | --prompt-ids IDS) [options]",
    .details = "Greedy unless sampling options say otherwise. Without a chat template (a base model) the prompt is raw text; "
               "the statistics line goes to standard error after the text.",
    .opts = gen_tab,
    .size = sizeof(gen_opts),
    .init = gen_init,
    .samp_off = offsetof(gen_opts, samp),
    .run = gen_run,
    .loads_model = true,
};

/* Prompt ids from -p: through the chat template when the model has one. With
 * images (vp), the user message is [image parts..., text] and the
 * processor expands the placeholders the template wrote (or puts them first). */
static int generate(const gen_opts *go, const char *dir);
static int encode_prompt(const mx_textmodel *tm, const gen_opts *o, const mx_vlprompt *vp, int32_t **ids, int *n) {
    if (!tm->tok) return mx_set_err("%s has no tokenizer (tokenizer.json or tokenizer.model): use --prompt-ids", o->model);
    /* the model's template, or one the user named (the plain fallback too); else raw text */
    bool chat = !o->no_template && (tm->tmpl || o->tmpl_name || o->tmpl_file);
    if (!chat) {
        if (o->system && o->no_template) return mx_set_err("--system needs a chat template, and --no-chat-template turns it off");
        if (o->system) return mx_set_err("--system needs a chat template and %s has none: give --chat-template NAME or --chat-template-file F", o->model);
        if (vp) return mx_vlprompt_tokenize(vp, tm, o->prompt, false, ids, n);
        return mx_textmodel_encode(tm, o->prompt, strlen(o->prompt), true, ids, n);
    }
    json_t *msgs = json_array(), *content = json_string(o->prompt);
    if (vp && !mx_textmodel_plain_chat(tm)) {
        json_decref(content);
        content = json_array();
        for (int i = 0; i < vp->n; i++) json_array_append_new(content, json_pack("{s:s}", "type", "image"));
        json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", o->prompt));
    }
    if (o->system) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", o->system));
    json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "user", "content", content));
    json_t *ctx = json_pack("{s:o,s:b}", "messages", msgs, "add_generation_prompt", 1);
    mx_buf text = {0};
    int rc = mx_textmodel_render(tm, ctx, &text);
    if (!rc && vp) rc = mx_vlprompt_tokenize(vp, tm, text.data ? text.data : "", true, ids, n);
    else if (!rc) rc = mx_textmodel_encode_chat(tm, text.data ? text.data : "", text.len, ids, n);
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

/* -p - (standard input) and -f FILE */
static int read_prompt(gen_opts *o) {
    size_t len;
    if (o->prompt_file && o->prompt) { fprintf(stderr, "mlxcel generate: give -p or -f, not both\n"); return 2; }
    if (o->prompt_file) {
        if (mx_read_file(o->prompt_file, (size_t)1 << 30, &o->prompt_buf, &len)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); return 1; }
    } else if (o->prompt && !strcmp(o->prompt, "-")) {
        mx_buf b = {0};
        char chunk[65536];
        size_t r;
        while ((r = fread(chunk, 1, sizeof chunk, stdin)) > 0)
            if (mx_buf_append(&b, chunk, r)) { fprintf(stderr, "mlxcel generate: out of memory\n"); mx_buf_free(&b); return 1; }
        if (mx_buf_append(&b, "", 1)) { mx_buf_free(&b); return 1; }
        o->prompt_buf = b.data;
        len = b.len - 1;
    } else return 0;
    if (strlen(o->prompt_buf) != len) { fprintf(stderr, "mlxcel generate: the prompt holds a NUL byte\n"); return 2; }
    o->prompt = o->prompt_buf;
    return 0;
}

static int gen_run(void *p) {
    gen_opts *op = p, o = *op;
    if (!o.model) { fprintf(stderr, "mlxcel generate: -m MODEL is required\n"); return 2; }
    if (!o.prompt && !o.prompt_file && !o.prompt_ids) { fprintf(stderr, "mlxcel generate: give -p TEXT, -f FILE or --prompt-ids IDS\n"); return 2; }
    if ((o.prompt || o.prompt_file) && o.prompt_ids) { fprintf(stderr, "mlxcel generate: give either a prompt or --prompt-ids, not both\n"); return 2; }
    if (o.tmpl_name && o.tmpl_file) { fprintf(stderr, "mlxcel generate: give --chat-template or --chat-template-file, not both\n"); return 2; }
    if (o.json_schema && o.grammar) { fprintf(stderr, "mlxcel generate: give --json-schema or --grammar, not both\n"); return 2; }
    if (o.stops.n > 16) { fprintf(stderr, "mlxcel generate: at most 16 --stop strings\n"); return 2; }
    for (int i = 0; i < o.stops.n; i++)
        if (!o.stops.v[i][0]) { fprintf(stderr, "mlxcel generate: --stop needs a non-empty string\n"); return 2; }
    cli_fast_apply(o.fast);
    if (cli_kv_apply("generate", &o.kv)) return 2; /* the decoder's self-attention of --audio too */
    if (o.audio) { /* an encoder-decoder speech model: the raw model on the audio */
        if (o.spec.draft_model || o.spec.lookup_ngram) { fprintf(stderr, "mlxcel generate: --audio decodes without speculation\n"); return 2; }
        if (o.prompt || o.prompt_file || o.system || o.stops.n) { fprintf(stderr, "mlxcel generate: with --audio give the decoder prompt as --prompt-ids\n"); return 2; }
        if (o.images.n) { fprintf(stderr, "mlxcel generate: --audio and --image do not go together\n"); return 2; }
        char *dir = cli_model_dir("generate", o.model);
        if (!dir) return 1;
        int rc = cli_generate_audio(dir, o.audio, o.prompt_ids, o.n_new, o.chunk, o.threads, &o.samp, o.ignore_eos, o.logits_out, o.format);
        free(dir);
        return rc;
    }
    mx_dist_micro(o.pp_micro);
    if (mx_dist_start(o.tp, o.pp, o.threads)) {
        if (mx_dist_rank() == 0) fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        mx_dist_finish();
        return 2;
    }
    int prc = read_prompt(&o);
    if (prc) { mx_dist_finish(); return prc; }
    char *dir = cli_model_dir("generate", o.model);
    if (!dir) { free(o.prompt_buf); mx_dist_finish(); return 1; }
    int rc = generate(&o, dir);
    free(dir);
    free(o.prompt_buf);
    if (o.verbose) mx_dist_report(); /* -v: each process's messages, bytes and time in MPI */
    mx_dist_finish();
    return rc;
}

static int generate(const gen_opts *go, const char *dir) {
    gen_opts o = *go;
    o.model = dir;
    int32_t *ids = NULL;
    int T = 0;
    if (o.prompt_ids && !mx_parse_ids("generate", "--prompt-ids", o.prompt_ids, &ids, &T)) return 2;
    double t0 = mx_now();
    mx_textmodel tm;
    char what[256];
    if (mx_sampling_gencfg(&o.samp, o.model, what, sizeof what)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); free(ids); return 1; }
    if (*what && o.verbose && mx_dist_rank() == 0) fprintf(stderr, "mlxcel generate: sampling defaults from generation_config.json: %s\n", what);
    if (mx_textmodel_open(o.model, &tm)) {
        if (mx_dist_rank() == 0) fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        free(ids);
        return 1;
    }
    if (mx_dist_rank() != 0) { /* a distributed run: rank 0 drives, this process serves its part of each pass */
        int rc = mx_dist_worker(&tm.e.model) ? 1 : 0;
        free(ids);
        mx_textmodel_close(&tm);
        return rc;
    }
    cli_kv_note("generate", &tm.e.model);
    if ((o.tmpl_name || o.tmpl_file) && mx_textmodel_set_template(&tm, o.tmpl_name, o.tmpl_file)) {
        fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        free(ids);
        mx_textmodel_close(&tm);
        return 1;
    }
    mx_engine *e = &tm.e;
    mx_textmodel dtm;
    mx_spec_cfg sc;
    if ((o.json_schema || o.grammar) && (o.spec.draft_model || o.spec.lookup_ngram)) {
        fprintf(stderr, "mlxcel generate: --json-schema / --grammar with a drafter (--draft-model, --lookup-ngram) is not supported\n");
        free(ids);
        mx_textmodel_close(&tm);
        return 2;
    }
    if (o.images.n && (o.spec.draft_model || o.spec.lookup_ngram)) {
        fprintf(stderr, "mlxcel generate: --image with a drafter (--draft-model, --lookup-ngram) is not supported\n");
        free(ids);
        mx_textmodel_close(&tm);
        return 2;
    }
    if (cli_spec_open("generate", &o.spec, &tm, &dtm, &sc)) { free(ids); mx_textmodel_close(&tm); return 1; }
    bool spec = sc.kind != 0;
    mx_spec sp = {0};
    int32_t *sbuf = NULL; /* a round's tokens, emitted one by one */
    int np = 0, ip = 0;
    double t_load = mx_now() - t0, t_enc0 = mx_now();
    mx_vlprompt vp = {0};
    double t_image = 0, t_img0 = mx_now(); /* decode, preprocess, tower + projector */
    if (o.images.n > MX_VLPROMPT_MAX_IMAGES) {
        fprintf(stderr, "mlxcel generate: at most %d --image files\n", MX_VLPROMPT_MAX_IMAGES);
        free(ids);
        mx_textmodel_close(&tm);
        return 2;
    }
    for (int i = 0; i < o.images.n; i++) {
        char *data;
        size_t len;
        if (mx_read_file(o.images.v[i], MX_IMAGE_MAX_FILE_BYTES, &data, &len) || mx_vlprompt_add(&vp, e, data, len, 0, o.images.v[i])) {
            free(data);
            fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
            mx_vlprompt_free(&vp);
            free(ids);
            mx_textmodel_close(&tm);
            return 1;
        }
        free(data);
    }
    t_image = mx_now() - t_img0;
    double t_img_dec = t_image; /* within the tokenizing phase's time */
    if (o.prompt && encode_prompt(&tm, &o, o.images.n ? &vp : NULL, &ids, &T)) {
        fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        mx_vlprompt_free(&vp);
        if (sc.draft) mx_textmodel_close(&dtm); /* a draft model or a next-n module */
        mx_textmodel_close(&tm);
        return 1;
    }
    if (T == 0) {
        fprintf(stderr, "mlxcel generate: the prompt is empty\n");
        free(ids);
        mx_vlprompt_free(&vp);
        if (sc.draft) mx_textmodel_close(&dtm); /* a draft model or a next-n module */
        mx_textmodel_close(&tm);
        return 2;
    }
    double t_encode = mx_now() - t_enc0, t_init0 = 0, t_init = 0;
    int V = e->model.arch.vocab, rc = 1;
    /* the output constraint (--json-schema / --grammar) */
    mx_gvocab *gv = NULL;
    mx_grammar *gram = NULL;
    mx_constraint con = {0};
    if ((o.json_schema || o.grammar) &&
        (!(gv = mx_textmodel_gvocab(&tm)) || !(gram = mx_grammar_load_file(gv, o.json_schema, o.grammar)) || mx_constraint_init(&con, gram, V))) {
        /* a grammar or schema refused (an error, a limit) is bad input: 2, as a bad option */
        int rc = gv ? 2 : 1;
        fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        mx_grammar_unref(gram);
        mx_gvocab_free(gv);
        free(ids);
        mx_vlprompt_free(&vp);
        if (sc.draft) mx_textmodel_close(&dtm); /* a draft model or a next-n module */
        mx_textmodel_close(&tm);
        return rc;
    }
    int ctx = o.ctx_size ? o.ctx_size : T + o.n_new;
    mx_pool *pool = mx_pool_new(o.threads);
    mx_session s;
    mx_sampler *smp = NULL;
    float *plog = NULL, *slog = NULL, *last = NULL;
    int32_t *gen = malloc(sizeof(int32_t) * (size_t)(o.n_new ? o.n_new : 1));
    int ng = 0;
    mx_detok *dt = tm.tok ? mx_detok_new(tm.tok, true) : NULL;
    mx_outparse op;
    mx_out_init(&op, false, false, false, o.stops.v, o.stops.n);
    mx_buf all = {0}, piece = {0}, vis = {0}, unused = {0};
    if (T + o.n_new > ctx) {
        fprintf(stderr, "mlxcel generate: prompt (%d tokens) + %d new tokens exceed the context size %d\n", T, o.n_new, ctx);
        goto out_engine;
    }
    t_init0 = mx_now();
    if (mx_session_init_batch(&s, e, ctx, o.chunk, spec ? sc.draft_max + 1 : o.chunk, pool)) {
        fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        goto out_engine;
    }
    smp = mx_sampler_new(&o.samp, V);
    if (spec && smp && (!(sbuf = malloc(sizeof(int32_t) * (size_t)(sc.draft_max + 1))) || mx_spec_init(&sp, &s, smp, &o.samp, &sc))) {
        fprintf(stderr, "mlxcel generate: %s\n", sbuf ? mx_errmsg() : "out of memory");
        goto out;
    }
    last = malloc(sizeof(float) * V);
    if (o.logits_out) {
        plog = malloc(sizeof(float) * (size_t)T * V);
        slog = malloc(sizeof(float) * (size_t)(o.n_new ? o.n_new : 1) * V);
    }
    if (!smp || !last || !gen || (o.logits_out && (!plog || !slog))) { fprintf(stderr, "mlxcel generate: out of memory\n"); goto out; }
    t_init = mx_now() - t_init0;
    if (o.images.n) {
        double t = mx_now();
        if (mx_vlprompt_prepare(&vp, e, ids, T, pool)) {
            fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
            goto out;
        }
        t_image += mx_now() - t;
    }
    double t1 = mx_now();
    if (o.images.n) { /* the images' rows at their tokens */
        if (mx_session_feed_images(&s, ids, T, &vp.lay, vp.rows, mx_vision_spec(e->vision)->rows_scaled, plog, last)) {
            fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
            goto out;
        }
    } else if (mx_session_feed(&s, ids, T, plog, last)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
    double t_prefill = mx_now() - t1, t2 = mx_now();
    bool text = !strcmp(o.format, "text");
    for (ng = 0; ng < o.n_new;) {
        int32_t tok;
        if (ip < np) { /* the rest of a speculative round */
            if (slog) memcpy(slog + (size_t)ng * V, sp.rows + (size_t)ip * V, sizeof(float) * V);
            tok = sbuf[ip++];
        } else {
            if (slog) memcpy(slog + (size_t)ng * V, last, sizeof(float) * V);
            if (con.m) {
                int allowed = mx_constraint_mask(&con, last);
                if (allowed < 0) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
                if (!allowed) break; /* the grammar is complete and the model has no end token */
            }
            tok = mx_sampler_sample(smp, last, s.history, s.n_history);
            if (con.m && mx_constraint_accept(&con, tok)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
        }
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
        if (eos || ng == o.n_new || (con.m && mx_constraint_done(&con))) break;
        if (spec) {
            if (ip == np) { /* the round is out: pass its last token to the next */
                if ((np = mx_spec_step(&sp, tok, o.n_new - ng, sbuf)) < 0) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
                ip = 0;
            }
        } else if (mx_session_feed(&s, &tok, 1, NULL, last)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto out; }
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
        printf(":{\"load_ms\":%.3f,\"image_ms\":%.3f,\"prefill_ms\":%.3f,\"decode_ms\":%.3f,\"prompt_tps\":%.3f,\"gen_tps\":%.3f}",
               t_load * 1e3, t_image * 1e3, t_prefill * 1e3, t_decode * 1e3, T / (t_prefill > 0 ? t_prefill : 1e-9),
               ng > 1 ? (ng - 1) / (t_decode > 0 ? t_decode : 1e-9) : 0.0);
        if (spec) printf(",\"speculative\":{\"rounds\":%ld,\"drafted\":%ld,\"accepted\":%ld}", sp.rounds, sp.drafted, sp.accepted);
        printf("}\n");
    } else {
        fflush(stdout); /* the text before the statistics, also when both go to one file */
        fprintf(stderr, "prompt: %d tokens, %.1f t/s | generation: %d tokens, %.1f t/s\n", T, T / (t_prefill > 0 ? t_prefill : 1e-9), ng,
                ng > 1 ? (ng - 1) / (t_decode > 0 ? t_decode : 1e-9) : 0.0);
        if (spec)
            fprintf(stderr, "speculative: %ld verification passes, %ld of %ld drafted tokens accepted (%.1f%%)\n", sp.rounds, sp.accepted,
                    sp.drafted, sp.drafted ? 100.0 * sp.accepted / sp.drafted : 0.0);
    }
    if (o.verbose) {
        char kvd[160];
        cli_kv_describe(s.kv, kvd, sizeof kvd);
        fprintf(stderr, "%s\n", kvd);
    }
    if (o.verbose)
        fprintf(stderr, "timings: load %.1f ms | images %.1f ms | template + tokenize %.2f ms | cache %.2f ms | prefill %.1f ms "
                        "(%d tokens, %.2f ms each) | decode %.1f ms (%d tokens, %.2f ms each)\n",
                t_load * 1e3, t_image * 1e3, (t_encode - t_img_dec) * 1e3, t_init * 1e3, t_prefill * 1e3, T, t_prefill * 1e3 / T, t_decode * 1e3, ng,
                ng ? t_decode * 1e3 / ng : 0.0);
    rc = 0;
out:
    if (spec) mx_spec_free(&sp);
    mx_session_free(&s);
out_engine:
    free(sbuf);
    if (sc.draft) mx_textmodel_close(&dtm); /* a draft model or a next-n module */
    mx_detok_free(dt);
    mx_out_free(&op);
    mx_buf_free(&all); mx_buf_free(&piece); mx_buf_free(&vis); mx_buf_free(&unused);
    mx_sampler_free(smp);
    free(plog); free(slog); free(last); free(gen); free(ids);
    mx_vlprompt_free(&vp);
    mx_pool_free(pool);
    mx_constraint_free(&con);
    mx_grammar_unref(gram);
    mx_gvocab_free(gv);
    mx_textmodel_close(&tm);
    return rc;
}
