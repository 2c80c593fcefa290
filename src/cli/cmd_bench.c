/* mlxcel bench: llama-bench-style prompt processing (pp) and generation (tg)
 * speed, with the memory read bandwidth measured in the same run so decode
 * efficiency is a ratio of two numbers taken side by side. */
#include "cli.h"
#include "../base/base.h"
#include "../dist/dist.h"
#include "../runtime/generate.h"
#include "../quant/quant.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    const char *model;
    int pp, tg, threads, reps, bw_mb, depth;
    int batch; /* --batch B: B sequences decoded together (0: one) */
    int tp, ppar, pp_micro; /* a distributed model: --tp, --pp, --pp-micro (src/dist/) */
    bool json, depth_random, oracle, profile;
    cli_spec_opts spec;
    cli_kv_opts kv;
    bool fast;
} bench_opts;

static void bench_init(void *p) {
    bench_opts *o = p;
    *o = (bench_opts){.pp = -1, .tg = 128, .threads = mx_default_threads(), .reps = 3, .spec.draft_max = CLI_SPEC_DEFAULT_MAX, .tp = 1, .ppar = 1};
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), cmp_d);
    return n ? (n & 1 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2])) : 0;
}

enum { SPEC_PROMPT = 16 }; /* the speculative runs' prompt: random tokens */

/* Greedy decoding of n tokens after prompt, plainly (sp NULL) or
 * speculatively; *dt: the time after the prompt. */
static int greedy_run(mx_session *s, mx_spec *sp, const int32_t *prompt, int n, int32_t *out, int32_t *buf, float *last, double *dt) {
    mx_session_truncate(s, 0);
    if (mx_session_feed(s, prompt, SPEC_PROMPT, NULL, last)) return MX_ERR;
    double t0 = mx_now();
    out[0] = mx_argmax(last, s->e->model.arch.vocab);
    for (int g = 1; g < n;) {
        if (!sp) {
            if (mx_session_feed(s, &out[g - 1], 1, NULL, last)) return MX_ERR;
            out[g++] = mx_argmax(last, s->e->model.arch.vocab);
            continue;
        }
        int m = mx_spec_step(sp, out[g - 1], n - g, buf);
        if (m < 0) return MX_ERR;
        memcpy(out + g, buf, sizeof(int32_t) * (size_t)m);
        g += m;
    }
    *dt = mx_now() - t0;
    return MX_OK;
}

static const mx_opt bench_tab[] = {
    OPT_MODEL(bench_opts, model),
    {"-p", "--n-prompt", NULL, OPT_INT, "N", 0, 1 << 20, offsetof(bench_opts, pp),
     "prompt tokens per prompt-processing run (default 512; with --batch, each sequence's prompt, default 16)", NULL, OPT_NODEF},
    {"-n", "--n-gen", NULL, OPT_INT, "N", 0, 1 << 20, offsetof(bench_opts, tg), "tokens per generation run", NULL, 0},
    {"-d", "--n-depth", NULL, OPT_INT, "N", 0, 1 << 20, offsetof(bench_opts, depth),
     "tokens already in the cache before each pp and tg run (filled once by one prefill, reported as its own row)", NULL, 0},
    {NULL, "--depth-random", NULL, OPT_FLAG, NULL, 0, 0, offsetof(bench_opts, depth_random),
     "the depth's cache holds random values instead of a prefill's (times pp and tg at a depth too long to prefill here; "
     "not for recurrent models)", NULL, 0},
    {"-r", "--repetitions", NULL, OPT_INT, "N", 1, 1000, offsetof(bench_opts, reps), "runs of each test", NULL, 0},
    OPT_THREADS(bench_opts, threads),
    {NULL, "--tp", NULL, OPT_INT, "T", 1, 4096, offsetof(bench_opts, tp),
     "tensor parallelism over T processes (under mpirun; rank 0 reports; see Distributed runs)", NULL, 0},
    {NULL, "--pp", NULL, OPT_INT, "P", 1, 4096, offsetof(bench_opts, ppar), "pipeline parallelism over P stages (under mpirun)", NULL, 0},
    {NULL, "--pp-micro", NULL, OPT_INT, "N", 1, 64, offsetof(bench_opts, pp_micro), "micro-batches per pass under --pp: each stage computes one while the next stage takes the one before (default: --pp, twice as many for a pass of 256 tokens or more; 1: none)", NULL, 0},
    {NULL, "--bw-mb", NULL, OPT_INT, "MB", 16, 1 << 16, offsetof(bench_opts, bw_mb),
     "the bandwidth probe's buffer (default 1024, or a quarter of a smaller machine's memory; at most half)", NULL, 0},
    OPT_SPEC(bench_opts, spec),
    OPT_KV(bench_opts, kv),
    OPT_FAST(bench_opts, fast),
    {NULL, "--spec-oracle", NULL, OPT_FLAG, NULL, 0, 0, offsetof(bench_opts, oracle),
     "speculative decoding with an oracle draft: the target's own greedy continuation, computed first (the cost of verification alone)", NULL, 0},
    {NULL, "--profile", NULL, OPT_FLAG, NULL, 0, 0, offsetof(bench_opts, profile),
     "after the timed runs, one more prefill and greedy decode timed op by op: each op's share of a step (matmuls by role, attention, "
     "norms, rope, activations, sampling, the rest), ms per token, GB/s and GFLOP/s of the products", NULL, 0},
    {"-b", "--batch", NULL, OPT_INT, "B", 2, 256, offsetof(bench_opts, batch),
     "decode B sequences together, one token each per forward pass, as a server's continuous batch does: each takes a prompt "
     "of -p tokens (default 16 here), then -n steps; reports the aggregate decode t/s (and with --profile the split of one "
     "B-token step)", NULL, 0},
    {NULL, "--json", NULL, OPT_FLAG, NULL, 0, 0, offsetof(bench_opts, json),
     "one JSON object: pp_tps, tg_tps (and _sd), threads, bytes_per_token, mem_read_gbs, tg_efficiency, peak_rss_mb, ttft_ms, ...", NULL, 0},
    {0},
};

static int bench(const bench_opts *o, const char *model);

/* The first `depth` tokens' cache as random values (mx_kv_fill_random:
 * unit variance in an f32 cache, as a prefill would leave normed keys): the
 * time of attending them does not depend on what they hold. */
static void fill_random(mx_session *s, const int32_t *toks, int depth) {
    mx_kv *kv = s->kv;
    mx_kv_fill_random(&s->e->model, kv, 777);
    kv->len = depth;
    s->n_history = depth;
    memcpy(s->history, toks, (size_t)depth * sizeof(int32_t));
}

/* back to the first `depth` tokens; a cache that cannot be cut back
 * (recurrent state) is filled again */
static int to_depth(mx_session *s, const int32_t *toks, int depth, float *last) {
    mx_session_truncate(s, depth);
    if (s->n_history == depth) return MX_OK;
    mx_session_truncate(s, 0);
    return depth ? mx_session_feed(s, toks, depth, NULL, last) : MX_OK;
}

/* --profile: one prefill of pp tokens and tg greedy decode steps after the
 * depth, timed op by op (nn/prof.h). The decode runs twice, without the
 * timer and with it, and the two runs' ids are compared. */
typedef struct {
    mx_prof pp, tg;
    double pp_sec, tg_sec;
    int n_diff; /* decode steps whose id differs with the timer on */
} bench_prof;

static int profile_run(mx_session *s, const int32_t *toks, int d, int pp, int tg, float *last, int32_t *ids, bench_prof *bp) {
    int V = s->e->model.arch.vocab, rc = MX_OK;
    memset(bp, 0, sizeof *bp);
    if (pp > 0 && !(rc = to_depth(s, toks, d, last))) {
        mx_ctx_set_prof(s->ctx, &bp->pp);
        double t0 = mx_now();
        rc = mx_session_feed(s, toks + d, pp, NULL, last);
        bp->pp_sec = mx_now() - t0;
        mx_ctx_set_prof(s->ctx, NULL);
    }
    for (int pass = 0; pass < 2 && tg > 0 && !rc; pass++) {
        if ((rc = to_depth(s, toks, d, last))) break;
        mx_prof *p = pass ? &bp->tg : NULL;
        int32_t tok = toks[d];
        mx_ctx_set_prof(s->ctx, p);
        double t0 = mx_now();
        for (int i = 0; i < tg && !rc; i++) {
            rc = mx_session_feed(s, &tok, 1, NULL, last);
            double ts = p ? mx_now() : 0;
            tok = mx_argmax(last, V);
            if (p) mx_prof_add(p, MX_OP_SAMPLE, ts);
            if (!pass) ids[i] = tok;
            else if (ids[i] != tok) bp->n_diff++;
        }
        if (pass) bp->tg_sec = mx_now() - t0;
        mx_ctx_set_prof(s->ctx, NULL);
    }
    return rc;
}

/* one phase's table (steps: 1 prefill or tg decode steps; tokens per step) */
static void profile_print(const char *title, const mx_prof *p, double sec, int steps, int tokens) {
    double ms_tok = sec * 1e3 / ((double)steps * tokens), rest = sec - mx_prof_total(p);
    printf("\n%s: %.3f ms per token, %.3f ms per step\n", title, ms_tok, sec * 1e3 / steps);
    printf("| op | calls/step | ms/token | %% of step | GB/s | GFLOP/s |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < MX_OP_COUNT; i++) {
        if (!p->calls[i]) continue;
        double t = p->sec[i];
        printf("| %s | %.1f | %.4f | %.1f |", mx_op_name(i), (double)p->calls[i] / steps, t * 1e3 / ((double)steps * tokens), 100 * t / sec);
        if (mx_op_is_matmul(i) && t > 0) printf(" %.1f | %.1f |\n", p->bytes[i] / t / 1e9, p->flops[i] / t / 1e9);
        else printf(" | |\n");
    }
    printf("| rest (scheduler/overhead) | | %.4f | %.1f | | |\n", rest * 1e3 / ((double)steps * tokens), 100 * rest / sec);
}

static json_t *profile_json(const mx_prof *p, double sec, int steps, int tokens) {
    json_t *ops = json_array();
    double per = 1e3 / ((double)steps * tokens), rest = sec - mx_prof_total(p);
    for (int i = 0; i < MX_OP_COUNT && ops; i++) {
        double t = p->sec[i];
        json_t *o = json_pack("{s:s,s:f,s:f,s:f}", "op", mx_op_name(i), "calls_per_step", (double)p->calls[i] / steps, "ms_per_token",
                              t * per, "share_pct", sec > 0 ? 100 * t / sec : 0.0);
        if (o && mx_op_is_matmul(i)) {
            json_object_set_new(o, "gbs", json_real(t > 0 ? p->bytes[i] / t / 1e9 : 0));
            json_object_set_new(o, "gflops", json_real(t > 0 ? p->flops[i] / t / 1e9 : 0));
        }
        json_array_append_new(ops, o);
    }
    json_t *rest_o = json_pack("{s:s,s:f,s:f}", "op", "rest", "ms_per_token", rest * per, "share_pct", sec > 0 ? 100 * rest / sec : 0.0);
    if (ops) json_array_append_new(ops, rest_o);
    return json_pack("{s:i,s:i,s:f,s:f,s:o}", "steps", steps, "tokens_per_step", tokens, "ms_per_token", sec * per, "ms_per_step",
                     sec * 1e3 / steps, "ops", ops);
}

static int bench_run(void *p) {
    const bench_opts *o = p;
    if (!o->model) { fprintf(stderr, "mlxcel bench: -m MODEL is required\n"); return 2; }
    char *dir = cli_model_dir("bench", o->model);
    if (!dir) return 1;
    mx_dist_micro(o->pp_micro);
    if (mx_dist_start(o->tp, o->ppar, o->threads)) {
        if (mx_dist_rank() == 0) fprintf(stderr, "mlxcel bench: %s\n", mx_errmsg());
        mx_dist_finish();
        free(dir);
        return 2;
    }
    int rc;
    if (mx_dist_rank() != 0) { /* a distributed run: rank 0 measures and drives, this process serves its part of each pass */
        mx_engine e;
        rc = mx_engine_open(dir, &e) ? 1 : mx_dist_worker(&e.model) ? 1 : 0;
        if (!rc) mx_engine_close(&e);
    } else rc = bench(o, dir);
    mx_dist_finish();
    free(dir);
    return rc;
}

const mx_cmd mx_cmd_bench = {
    .name = "bench",
    .summary = "prompt processing and generation speed, with memory bandwidth",
    .usage = "-m MODEL [options]",
    .details = "llama-bench-style prompt processing (pp) and generation (tg) speed, with the memory read bandwidth measured in "
               "the same run, decode efficiency (each quarter of a generation run rated against probes taken right before "
               "and after it; median), peak RSS and time to first token. With a drafter (--draft-model, --lookup-ngram or --spec-oracle), greedy decoding of -n "
               "tokens after a 16-token prompt, plain and speculative in turn in each repetition: tokens/s of each, their ratio "
               "(medians), the acceptance rate and whether the outputs are identical. With --batch B, B sequences decoded "
               "together, one token each per forward pass (a server's step with B streams): their aggregate t/s. With --profile, where the time goes: "
               "one more prefill and decode, each op's share of a step (the rest is what no op measured), in the table and "
               "in --json's \"profile\".",
    .opts = bench_tab,
    .size = sizeof(bench_opts),
    .init = bench_init,
    .samp_off = OPT_NO_SAMPLING,
    .run = bench_run,
    .loads_model = true,
};

/* the same pseudo-random token ids in every run (and every command line) */
static void bench_tokens(int32_t *toks, int n, int V) {
    uint64_t rng = 12345;
    for (int i = 0; i < n; i++) { rng = rng * 6364136223846793005ull + 1442695040888963407ull; toks[i] = (int32_t)((rng >> 33) % (uint64_t)V); }
}

/* the checkpoint's size on disk (its mapped files) */
static size_t ckpt_bytes(const mx_engine *e) {
    size_t b = 0;
    for (int f = 0; f < e->model.ck.n_files; f++) b += e->model.ck.files[f].map_len;
    return b;
}

/* --batch B: B sequences (caches of their own), each fed a prompt of pp
 * tokens, then tg greedy steps of B tokens, one per sequence, each step one
 * forward pass (a server's decode step with B streams, without the HTTP):
 * the aggregate decode t/s, B * tg over the steps' time, per repetition
 * (fresh caches each), the median reported; --profile: one more run timed
 * op by op. */
static int batch_bench(const bench_opts *bo, mx_engine *e, const char *label) {
    const mx_arch *ar = &e->model.arch;
    int B = bo->batch, pp = bo->pp < 0 ? 16 : bo->pp, tg = bo->tg, V = ar->vocab, reps = bo->reps, rc = MX_OK;
    if (tg < 1 || pp < 1) { fprintf(stderr, "mlxcel bench: --batch needs -p and -n of at least 1\n"); return 2; }
    int cap = pp + tg + 1, chunk = MX_MAX(B, MX_MIN(pp, 512));
    mx_pool *pool = mx_pool_new(bo->threads);
    mx_ctx *ctx = pool ? mx_ctx_new(&e->model, chunk, cap, pool) : NULL;
    mx_kv **kv = calloc((size_t)B, sizeof *kv);
    mx_seq_in *ins = calloc((size_t)B, sizeof *ins);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(pp + B)), *cur = malloc(sizeof(int32_t) * (size_t)B);
    float *logits = malloc(sizeof(float) * (size_t)B * (size_t)V);
    double *tps = calloc((size_t)reps, sizeof(double)), prof_sec = 0;
    mx_prof prof;
    memset(&prof, 0, sizeof prof);
    if (!ctx || !kv || !ins || !toks || !cur || !logits || !tps) { fprintf(stderr, "mlxcel bench: %s\n", pool && !ctx ? mx_errmsg() : "out of memory"); rc = 1; goto out; }
    bench_tokens(toks, pp + B, V);
    for (int r = 0; r <= reps && !rc; r++) { /* the last run: the profile's, when asked */
        bool prof_run = r == reps;
        if (prof_run && !bo->profile) break;
        for (int b = 0; b < B && !rc; b++) { /* fresh caches, each with its prompt (sequence b starts at token b) */
            mx_kv_free(kv[b]);
            if (!(kv[b] = mx_kv_new(&e->model, cap))) { rc = MX_ERR; break; }
            for (int t0 = 0; t0 < pp && !rc; t0 += chunk) {
                mx_seq_in in = {.kv = kv[b], .tokens = toks + b + t0, .n = MX_MIN(chunk, pp - t0), .seg_end = pp};
                rc = mx_forward(ctx, &in, 1, logits + (size_t)b * V, false);
            }
            if (!rc) cur[b] = mx_argmax(logits + (size_t)b * V, V);
        }
        if (prof_run) mx_ctx_set_prof(ctx, &prof);
        double t0 = mx_now();
        for (int i = 0; i < tg && !rc; i++) {
            for (int b = 0; b < B; b++) ins[b] = (mx_seq_in){.kv = kv[b], .tokens = &cur[b], .n = 1};
            rc = mx_forward(ctx, ins, B, logits, false);
            double ts = prof_run ? mx_now() : 0;
            for (int b = 0; b < B && !rc; b++) cur[b] = mx_argmax(logits + (size_t)b * V, V);
            if (prof_run) mx_prof_add(&prof, MX_OP_SAMPLE, ts);
        }
        double dt = mx_now() - t0;
        mx_ctx_set_prof(ctx, NULL);
        if (prof_run) prof_sec = dt;
        else tps[r] = (double)B * tg / dt;
    }
    if (rc) { fprintf(stderr, "mlxcel bench: %s\n", mx_errmsg()); rc = 1; goto out; }
    size_t ckpt = ckpt_bytes(e);
    double lo = tps[0], hi = tps[0];
    for (int r = 1; r < reps; r++) { lo = MX_MIN(lo, tps[r]); hi = MX_MAX(hi, tps[r]); }
    double med = median(tps, reps);
    if (bo->json) {
        json_t *o = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:[f,f],s:b}", "model", label, "family", ar->family, "threads", bo->threads,
                              "batch", B, "n_prompt", pp, "n_gen", tg, "reps", reps, "batch_tps", med, "per_stream_tps", med / B,
                              "batch_tps_range", lo, hi, "fast", e->model.kp.fast);
        if (o && bo->profile) json_object_set_new(o, "profile", profile_json(&prof, prof_sec, tg, B));
        char *js = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
        if (js) printf("%s\n", js);
        else { fprintf(stderr, "mlxcel bench: cannot format the JSON result\n"); rc = 1; }
        free(js);
        json_decref(o);
    } else {
        printf("| model | family | size | threads | test | aggregate t/s (median, range) | per stream |\n|---|---|---|---|---|---|---|\n");
        printf("| %s | %s | %.2f GiB | %d | tg%d x %d streams (prompts of %d) | %.2f (%.2f-%.2f) | %.2f |\n", label, ar->family,
               ckpt / 1073741824.0, bo->threads, tg, B, pp, med, lo, hi, med / B);
        if (bo->profile) {
            char title[96];
            snprintf(title, sizeof title, "profile of tg%d x %d streams (one %d-token decode step each, greedy)", tg, B, B);
            profile_print(title, &prof, prof_sec, tg, B);
        }
    }
out:
    for (int b = 0; kv && b < B; b++) mx_kv_free(kv[b]);
    free(kv); free(ins); free(toks); free(cur); free(logits); free(tps);
    mx_ctx_free(ctx);
    mx_pool_free(pool);
    return rc;
}

static int bench(const bench_opts *bo, const char *model) {
    const char *label = bo->model;
    int pp = bo->pp < 0 ? 512 : bo->pp, tg = bo->tg, threads = bo->threads, reps = bo->reps, bw_mb = bo->bw_mb, d = bo->depth;
    bool json = bo->json;
    if (bo->depth_random && !d) { fprintf(stderr, "mlxcel bench: --depth-random needs a depth (-d N)\n"); return 2; }
    if (bo->batch && (d || bo->oracle || bo->spec.draft_model || bo->spec.lookup_ngram || bo->tp > 1 || bo->ppar > 1)) {
        fprintf(stderr, "mlxcel bench: --batch does not go with -d, a drafter, --tp or --pp\n");
        return 2;
    }
    /* the probe's buffer is faulted in whole: past the machine's memory that would be the OOM killer */
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double mem_mb = pages > 0 && psz > 0 ? (double)pages * (double)psz / 1048576.0 : 0;
    if (!bw_mb) bw_mb = mem_mb > 0 && mem_mb / 4 < 1024 ? (int)MX_MAX(16.0, mem_mb / 4) : 1024; /* default: 1 GiB, or a quarter of a small machine */
    if (mem_mb > 0 && bw_mb > 0.5 * mem_mb) {
        fprintf(stderr, "mlxcel bench: --bw-mb %d is more than half of this machine's %.0f MB of memory\n", bw_mb, mem_mb);
        return 2;
    }
    double t_start = mx_now();
    /* a draft model's tokenizer is checked against the target's: open it with its tokenizer then */
    mx_textmodel tm = {0}, dtm;
    mx_spec_cfg sc;
    mx_engine *ep = &tm.e;
    if (bo->oracle && (bo->spec.draft_model || bo->spec.lookup_ngram)) { fprintf(stderr, "mlxcel bench: give one drafter\n"); return 2; }
    if (d && (bo->oracle || bo->spec.draft_model || bo->spec.lookup_ngram)) { fprintf(stderr, "mlxcel bench: -d and a drafter together are not supported (the speculative runs start at depth 0)\n"); return 2; }
    cli_fast_apply(bo->fast);
    if (cli_kv_apply("bench", &bo->kv)) return 2;
    if (bo->spec.draft_model ? mx_textmodel_open(model, &tm) : mx_engine_open(model, ep)) { fprintf(stderr, "mlxcel bench: %s\n", mx_errmsg()); return 1; }
    cli_kv_note("bench", &ep->model);
    if (cli_spec_open("bench", &bo->spec, &tm, &dtm, &sc)) { bo->spec.draft_model ? mx_textmodel_close(&tm) : mx_engine_close(ep); return 1; }
    if (bo->oracle) sc.kind = MX_DRAFT_ORACLE;
    bool spec = sc.kind && tg > 1;
    mx_engine *e = ep;
    const mx_arch *ar = &e->model.arch;
    int rc = 0;
    if (bo->batch) {
        rc = batch_bench(bo, e, label);
        goto out_model;
    }
    if (bo->depth_random && mx_model_recurrent(&e->model)) {
        fprintf(stderr, "mlxcel bench: --depth-random: %s keeps recurrent state, which random values do not stand for\n", ar->family);
        rc = 2;
        goto out_model;
    }
    int V = ar->vocab, ctx = d + MX_MAX(pp, SPEC_PROMPT) + tg + 1;
    mx_pool *pool = mx_pool_new(threads);
    mx_session s;
    mx_spec sp = {0};
    if (mx_session_init_batch(&s, e, ctx, 512, sc.draft_max + 1, pool)) {
        fprintf(stderr, "mlxcel bench: %s\n", mx_errmsg());
        mx_pool_free(pool);
        rc = 1;
        goto out_model;
    }
    float *last = malloc(sizeof(float) * V);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)ctx);
    if (!last || !toks) {
        fprintf(stderr, "mlxcel bench: out of memory\n");
        free(last); free(toks); mx_session_free(&s); mx_pool_free(pool);
        rc = 1;
        goto out_model;
    }
    bench_tokens(toks, ctx, V);
    /* time to first token: model open + an 8-token prompt + one sample */
    rc = mx_session_feed(&s, toks, 8, NULL, last);
    mx_argmax(last, V);
    double ttft = mx_now() - t_start, fill_tps = 0;
    if (d > 0 && !rc && bo->depth_random) fill_random(&s, toks, d); else if (d > 0 && !rc) { /* the depth: one prefill, timed */
        mx_session_truncate(&s, 0);
        double t0 = mx_now();
        rc = mx_session_feed(&s, toks, d, NULL, last);
        fill_tps = d / (mx_now() - t0);
    }
    /* Each generation run is cut into nseg stretches with a bandwidth probe
     * before the first and after each (their decode time alone counts for
     * tg t/s): a stretch's efficiency is its bytes/s over the mean of the
     * probes on either side, and the figure reported is the median over
     * all stretches. This machine's bandwidth moves by 1.5x within a
     * minute; one probe per run could land in another phase than the
     * decode it rates. */
    int nseg = tg >= 32 ? 4 : 1;
    size_t kv_bytes = s.kv->offset[s.kv->n_layers] * sizeof(float);
    double kv_per_pos = (double)kv_bytes / ctx; /* KV bytes one cached position adds to a token's reads */
    int nbw = reps * (nseg + 1) + 1;
    double *pp_t = calloc((size_t)reps, sizeof(double)), *tg_t = calloc((size_t)reps, sizeof(double));
    double *bw = calloc((size_t)nbw, sizeof(double)), *seg_eff = calloc((size_t)reps * nseg, sizeof(double));
    int n_bw = 0, n_eff = 0;
    mx_bw_probe *probe = mx_bw_probe_new((size_t)bw_mb << 20);
    /* speculative decoding: per repetition, plain greedy decoding (which
     * gives the oracle its continuation) and then the speculative run */
    mx_sampling greedy;
    mx_sampling_defaults(&greedy);
    mx_sampler *gsmp = spec ? mx_sampler_new(&greedy, V) : NULL;
    int32_t *plain_ids = spec ? malloc(sizeof(int32_t) * (size_t)tg) : NULL, *spec_ids = spec ? malloc(sizeof(int32_t) * (size_t)tg) : NULL;
    int32_t *oracle = spec ? malloc(sizeof(int32_t) * (size_t)(SPEC_PROMPT + tg)) : NULL, *sbuf = spec ? malloc(sizeof(int32_t) * (size_t)(sc.draft_max + 1)) : NULL;
    double *sp_plain = calloc((size_t)reps, sizeof(double)), *sp_spec = calloc((size_t)reps, sizeof(double)), *sp_ratio = calloc((size_t)reps, sizeof(double));
    int n_diff = 0, first_diff = -1;
    bench_prof bprof;
    int32_t *prof_ids = NULL;
    if (spec && (!gsmp || !plain_ids || !spec_ids || !oracle || !sbuf || !sp_plain || !sp_spec || !sp_ratio)) { fprintf(stderr, "mlxcel bench: out of memory\n"); rc = 1; goto out; }
    if (spec) {
        memcpy(oracle, toks, sizeof(int32_t) * SPEC_PROMPT);
        sc.oracle = oracle;
        sc.n_oracle = SPEC_PROMPT + tg;
        if (mx_spec_init(&sp, &s, gsmp, &greedy, &sc)) { fprintf(stderr, "mlxcel bench: %s\n", mx_errmsg()); rc = 1; goto out; }
    }
    if (!rc && (!pp_t || !tg_t || !bw || !seg_eff || !probe)) {
        fprintf(stderr, "mlxcel bench: cannot map the %d MB bandwidth probe buffer (--bw-mb)\n", bw_mb);
        rc = 1;
        goto out;
    }
    for (int r = 0; r < reps && !rc; r++) {
        if (pp > 0) {
            rc = to_depth(&s, toks, d, last);
            double t0 = mx_now();
            if (!rc) rc = mx_session_feed(&s, toks + d, pp, NULL, last);
            pp_t[r] = pp / (mx_now() - t0);
        }
        if (tg > 0 && !rc) rc = to_depth(&s, toks, d, last);
        if (tg > 0 && !rc) {
            double t_dec = 0, before = bw[n_bw++] = mx_bw_probe_run(probe, pool, 3);
            for (int k = 0; k < nseg && !rc; k++) {
                int a0 = (int)((long)tg * k / nseg), a1 = (int)((long)tg * (k + 1) / nseg);
                double t0 = mx_now();
                for (int i = a0; i < a1 && !rc; i++) rc = mx_session_feed(&s, &toks[d + i], 1, NULL, last);
                double dt = mx_now() - t0, after = bw[n_bw++] = mx_bw_probe_run(probe, pool, 3);
                t_dec += dt;
                /* the token at position d + i reads every weight and d + i + 1 cached positions */
                double bytes = (a1 - a0) * ((double)e->model.weight_bytes + kv_per_pos * (d + (a0 + a1 + 1) / 2.0));
                if (dt > 0 && before + after > 0) seg_eff[n_eff++] = bytes / dt / (0.5 * (before + after) * 1e9);
                before = after;
            }
            tg_t[r] = tg / t_dec;
        }
        if (spec && !rc) {
            double dt_p = 0, dt_s = 0;
            rc = greedy_run(&s, NULL, toks, tg, plain_ids, sbuf, last, &dt_p);
            if (!rc) memcpy(oracle + SPEC_PROMPT, plain_ids, sizeof(int32_t) * (size_t)tg);
            if (!rc) rc = greedy_run(&s, &sp, toks, tg, spec_ids, sbuf, last, &dt_s);
            if (!rc) {
                sp_plain[r] = tg / dt_p;
                sp_spec[r] = tg / dt_s;
                sp_ratio[r] = dt_p / dt_s;
                for (int i = 0; i < tg; i++)
                    if (plain_ids[i] != spec_ids[i]) { n_diff++; if (first_diff < 0) first_diff = i; break; }
            }
        }
    }
    if (!tg && !rc) bw[n_bw++] = mx_bw_probe_run(probe, pool, 3);
    if (!rc && bo->profile) {
        prof_ids = malloc(sizeof(int32_t) * (size_t)MX_MAX(tg, 1));
        if (!prof_ids) { fprintf(stderr, "mlxcel bench: out of memory\n"); rc = 1; goto out; }
        rc = profile_run(&s, toks, d, pp, tg, last, prof_ids, &bprof);
    }
    if (rc) { fprintf(stderr, "mlxcel bench: %s\n", mx_errmsg()); goto out; }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double pp_m, pp_sd, tg_m, tg_sd;
    mean_sd(pp_t, reps, &pp_m, &pp_sd);
    mean_sd(tg_t, reps, &tg_m, &tg_sd);
    qsort(bw, (size_t)n_bw, sizeof(double), cmp_d);
    double bw_med = bw[n_bw / 2];
    double eff = median(seg_eff, n_eff); /* sorted: the range is its ends */
    size_t ckpt = ckpt_bytes(e);
    /* per generated token: every linear once, plus the KV read at the mean context of the tg run */
    double bpt = (double)e->model.weight_bytes + kv_per_pos * (d + (tg + 1) / 2.0);
    double rss_mb = ru.ru_maxrss / 1024.0, bw_buf_mb = bw_mb;
    /* the bandwidth probe's buffer is part of the peak; report the model's share */
    double rss_model_mb = rss_mb - bw_buf_mb;
    const char *wmode = mx_st_load_mode() == MX_LOAD_COPY ? "copied (--no-mmap)" : "mmap";
    /* which activation path the matmuls took (BENCHMARKS.md says it per format) */
    unsigned long n_bf16 = mx_qmatmul_bf16_calls(), n_int8 = mx_qmatmul_int8_calls() - n_bf16;
    n_bf16 += mx_matmul_bf2_calls();
    unsigned long n_one = mx_qmatmul_one_calls();
    bool fast = e->model.kp.fast;
    const char *paths[4] = {n_int8 > n_one ? "int12 (VNNI)" : NULL, n_one ? "int8 (VNNI, --fast)" : NULL, n_bf16 ? "bf16x2 (vdpbf16ps)" : NULL,
                            mx_matmul_bf16dot_calls() ? (fast ? "bf16 (--fast)" : "bf16 (MLXCEL_BF16_DOT)") : NULL};
    char act[160] = "f32";
    for (int i = 0, k = 0; i < 4; i++)
        if (paths[i]) k += snprintf(act + k, sizeof act - (size_t)k, "%s%s", k ? " and " : "", paths[i]);
    const char *spec_kind = sc.kind == MX_DRAFT_ORACLE ? "oracle" : sc.kind == MX_DRAFT_NGRAM ? "n-gram lookup" : sc.kind == MX_DRAFT_MTP ? "next-n module" : "draft model";
    double med_plain = spec ? median(sp_plain, reps) : 0, med_spec = spec ? median(sp_spec, reps) : 0, med_ratio = spec ? median(sp_ratio, reps) : 0;
    double acc_rate = sp.drafted ? (double)sp.accepted / sp.drafted : 0, per_pass = sp.rounds ? (double)(reps * (tg - 1)) / sp.rounds : 0;
    double eff_lo = n_eff ? seg_eff[0] : 0, eff_hi = n_eff ? seg_eff[n_eff - 1] : 0;
    if (json) { /* jansson: the model path may hold any character */
        json_t *o = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:[f,f],s:[f,f],s:I,s:I,s:f,s:f,s:f,s:s,s:s,s:s,s:s,s:f}",
                              "model", label, "family", ar->family, "threads", threads, "n_prompt", pp, "n_gen", tg, "n_depth", d, "reps", reps, "depth_fill_tps", fill_tps,
                              "pp_tps", pp_m, "pp_tps_sd", pp_sd, "tg_tps", tg_m, "tg_tps_sd", tg_sd, "bytes_per_token", (json_int_t)llround(bpt),
                              "mem_read_gbs", bw_med, "tg_efficiency", eff, "mem_read_gbs_range", bw[0], bw[n_bw - 1],
                              "tg_efficiency_range", eff_lo, eff_hi, "checkpoint_bytes", (json_int_t)ckpt, "kv_cache_bytes",
                              (json_int_t)kv_bytes, "peak_rss_mb", rss_mb, "peak_rss_model_mb", rss_model_mb, "ttft_ms", ttft * 1e3,
                              "weights", wmode, "activations", act, "cache_type_k", mx_kv_type_name(s.kv->type[0]), "cache_type_v",
                              mx_kv_type_name(s.kv->type[1]), "kv_bytes_per_position", (double)kv_bytes / ctx);
        if (o) json_object_set_new(o, "fast", json_boolean(fast));
        if (o && spec)
            json_object_set_new(o, "speculative", json_pack("{s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:i}", "draft", spec_kind, "draft_max", sc.draft_max,
                                                            "plain_tps", med_plain, "spec_tps", med_spec, "speedup", med_ratio, "acceptance",
                                                            acc_rate, "tokens_per_pass", per_pass, "runs_differing", n_diff));
        if (o && bo->profile) {
            json_t *pr = json_pack("{s:b}", "ids_identical", bprof.n_diff == 0);
            if (pr && pp) json_object_set_new(pr, "pp", profile_json(&bprof.pp, bprof.pp_sec, 1, pp));
            if (pr && tg) json_object_set_new(pr, "tg", profile_json(&bprof.tg, bprof.tg_sec, tg, 1));
            json_object_set_new(o, "profile", pr);
        }
        char *js = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
        if (js) printf("%s\n", js);
        else fprintf(stderr, "mlxcel bench: cannot format the JSON result\n");
        free(js);
        json_decref(o);
    } else {
        printf("| model | family | size | threads | test | t/s |\n|---|---|---|---|---|---|\n");
        char at[32] = "";
        if (d) snprintf(at, sizeof at, " @ d%d", d);
        if (d && !bo->depth_random) printf("| %s | %s | %.2f GiB | %d | pp%d (the depth, once) | %.2f |\n", label, ar->family, ckpt / 1073741824.0, threads, d, fill_tps);
        if (pp) printf("| %s | %s | %.2f GiB | %d | pp%d%s | %.2f ± %.2f |\n", label, ar->family, ckpt / 1073741824.0, threads, pp, at, pp_m, pp_sd);
        if (tg) printf("| %s | %s | %.2f GiB | %d | tg%d%s | %.2f ± %.2f |\n", label, ar->family, ckpt / 1073741824.0, threads, tg, at, tg_m, tg_sd);
        printf("\nmemory read bandwidth (median of %d probes, %d threads): %.2f GB/s\n", n_bw, threads, bw_med);
        printf("bytes read per generated token: %.1f MB -> decode efficiency %.1f%% of the bandwidth probed around each stretch of decode (median of %d; %.1f-%.1f%%)\n",
               bpt / 1e6, eff * 100, n_eff, eff_lo * 100, eff_hi * 100);
        printf("peak RSS %.0f MB (%.0f MB without the %d MB bandwidth probe) vs checkpoint %.0f MB + KV cache %.0f MB\n", rss_mb,
               rss_model_mb, bw_mb, ckpt / 1048576.0, kv_bytes / 1048576.0);
        char kvd[160];
        cli_kv_describe(s.kv, kvd, sizeof kvd);
        printf("%s: %.0f bytes per position\n", kvd, (double)kv_bytes / ctx);
        printf("time to first token (open + 8-token prompt): %.0f ms\n", ttft * 1e3);
        printf("weights: %s; matmuls' activations: %s\n", wmode, act);
        if (spec) {
            printf("speculative decoding (%s, draft-max %d; greedy, %d tokens after a %d-token prompt, medians of %d): plain %.2f t/s, "
                   "speculative %.2f t/s (%.2fx); %ld of %ld drafted tokens accepted (%.1f%%), %.2f tokens per verification pass\n",
                   spec_kind, sc.draft_max, tg, SPEC_PROMPT, reps, med_plain, med_spec, med_ratio, sp.accepted, sp.drafted, acc_rate * 100,
                   per_pass);
            if (n_diff) printf("speculative output differs from plain decoding in %d of %d runs (first at token %d)\n", n_diff, reps, first_diff);
            else printf("speculative output identical to plain decoding\n");
        }
        if (bo->profile) {
            char title[96];
            if (pp) {
                snprintf(title, sizeof title, "profile of one pp%d%s (prefill)", pp, at);
                profile_print(title, &bprof.pp, bprof.pp_sec, 1, pp);
            }
            if (tg) {
                snprintf(title, sizeof title, "profile of tg%d%s (one decode step each, greedy)", tg, at);
                profile_print(title, &bprof.tg, bprof.tg_sec, tg, 1);
                printf("decode ids with the timer on: %s\n", bprof.n_diff ? "DIFFERENT from the run without it" : "identical to the run without it");
            }
        }
    }
out:
    free(prof_ids);
    if (spec) mx_spec_free(&sp);
    mx_sampler_free(gsmp);
    free(plain_ids); free(spec_ids); free(oracle); free(sbuf); free(sp_plain); free(sp_spec); free(sp_ratio);
    free(pp_t); free(tg_t); free(bw); free(seg_eff); free(last); free(toks);
    mx_bw_probe_free(probe);
    mx_session_free(&s);
    mx_pool_free(pool);
out_model:
    if (sc.draft) mx_textmodel_close(&dtm); /* a draft model or a next-n module */
    if (bo->spec.draft_model) mx_textmodel_close(&tm);
    else mx_engine_close(ep);
    return rc == 2 ? 2 : rc ? 1 : 0; /* 2: a usage refusal */
}
