/* mlxcel embed: sentence embeddings (or per-token hidden states) of texts or
 * token ids, through the model's sentence-transformers pipeline.
 *
 *   mlxcel embed -m DIR (-p TEXT ... | --prompt-ids 1,2,3 ... [--token-type-ids 0,0,1 ...])
 *                [--pooling auto|mean|cls|last|max|none] [--dimensions D] [--no-truncate]
 *                [--output-format text|json] [--hidden-out FILE] [-t N] [--batch-tokens N]
 *
 * text: one line per input, the values separated by spaces (pooling none:
 * one line per token, inputs separated by a blank line). json: {"model",
 * "pooling", "dim", "normalized", "embeddings": [[...], ...], "tokens": [n, ...]}
 * (pooling none: embeddings[i] is [T][H]). --hidden-out FILE (one input)
 * writes F32 last_hidden_state [T, H] and, when the model has a pooler,
 * pooler_output [H] as safetensors. */
#include "cli.h"
#include "args.h"
#include "../base/base.h"
#include "../runtime/embed.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 4096

typedef struct {
    const char *model, *format, *hidden_out, *pooling;
    mx_strlist texts, id_lists, type_lists;
    int threads;
    bool fast;
    mx_embed_opts eo;
    const char *dir;
} embed_opts;

static void embed_init(void *p) {
    embed_opts *o = p;
    o->format = "text";
    o->pooling = "auto";
    o->threads = mx_default_threads();
}

#define E(f) offsetof(embed_opts, f)
static const mx_opt embed_tab[] = {
    OPT_MODEL(embed_opts, model),
    {"-p", "--prompt", NULL, OPT_LIST, "TEXT", 0, 0, E(texts), "an input text (repeatable)", NULL, 0},
    {NULL, "--prompt-ids", NULL, OPT_LIST, "IDS", 0, 0, E(id_lists), "an input as token ids 1,2,3 (repeatable)", NULL, 0},
    {NULL, "--token-type-ids", NULL, OPT_LIST, "IDS", 0, 0, E(type_lists), "token type ids of each --prompt-ids input", NULL, 0},
    {NULL, "--pooling", NULL, OPT_CHOICE, NULL, 0, 0, E(pooling), "auto: the model's sentence-transformers pipeline; none: per-token states",
     "auto|mean|cls|last|max|none", 0},
    {NULL, "--dimensions", NULL, OPT_INT, "D", 1, 1 << 20, E(eo.dimensions), "keep the first D dimensions (Matryoshka), renormalized", NULL, 0},
    {NULL, "--no-truncate", NULL, OPT_FLAG, NULL, 0, 0, E(eo.no_truncate), "refuse inputs longer than the model's maximum instead of cutting them", NULL, 0},
    {NULL, "--output-format", NULL, OPT_CHOICE, NULL, 0, 0, E(format), "text: one line per input; json: one object", "text|json", 0},
    {NULL, "--hidden-out", NULL, OPT_STR, "FILE", 0, 0, E(hidden_out),
     "(one input) write F32 last_hidden_state [T, H] and pooler_output [H] as safetensors", NULL, 0},
    OPT_THREADS(embed_opts, threads),
    OPT_FAST(embed_opts, fast),
    {NULL, "--batch-tokens", NULL, OPT_INT, "N", 1, 1 << 24, E(eo.max_tokens), "tokens per forward pass", NULL, 0},
    {0},
};
#undef E

static int embed_run(void *p);
const mx_cmd mx_cmd_embed = {
    .name = "embed",
    .summary = "sentence embeddings / hidden states of texts or token ids",
    .usage = "-m MODEL (-p TEXT ... | --prompt-ids 1,2,3 ... [--token-type-ids 0,0,1 ...]) [options]",
    .details = "For the encoder families (bert, xlm-roberta, modernbert), through the model's sentence-transformers pipeline.",
    .opts = embed_tab,
    .size = sizeof(embed_opts),
    .init = embed_init,
    .samp_off = OPT_NO_SAMPLING,
    .run = embed_run,
    .loads_model = true,
};

static int parse_pooling(const char *s, int *out) {
    static const struct { const char *n; int v; } map[] = {
        {"auto", MX_EMB_POOL_AUTO}, {"mean", MX_POOL_MEAN}, {"cls", MX_POOL_CLS}, {"last", MX_POOL_LAST},
        {"max", MX_POOL_MAX}, {"none", MX_EMB_POOL_NONE},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(map); i++)
        if (!strcmp(s, map[i].n)) { *out = map[i].v; return 0; }
    return -1;
}

static void print_vec(mx_buf *b, const float *v, int n, bool json) {
    if (json) mx_buf_puts(b, "[");
    for (int i = 0; i < n; i++) mx_buf_printf(b, json ? "%s%.9g" : "%s%.7g", i ? (json ? "," : " ") : "", v[i]);
    if (json) mx_buf_puts(b, "]");
}

static void json_str(mx_buf *b, const char *s) {
    json_t *j = json_string(s);
    char *d = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    mx_buf_puts(b, d ? d : "\"\"");
    free(d);
    json_decref(j);
}

static int write_hidden(const char *path, const float *h, int T, int H, const float *pooler) {
    mx_st_out ts[2] = {
        {"last_hidden_state", MX_DT_F32, 2, {T, H}, h, (size_t)T * H * sizeof(float)},
        {"pooler_output", MX_DT_F32, 1, {H}, pooler, (size_t)H * sizeof(float)},
    };
    return mx_st_write(path, ts, pooler ? 2 : 1, "{\"format\":\"pt\"}");
}

static int embed_main(embed_opts o);

static int embed_run(void *p) {
    embed_opts *o = p;
    if (!o->model) { fprintf(stderr, "mlxcel embed: -m MODEL is required\n"); return 2; }
    if (o->texts.n > MAX_INPUTS || o->id_lists.n > MAX_INPUTS) { fprintf(stderr, "mlxcel embed: at most %d inputs\n", MAX_INPUTS); return 2; }
    parse_pooling(o->pooling, &o->eo.pooling);
    char *dir = cli_model_dir("embed", o->model);
    if (!dir) return 1;
    o->dir = dir;
    int rc = embed_main(*o);
    free(dir);
    return rc;
}

static int embed_main(embed_opts o) {
    if (!o.model) { fprintf(stderr, "mlxcel embed: -m DIR is required\n"); return 2; }
    if (!o.texts.n == !o.id_lists.n) { fprintf(stderr, "mlxcel embed: give the inputs with -p TEXT or with --prompt-ids (one of them)\n"); return 2; }
    if (o.type_lists.n && o.type_lists.n != o.id_lists.n) {
        fprintf(stderr, "mlxcel embed: --token-type-ids: %d given for %d --prompt-ids (one per input)\n", o.type_lists.n, o.id_lists.n);
        return 2;
    }
    int n = o.texts.n + o.id_lists.n, rc = 1;
    if (o.hidden_out && n != 1) { fprintf(stderr, "mlxcel embed: --hidden-out takes exactly one input (%d given)\n", n); return 2; }
    int32_t **ids = calloc((size_t)n, sizeof *ids), **types = calloc((size_t)n, sizeof *types);
    int *lens = calloc((size_t)n, sizeof *lens);
    if (!ids || !types || !lens) { free(ids); free(types); free(lens); return 1; }
    for (int i = 0; i < o.id_lists.n; i++) {
        if (!mx_parse_ids("embed", "--prompt-ids", o.id_lists.v[i], &ids[i], &lens[i])) { rc = 2; goto out_ids; }
        if (o.type_lists.n) {
            int nt;
            if (!mx_parse_ids("embed", "--token-type-ids", o.type_lists.v[i], &types[i], &nt)) { rc = 2; goto out_ids; }
            if (nt != lens[i]) {
                fprintf(stderr, "mlxcel embed: --token-type-ids %d has %d ids for %d tokens\n", i + 1, nt, lens[i]);
                rc = 2;
                goto out_ids;
            }
        }
    }
    mx_pool *pool = mx_pool_new(o.threads);
    mx_embedder *e = NULL;
    float *out = NULL, *hidden = NULL, *pooler = NULL;
    mx_buf b = {0};
    cli_fast_apply(o.fast);
    if (mx_embedder_open(o.dir, &o.eo, pool, &e)) { fprintf(stderr, "mlxcel embed: %s\n", mx_errmsg()); goto out; }
    for (int i = 0; i < o.texts.n; i++)
        if (mx_embed_encode_text(e, o.texts.v[i], strlen(o.texts.v[i]), &ids[i], &lens[i])) {
            fprintf(stderr, "mlxcel embed: -p %d: %s\n", i + 1, mx_errmsg());
            goto out;
        }
    bool json = !strcmp(o.format, "json"), none = o.eo.pooling == MX_EMB_POOL_NONE;
    int H = mx_embedder_hidden(e), dim = none ? H : mx_embedder_dim(e), maxl = mx_embedder_max_len(e);
    if (json) {
        mx_buf_puts(&b, "{\"model\":");
        json_str(&b, o.model);
        mx_buf_puts(&b, ",\"pooling\":");
        json_str(&b, none ? "none" : mx_embedder_describe(e));
        mx_buf_printf(&b, ",\"dim\":%d,\"normalized\":%s,\"embeddings\":[", dim, !none && mx_embedder_normalizes(e) ? "true" : "false");
    }
    if (none || o.hidden_out) { /* per-token states, one input at a time */
        hidden = malloc((size_t)maxl * H * sizeof(float));
        pooler = malloc((size_t)H * sizeof(float));
        if (!hidden || !pooler) goto out;
    }
    if (!none) {
        out = malloc((size_t)n * dim * sizeof(float));
        if (!out) goto out;
        if (mx_embed_batch_ex(e, (const int32_t *const *)ids, (const int32_t *const *)types, lens, NULL, n, out)) {
            fprintf(stderr, "mlxcel embed: %s\n", mx_errmsg());
            goto out;
        }
    }
    for (int i = 0; i < n; i++) {
        int T = 0;
        bool hp = false;
        if (hidden && mx_embed_hidden(e, ids[i], types[i], lens[i], hidden, &T, pooler, &hp)) {
            fprintf(stderr, "mlxcel embed: input %d: %s\n", i + 1, mx_errmsg());
            goto out;
        }
        if (o.hidden_out && write_hidden(o.hidden_out, hidden, T, H, hp ? pooler : NULL)) {
            fprintf(stderr, "mlxcel embed: --hidden-out: %s\n", mx_errmsg());
            goto out;
        }
        if (json && i) mx_buf_puts(&b, ",");
        if (none) {
            if (json) mx_buf_puts(&b, "[");
            else if (i) mx_buf_puts(&b, "\n");
            for (int t = 0; t < T; t++) {
                if (json && t) mx_buf_puts(&b, ",");
                print_vec(&b, hidden + (size_t)t * H, H, json);
                if (!json) mx_buf_puts(&b, "\n");
            }
            if (json) mx_buf_puts(&b, "]");
        } else {
            print_vec(&b, out + (size_t)i * dim, dim, json);
            if (!json) mx_buf_puts(&b, "\n");
        }
    }
    if (json) {
        mx_buf_puts(&b, "],\"tokens\":[");
        for (int i = 0; i < n; i++) mx_buf_printf(&b, "%s%d", i ? "," : "", MX_MIN(lens[i], maxl));
        mx_buf_puts(&b, "]}\n");
    }
    if (b.len) fwrite(b.data, 1, b.len, stdout);
    rc = 0;
out:
    mx_buf_free(&b);
    free(out);
    free(hidden);
    free(pooler);
    mx_embedder_close(e);
    mx_pool_free(pool);
out_ids:
    for (int i = 0; i < n; i++) { free(ids[i]); free(types[i]); }
    free(ids);
    free(types);
    free(lens);
    return rc;
}
