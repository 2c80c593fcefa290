/* Speculative decoding (runtime/spec.h):
 * - greedy ids identical to plain decoding, and the target's logits for every
 *   generated token as plain decoding computes them (1e-4 * max(1, max|ref|)),
 *   on several causal fixture families, with drafts that always agree (the
 *   target itself, as a draft model and as an oracle of its own greedy
 *   continuation), that never agree (a deliberately wrong oracle), and
 *   prompt-lookup n-grams; a draft model of another family with the same
 *   vocabulary (accepted or not, the output must not change);
 * - targets with recurrent state: their state restored past a rejection (the families above);
 *   refused when split over processes;
 * - next-n (MTP) modules split out of a checkpoint (check_mtp);
 * - the acceptance rule keeps the target's distribution: a chi-square test
 *   on a 6-token vocabulary. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "runtime/spec.h"
#include "convert/convert.h"

#define FX "tests/fixtures/"
enum { T = 11, N = 36, K = 4 };
static const int32_t PROMPT[T] = {1, 5, 9, 33, 7, 7, 12, 90, 5, 9, 33};

/* Decodes N tokens after PROMPT: plainly when cfg is NULL. rows: [N, V]. */
static int decode(mx_engine *e, const mx_spec_cfg *cfg, const mx_sampling *samp, int32_t *ids, float *rows, long *acc, long *drafted) {
    int V = e->model.arch.vocab, rc = -1;
    mx_pool *pool = mx_pool_new(2);
    mx_session s;
    mx_spec sp = {0};
    mx_sampler *smp = mx_sampler_new(samp, V);
    float *last = malloc(sizeof(float) * V);
    int32_t buf[K + 1];
    if (mx_session_init_batch(&s, e, T + N, 8, K + 1, pool)) goto out_pool;
    if (cfg && mx_spec_init(&sp, &s, smp, samp, cfg)) goto out;
    if (mx_session_feed(&s, PROMPT, T, NULL, last)) goto out;
    int np = 0, ip = 0;
    for (int n = 0; n < N;) {
        if (ip < np) {
            memcpy(rows + (size_t)n * V, sp.rows + (size_t)ip * V, sizeof(float) * V);
            ids[n] = buf[ip++];
        } else {
            memcpy(rows + (size_t)n * V, last, sizeof(float) * V);
            ids[n] = mx_sampler_sample(smp, last, s.history, s.n_history);
        }
        if (++n == N) break;
        if (!cfg) {
            if (mx_session_feed(&s, &ids[n - 1], 1, NULL, last)) goto out;
        } else if (ip == np) {
            if ((np = mx_spec_step(&sp, ids[n - 1], N - n, buf)) < 1) goto out;
            ip = 0;
        }
    }
    if (acc) { *acc = sp.accepted; *drafted = sp.drafted; }
    rc = 0;
out:
    if (cfg) mx_spec_free(&sp);
    mx_session_free(&s);
out_pool:
    mx_sampler_free(smp);
    free(last);
    mx_pool_free(pool);
    return rc;
}

static float maxabs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

static void check_family(const char *name, const char *other) {
    char dir[256], label[256];
    snprintf(dir, sizeof dir, FX "%s", name);
    mx_engine e, d;
    if (mx_engine_open(dir, &e)) { CHECK(name, 0, "%s", mx_errmsg()); return; }
    int V = e.model.arch.vocab;
    mx_sampling samp;
    mx_sampling_defaults(&samp);
    int32_t ref[N], ids[N], oracle[T + N], wrong[T + N];
    float *rref = malloc(sizeof(float) * N * V), *rows = malloc(sizeof(float) * N * V);
    if (decode(&e, NULL, &samp, ref, rref, NULL, NULL)) { CHECK(name, 0, "plain: %s", mx_errmsg()); goto out; }
    memcpy(oracle, PROMPT, sizeof PROMPT);
    memcpy(oracle + T, ref, sizeof ref);
    for (int i = 0; i < T + N; i++) wrong[i] = (oracle[i] + 1) % V; /* never the target's choice */
    float tol = 1e-4f * fmaxf(1, maxabs(rref, (size_t)N * V));
    snprintf(dir, sizeof dir, FX "%s", other);
    bool have_d = !mx_engine_open(dir, &d);
    CHECK("spec/open_draft", have_d, "%s", mx_errmsg());
    struct { const char *what; mx_spec_cfg cfg; int want; /* 1: all accepted, 0: none, -1: any */ } cases[] = {
        {"self_draft", {.kind = MX_DRAFT_MODEL, .draft_max = K, .draft = &e}, 1},
        {"oracle", {.kind = MX_DRAFT_ORACLE, .draft_max = K, .oracle = oracle, .n_oracle = T + N}, 1},
        {"wrong_oracle", {.kind = MX_DRAFT_ORACLE, .draft_max = K, .oracle = wrong, .n_oracle = T + N}, 0},
        {"ngram", {.kind = MX_DRAFT_NGRAM, .draft_max = K, .ngram = 3}, -1},
        {"other_draft", {.kind = MX_DRAFT_MODEL, .draft_max = 2, .draft = &d}, -1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        if (cases[c].cfg.draft == &d && !have_d) continue;
        long acc = 0, dr = 0;
        snprintf(label, sizeof label, "spec/%s/%s", name, cases[c].what);
        if (decode(&e, &cases[c].cfg, &samp, ids, rows, &acc, &dr)) { CHECK(label, 0, "%s", mx_errmsg()); continue; }
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (ids[i] != ref[i]) bad = i;
        float md = t_maxdiff(rows, rref, (size_t)N * V);
        bool rate = cases[c].want < 0 || (cases[c].want ? acc == dr && dr >= N / 2 : acc == 0 && dr > 0);
        CHECK(label, bad < 0 && md <= tol && rate, "first differing id at %d, logits max diff %g (tol %g), accepted %ld of %ld", bad, md, tol, acc, dr);
    }
    if (have_d) mx_engine_close(&d);
out:
    free(rref);
    free(rows);
    mx_engine_close(&e);
}

/* Sampling through a draft that is the target: p and q agree up to the
 * batched pass's rounding, so nearly every draft is accepted; and the same
 * seed gives the same tokens. */
static void check_sampled(void) {
    mx_engine e;
    if (mx_engine_open(FX "llama", &e)) { CHECK("spec/sampled", 0, "%s", mx_errmsg()); return; }
    int V = e.model.arch.vocab;
    mx_sampling samp;
    mx_sampling_defaults(&samp);
    samp.temperature = 0.9f;
    samp.top_k = 40;
    samp.seed = 7;
    int32_t a[N], b[N];
    float *rows = malloc(sizeof(float) * N * V);
    long acc = 0, dr = 0;
    mx_spec_cfg cfg = {.kind = MX_DRAFT_MODEL, .draft_max = K, .draft = &e};
    int rc = decode(&e, &cfg, &samp, a, rows, &acc, &dr) || decode(&e, &cfg, &samp, b, rows, NULL, NULL);
    CHECK("spec/sampled_self_draft", !rc && dr > 0 && acc >= dr * 9 / 10 && !memcmp(a, b, sizeof a), "rc %d, accepted %ld of %ld", rc, acc, dr);
    free(rows);
    mx_engine_close(&e);
}

/* Targets with recurrent state: the state is snapshotted before each pass and, on a rejection,
 * restored and pending and the accepted drafts fed again; the distributed refusal stays. */
static void check_recurrent_refused(void) {
    mx_engine e;
    if (mx_engine_open(FX "mamba", &e)) { CHECK("spec/refuse_recurrent_split", 0, "%s", mx_errmsg()); return; }
    static const mx_shard sh = {0};
    e.model.shard = &sh; /* as a process's part of a distributed model */
    mx_pool *pool = mx_pool_new(1);
    mx_session s;
    mx_spec sp;
    mx_sampling samp;
    mx_sampling_defaults(&samp);
    mx_sampler *smp = mx_sampler_new(&samp, e.model.arch.vocab);
    mx_spec_cfg cfg = {.kind = MX_DRAFT_NGRAM, .draft_max = K, .ngram = 2};
    int rc = mx_session_init_batch(&s, &e, 32, 8, K + 1, pool);
    CHECK("spec/refuse_recurrent_split", !rc && mx_spec_init(&sp, &s, smp, &samp, &cfg) && strstr(mx_errmsg(), "one process"), "%s", mx_errmsg());
    if (!rc) mx_session_free(&s);
    e.model.shard = NULL;
    mx_sampler_free(smp);
    mx_pool_free(pool);
    mx_engine_close(&e);
}

static uint64_t rng_state = 12345;
static double uni(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static int draw(const float *q, int n) {
    double r = uni(), c = 0;
    for (int i = 0; i < n; i++)
        if (r < (c += q[i])) return i;
    return n - 1;
}

/* Draft d ~ q, then mx_spec_accept: the output must be distributed as p.
 * 200000 draws, 5 degrees of freedom: chi-square < 20.5 (p = 0.001). The
 * same test with q in place of p as the claimed distribution must fail
 * (chi-square in the thousands), so the test can tell them apart. */
static void check_distribution(void) {
    enum { V = 6, S = 200000 };
    const float p[V] = {0.35f, 0.25f, 0.2f, 0.1f, 0.1f, 0}, q[V] = {0.05f, 0.1f, 0.4f, 0.05f, 0.2f, 0.2f};
    const float *qs[2] = {q, NULL};
    for (int c = 0; c < 2; c++) {
        long hist[V] = {0}, nacc = 0;
        for (int s = 0; s < S; s++) {
            int d = qs[c] ? draw(q, V) : 1; /* NULL: a certain draft of token 1 */
            bool acc;
            double u1 = uni(), u2 = uni();
            int32_t t = mx_spec_accept(p, V, qs[c], V, d, u1, u2, &acc);
            hist[t]++;
            nacc += acc;
        }
        double chi = 0, chi_q = 0;
        for (int i = 0; i < V; i++) {
            if (p[i] > 0) chi += (hist[i] - S * p[i]) * (hist[i] - S * p[i]) / (S * p[i]);
            else if (hist[i]) chi = 1e9; /* a token the target never gives */
            if (qs[c] && q[i] > 0) chi_q += (hist[i] - S * q[i]) * (hist[i] - S * q[i]) / (S * q[i]);
        }
        /* the acceptance rate is sum_x min(p, q) */
        double want_acc = 0;
        for (int i = 0; i < V; i++) want_acc += qs[c] ? fminf(p[i], q[i]) : (i == 1 ? p[i] : 0);
        char label[64];
        snprintf(label, sizeof label, "spec/accept_distribution_%s", qs[c] ? "q" : "certain");
        CHECK(label, chi < 20.5 && (!qs[c] || chi_q > 1000) && fabs((double)nacc / S - want_acc) < 0.005,
              "chi-square %.2f (bound 20.5), against q %.0f, acceptance %.4f vs %.4f", chi, chi_q, (double)nacc / S, want_acc);
    }
}

/* ---- next-n (MTP) modules: a checkpoint with one is made from a fixture, split by
 * mx_split_mtp and run as the draft (MX_DRAFT_MTP). Its layer is the fixture's last
 * one with the attention output and every MLP down projection zeroed (the block
 * passes its input on), so two input stages give drafts known in advance:
 * "token": eh_proj = [I | 0] and the module's own table and head of +-1 rows (each
 * row's product with itself, H, beats any other's): the first draft is the token the
 * module reads, i.e. the pending one, and so is every later one;
 * "hidden": eh_proj = [0 | I], the target's own table and head: the logits are the
 * target's head on a positive multiple of the target's hidden state, so the first
 * draft is the target's greedy choice at the position before: the pending token.
 * A module reading the token or the hidden state one position off drafts the
 * token before. "random": a random eh_proj (output unchanged, drafts anything). The checkpoints
 * come from tests/lib/add_mtp.py (shared with spec.sh). */
static int mtp_checkpoint(const char *fx, const char *src, const char *mode, bool qwen) {
    char cmd[1024]; /* tests/lib/add_mtp.py writes the fixture with a module (spec.sh's too) */
    snprintf(cmd, sizeof cmd, "python3 tests/lib/add_mtp.py %s %s %s %s", fx, src, qwen ? "qwen" : "deepseek", strcmp(mode, "random") ? mode : "");
    return system(cmd) ? -1 : 0;
}

static void check_mtp(const char *fam, bool qwen) {
    char fx[256], tmp[] = "/tmp/mlxcel-test-mtp-XXXXXX", label[256];
    snprintf(fx, sizeof fx, FX "%s", fam);
    if (!mkdtemp(tmp)) { CHECK("spec/mtp/tmpdir", 0, "mkdtemp"); return; }
    mx_engine e;
    if (mx_engine_open(fx, &e)) { CHECK(fam, 0, "%s", mx_errmsg()); return; }
    int V = e.model.arch.vocab;
    mx_sampling samp;
    mx_sampling_defaults(&samp);
    int32_t ref[N], ids[N];
    float *rref = malloc(sizeof(float) * N * V), *rows = malloc(sizeof(float) * N * V);
    if (decode(&e, NULL, &samp, ref, rref, NULL, NULL)) { CHECK(fam, 0, "plain: %s", mx_errmsg()); goto out; }
    float tol = 1e-4f * fmaxf(1, maxabs(rref, (size_t)N * V));
    const char *modes[] = {"token", "hidden", "random"};
    for (int m = qwen; m < 3; m++) { /* Qwen3-Next's module has no table of its own: no token mode */
        char src[300], dst[300];
        snprintf(src, sizeof src, "%s/%s-src", tmp, modes[m]);
        snprintf(dst, sizeof dst, "%s/%s-mtp", tmp, modes[m]);
        snprintf(label, sizeof label, "spec/mtp/%s/%s", fam, modes[m]);
        mx_engine d;
        if (mtp_checkpoint(fx, src, modes[m], qwen) || mx_split_mtp(src, dst, 0) || mx_engine_open(dst, &d)) {
            CHECK(label, 0, "making the module: %s", mx_errmsg());
            continue;
        }
        /* greedy: the output as plain decoding's, whatever the drafts */
        mx_spec_cfg cfg = {.kind = MX_DRAFT_MTP, .draft_max = K, .draft = &d};
        long acc = 0, dr = 0;
        int bad = -1;
        if (decode(&e, &cfg, &samp, ids, rows, &acc, &dr)) { CHECK(label, 0, "%s", mx_errmsg()); mx_engine_close(&d); continue; }
        for (int i = 0; i < N && bad < 0; i++)
            if (ids[i] != ref[i]) bad = i;
        float md = t_maxdiff(rows, rref, (size_t)N * V);
        CHECK(label, bad < 0 && md <= tol && dr > 0, "first differing id at %d, logits max diff %g (tol %g), %ld drafted", bad, md, tol, dr);
        if (m < 2) { /* the drafts, round by round: every one the pending token */
            mx_pool *pool = mx_pool_new(2);
            mx_session s;
            mx_spec sp = {0};
            mx_sampler *smp = mx_sampler_new(&samp, V);
            float *lastl = malloc(sizeof(float) * V);
            int32_t buf[K + 1], pending;
            int rounds = 0, wrong = 0, differ = 0, n = 0;
            bool ok = !mx_session_init_batch(&s, &e, T + N, 8, K + 1, pool) && !mx_spec_init(&sp, &s, smp, &samp, &cfg) &&
                      !mx_session_feed(&s, PROMPT, T, NULL, lastl);
            pending = ok ? mx_sampler_sample(smp, lastl, s.history, s.n_history) : 0;
            while (ok && n < N - 1) {
                long before = sp.drafted;
                int32_t prev = s.history[s.n_history - 1];
                int got = mx_spec_step(&sp, pending, N - 1 - n, buf);
                if (got < 1) { ok = false; break; }
                for (long j = 0; j < sp.drafted - before; j++) wrong += sp.tok[1 + j] != pending;
                rounds += sp.drafted > before;
                differ += sp.drafted > before && pending != prev;
                n += got;
                pending = buf[got - 1];
            }
            snprintf(label, sizeof label, "spec/mtp/%s/%s_drafts", fam, modes[m]);
            CHECK(label, ok && rounds > 4 && !wrong && differ > 2, "%s; %d rounds, %d drafts not the pending token, %d rounds after a change",
                  ok ? "ran" : mx_errmsg(), rounds, wrong, differ);
            mx_spec_free(&sp);
            mx_session_free(&s);
            mx_sampler_free(smp);
            free(lastl);
            mx_pool_free(pool);
        }
        mx_engine_close(&d);
    }
out:
    free(rref);
    free(rows);
    mx_engine_close(&e);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) {}
}

/* split-mtp's refusals: no next-n module declared, declared but not stored */
static void check_mtp_refused(void) {
    char tmp[] = "/tmp/mlxcel-test-mtpr-XXXXXX", dst[300];
    if (!mkdtemp(tmp)) return;
    snprintf(dst, sizeof dst, "%s/out", tmp);
    int rc = mx_split_mtp(FX "llama", dst, 0);
    CHECK("spec/mtp/refuse_none", rc && strstr(mx_errmsg(), "num_nextn_predict_layers"), "%s", mx_errmsg());
    mx_engine e, d;
    if (!mx_engine_open(FX "llama", &e)) {
        if (!mx_engine_open(FX "mistral", &d)) {
            mx_pool *pool = mx_pool_new(1);
            mx_session s;
            mx_spec sp = {0};
            mx_sampling samp;
            mx_sampling_defaults(&samp);
            mx_sampler *smp = mx_sampler_new(&samp, e.model.arch.vocab);
            mx_spec_cfg cfg = {.kind = MX_DRAFT_MTP, .draft_max = K, .draft = &d};
            rc = mx_session_init_batch(&s, &e, 64, 8, K + 1, pool) ? -1 : mx_spec_init(&sp, &s, smp, &samp, &cfg);
            CHECK("spec/mtp/refuse_plain_draft", rc && strstr(mx_errmsg(), "not a next-n module"), "%s", mx_errmsg());
            if (!rc) mx_spec_free(&sp);
            mx_session_free(&s);
            mx_sampler_free(smp);
            mx_pool_free(pool);
            mx_engine_close(&d);
        }
        mx_engine_close(&e);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) {}
}

int main(void) {
    check_distribution();
    check_mtp("glm4_moe", false);
    check_mtp("deepseek_v3", false);
    check_mtp("qwen3_next", true); /* a recurrent target, a full-attention module */
    check_mtp("qwen3_5_text", true);
    check_mtp_refused();
    /* families with different attention kinds: GQA, sliding windows and
     * soft-capping, q/k norms, MLA, MoE, sinks; bf16 and MLX 4-bit weights */
    const char *fams[] = {"llama", "gemma2", "qwen3", "deepseek_v2", "mixtral", "gpt_oss", "llama-bf16", "mlxq_affine_b4_g64",
                          /* recurrent state: Mamba, Mamba-2 hybrids, DeltaNet, short convolutions, RG-LRU, lightning attention */
                          "mamba", "jamba", "granitemoehybrid", "qwen3_next", "lfm2", "recurrent_gemma", "minimax"};
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) check_family(fams[i], i ? "llama" : "mistral");
    check_sampled();
    check_recurrent_refused();
    TEST_END();
}
