/* grammar_bench: the cost of constrained decoding per token, against the
 * model's own decode step, measured in the same loop.
 *
 *   build/grammar_bench -m MODEL_DIR [-s SCHEMA.json | -g GRAMMAR.gbnf | --json-object]
 *                       [-n TOKENS] [-r ROUNDS] [-t THREADS]
 *
 * Each round generates up to TOKENS tokens greedily from a fixed prompt with
 * the grammar (the model's argmax over the allowed tokens), timing each
 * decode step (mx_session_feed of one token) and each grammar step (mask,
 * applying it, accepting the token; not the argmax) separately, in wall
 * time and in the thread's CPU time (the grammar's cost on a loaded machine). Round 1 uses a freshly
 * compiled grammar ("cold": its per-position token sets are computed as
 * positions are first met); later rounds reuse it ("warm", as a server does
 * for a repeated schema). Prints medians and means in ms and the ratio. */
#include "grammar/grammar.h"
#include "runtime/constrain.h"
#include "runtime/generate.h"
#include "runtime/textmodel.h"
#include "format/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* this thread's CPU time: the grammar's own cost, whatever else loads the machine */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (!n) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *schema = NULL, *gbnf = NULL;
    bool json_object = false;
    int n_tok = 128, rounds = 3, threads = mx_default_threads();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) schema = argv[++i];
        else if (!strcmp(argv[i], "-g") && i + 1 < argc) gbnf = argv[++i];
        else if (!strcmp(argv[i], "--json-object")) json_object = true;
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else { fprintf(stderr, "usage: grammar_bench -m DIR [-s SCHEMA | -g GBNF | --json-object] [-n N] [-r R] [-t T]\n"); return 2; }
    }
    if (!model || (!!schema + !!gbnf + json_object) != 1 || n_tok < 1 || rounds < 1) {
        fprintf(stderr, "grammar_bench: give -m DIR and one of -s, -g, --json-object\n");
        return 2;
    }
    mx_textmodel tm;
    if (mx_textmodel_open(model, &tm)) { fprintf(stderr, "grammar_bench: %s\n", mx_errmsg()); return 1; }
    int V = tm.e.model.arch.vocab;
    double t0 = mx_now();
    mx_gvocab *gv = mx_textmodel_gvocab(&tm);
    double t_vocab = mx_now() - t0;
    if (!gv) { fprintf(stderr, "grammar_bench: %s\n", mx_errmsg()); return 1; }
    t0 = mx_now();
    mx_grammar *g = json_object ? mx_grammar_from_schema(NULL, gv) : mx_grammar_load_file(gv, schema, gbnf);
    double t_compile = mx_now() - t0;
    if (!g) { fprintf(stderr, "grammar_bench: %s\n", mx_errmsg()); return 1; }
    printf("model %s: vocab %d (%d in the tokenizer); vocabulary trie %.0f ms, grammar compile %.2f ms\n", model, V,
           mx_tok_vocab_size(tm.tok), t_vocab * 1e3, t_compile * 1e3);
    int32_t *prompt = NULL;
    int np = 0;
    const char *ptext = "Reply with JSON only.";
    if (mx_textmodel_encode(&tm, ptext, strlen(ptext), true, &prompt, &np)) { fprintf(stderr, "grammar_bench: %s\n", mx_errmsg()); return 1; }
    mx_pool *pool = mx_pool_new(threads);
    float *logits = malloc(sizeof(float) * (size_t)V);
    double *fwd = malloc(sizeof(double) * (size_t)n_tok), *msk = malloc(sizeof(double) * (size_t)n_tok);
    double *cpu = malloc(sizeof(double) * (size_t)n_tok);
    for (int r = 0; r < rounds; r++) {
        mx_session s;
        mx_constraint c;
        if (mx_session_init(&s, &tm.e, np + n_tok + 1, 512, pool) || mx_constraint_init(&c, g, V)) { fprintf(stderr, "grammar_bench: %s\n", mx_errmsg()); return 1; }
        mx_session_feed(&s, prompt, np, NULL, logits);
        int n = 0;
        const char *why = "token limit";
        for (; n < n_tok; n++) {
            /* the grammar's work: the mask, applying it, following the chosen token */
            double a = mx_now(), ca = cpu_now();
            int allowed = mx_constraint_mask(&c, logits);
            double dm = mx_now() - a, cm = cpu_now() - ca;
            int32_t tok = allowed > 0 ? mx_argmax(logits, V) : -1;
            a = mx_now();
            ca = cpu_now();
            bool ok = tok >= 0 && !mx_constraint_accept(&c, tok);
            msk[n] = dm + mx_now() - a;
            cpu[n] = cm + cpu_now() - ca;
            if (!ok) { why = allowed < 0 ? mx_errmsg() : "grammar complete"; break; }
            if (mx_textmodel_is_eos(&tm, tok)) { why = "end token"; n++; break; }
            a = mx_now();
            mx_session_feed(&s, &tok, 1, NULL, logits);
            fwd[n] = mx_now() - a;
            if (mx_constraint_done(&c)) { why = "grammar complete"; n++; break; }
        }
        int nf = n; /* the last token may have no forward step */
        if (nf && (!strcmp(why, "end token") || !strcmp(why, "grammar complete"))) nf--;
        double mm = mean(msk, n), mf = mean(fwd, nf), mc = mean(cpu, n);
        double med_m = median(msk, n), med_f = median(fwd, nf), med_c = median(cpu, n);
        printf("round %d (%s): %d tokens (%s); grammar per token: median %.3f ms, mean %.3f ms (CPU: median %.3f, mean %.3f); "
               "decode step: median %.2f ms, mean %.2f ms; grammar / decode (means) %.2f %%\n",
               r + 1, r ? "warm" : "cold", n, why, med_m * 1e3, mm * 1e3, med_c * 1e3, mc * 1e3, med_f * 1e3, mf * 1e3, mf > 0 ? 100 * mm / mf : 0);
        mx_constraint_free(&c);
        mx_session_free(&s);
    }
    free(fwd);
    free(msk);
    free(cpu);
    free(logits);
    free(prompt);
    mx_pool_free(pool);
    mx_grammar_unref(g);
    mx_gvocab_free(gv);
    mx_textmodel_close(&tm);
    return 0;
}
