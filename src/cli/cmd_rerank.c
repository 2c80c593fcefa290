/* mlxcel rerank: scores documents against a query with a cross-encoder
 * (a one-label …ForSequenceClassification model): score = sigmoid(logit).
 *
 *   mlxcel rerank -m DIR (-q QUERY -d DOC ... | --prompt-ids 1,2,3 ... [--token-type-ids 0,0,1 ...])
 *                 [--output-format text|json] [--no-truncate] [-t N]
 *
 * Each --prompt-ids is one complete pair input ([CLS] q [SEP] d [SEP] as the
 * tokenizer builds it). text: one line per document, best first:
 * "RANK SCORE LOGIT INDEX DOCUMENT". json: {"model", "logits": [...],
 * "scores": [...]} in input order, and "ranking": the indices best first. */
#include "cli.h"
#include "args.h"
#include "../base/base.h"
#include "../runtime/embed.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DOCS 4096

static const float *g_scores;
static int by_score(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    if (g_scores[a] != g_scores[b]) return g_scores[a] < g_scores[b] ? 1 : -1;
    return a - b;
}

typedef struct {
    const char *model, *query, *format;
    mx_strlist docs, id_lists, type_lists;
    int threads;
    bool fast;
    mx_embed_opts eo;
} rerank_opts;

static void rerank_init(void *p) {
    rerank_opts *o = p;
    o->format = "text";
    o->threads = mx_default_threads();
    o->eo.pooling = MX_EMB_POOL_AUTO;
}

#define R(f) offsetof(rerank_opts, f)
static const mx_opt rerank_tab[] = {
    OPT_MODEL(rerank_opts, model),
    {"-q", "--query", NULL, OPT_STR, "TEXT", 0, 0, R(query), "the query", NULL, 0},
    {"-d", "--document", NULL, OPT_LIST, "TEXT", 0, 0, R(docs), "a document to score (repeatable)", NULL, 0},
    {NULL, "--prompt-ids", NULL, OPT_LIST, "IDS", 0, 0, R(id_lists), "a whole pair input as token ids (repeatable)", NULL, 0},
    {NULL, "--token-type-ids", NULL, OPT_LIST, "IDS", 0, 0, R(type_lists), "token type ids of each --prompt-ids input", NULL, 0},
    {NULL, "--output-format", NULL, OPT_CHOICE, NULL, 0, 0, R(format),
     "text: RANK SCORE LOGIT INDEX DOCUMENT per line, best first; json: logits, scores, ranking", "text|json", 0},
    {NULL, "--no-truncate", NULL, OPT_FLAG, NULL, 0, 0, R(eo.no_truncate), "refuse inputs longer than the model's maximum", NULL, 0},
    OPT_THREADS(rerank_opts, threads),
    OPT_FAST(rerank_opts, fast),
    {0},
};
#undef R

static int rerank_main(const rerank_opts *o, const char *model);

static int rerank_run(void *p) {
    const rerank_opts *o = p;
    if (!o->model) { fprintf(stderr, "mlxcel rerank: -m MODEL is required\n"); return 2; }
    if (o->docs.n > MAX_DOCS || o->id_lists.n > MAX_DOCS) { fprintf(stderr, "mlxcel rerank: at most %d documents\n", MAX_DOCS); return 2; }
    char *dir = cli_model_dir("rerank", o->model);
    if (!dir) return 1;
    int rc = rerank_main(o, dir);
    free(dir);
    return rc;
}

const mx_cmd mx_cmd_rerank = {
    .name = "rerank",
    .summary = "score documents against a query with a cross-encoder",
    .usage = "-m MODEL (-q QUERY -d DOC ... | --prompt-ids 1,2,3 ... [--token-type-ids 0,0,1 ...]) [options]",
    .details = "A one-label ...ForSequenceClassification model; score = sigmoid(logit).",
    .opts = rerank_tab,
    .size = sizeof(rerank_opts),
    .init = rerank_init,
    .samp_off = OPT_NO_SAMPLING,
    .run = rerank_run,
    .loads_model = true,
};

static int rerank_main(const rerank_opts *o, const char *model) {
    const char *query = o->query, *format = o->format;
    const char *const *docs = o->docs.v, *const *id_lists = o->id_lists.v, *const *type_lists = o->type_lists.v;
    int n_docs = o->docs.n, n_ids = o->id_lists.n, n_types = o->type_lists.n, threads = o->threads;
    mx_embed_opts eo = o->eo;
    if (n_ids && (query || n_docs)) { fprintf(stderr, "mlxcel rerank: give -q/-d texts or --prompt-ids, not both\n"); return 2; }
    if (!n_ids && (!query || !n_docs)) { fprintf(stderr, "mlxcel rerank: give -q QUERY and at least one -d DOC (or --prompt-ids)\n"); return 2; }
    if (n_types && n_types != n_ids) {
        fprintf(stderr, "mlxcel rerank: --token-type-ids: %d given for %d --prompt-ids (one per input)\n", n_types, n_ids);
        return 2;
    }
    int n = n_ids ? n_ids : n_docs, rc = 1;
    int32_t **ids = calloc((size_t)n, sizeof *ids), **types = calloc((size_t)n, sizeof *types);
    int *lens = calloc((size_t)n, sizeof *lens), *order = calloc((size_t)n, sizeof *order);
    float *logits = calloc((size_t)n, sizeof(float)), *scores = calloc((size_t)n, sizeof(float));
    mx_pool *pool = NULL;
    mx_embedder *e = NULL;
    mx_buf b = {0};
    if (!ids || !types || !lens || !order || !logits || !scores) goto out;
    for (int i = 0; i < n_ids; i++) {
        if (!mx_parse_ids("rerank", "--prompt-ids", id_lists[i], &ids[i], &lens[i])) { rc = 2; goto out; }
        if (n_types) {
            int nt;
            if (!mx_parse_ids("rerank", "--token-type-ids", type_lists[i], &types[i], &nt)) { rc = 2; goto out; }
            if (nt != lens[i]) {
                fprintf(stderr, "mlxcel rerank: --token-type-ids %d has %d ids for %d tokens\n", i + 1, nt, lens[i]);
                rc = 2;
                goto out;
            }
        }
    }
    pool = mx_pool_new(threads);
    cli_fast_apply(o->fast);
    if (mx_embedder_open(model, &eo, pool, &e)) { fprintf(stderr, "mlxcel rerank: %s\n", mx_errmsg()); goto out; }
    if (mx_embedder_labels(e) != 1) {
        fprintf(stderr, "mlxcel rerank: %s is not a one-label cross-encoder (%d labels)\n", o->model, mx_embedder_labels(e));
        goto out;
    }
    for (int i = 0; i < n_docs; i++)
        if (mx_rerank_encode_pair(e, query, docs[i], &ids[i], &types[i], &lens[i])) {
            fprintf(stderr, "mlxcel rerank: -d %d: %s\n", i + 1, mx_errmsg());
            goto out;
        }
    if (mx_rerank_batch(e, (const int32_t *const *)ids, (const int32_t *const *)types, lens, n, logits, scores)) {
        fprintf(stderr, "mlxcel rerank: %s\n", mx_errmsg());
        goto out;
    }
    for (int i = 0; i < n; i++) order[i] = i;
    g_scores = scores;
    qsort(order, (size_t)n, sizeof(int), by_score);
    if (!strcmp(format, "json")) {
        json_t *j = json_object(), *jl = json_array(), *js = json_array(), *jr = json_array();
        json_object_set_new(j, "model", json_string(o->model));
        for (int i = 0; i < n; i++) {
            json_array_append_new(jl, json_real(logits[i]));
            json_array_append_new(js, json_real(scores[i]));
            json_array_append_new(jr, json_integer(order[i]));
        }
        json_object_set_new(j, "logits", jl);
        json_object_set_new(j, "scores", js);
        json_object_set_new(j, "ranking", jr);
        char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9));
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        for (int r = 0; r < n; r++) {
            int i = order[r];
            mx_buf_printf(&b, "%d %.6f %.6f %d", r + 1, scores[i], logits[i], i);
            if (n_docs) mx_buf_printf(&b, " %s", docs[i]);
            mx_buf_puts(&b, "\n");
        }
        if (b.len) fwrite(b.data, 1, b.len, stdout);
    }
    rc = 0;
out:
    mx_buf_free(&b);
    mx_embedder_close(e);
    mx_pool_free(pool);
    for (int i = 0; ids && i < n; i++) free(ids[i]);
    for (int i = 0; types && i < n; i++) free(types[i]);
    free(ids); free(types); free(lens); free(order); free(logits); free(scores);
    return rc;
}
