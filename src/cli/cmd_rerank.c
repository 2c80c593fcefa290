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

int cmd_rerank(int argc, char **argv) {
    const char *model = NULL, *query = NULL, *format = "text";
    const char *docs[MAX_DOCS], *id_lists[MAX_DOCS], *type_lists[MAX_DOCS];
    int n_docs = 0, n_ids = 0, n_types = 0, threads = mx_default_threads();
    mx_embed_opts eo = {.pooling = MX_EMB_POOL_AUTO};
    mx_args a = {"rerank", argc, 1, argv};
    for (; a.i < argc; a.i++) {
        bool ok = true;
        const char *v;
        if (mx_arg_is(&a, "-m", "--model")) ok = (model = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-q", "--query")) ok = (query = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "-d", "--document")) {
            ok = (v = mx_arg_val(&a)) != NULL && n_docs < MAX_DOCS;
            if (ok) docs[n_docs++] = v;
        } else if (mx_arg_is(&a, "--prompt-ids", NULL)) {
            ok = (v = mx_arg_val(&a)) != NULL && n_ids < MAX_DOCS;
            if (ok) id_lists[n_ids++] = v;
        } else if (mx_arg_is(&a, "--token-type-ids", NULL)) {
            ok = (v = mx_arg_val(&a)) != NULL && n_types < MAX_DOCS;
            if (ok) type_lists[n_types++] = v;
        } else if (mx_arg_is(&a, "--output-format", NULL)) {
            ok = (format = mx_arg_val(&a)) != NULL;
            if (ok && strcmp(format, "text") && strcmp(format, "json")) {
                fprintf(stderr, "mlxcel rerank: --output-format: '%s' is not text or json\n", format);
                return 2;
            }
        } else if (mx_arg_is(&a, "--no-truncate", NULL)) eo.no_truncate = true;
        else if (mx_arg_is(&a, "-t", "--threads")) ok = mx_arg_int(&a, 1, 1024, &threads);
        else if (mx_arg_is(&a, "-h", "--help")) {
            printf("usage: mlxcel rerank -m DIR (-q QUERY -d DOC ... | --prompt-ids 1,2,3 ... [--token-type-ids 0,0,1 ...])\n"
                   "       [--output-format text|json] [--no-truncate] [-t N]\n");
            return 0;
        } else return mx_arg_unknown(&a);
        if (!ok) {
            if (n_docs >= MAX_DOCS || n_ids >= MAX_DOCS || n_types >= MAX_DOCS) fprintf(stderr, "mlxcel rerank: at most %d documents\n", MAX_DOCS);
            return 2;
        }
    }
    if (!model) { fprintf(stderr, "mlxcel rerank: -m DIR is required\n"); return 2; }
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
    if (mx_embedder_open(model, &eo, pool, &e)) { fprintf(stderr, "mlxcel rerank: %s\n", mx_errmsg()); goto out; }
    if (mx_embedder_labels(e) != 1) {
        fprintf(stderr, "mlxcel rerank: %s is not a one-label cross-encoder (%d labels)\n", model, mx_embedder_labels(e));
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
        json_object_set_new(j, "model", json_string(model));
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
