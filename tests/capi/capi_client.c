/* A program built against include/mlxcel.h and build/libmlxcel.so only
 * (tests/cli/capi.sh compiles and runs it):
 *   capi_client gen DIR PROMPT N LOGITS_FILE TEXT_FILE
 *       chat-tokenizes PROMPT as one user message, generates N tokens
 *       greedily twice (the second must repeat the first), prints
 *       "prompt_ids a,b,..." and "generated_ids a,b,...", writes the pieces'
 *       text to TEXT_FILE and the prompt's logits [T, vocab] (raw f32) to
 *       LOGITS_FILE; checks detokenize(generated) == the pieces.
 *   capi_client ids DIR IDS N      greedy ids from token ids (1,2,3), the end token ignored,
 *       twice with a logits call between (the same both times)
 *   capi_client embed DIR IDS...   (IDS: 1,2,3) prints "embedding x,y,..." per input (%.9g)
 *   capi_client errors DIR        the refusals: one "ok NAME" / "FAIL NAME: why" line each
 * Exit status 0 when everything held. */
#include <mlxcel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;
#define CHECK(name, cond, ...)                                                                                       \
    do {                                                                                                             \
        if (cond) printf("ok capi/%s\n", name);                                                                       \
        else { printf("FAIL capi/%s: ", name); printf(__VA_ARGS__); printf("\n"); failed = 1; }                       \
    } while (0)

typedef struct {
    int32_t ids[4096];
    size_t n;
    char text[65536];
    size_t len;
} collected;

static int on_token(void *user, int32_t token, const char *piece, size_t piece_len) {
    collected *c = user;
    if (c->n < 4096) c->ids[c->n++] = token;
    if (c->len + piece_len < sizeof c->text) {
        memcpy(c->text + c->len, piece, piece_len);
        c->len += piece_len;
    }
    return 0;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    printf("%s ", label);
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
    printf("\n");
}

static int die(const char *what, int rc) {
    printf("FAIL capi/%s: %s: %s\n", what, mlxcel_status_name(rc), mlxcel_last_error());
    return 1;
}

static int gen(const char *dir, const char *prompt, int n, const char *logits_file, const char *text_file) {
    mlxcel_model_options o = mlxcel_model_options_default();
    o.threads = 2;
    mlxcel_model *m;
    int rc = mlxcel_model_load(dir, &o, &m);
    if (rc) return die("load", rc);
    mlxcel_message msg = {"user", prompt};
    int32_t *ids;
    size_t T;
    if ((rc = mlxcel_chat_tokenize(m, &msg, 1, 1, &ids, &T))) return die("chat_tokenize", rc);
    mlxcel_gen_params p = mlxcel_gen_params_default();
    p.temperature = 0;
    p.max_tokens = n;
    static collected a, b;
    size_t ng = 0;
    if ((rc = mlxcel_generate(m, ids, T, &p, on_token, &a, &ng))) return die("generate", rc);
    if ((rc = mlxcel_generate(m, ids, T, &p, on_token, &b, NULL))) return die("generate again", rc);
    print_ids("prompt_ids", ids, T);
    print_ids("generated_ids", a.ids, a.n);
    CHECK("count", ng == a.n, "n_generated %zu, callback saw %zu", ng, a.n);
    CHECK("repeat", a.n == b.n && !memcmp(a.ids, b.ids, a.n * sizeof *a.ids), "a second generation from the same prompt differs");
    /* the pieces are the decoded text of the tokens (the end token left out) */
    size_t nt = a.n && mlxcel_token_is_eos(m, a.ids[a.n - 1]) ? a.n - 1 : a.n;
    char *dec;
    size_t dlen;
    if ((rc = mlxcel_detokenize(m, a.ids, nt, 1, &dec, &dlen))) return die("detokenize", rc);
    CHECK("pieces", dlen == a.len && !memcmp(dec, a.text, dlen), "pieces '%.*s' vs decoded '%s'", (int)a.len, a.text, dec);
    mlxcel_free(dec);
    FILE *f = fopen(text_file, "wb");
    if (!f || fwrite(a.text, 1, a.len, f) != a.len || fclose(f)) return die("text file", MLXCEL_ERR_ARG);
    float *lg;
    if ((rc = mlxcel_logits(m, ids, T, 1, &lg))) return die("logits", rc);
    size_t V = (size_t)mlxcel_model_vocab_size(m);
    float *last;
    if ((rc = mlxcel_logits(m, ids, T, 0, &last))) return die("logits last", rc);
    CHECK("logits_last_row", !memcmp(last, lg + (T - 1) * V, V * sizeof(float)), "the last row differs from all rows' last");
    f = fopen(logits_file, "wb");
    if (!f || fwrite(lg, sizeof(float), T * V, f) != T * V || fclose(f)) return die("logits file", MLXCEL_ERR_ARG);
    mlxcel_free(lg);
    mlxcel_free(last);
    /* tokenize / detokenize round trip on the prompt text */
    char *tmpl;
    size_t tl;
    if ((rc = mlxcel_chat_apply(m, &msg, 1, 1, &tmpl, &tl))) return die("chat_apply", rc);
    int32_t *ids2;
    size_t T2;
    if ((rc = mlxcel_tokenize(m, tmpl, tl, 0, &ids2, &T2))) return die("tokenize", rc);
    CHECK("chat_apply_tokenize", T2 == T && !memcmp(ids2, ids, T * sizeof *ids), "tokenize(chat_apply) differs from chat_tokenize");
    mlxcel_free(tmpl);
    mlxcel_free(ids2);
    mlxcel_free(ids);
    mlxcel_model_free(m);
    return failed;
}

/* Token ids in, greedy ids out (ignoring the end token), twice with a
 * logits call between: the session's reuse on any cache (recurrent, sliding). */
static int ids_gen(const char *dir, const char *list, int n) {
    mlxcel_model *m;
    int rc = mlxcel_model_load(dir, NULL, &m);
    if (rc) return die("load", rc);
    int32_t ids[256];
    size_t T = 0;
    for (const char *s = list; *s && T < 256;) {
        char *e;
        ids[T++] = (int32_t)strtol(s, &e, 10);
        s = *e ? e + 1 : e;
    }
    mlxcel_gen_params p = mlxcel_gen_params_default();
    p.max_tokens = n;
    p.ignore_eos = 1;
    static collected a, b;
    float *lg;
    if ((rc = mlxcel_generate(m, ids, T, &p, on_token, &a, NULL))) return die("generate", rc);
    if ((rc = mlxcel_logits(m, ids, T > 1 ? T - 1 : T, 1, &lg))) return die("logits", rc);
    mlxcel_free(lg);
    if ((rc = mlxcel_generate(m, ids, T, &p, on_token, &b, NULL))) return die("generate again", rc);
    print_ids("generated_ids", a.ids, a.n);
    CHECK("repeat_after_logits", a.n == b.n && !memcmp(a.ids, b.ids, a.n * sizeof *a.ids), "%s: the second generation differs", dir);
    mlxcel_model_free(m);
    return failed;
}

static int embed(const char *dir, int n, char **lists) {
    mlxcel_model *m;
    int rc = mlxcel_model_load(dir, NULL, &m);
    if (rc) return die("load embedder", rc);
    CHECK("embed_kind", mlxcel_model_kind(m) == MLXCEL_KIND_EMBED, "kind %d", mlxcel_model_kind(m));
    int32_t *ids[8];
    size_t lens[8];
    for (int i = 0; i < n && i < 8; i++) {
        ids[i] = malloc(sizeof(int32_t) * 256);
        lens[i] = 0;
        for (char *s = lists[i], *e; *s && lens[i] < 256; s = *e ? e + 1 : e) ids[i][lens[i]++] = (int32_t)strtol(s, &e, 10);
    }
    float *v;
    if ((rc = mlxcel_embed(m, (const int32_t *const *)ids, lens, (size_t)n, &v))) return die("embed", rc);
    int d = mlxcel_model_embedding_size(m);
    for (int i = 0; i < n; i++) {
        printf("embedding ");
        for (int k = 0; k < d; k++) printf("%s%.9g", k ? "," : "", v[(size_t)i * d + k]);
        printf("\n");
        free(ids[i]);
    }
    mlxcel_free(v);
    int32_t one = 1;
    float *lg;
    rc = mlxcel_logits(m, &one, 1, 0, &lg);
    CHECK("embedder_no_logits", rc == MLXCEL_ERR_UNSUPPORTED, "logits on an embedder: %s", mlxcel_status_name(rc));
    mlxcel_model_free(m);
    return failed;
}

static int errors(const char *dir) {
    mlxcel_model *m = (mlxcel_model *)&failed;
    int rc = mlxcel_model_load("/nonexistent/model", NULL, &m);
    CHECK("load_missing", rc == MLXCEL_ERR_LOAD && !m && strstr(mlxcel_last_error(), "/nonexistent/model"), "%s, '%s'",
          mlxcel_status_name(rc), mlxcel_last_error());
    mlxcel_model_options o = mlxcel_model_options_default();
    o.threads = -3;
    rc = mlxcel_model_load(dir, &o, &m);
    CHECK("load_bad_threads", rc == MLXCEL_ERR_ARG && strstr(mlxcel_last_error(), "threads"), "%s, '%s'", mlxcel_status_name(rc),
          mlxcel_last_error());
    o = mlxcel_model_options_default();
    o.context = 16;
    o.threads = 1;
    if ((rc = mlxcel_model_load(dir, &o, &m))) return die("load", rc);
    CHECK("version", mlxcel_api_version() == MLXCEL_API_VERSION && strlen(mlxcel_version()) > 0, "api %d, version '%s'",
          mlxcel_api_version(), mlxcel_version());
    int32_t ids[4] = {1, 2, 3, 4};
    mlxcel_gen_params p = mlxcel_gen_params_default();
    p.temperature = -1;
    rc = mlxcel_generate(m, ids, 4, &p, NULL, NULL, NULL);
    CHECK("bad_temperature", rc == MLXCEL_ERR_ARG && strstr(mlxcel_last_error(), "temperature"), "%s, '%s'", mlxcel_status_name(rc),
          mlxcel_last_error());
    p = mlxcel_gen_params_default();
    p.top_p = 1.5f;
    rc = mlxcel_generate(m, ids, 4, &p, NULL, NULL, NULL);
    CHECK("bad_top_p", rc == MLXCEL_ERR_ARG && strstr(mlxcel_last_error(), "top_p"), "%s, '%s'", mlxcel_status_name(rc),
          mlxcel_last_error());
    p = mlxcel_gen_params_default();
    p.max_tokens = 13; /* 4 + 13 > 16 */
    rc = mlxcel_generate(m, ids, 4, &p, NULL, NULL, NULL);
    CHECK("context", rc == MLXCEL_ERR_CONTEXT && strstr(mlxcel_last_error(), "context"), "%s, '%s'", mlxcel_status_name(rc),
          mlxcel_last_error());
    p.max_tokens = 12;
    rc = mlxcel_generate(m, ids, 4, &p, NULL, NULL, NULL);
    CHECK("context_fits", rc == MLXCEL_OK, "%s, '%s'", mlxcel_status_name(rc), mlxcel_last_error());
    int32_t bad[2] = {1, 1 << 30};
    p.max_tokens = 1;
    rc = mlxcel_generate(m, bad, 2, &p, NULL, NULL, NULL);
    CHECK("bad_token", rc == MLXCEL_ERR_ARG && strstr(mlxcel_last_error(), "vocabulary"), "%s, '%s'", mlxcel_status_name(rc),
          mlxcel_last_error());
    rc = mlxcel_generate(m, ids, 0, NULL, NULL, NULL, NULL);
    CHECK("empty_prompt", rc == MLXCEL_ERR_ARG, "%s", mlxcel_status_name(rc));
    float *v;
    const int32_t *in[1] = {ids};
    size_t len[1] = {4};
    rc = mlxcel_embed(m, in, len, 1, &v);
    CHECK("generator_no_embed", rc == MLXCEL_ERR_UNSUPPORTED, "%s", mlxcel_status_name(rc));
    char *t;
    rc = mlxcel_detokenize(m, bad, 2, 1, &t, NULL);
    CHECK("detokenize_bad_id", rc == MLXCEL_ERR_ARG && !t, "%s", mlxcel_status_name(rc));
    rc = mlxcel_tokenize(m, NULL, 0, 1, NULL, NULL);
    CHECK("null_args", rc == MLXCEL_ERR_ARG, "%s", mlxcel_status_name(rc));
    mlxcel_model_free(m);
    mlxcel_model_free(NULL);
    return failed;
}

int main(int argc, char **argv) {
    if (argc >= 7 && !strcmp(argv[1], "gen")) return gen(argv[2], argv[3], atoi(argv[4]), argv[5], argv[6]);
    if (argc == 5 && !strcmp(argv[1], "ids")) return ids_gen(argv[2], argv[3], atoi(argv[4]));
    if (argc >= 4 && !strcmp(argv[1], "embed")) return embed(argv[2], argc - 3, argv + 3);
    if (argc == 3 && !strcmp(argv[1], "errors")) return errors(argv[2]);
    fprintf(stderr, "usage: capi_client gen DIR PROMPT N LOGITS TEXT | ids DIR IDS N | embed DIR IDS... | errors DIR\n");
    return 2;
}
