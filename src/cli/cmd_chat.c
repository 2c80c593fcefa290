#define _GNU_SOURCE
/* mlxcel chat (also mlxcel run): an interactive multi-turn chat. The KV cache
 * is kept between turns: each turn renders the whole conversation, and only
 * the tokens after the longest common prefix with the cache are prefilled.
 * Ctrl-C stops a reply (the chat goes on); when the conversation outgrows
 * the context the oldest turns are dropped, with a notice. Under mpirun with
 * --tp / --pp, rank 0 owns the terminal and the other ranks serve their part
 * of each pass until rank 0 ends the session (src/dist/). */
#include "cli.h"
#include "../base/base.h"
#include "../dist/dist.h"
#include "../runtime/constrain.h"
#include "../runtime/generate.h"
#include "../runtime/outparse.h"
#include "../runtime/sampling_opts.h"
#include "../runtime/spec.h"
#include "../runtime/textmodel.h"
#include "../runtime/vlprompt.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *system, *tmpl_name, *tmpl_file, *json_schema, *grammar;
    int n_max, threads, ctx, tp, pp, pp_micro;
    bool verbose;
    mx_sampling samp;
    cli_kv_opts kv;
    cli_spec_opts spec;
    bool fast;
} chat_opts;

static void chat_init(void *p) {
    chat_opts *o = p;
    o->n_max = 1024;
    o->ctx = 4096;
    o->threads = mx_default_threads();
    o->tp = o->pp = 1;
    o->spec.draft_max = CLI_SPEC_DEFAULT_MAX;
    mx_sampling_defaults(&o->samp);
    o->samp.temperature = 0.7f;
    o->samp.top_p = 0.95f;
}

static const mx_opt chat_tab[] = {
    OPT_MODEL(chat_opts, model),
    {NULL, "--system-prompt", "--system", OPT_STR, "TEXT", 0, 0, offsetof(chat_opts, system), "the system message", NULL, 0},
    {"-n", "--max-tokens", "--n-predict", OPT_INT, "N", 1, 1 << 24, offsetof(chat_opts, n_max), "at most N tokens per reply", NULL, 0},
    {"-c", "--ctx-size", NULL, OPT_INT, "N", 16, 1 << 24, offsetof(chat_opts, ctx),
     "context size; past it the oldest turns are dropped", NULL, 0},
    OPT_TEMPLATES(chat_opts, tmpl_name, tmpl_file),
    {NULL, "--json-schema", NULL, OPT_STR, "FILE", 0, 0, offsetof(chat_opts, json_schema),
     "every reply is JSON valid against the JSON Schema in FILE", NULL, 0},
    {NULL, "--grammar", "--grammar-file", OPT_STR, "FILE", 0, 0, offsetof(chat_opts, grammar),
     "every reply follows the GBNF grammar in FILE", NULL, 0},
    OPT_THREADS(chat_opts, threads),
    OPT_SPEC(chat_opts, spec),
    OPT_KV(chat_opts, kv),
    OPT_FAST(chat_opts, fast),
    {NULL, "--tp", NULL, OPT_INT, "T", 1, 4096, offsetof(chat_opts, tp),
     "tensor parallelism over T processes (under mpirun; rank 0 owns the terminal; see Distributed runs)", NULL, 0},
    {NULL, "--pp", NULL, OPT_INT, "P", 1, 4096, offsetof(chat_opts, pp),
     "pipeline parallelism: the layers in P ranges, one per group of --tp processes (under mpirun)", NULL, 0},
    {NULL, "--pp-micro", NULL, OPT_INT, "N", 1, 64, offsetof(chat_opts, pp_micro), "micro-batches per pass under --pp: each stage computes one while the next stage takes the one before (default: --pp, twice as many for a pass of 256 tokens or more; 1: none)", NULL, 0},
    {"-v", "--verbose", NULL, OPT_FLAG, NULL, 0, 0, offsetof(chat_opts, verbose), "print each turn's prefill and decode times", NULL, 0},
    {0},
};

static int chat_run(void *p);
const mx_cmd mx_cmd_chat = {
    .name = "chat",
    .alias = "run",
    .summary = "interactive multi-turn chat in the terminal",
    .usage = "-m MODEL [options]",
    .details = "Streams the reply; the KV cache is kept between turns, so a turn only prefills its new text. "
               "In the chat: /help, /clear (start over), /system [TEXT] (show or set the system prompt), "
               "/image PATH (an image for the next message, vision-language models), /exit; "
               "Ctrl-C stops a reply, Ctrl-D quits. A model without a chat template gets a plain User:/Assistant: format. "
               "Under mpirun with --tp / --pp, rank 0 owns the terminal (and runs the vision tower) and the other ranks end with it.",
    .opts = chat_tab,
    .size = sizeof(chat_opts),
    .init = chat_init,
    .samp_off = offsetof(chat_opts, samp),
    .run = chat_run,
    .loads_model = true,
};

static volatile sig_atomic_t g_interrupt;
static void on_sigint(int sig) {
    (void)sig;
    g_interrupt = 1;
}

static const char chat_help[] = "  /help           this list\n"
                                "  /clear          forget the conversation (the system prompt stays)\n"
                                "  /system [TEXT]  show the system prompt, or set it and start over\n"
                                "  /image PATH     attach an image (PNG, JPEG, WebP) to the next message\n"
                                "  /exit, /quit    leave (also Ctrl-D)\n"
                                "  Ctrl-C          stop the reply being written\n";

typedef struct {
    mx_textmodel tm;
    mx_session s;
    mx_sampler *smp;
    float *last;
    json_t *msgs; /* the conversation, system message first when there is one */
    mx_gvocab *gv;
    mx_grammar *gram; /* --json-schema / --grammar: each reply follows it */
    char *system;
    bool plain;
    const chat_opts *o;
    /* the conversation's images in order (a message's count in its "_images");
     * the last n_pending go with the next message */
    char **img;
    size_t *img_len;
    int n_img, n_pending;
    mx_vlprompt vp;
    /* speculative decoding (--draft-model, --lookup-ngram): rounds of sp, the current one's tokens in sbuf */
    mx_spec sp;
    bool spec;
    int32_t *sbuf;
} chat;

static void drop_images(chat *c, int n) {
    if (n <= 0) return;
    for (int i = 0; i < n && i < c->n_img; i++) free(c->img[i]);
    n = MX_MIN(n, c->n_img);
    memmove(c->img, c->img + n, sizeof(char *) * (size_t)(c->n_img - n));
    memmove(c->img_len, c->img_len + n, sizeof(size_t) * (size_t)(c->n_img - n));
    c->n_img -= n;
}

static void reset(chat *c) {
    drop_images(c, c->n_img);
    c->n_pending = 0;
    json_array_clear(c->msgs);
    if (c->system) json_array_append_new(c->msgs, json_pack("{s:s,s:s}", "role", "system", "content", c->system));
}

/* The oldest user turn and its replies (never the system message nor the last message). */
static bool drop_oldest(chat *c) {
    size_t first = c->system ? 1 : 0, n = json_array_size(c->msgs);
    if (n <= first + 1) return false;
    size_t end = first + 1;
    while (end < n - 1 && strcmp(json_string_value(json_object_get(json_array_get(c->msgs, end), "role")), "user")) end++;
    for (size_t i = first; i < end; i++) {
        drop_images(c, (int)json_integer_value(json_object_get(json_array_get(c->msgs, first), "_images")));
        json_array_remove(c->msgs, first);
    }
    return true;
}

/* The conversation's ids; with images, c->vp holds them prepared (rows of
 * images seen in earlier turns come from the engine's cache). */
static int render(chat *c, int32_t **ids, int *n, mx_pool *pool) {
    json_t *ctx = json_pack("{s:O,s:b}", "messages", c->msgs, "add_generation_prompt", 1);
    mx_buf text = {0};
    int rc = mx_textmodel_render(&c->tm, ctx, &text);
    mx_vlprompt_free(&c->vp);
    for (int i = 0; !rc && i < c->n_img; i++) rc = mx_vlprompt_add(&c->vp, &c->tm.e, c->img[i], c->img_len[i], 0, "image");
    if (!rc && c->n_img) {
        rc = mx_vlprompt_tokenize(&c->vp, &c->tm, text.data ? text.data : "", true, ids, n);
        if (!rc) rc = mx_vlprompt_prepare(&c->vp, &c->tm.e, *ids, *n, pool);
    } else if (!rc) rc = mx_textmodel_encode_chat(&c->tm, text.data ? text.data : "", text.len, ids, n);
    json_decref(ctx);
    mx_buf_free(&text);
    return rc;
}

/* One reply to the conversation in c->msgs (which ends with the user's turn). */
static int reply(chat *c, mx_pool *pool) {
    const chat_opts *o = c->o;
    int32_t *ids = NULL;
    int n = 0;
    int room = MX_MIN(o->n_max, o->ctx / 4); /* a reply gets at least this much of the context */
    for (;;) {
        if (render(c, &ids, &n, pool)) return MX_ERR;
        if (n + room <= o->ctx) break;
        free(ids);
        ids = NULL;
        if (!drop_oldest(c)) {
            fprintf(stderr, "[this message is too long for the context: %d tokens of %d; it was not sent]\n", n, o->ctx);
            size_t last = json_array_size(c->msgs) - 1;
            int k = (int)json_integer_value(json_object_get(json_array_get(c->msgs, last), "_images"));
            for (int i = c->n_img - k; i < c->n_img; i++) free(c->img[i]); /* its images go too */
            c->n_img -= k;
            json_array_remove(c->msgs, last);
            return MX_OK;
        }
        fprintf(stderr, "[context full (%d tokens): dropped the oldest turn]\n", o->ctx);
    }
    int keep = 0, rc;
    double t0 = mx_now();
    g_interrupt = 0;
    if (c->vp.n) {
        keep = mx_vlprompt_reuse(&c->vp, &c->s, ids, n);
        rc = mx_vlprompt_feed(&c->vp, &c->s, ids, n, keep, NULL, c->last);
    } else {
        while (keep < n - 1 && keep < c->s.n_history && c->s.history[keep] == ids[keep]) keep++;
        mx_session_truncate(&c->s, keep);
        keep = c->s.n_history; /* a recurrent model restarts from 0 */
        rc = mx_session_feed(&c->s, ids + keep, n - keep, NULL, c->last);
    }
    free(ids);
    if (rc) return MX_ERR;
    double t1 = mx_now();
    const char *plain_stop[] = {mx_textmodel_plain_stop};
    mx_detok *dt = mx_detok_new(c->tm.tok, true);
    mx_outparse op;
    mx_out_init(&op, false, false, false, c->plain ? plain_stop : NULL, c->plain ? 1 : 0);
    mx_buf text = {0}, piece = {0}, vis = {0}, unused = {0};
    int limit = MX_MIN(o->n_max, o->ctx - n), ng = 0;
    bool stopped = false;
    mx_constraint con = {0};
    if (c->gram && mx_constraint_init(&con, c->gram, c->tm.e.model.arch.vocab)) rc = MX_ERR;
    int np = 0, ip = 0; /* a speculative round's tokens, and how many were shown */
    for (; ng < limit && !rc; ng++) {
        if (g_interrupt) { stopped = true; break; }
        int32_t tok;
        if (ip < np) tok = c->sbuf[ip++];
        else {
            int allowed = con.m ? mx_constraint_mask(&con, c->last) : 1;
            if (allowed < 0) rc = MX_ERR;
            if (allowed <= 0) break;
            tok = mx_sampler_sample(c->smp, c->last, c->s.history, c->s.n_history);
        }
        if (con.m && mx_constraint_accept(&con, tok)) { rc = MX_ERR; break; }
        if (mx_textmodel_is_eos(&c->tm, tok)) break;
        piece.len = vis.len = 0;
        mx_detok_push(dt, tok, &piece);
        bool stop = piece.len && mx_out_push(&op, piece.data, piece.len, &vis, &unused);
        if (vis.len) fwrite(vis.data, 1, vis.len, stdout);
        fflush(stdout);
        mx_buf_append(&text, vis.data, vis.len);
        if (stop || (con.m && mx_constraint_done(&con))) { ng++; break; }
        if (ng + 1 >= limit) continue;
        if (!c->spec) {
            if (mx_session_feed(&c->s, &tok, 1, NULL, c->last)) { rc = MX_ERR; break; }
        } else if (ip == np) { /* the round is out: its last token goes to the next */
            if ((np = mx_spec_step(&c->sp, tok, limit - ng - 1, c->sbuf)) < 0) { rc = MX_ERR; break; }
            ip = 0;
        }
    }
    mx_constraint_free(&con);
    if (!op.stopped && !rc) {
        piece.len = vis.len = 0;
        mx_detok_flush(dt, &piece);
        if (piece.len) mx_out_push(&op, piece.data, piece.len, &vis, &unused);
        json_t *calls = NULL;
        mx_out_finish(&op, &vis, &unused, &calls);
        json_decref(calls);
        if (vis.len) fwrite(vis.data, 1, vis.len, stdout);
        mx_buf_append(&text, vis.data, vis.len);
    }
    printf("\n");
    fflush(stdout);
    if (stopped) fprintf(stderr, "[stopped]\n");
    if (o->verbose)
        fprintf(stderr, "[prefill %d tokens in %.1f ms | %d tokens in %.1f ms, %.1f t/s | context %d/%d]\n", n - keep, (t1 - t0) * 1e3, ng,
                (mx_now() - t1) * 1e3, ng > 1 ? (ng - 1) / (mx_now() - t1) : 0.0, c->s.n_history, o->ctx);
    /* the plain format writes "Assistant: " itself: keep the reply without the space the model put after the colon */
    size_t skip = 0;
    while (c->plain && skip < text.len && text.data[skip] == ' ') skip++;
    json_array_append_new(c->msgs, json_pack("{s:s,s:s%}", "role", "assistant", "content", text.data ? text.data + skip : "", text.len - skip));
    mx_out_free(&op);
    mx_detok_free(dt);
    mx_buf_free(&text); mx_buf_free(&piece); mx_buf_free(&vis); mx_buf_free(&unused);
    return rc;
}

static void banner(const chat *c, const char *spec) {
    const mx_arch *a = &c->tm.e.model.arch;
    fprintf(stderr, "mlxcel chat: %s (%s, %d layers), context %d tokens, temperature %g\n", spec, a->family, a->n_layers, c->o->ctx,
            (double)c->o->samp.temperature);
    if (mx_dist_active())
        fprintf(stderr, "distributed: %d processes (--tp %d x --pp %d); this one (rank 0) owns the terminal\n", c->o->tp * c->o->pp, c->o->tp,
                c->o->pp);
    fprintf(stderr, "/help for commands; Ctrl-C stops a reply; /exit or Ctrl-D quits.\n");
}

/* A line starting with '/': true when it was a command (handled here). */
static bool command(chat *c, const char *line, bool *quit) {
    if (line[0] != '/') return false;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) { *quit = true; return true; }
    if (!strcmp(line, "/help")) { fputs(chat_help, stderr); return true; }
    if (!strcmp(line, "/clear")) {
        reset(c);
        mx_session_truncate(&c->s, 0);
        fprintf(stderr, "[conversation cleared]\n");
        return true;
    }
    if (!strncmp(line, "/system", 7) && (!line[7] || line[7] == ' ')) {
        const char *t = line + 7;
        while (*t == ' ') t++;
        if (!*t) {
            fprintf(stderr, c->system ? "[system prompt: %s]\n" : "[no system prompt]\n", c->system);
            return true;
        }
        free(c->system);
        c->system = strdup(t);
        reset(c);
        fprintf(stderr, "[system prompt set; conversation cleared]\n");
        return true;
    }
    if (!strncmp(line, "/image", 6) && (!line[6] || line[6] == ' ')) {
        const char *path = line + 6;
        while (*path == ' ') path++;
        char *data;
        size_t len;
        mx_vlprompt probe = {0};
        if (!*path) fprintf(stderr, "[/image PATH: give the image file]\n");
        else if (mx_read_file(path, MX_IMAGE_MAX_FILE_BYTES, &data, &len)) fprintf(stderr, "[%s]\n", mx_errmsg());
        else if (mx_vlprompt_add(&probe, &c->tm.e, data, len, 0, path)) { /* checked now, not at the next message */
            fprintf(stderr, "[%s]\n", mx_errmsg());
            free(data);
        } else {
            char **img = realloc(c->img, sizeof(char *) * (size_t)(c->n_img + 1));
            size_t *il = img ? realloc(c->img_len, sizeof(size_t) * (size_t)(c->n_img + 1)) : NULL;
            if (img) c->img = img;
            if (il) c->img_len = il;
            if (!img || !il) {
                fprintf(stderr, "[out of memory]\n");
                free(data);
            } else {
                c->img[c->n_img] = data;
                c->img_len[c->n_img++] = len;
                c->n_pending++;
                fprintf(stderr, "[image attached: %s, %dx%d; it goes with your next message]\n", path, probe.in[0].orig_w,
                        probe.in[0].orig_h);
            }
        }
        mx_vlprompt_free(&probe);
        return true;
    }
    fprintf(stderr, "[unknown command %s: /help lists them]\n", line);
    return true;
}

/* The user's message with the images attached since the last one: parts for
 * a template, the processor's placeholders in the text for the plain format. */
static json_t *user_message(chat *c, const char *line, size_t len) {
    int k = c->n_pending;
    c->n_pending = 0;
    if (!k) return json_pack("{s:s,s:s%}", "role", "user", "content", line, len);
    json_t *content;
    if (c->plain) {
        mx_buf b = {0};
        for (int i = 0; i < k; i++) mx_buf_puts(&b, mx_vision_processor(c->tm.e.vision)->placeholder);
        mx_buf_append(&b, line, len);
        content = json_stringn(b.data ? b.data : "", b.len);
        mx_buf_free(&b);
    } else {
        content = json_array();
        for (int i = 0; i < k; i++) json_array_append_new(content, json_pack("{s:s}", "type", "image"));
        json_array_append_new(content, json_pack("{s:s,s:s%}", "type", "text", "text", line, len));
    }
    return json_pack("{s:s,s:o,s:i}", "role", "user", "content", content, "_images", k);
}

static int chat_session(chat_opts *o);

static int chat_run(void *p) {
    chat_opts *o = p;
    mx_dist_micro(o->pp_micro);
    if (mx_dist_start(o->tp, o->pp, o->threads)) {
        if (mx_dist_rank() == 0) fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
        mx_dist_finish();
        return 2;
    }
    int rc = chat_session(o);
    if (o->verbose) mx_dist_report(); /* -v: each process's messages, bytes and time in MPI */
    mx_dist_finish();                 /* rank 0: stops the other ranks */
    return rc;
}

static int chat_session(chat_opts *o) {
    bool lead = mx_dist_rank() == 0; /* rank 0 (every run without MPI) owns the terminal */
    if (!o->model) { if (lead) fprintf(stderr, "mlxcel chat: -m MODEL is required\n"); return 2; }
    if (o->tmpl_name && o->tmpl_file) { if (lead) fprintf(stderr, "mlxcel chat: give --chat-template or --chat-template-file, not both\n"); return 2; }
    if (o->json_schema && o->grammar) { if (lead) fprintf(stderr, "mlxcel chat: give --json-schema or --grammar, not both\n"); return 2; }
    char *dir = cli_model_dir("chat", o->model);
    if (!dir) return 1;
    char what[256];
    if (mx_sampling_gencfg(&o->samp, dir, what, sizeof what)) { /* options given win */
        if (lead) fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
        free(dir);
        return 1;
    }
    if (*what && lead) fprintf(stderr, "mlxcel chat: sampling defaults from generation_config.json: %s\n", what);
    chat c = {.o = o};
    cli_fast_apply(o->fast);
    if (cli_kv_apply("chat", &o->kv)) { free(dir); return 2; }
    int rc = mx_textmodel_open(dir, &c.tm);
    free(dir);
    if (rc) { if (lead) fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg()); return 1; }
    if (!lead) { /* a distributed run: rank 0 talks to the user, this process serves its part of each pass until rank 0 ends */
        signal(SIGINT, SIG_IGN); /* a Ctrl-C that reaches the whole process group is rank 0's to handle (it stops the reply) */
        rc = mx_dist_worker(&c.tm.e.model) ? 1 : 0;
        mx_textmodel_close(&c.tm);
        return rc;
    }
    cli_kv_note("chat", &c.tm.e.model);
    rc = 1;
    mx_pool *pool = NULL;
    char *line = NULL;
    bool sess = false, dtm_open = false;
    mx_textmodel dtm;
    if (!c.tm.tok) { fprintf(stderr, "mlxcel chat: %s has no tokenizer (tokenizer.json or tokenizer.model)\n", o->model); goto out; }
    if ((o->tmpl_name || o->tmpl_file) && mx_textmodel_set_template(&c.tm, o->tmpl_name, o->tmpl_file)) {
        fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
        goto out;
    }
    mx_textmodel_warn_plain(&c.tm, "mlxcel chat");
    c.plain = mx_textmodel_plain_chat(&c.tm);
    if ((o->json_schema || o->grammar) &&
        (!(c.gv = mx_textmodel_gvocab(&c.tm)) || !(c.gram = mx_grammar_load_file(c.gv, o->json_schema, o->grammar)))) {
        fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
        goto out;
    }
    int V = c.tm.e.model.arch.vocab;
    pool = mx_pool_new(o->threads);
    c.last = malloc(sizeof(float) * V);
    c.smp = mx_sampler_new(&o->samp, V);
    c.msgs = json_array();
    c.system = o->system ? strdup(o->system) : NULL;
    if (!c.last || !c.smp || !c.msgs || mx_session_init(&c.s, &c.tm.e, o->ctx, 512, pool)) {
        fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
        goto out;
    }
    sess = true;
    mx_spec_cfg sc;
    if (c.gram && (o->spec.draft_model || o->spec.lookup_ngram)) {
        fprintf(stderr, "mlxcel chat: --json-schema / --grammar with a drafter (--draft-model, --lookup-ngram) is not supported\n");
        rc = 2;
        goto out;
    }
    if (cli_spec_open("chat", &o->spec, &c.tm, &dtm, &sc)) goto out;
    dtm_open = o->spec.draft_model != NULL;
    if (sc.kind && (!(c.sbuf = malloc(sizeof(int32_t) * (size_t)(sc.draft_max + 1))) || mx_spec_init(&c.sp, &c.s, c.smp, &o->samp, &sc))) {
        fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg());
        goto out;
    }
    c.spec = sc.kind != 0;
    if (o->verbose) {
        char kvd[160];
        cli_kv_describe(c.s.kv, kvd, sizeof kvd);
        fprintf(stderr, "%s\n", kvd);
    }
    reset(&c);
    banner(&c, o->model);
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    size_t cap = 0;
    bool quit = false, warned = false;
    rc = 0;
    while (!quit) {
        fprintf(stderr, "> ");
        g_interrupt = 0;
        errno = 0;
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0) {
            if (g_interrupt && errno == EINTR) {
                clearerr(stdin);
                if (warned) break; /* a second Ctrl-C at the prompt quits */
                fprintf(stderr, "\n[Ctrl-C again, /exit or Ctrl-D quits]\n");
                warned = true;
                continue;
            }
            fputc('\n', stderr);
            break;
        }
        warned = false;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len || command(&c, line, &quit)) continue;
        json_array_append_new(c.msgs, user_message(&c, line, (size_t)len));
        if (reply(&c, pool)) { fprintf(stderr, "mlxcel chat: %s\n", mx_errmsg()); rc = 1; break; }
    }
    sigaction(SIGINT, &old, NULL);
out:
    free(line);
    if (c.spec) {
        if (o->verbose)
            fprintf(stderr, "speculative: %ld verification passes, %ld of %ld drafted tokens accepted\n", c.sp.rounds, c.sp.accepted, c.sp.drafted);
        mx_spec_free(&c.sp);
    }
    free(c.sbuf);
    if (dtm_open) mx_textmodel_close(&dtm);
    if (sess) mx_session_free(&c.s);
    json_decref(c.msgs);
    drop_images(&c, c.n_img);
    free(c.img);
    free(c.img_len);
    mx_vlprompt_free(&c.vp);
    free(c.system);
    mx_sampler_free(c.smp);
    free(c.last);
    mx_pool_free(pool);
    mx_grammar_unref(c.gram);
    mx_gvocab_free(c.gv);
    mx_textmodel_close(&c.tm);
    return rc;
}
