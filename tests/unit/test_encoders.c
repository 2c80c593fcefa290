#define _GNU_SOURCE
/* Encoder parity against the Hugging Face fixtures whose task is embedding or
 * sequence-classification: last_hidden_state, pooler_output and logits within
 * 1e-4 * max(1, max|ref|) over attention_mask == 1 rows, run padded as given
 * (with the mask) and unpadded (each sequence at its true length); batching
 * (many sequences stacked in one pass) equal to one at a time; and the
 * sentence-transformers pipeline (modules.json, 1_Pooling, Dense, Normalize,
 * Matryoshka dimensions, truncation) against values computed here from the
 * fixture's own reference hidden states. */
#include "test.h"
#include "base/base.h"
#include "base/threadpool.h"
#include "nn/encoder.h"
#include "runtime/embed.h"
#include "fixtures.h"
#include <sys/stat.h>
#include <unistd.h>

/* max diff over rows with mask 1 */
static float rows_diff(const float *a, const float *b, int T, int H, const int32_t *mask) {
    float d = 0;
    for (int t = 0; t < T; t++) {
        if (mask && !mask[t]) continue;
        float x = t_maxdiff(a + (size_t)t * H, b + (size_t)t * H, (size_t)H);
        if (!(x <= d)) d = x;
    }
    return d;
}

typedef struct {
    int32_t *ids, *types, *mask;
    uint8_t *mask8;
    int T, nv; /* length, valid tokens (the mask is 1...1 0...0) */
    float *hidden, *pooler, *logits;
    size_t nh, np, nl;
} ref_t;

static void ref_free(ref_t *r) {
    free(r->ids); free(r->types); free(r->mask); free(r->mask8);
    free(r->hidden); free(r->pooler); free(r->logits);
}

static int ref_load(const char *dir, ref_t *r) {
    memset(r, 0, sizeof *r);
    char *p = mx_path_join(dir, "reference.safetensors");
    mx_st_file f;
    int rc = mx_st_open(p, &f);
    free(p);
    if (rc) return -1;
    fx_read_i64(&f, "input_ids", &r->ids, &r->T);
    int n;
    if (fx_read_i64(&f, "attention_mask", &r->mask, &n)) { r->mask = malloc(sizeof(int32_t) * r->T); for (int i = 0; i < r->T; i++) r->mask[i] = 1; }
    fx_read_i64(&f, "token_type_ids", &r->types, &n);
    r->hidden = fx_read_f32(&f, "last_hidden_state", &r->nh);
    r->pooler = fx_read_f32(&f, "pooler_output", &r->np);
    r->logits = fx_read_f32(&f, "logits", &r->nl);
    mx_st_close(&f);
    r->mask8 = malloc((size_t)r->T);
    for (int i = 0; i < r->T; i++) { r->mask8[i] = (uint8_t)r->mask[i]; r->nv += r->mask[i] != 0; }
    return 0;
}

static void check_outputs(const char *label, const mx_model *m, mx_pool *pool, const ref_t *r, const float *hidden, int n,
                          const uint8_t *mask) {
    char nm[256];
    int H = m->arch.hidden;
    if (r->hidden) {
        float tol = 1e-4f * fmaxf(1, fx_maxabs(r->hidden, r->nh)), d = rows_diff(hidden, r->hidden, MX_MIN(n, r->T), H, r->mask);
        snprintf(nm, sizeof nm, "%s/last_hidden_state", label);
        CHECK(nm, d <= tol, "max diff %g > tol %g", d, tol);
    }
    if (r->pooler) {
        float *pooled = calloc((size_t)H, sizeof(float));
        snprintf(nm, sizeof nm, "%s/pooler_output", label);
        if (!mx_head_has_pooler(m)) CHECK(nm, 0, "the model has no pooler");
        else if (mx_head_forward(m, pool, hidden, n, mask, pooled, NULL)) CHECK(nm, 0, "%s", mx_errmsg());
        else {
            float tol = 1e-4f * fmaxf(1, fx_maxabs(r->pooler, r->np)), d = t_maxdiff(pooled, r->pooler, r->np);
            CHECK(nm, d <= tol, "max diff %g > tol %g", d, tol);
        }
        free(pooled);
    }
    if (r->logits) {
        float lg[16] = {0};
        snprintf(nm, sizeof nm, "%s/logits", label);
        if (mx_head_labels(m) != (int)r->nl) CHECK(nm, 0, "model has %d labels, reference %zu", mx_head_labels(m), r->nl);
        else if (mx_head_forward(m, pool, hidden, n, mask, NULL, lg)) CHECK(nm, 0, "%s", mx_errmsg());
        else {
            float tol = 1e-4f * fmaxf(1, fx_maxabs(r->logits, r->nl)), d = t_maxdiff(lg, r->logits, r->nl);
            CHECK(nm, d <= tol, "max diff %g > tol %g (got %g, ref %g)", d, tol, lg[0], r->logits[0]);
        }
    }
}

static void run_fixture(const char *name, const char *dir, mx_pool *pool) {
    char label[256];
    mx_engine e;
    ref_t r;
    if (ref_load(dir, &r)) { CHECK(name, 0, "reference: %s", mx_errmsg()); return; }
    if (mx_engine_open(dir, &e)) { CHECK(name, 0, "load: %s", mx_errmsg()); ref_free(&r); return; }
    const mx_model *m = &e.model;
    int H = m->arch.hidden, T = r.T;
    mx_enc *enc = mx_enc_new(m, 4 * T, pool);
    float *h = calloc((size_t)4 * T * H, sizeof(float)), *h1 = calloc((size_t)T * H, sizeof(float));
    /* padded as given, with the mask */
    mx_enc_seq s = {.tokens = r.ids, .type_ids = r.types, .mask = r.mask8, .n = T};
    snprintf(label, sizeof label, "%s/padded", name);
    if (mx_encode(enc, &s, 1, h)) CHECK(label, 0, "%s", mx_errmsg());
    else check_outputs(label, m, pool, &r, h, T, r.mask8);
    /* unpadded: the valid prefix only */
    mx_enc_seq u = {.tokens = r.ids, .type_ids = r.types, .mask = NULL, .n = r.nv};
    snprintf(label, sizeof label, "%s/unpadded", name);
    if (mx_encode(enc, &u, 1, h1)) CHECK(label, 0, "%s", mx_errmsg());
    else check_outputs(label, m, pool, &r, h1, r.nv, NULL);
    /* batching: [prefix of half, full (padded), valid prefix] in one pass equals each alone */
    int half = r.nv / 2;
    mx_enc_seq b[3] = {{.tokens = r.ids, .type_ids = r.types, .mask = NULL, .n = half}, {.tokens = r.ids, .type_ids = r.types, .mask = r.mask8, .n = T}, {.tokens = r.ids, .type_ids = r.types, .mask = NULL, .n = r.nv}};
    float *hb = calloc((size_t)4 * T * H, sizeof(float)), *hs = calloc((size_t)T * H, sizeof(float));
    snprintf(label, sizeof label, "%s/batch_equals_single", name);
    if (mx_encode(enc, b, 3, hb)) CHECK(label, 0, "%s", mx_errmsg());
    else {
        float worst = 0;
        size_t off = 0;
        for (int k = 0; k < 3; k++) {
            if (mx_encode(enc, &b[k], 1, hs)) { worst = INFINITY; break; }
            float d = t_maxdiff(hb + off, hs, (size_t)b[k].n * H);
            if (!(d <= worst)) worst = d;
            off += (size_t)b[k].n * H;
        }
        float tol = 1e-6f * fmaxf(1, fx_maxabs(h1, (size_t)r.nv * H));
        CHECK(label, worst <= tol, "batched vs single max diff %g > %g", worst, tol);
    }
    free(hb); free(hs);
    free(h); free(h1);
    mx_enc_free(enc);
    mx_engine_close(&e);
    ref_free(&r);
}

/* ---- sentence-transformers pipeline ---- */

static void write_file(const char *dir, const char *name, const char *text) {
    char *p = mx_path_join(dir, name);
    FILE *f = fopen(p, "w");
    if (f) { fputs(text, f); fclose(f); }
    free(p);
}

static void link_into(const char *src_dir, const char *dst_dir, const char *name) {
    char *s = mx_path_join(src_dir, name), *d = mx_path_join(dst_dir, name);
    char *abs = realpath(s, NULL);
    if (abs && symlink(abs, d)) perror(d);
    free(abs); free(s); free(d);
}

/* pools the reference hidden rows [0, nv) by hand */
static void hand_pool(const char *mode, const float *h, int nv, int H, int skip, float *out) {
    if (!strcmp(mode, "cls")) { memcpy(out, h, sizeof(float) * H); return; }
    if (!strcmp(mode, "last")) { memcpy(out, h + (size_t)(nv - 1) * H, sizeof(float) * H); return; }
    for (int i = 0; i < H; i++) {
        double acc = !strcmp(mode, "max") ? -1e30 : 0;
        for (int t = skip; t < nv; t++) {
            double v = h[(size_t)t * H + i];
            if (!strcmp(mode, "max")) acc = v > acc ? v : acc;
            else acc += v;
        }
        if (!strcmp(mode, "mean")) acc /= (nv - skip);
        if (!strcmp(mode, "mean_sqrt")) acc /= sqrt((double)(nv - skip));
        out[i] = (float)acc;
    }
}

static void l2(float *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    for (int i = 0; i < n; i++) v[i] = (float)(v[i] / sqrt(s));
}

static char *make_st_dir(const char *fixture, const char *pool_json, bool normalize, bool dense, int max_len) {
    char tmpl[] = "/tmp/mx_st_XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d) return NULL;
    d = strdup(d);
    link_into(fixture, d, "config.json");
    link_into(fixture, d, "model.safetensors");
    char buf[1024], *pd = mx_path_join(d, "1_Pooling");
    mkdir(pd, 0755);
    write_file(pd, "config.json", pool_json);
    free(pd);
    int n = snprintf(buf, sizeof buf,
                     "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
                     "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"}");
    if (dense)
        n += snprintf(buf + n, sizeof buf - n, ",{\"idx\":2,\"name\":\"2\",\"path\":\"2_Dense\",\"type\":\"sentence_transformers.models.Dense\"}");
    if (normalize)
        n += snprintf(buf + n, sizeof buf - n, ",{\"idx\":3,\"name\":\"3\",\"path\":\"3_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}");
    snprintf(buf + n, sizeof buf - n, "]");
    write_file(d, "modules.json", buf);
    if (max_len) {
        snprintf(buf, sizeof buf, "{\"max_seq_length\": %d, \"do_lower_case\": false}", max_len);
        write_file(d, "sentence_bert_config.json", buf);
    }
    return d;
}

static void rm_rf(const char *d) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd)) {}
}

/* a 64 -> 8 tanh Dense with a known weight: W[o][i] = ((o*7 + i*3) % 11 - 5) / 10, b[o] = o / 10 */
static void write_dense(const char *dir, int in, int out, float *W, float *B) {
    char *dd = mx_path_join(dir, "2_Dense"), cfg[256];
    mkdir(dd, 0755);
    snprintf(cfg, sizeof cfg, "{\"in_features\": %d, \"out_features\": %d, \"bias\": true, \"activation_function\": \"torch.nn.modules.activation.Tanh\"}", in, out);
    write_file(dd, "config.json", cfg);
    for (int o = 0; o < out; o++) {
        B[o] = (float)o / 10;
        for (int i = 0; i < in; i++) W[o * in + i] = (float)((o * 7 + i * 3) % 11 - 5) / 10;
    }
    mx_st_out ts[2] = {{"linear.weight", MX_DT_F32, 2, {out, in}, W, sizeof(float) * out * in},
                       {"linear.bias", MX_DT_F32, 1, {out}, B, sizeof(float) * out}};
    char *p = mx_path_join(dd, "model.safetensors");
    if (mx_st_write(p, ts, 2, NULL)) printf("# dense write: %s\n", mx_errmsg());
    free(p); free(dd);
}

static void st_tests(const char *root, mx_pool *pool) {
    char *fx = mx_path_join(root, "xlm-roberta-embed");
    ref_t r;
    if (ref_load(fx, &r)) { CHECK("st/reference", 0, "%s", mx_errmsg()); free(fx); return; }
    int H = 64, nv = r.nv;
    const int32_t *ids[1] = {r.ids};
    int lens[1] = {nv};
    float got[4 * 64], want[4 * 64];
    float tolh = 1e-4f * fmaxf(1, fx_maxabs(r.hidden, r.nh));
    static const struct { const char *name, *json; const char *modes[3]; } cases[] = {
        {"mean", "{\"word_embedding_dimension\":64,\"pooling_mode_mean_tokens\":true}", {"mean"}},
        {"cls", "{\"word_embedding_dimension\":64,\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":false}", {"cls"}},
        {"max", "{\"word_embedding_dimension\":64,\"pooling_mode_max_tokens\":true,\"pooling_mode_mean_tokens\":false}", {"max"}},
        {"last", "{\"word_embedding_dimension\":64,\"pooling_mode_lasttoken\":true,\"pooling_mode_mean_tokens\":false}", {"last"}},
        {"mean_sqrt_len", "{\"pooling_mode_mean_sqrt_len_tokens\":true,\"pooling_mode_mean_tokens\":false}", {"mean_sqrt"}},
        {"cls+mean", "{\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":true}", {"cls", "mean"}},
    };
    for (size_t c = 0; c < MX_ARRAY_LEN(cases); c++) {
        char nm[128];
        snprintf(nm, sizeof nm, "st/pooling_%s", cases[c].name);
        char *d = make_st_dir(fx, cases[c].json, false, false, 0);
        mx_embedder *e;
        if (mx_embedder_open(d, NULL, pool, &e)) { CHECK(nm, 0, "open: %s", mx_errmsg()); rm_rf(d); free(d); continue; }
        int dim = 0;
        for (int k = 0; k < 3 && cases[c].modes[k]; k++) { hand_pool(cases[c].modes[k], r.hidden, nv, H, 0, want + dim); dim += H; }
        if (mx_embedder_dim(e) != dim) CHECK(nm, 0, "dim %d, expected %d", mx_embedder_dim(e), dim);
        else if (mx_embed_batch(e, ids, lens, 1, got)) CHECK(nm, 0, "%s", mx_errmsg());
        else {
            float dd = t_maxdiff(got, want, (size_t)dim), tol = !strcmp(cases[c].name, "mean_sqrt_len") ? tolh * sqrtf((float)nv) : tolh;
            CHECK(nm, dd <= tol, "max diff %g > %g", dd, tol);
        }
        mx_embedder_close(e);
        rm_rf(d); free(d);
    }
    /* include_prompt = false: mean over the tokens after the prompt */
    {
        char *d = make_st_dir(fx, "{\"pooling_mode_mean_tokens\":true,\"include_prompt\":false}", false, false, 0);
        mx_embedder *e;
        if (mx_embedder_open(d, NULL, pool, &e)) CHECK("st/include_prompt_false", 0, "open: %s", mx_errmsg());
        else {
            int pl[1] = {5};
            hand_pool("mean", r.hidden, nv, H, 5, want);
            if (mx_embed_batch_ex(e, ids, NULL, lens, pl, 1, got)) CHECK("st/include_prompt_false", 0, "%s", mx_errmsg());
            else {
                float dd = t_maxdiff(got, want, H);
                CHECK("st/include_prompt_false", dd <= tolh, "max diff %g", dd);
            }
            mx_embedder_close(e);
        }
        rm_rf(d); free(d);
    }
    /* Dense (tanh) + Normalize, then Matryoshka dimensions (re-normalised) */
    {
        char *d = make_st_dir(fx, "{\"pooling_mode_mean_tokens\":true}", true, true, 0);
        float W[8 * 64], B[8], pooled[64];
        write_dense(d, 64, 8, W, B);
        hand_pool("mean", r.hidden, nv, H, 0, pooled);
        for (int o = 0; o < 8; o++) {
            double s = B[o];
            for (int i = 0; i < 64; i++) s += (double)W[o * 64 + i] * pooled[i];
            want[o] = (float)tanh(s);
        }
        float full[8];
        memcpy(full, want, sizeof full);
        l2(want, 8);
        mx_embedder *e;
        if (mx_embedder_open(d, NULL, pool, &e)) CHECK("st/dense_normalize", 0, "open: %s", mx_errmsg());
        else {
            if (mx_embedder_dim(e) != 8 || mx_embed_batch(e, ids, lens, 1, got)) CHECK("st/dense_normalize", 0, "dim %d: %s", mx_embedder_dim(e), mx_errmsg());
            else {
                float dd = t_maxdiff(got, want, 8);
                CHECK("st/dense_normalize", dd <= 1e-4f, "max diff %g", dd);
            }
            mx_embedder_close(e);
        }
        mx_embed_opts o = {.pooling = MX_EMB_POOL_AUTO, .dimensions = 4};
        l2(full, 4);
        if (mx_embedder_open(d, &o, pool, &e)) CHECK("st/matryoshka_dimensions", 0, "open: %s", mx_errmsg());
        else {
            if (mx_embedder_dim(e) != 4 || mx_embed_batch(e, ids, lens, 1, got)) CHECK("st/matryoshka_dimensions", 0, "dim %d: %s", mx_embedder_dim(e), mx_errmsg());
            else {
                float dd = t_maxdiff(got, full, 4);
                CHECK("st/matryoshka_dimensions", dd <= 1e-4f, "max diff %g", dd);
            }
            mx_embedder_close(e);
        }
        o.dimensions = 9;
        CHECK("st/dimensions_too_large_refused", mx_embedder_open(d, &o, pool, &e) != 0, "opened");
        rm_rf(d); free(d);
    }
    /* max_seq_length: longer inputs are cut (= the embedding of the prefix), or refused */
    {
        char *d = make_st_dir(fx, "{\"pooling_mode_mean_tokens\":true}", false, false, 20);
        mx_embedder *e;
        if (mx_embedder_open(d, NULL, pool, &e)) CHECK("st/max_seq_length", 0, "open: %s", mx_errmsg());
        else {
            float cut[64];
            const int32_t *ids2[2] = {r.ids, r.ids};
            int l2s[2] = {nv, 20};
            float two[128];
            CHECK("st/max_seq_length", mx_embedder_max_len(e) == 20, "max_len %d", mx_embedder_max_len(e));
            if (mx_embed_batch(e, ids2, l2s, 2, two)) CHECK("st/truncate", 0, "%s", mx_errmsg());
            else {
                memcpy(cut, two + 64, sizeof cut);
                float dd = t_maxdiff(two, cut, 64);
                CHECK("st/truncate", dd == 0, "cut input differs from its 20-token prefix by %g", dd);
            }
            mx_embedder_close(e);
        }
        mx_embed_opts o = {.pooling = MX_EMB_POOL_AUTO, .no_truncate = true};
        if (mx_embedder_open(d, &o, pool, &e)) CHECK("st/no_truncate_refuses", 0, "open: %s", mx_errmsg());
        else {
            CHECK("st/no_truncate_refuses", mx_embed_batch(e, ids, lens, 1, got) != 0, "accepted %d tokens over 20", nv);
            mx_embedder_close(e);
        }
        rm_rf(d); free(d);
    }
    /* many inputs per call, split over several passes, equal one at a time */
    {
        mx_embed_opts o = {.pooling = MX_POOL_MEAN, .max_tokens = 70};
        mx_embedder *e;
        if (mx_embedder_open(fx, &o, pool, &e)) CHECK("st/batch_passes", 0, "open: %s", mx_errmsg());
        else {
            enum { NB = 9 };
            const int32_t *bi[NB];
            int bl[NB];
            float *all = calloc((size_t)NB * 64, sizeof(float)), one[64], worst = 0;
            for (int k = 0; k < NB; k++) { bi[k] = r.ids + k; bl[k] = nv - 3 * k; }
            if (mx_embed_batch(e, bi, bl, NB, all)) CHECK("st/batch_passes", 0, "%s", mx_errmsg());
            else {
                for (int k = 0; k < NB; k++) {
                    mx_embed_batch(e, bi + k, bl + k, 1, one);
                    float dd = t_maxdiff(all + k * 64, one, 64);
                    if (!(dd <= worst)) worst = dd;
                }
                CHECK("st/batch_passes", worst <= 1e-6f, "batched vs single %g", worst);
            }
            free(all);
            mx_embedder_close(e);
        }
    }
    ref_free(&r);
    free(fx);
}

/* cross-encoder API on the classification fixtures: logits and sigmoid scores */
static void rerank_tests(const char *root, mx_pool *pool) {
    const char *names[] = {"bert-cls", "xlm-roberta-cls", "modernbert-cls"};
    for (size_t k = 0; k < MX_ARRAY_LEN(names); k++) {
        char *fx = mx_path_join(root, names[k]), nm[128];
        ref_t r;
        snprintf(nm, sizeof nm, "rerank/%s", names[k]);
        mx_embedder *e;
        if (ref_load(fx, &r) || mx_embedder_open(fx, NULL, pool, &e)) { CHECK(nm, 0, "%s", mx_errmsg()); free(fx); continue; }
        const int32_t *ids[2] = {r.ids, r.ids}, *types[2] = {r.types, r.types};
        int lens[2] = {r.nv, r.nv - 4};
        float lg[2], sc[2];
        if (mx_rerank_batch(e, ids, types, lens, 2, lg, sc)) CHECK(nm, 0, "%s", mx_errmsg());
        else {
            float tol = 1e-4f * fmaxf(1, fabsf(r.logits[0]));
            float want = 1.0f / (1.0f + expf(-r.logits[0]));
            CHECK(nm, fabsf(lg[0] - r.logits[0]) <= tol && fabsf(sc[0] - want) <= tol, "logit %g (ref %g), score %g (ref %g)",
                  lg[0], r.logits[0], sc[0], want);
        }
        mx_embedder_close(e);
        ref_free(&r);
        free(fx);
    }
}

/* A decoder used as an embedder (causal attention, last-token pooling, the
 * Qwen3-Embedding path): its hidden states times lm_head give the reference
 * prompt logits; and the same weights stored as the bare model (no "model."
 * prefix, no lm_head) load and embed identically. */
static void decoder_tests(const char *root, mx_pool *pool) {
    char *fx = mx_path_join(root, "qwen3"), *mp = mx_path_join(fx, "model.safetensors"), *rp = mx_path_join(fx, "reference.safetensors");
    mx_st_file w, rf;
    if (mx_st_open(mp, &w)) { CHECK("decoder_embed", 0, "%s", mx_errmsg()); goto out0; }
    if (mx_st_open(rp, &rf)) { CHECK("decoder_embed", 0, "%s", mx_errmsg()); mx_st_close(&w); goto out0; }
    int32_t *ids = NULL;
    int T = 0;
    size_t nl = 0;
   fx_read_i64(&rf, "input_ids", &ids, &T);
    float *ref = fx_read_f32(&rf, "logits", &nl);
    mx_embed_opts o = {.pooling = MX_EMB_POOL_AUTO};
    mx_embedder *e = NULL, *e2 = NULL;
    float *h = NULL, *h2 = NULL, *lg = NULL;
    if (mx_embedder_open(fx, &o, pool, &e)) { CHECK("decoder_embed", 0, "open: %s", mx_errmsg()); goto out; }
    const mx_model *m = &mx_embedder_engine(e)->model;
    int H = m->arch.hidden, V = m->arch.vocab, n = 0;
    h = calloc((size_t)T * H, sizeof(float));
    h2 = calloc((size_t)T * H, sizeof(float));
    lg = calloc((size_t)T * V, sizeof(float));
    if (mx_embed_hidden(e, ids, NULL, T, h, &n, NULL, NULL)) { CHECK("decoder_embed", 0, "%s", mx_errmsg()); goto out; }
    mx_matmul(&m->lm_head, h, T, H, lg, V, NULL);
    float tol = 1e-4f * fmaxf(1, fx_maxabs(ref, nl)), d = t_maxdiff(lg, ref, nl);
    CHECK("decoder_embed/hidden_times_lm_head_is_logits", n == T && d <= tol, "n %d, max diff %g > %g", n, d, tol);
    float v[4096], want[4096];
    const int32_t *rows[1] = {ids};
    int lens[1] = {T};
    if (H <= 4096 && !mx_embed_batch(e, rows, lens, 1, v)) {
        memcpy(want, h + (size_t)(T - 1) * H, sizeof(float) * H);
        CHECK("decoder_embed/last_token_pooling", mx_embedder_dim(e) == H && t_maxdiff(v, want, H) == 0, "differs");
    } else CHECK("decoder_embed/last_token_pooling", 0, "%s", mx_errmsg());
    /* bare-model layout */
    char tmpl[] = "/tmp/mx_bare_XXXXXX", *d2 = mkdtemp(tmpl);
    mx_st_out *ts = calloc((size_t)w.n_tensors, sizeof *ts);
    int nt = 0;
    for (int i = 0; i < w.n_tensors; i++) {
        const mx_tensor *t = &w.tensors[i];
        if (!strcmp(t->name, "lm_head.weight")) continue;
        ts[nt] = (mx_st_out){!strncmp(t->name, "model.", 6) ? t->name + 6 : t->name, t->dtype, t->ndim, {0}, t->data, t->nbytes};
        memcpy(ts[nt].shape, t->shape, sizeof t->shape);
        nt++;
    }
    char *wp = d2 ? mx_path_join(d2, "model.safetensors") : NULL;
    if (!d2 || mx_st_write(wp, ts, nt, NULL)) CHECK("decoder_embed/bare_model_layout", 0, "write: %s", mx_errmsg());
    else {
        link_into(fx, d2, "config.json");
        int n2 = 0;
        if (mx_embedder_open(d2, &o, pool, &e2) || mx_embed_hidden(e2, ids, NULL, T, h2, &n2, NULL, NULL))
            CHECK("decoder_embed/bare_model_layout", 0, "%s", mx_errmsg());
        else CHECK("decoder_embed/bare_model_layout", n2 == T && t_maxdiff(h, h2, (size_t)T * H) == 0, "hidden states differ");
    }
    free(ts);
    free(wp);
    if (d2) rm_rf(d2);
out:
    mx_embedder_close(e);
    mx_embedder_close(e2);
    free(h); free(h2); free(lg); free(ids); free(ref);
    mx_st_close(&w);
    mx_st_close(&rf);
out0:
    free(fx); free(mp); free(rp);
}

static void one(const char *name, const char *dir, const char *task, void *pool) {
    if (task && (!strcmp(task, "embedding") || !strcmp(task, "sequence-classification"))) run_fixture(name, dir, pool);
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : "tests/fixtures";
    mx_pool *pool = mx_pool_new(2);
    if (fx_each(root, one, pool)) { printf("FAIL encoders: cannot open %s\n", root); return 1; }
    st_tests(root, pool);
    rerank_tests(root, pool);
    decoder_tests(root, pool);
    mx_pool_free(pool);
    TEST_END();
}
