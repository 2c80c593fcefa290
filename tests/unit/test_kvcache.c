#define _GNU_SOURCE
/* KV cache row types (kernels/kvcache.h, docs/kv-cache.md):
 *  - the block layouts (llama.cpp's q8_0 / q4_0 bytes for a known row) and the
 *    store/load round trip of every type within its rounding bound;
 *  - the score and mix rows over stored rows against the f32 rows over the
 *    same rows loaded as floats, on every ISA the CPU has (row lengths with
 *    short last blocks and ones the AVX2 rows leave to portable C);
 *  - every causal fixture with f16 K/V: prompt and greedy logits within
 *    2e-3 * max(1, max|ref|), greedy ids exact; bf16 within 1e-2; q8_0 and
 *    q4_0: the largest logit difference (relative to max(1, max|ref|)) and
 *    the top-1 agreement with the reference over all prompt positions and
 *    greedy steps, against the bounds docs/kv-cache.md states from their
 *    measurement (`test_kvcache --table` prints that table).
 * The fixtures run with exact f32 activations (policy act12 and bf16_dot off)
 * so that the cache type is the only approximation. */
#include "test.h"
#include "base/base.h"
#include "base/cpu.h"
#include "base/half.h"
#include "kernels/kernels.h"
#include "kernels/kvcache.h"
#include "kernels/kvcache_impl.h"
#include "runtime/generate.h"
#include "fixtures.h"

static const mx_kv_type all_types[] = {MX_KV_F32, MX_KV_F16, MX_KV_BF16, MX_KV_Q8_0, MX_KV_Q4_0};

/* the largest error a stored value of block amax may have */
static float bound(mx_kv_type t, float x, float amax) {
    switch (t) {
    case MX_KV_F16: return fabsf(x) * 0x1p-11f + 0x1p-24f;
    case MX_KV_BF16: return fabsf(x) * 0x1p-8f;
    case MX_KV_Q8_0: return 0.51f * amax / 127.0f + amax * 0x1p-11f; /* half a step, and the f16 scale's rounding */
    case MX_KV_Q4_0: return 1.01f * amax / 8.0f; /* a step where -max clamps to 15, else half one */
    default: return 0;
    }
}

static void layouts(void) {
    float x[32];
    uint8_t b[64];
    for (int j = 0; j < 32; j++) x[j] = (float)(j % 16) - 8; /* max |x| = 8 at -8: d = 1 */
    mx_kv_store(MX_KV_Q4_0, b, x, 32);
    bool ok = b[0] == 0x00 && b[1] == 0x3c;
    for (int j = 0; j < 16; j++) ok &= b[2 + j] == (uint8_t)(j | j << 4);
    CHECK("kv/q4_0_layout", ok && mx_kv_row_bytes(MX_KV_Q4_0, 32) == 18, "bytes %02x %02x %02x %02x", b[0], b[1], b[2], b[3]);
    for (int j = 0; j < 32; j++) x[j] = (float)j - 16; /* amax 16: d = 16/127 */
    mx_kv_store(MX_KV_Q8_0, b, x, 32);
    uint16_t h;
    memcpy(&h, b, 2);
    ok = h == mx_f32_to_f16(16.0f / 127.0f) && (int8_t)b[2] == -127 && (int8_t)b[2 + 16] == 0 && (int8_t)b[2 + 31] == (int8_t)roundf(15 * 127.0f / 16);
    CHECK("kv/q8_0_layout", ok && mx_kv_row_bytes(MX_KV_Q8_0, 32) == 34, "scale %04x q0 %d", h, (int8_t)b[2]);
    CHECK("kv/row_bytes", mx_kv_row_bytes(MX_KV_Q8_0, 80) == 3 * 34 && mx_kv_row_bytes(MX_KV_Q4_0, 16) == 18 && mx_kv_row_bytes(MX_KV_F16, 80) == 160 &&
          mx_kv_row_bytes(MX_KV_F32, 80) == 320, "row sizes");
    mx_kv_type t;
    CHECK("kv/names", !mx_kv_type_parse("q4_0", &t) && t == MX_KV_Q4_0 && mx_kv_type_parse("q4", &t) && !strcmp(mx_kv_type_name(MX_KV_BF16), "bf16"),
          "name table");
}

static void round_trip(void) {
    static const int ds[] = {16, 20, 24, 64, 80, 128};
    unsigned rng = 5;
    for (size_t ti = 0; ti < MX_ARRAY_LEN(all_types); ti++)
        for (size_t di = 0; di < MX_ARRAY_LEN(ds); di++) {
            mx_kv_type t = all_types[ti];
            int d = ds[di];
            float x[128], y[128], worst = 0;
            uint8_t row[512];
            for (int i = 0; i < d; i++) x[i] = t_randf(&rng) * (i % 7 == 0 ? 9.0f : 1.5f); /* outliers, as keys have */
            mx_kv_store(t, row, x, d);
            mx_kv_load(t, y, row, d);
            bool ok = true;
            for (int i = 0; i < d; i++) {
                float amax = 0;
                for (int k = i / 32 * 32; k < MX_MIN(d, i / 32 * 32 + 32); k++) amax = fmaxf(amax, fabsf(x[k]));
                float e = fabsf(x[i] - y[i]);
                worst = fmaxf(worst, e);
                ok &= e <= bound(t, x[i], amax);
            }
            char nm[64];
            snprintf(nm, sizeof nm, "kv/round_trip/%s/d%d", mx_kv_type_name(t), d);
            CHECK(nm, ok, "largest error %g beyond the type's bound", worst);
        }
}

/* scores and mix over n stored rows (ld bytes apart, head offset 0) against
 * the f32 rows over the same rows loaded; dispatched and portable */
static void rows_vs_f32(void) {
    static const int ds[] = {16, 20, 24, 64, 80, 128};
    enum { N = 37 };
    unsigned rng = 11;
    for (size_t ti = 1; ti < MX_ARRAY_LEN(all_types); ti++)
        for (size_t di = 0; di < MX_ARRAY_LEN(ds); di++) {
            mx_kv_type t = all_types[ti];
            int d = ds[di];
            size_t ld = mx_kv_row_bytes(t, d) + 6; /* rows not aligned to anything */
            uint8_t *K = malloc(ld * N);
            float *Kf = malloc(sizeof(float) * (size_t)d * N), q[128], p[N], s_ref[N], s[N], s_c[N];
            float y_ref[128], y[128], y_c[128], x[128];
            for (int k = 0; k < N; k++) {
                for (int i = 0; i < d; i++) x[i] = t_randf(&rng) * 2;
                mx_kv_store(t, K + (size_t)k * ld, x, d);
                mx_kv_load(t, Kf + (size_t)k * d, K + (size_t)k * ld, d);
            }
            float mag = 0;
            for (int i = 0; i < d; i++) { q[i] = t_randf(&rng); mag += fabsf(q[i]) * 2; }
            for (int k = 0; k < N; k++) p[k] = (float)(t_rng(&rng) % 1000) / 1000.0f / N;
            mx_attn_scores(q, Kf, (size_t)d, N, d, 0.125f, s_ref);
            mx_attn_scores_kv(t, q, K, ld, N, d, 0.125f, s);
            mx_attn_scores_kv_c(t, q, K, ld, N, d, 0.125f, s_c);
            float tol = 1e-5f * mag;
            char nm[80];
            snprintf(nm, sizeof nm, "kv/scores/%s/d%d", mx_kv_type_name(t), d);
            float e1 = t_maxdiff(s, s_ref, N), e2 = t_maxdiff(s_c, s_ref, N);
            CHECK(nm, e1 <= tol && e2 <= tol, "dispatched %g, portable %g > %g", e1, e2, tol);
            /* mix in two key blocks (acc on the second), as the attention runs it */
            mx_attn_mix(y_ref, p, Kf, (size_t)d, 20, d, false);
            mx_attn_mix(y_ref, p + 20, Kf + (size_t)20 * d, (size_t)d, N - 20, d, true);
            mx_attn_mix_kv(t, y, p, K, ld, 20, d, false);
            mx_attn_mix_kv(t, y, p + 20, K + 20 * ld, ld, N - 20, d, true);
            mx_attn_mix_kv_c(t, y_c, p, K, ld, 20, d, false);
            mx_attn_mix_kv_c(t, y_c, p + 20, K + 20 * ld, ld, N - 20, d, true);
            snprintf(nm, sizeof nm, "kv/mix/%s/d%d", mx_kv_type_name(t), d);
            e1 = t_maxdiff(y, y_ref, (size_t)d);
            e2 = t_maxdiff(y_c, y_ref, (size_t)d);
            CHECK(nm, e1 <= 1e-5f && e2 <= 1e-5f, "dispatched %g, portable %g", e1, e2);
            /* two rows at once (two heads of a group): each bit for bit the one-row function's */
            float q1[128], p1[N], s0[N], s1[N], r1[N], y1[128], z[128], z1[128];
            for (int i = 0; i < d; i++) q1[i] = t_randf(&rng);
            for (int k = 0; k < N; k++) p1[k] = (float)(t_rng(&rng) % 1000) / 1000.0f / N;
            mx_attn_scores2_kv(t, q, q1, K, ld, N, d, 0.125f, s0, s1);
            mx_attn_scores_kv(t, q1, K, ld, N, d, 0.125f, r1);
            mx_attn_mix2_kv(t, y1, z, p, p1, K, ld, 20, d, false);
            mx_attn_mix2_kv(t, y1, z, p + 20, p1 + 20, K + 20 * ld, ld, N - 20, d, true);
            mx_attn_mix_kv(t, z1, p1, K, ld, 20, d, false);
            mx_attn_mix_kv(t, z1, p1 + 20, K + 20 * ld, ld, N - 20, d, true);
            snprintf(nm, sizeof nm, "kv/two_rows/%s/d%d", mx_kv_type_name(t), d);
            CHECK(nm, !memcmp(s0, s, sizeof s) && !memcmp(s1, r1, sizeof r1) && !memcmp(y1, y, sizeof(float) * (size_t)d) &&
                      !memcmp(z, z1, sizeof(float) * (size_t)d),
                  "scores %g / %g, mix %g / %g from the one-row results", t_maxdiff(s0, s, N), t_maxdiff(s1, r1, N), t_maxdiff(y1, y, (size_t)d),
                  t_maxdiff(z, z1, (size_t)d));
            free(K);
            free(Kf);
        }
}

/* ---- fixtures ---- */
enum { MAX_FX = 256 };
typedef struct {
    mx_kv_type t;
    double worst;      /* largest max|diff| / max(1, max|ref|) over the fixtures */
    long agree, total; /* top-1 agreements with the reference */
    int ids_bad;       /* fixtures whose greedy ids differ */
    double each[MAX_FX]; /* per fixture max diff (for the median) */
    int n;
    /* bounds (docs/kv-cache.md, from the measurement there): top-1 agreement
     * over all fixtures, median and largest per-fixture max diff */
    double min_top1, max_median, max_worst;
} type_stats;

static type_stats g_st[] = {
    {.t = MX_KV_F32, .min_top1 = 100, .max_median = 1e-4, .max_worst = 1e-4},
    {.t = MX_KV_F16, .min_top1 = 99.9, .max_median = 2e-3, .max_worst = 0.8},
    {.t = MX_KV_BF16, .min_top1 = 99.0, .max_median = 1e-2, .max_worst = 1.2},
    {.t = MX_KV_Q8_0, .min_top1 = 97.5, .max_median = 3e-2, .max_worst = 1.2},
    {.t = MX_KV_Q4_0, .min_top1 = 70.0, .max_median = 0.45, .max_worst = 1.8},
};
static bool g_table;

/* Fixtures whose logits move more than 2e-3 of their scale with f16 K/V
 * (f16's rounding, 2^-11 of each value, amplified; docs/kv-cache.md): the
 * per-fixture f16 check skips them, the bounds over all fixtures include
 * them. */
static const char *const f16_amplified[] = {
    "deepseek_v32",       /* sparse attention: the indexer's top-k changes with the hidden state */
    "gemma3n_text",       /* attention scale 1 (q/k norms) */
    "gemma4_text",        /* attention scale 1 with 256-dim heads: a score moves by ~|q||k| 2^-11 */
    "hf_fp8_block128",    /* 2.7e-3 */
    "minimax_m2",         /* a near tie of the expert router flips (greedy ids differ from step 6) */
    "mlxq_affine_b4_g128", /* 2.1e-3 */
    "nemotron",           /* 2.05e-3 */
};
static bool amplified(const char *name) {
    for (size_t i = 0; i < MX_ARRAY_LEN(f16_amplified); i++)
        if (!strcmp(name, f16_amplified[i])) return true;
    return false;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* one fixture under cache type t (K and V): prompt logits (whole prompt in
 * one pass) and greedy steps (fed one token at a time, the reference's ids) */
static void run_type(const char *name, mx_engine *e, type_stats *st, const int32_t *ids, int T, const float *ref, const int32_t *gids, int N,
                     const float *gref) {
    int V = e->model.arch.vocab;
    e->model.kp.kv_type[0] = e->model.kp.kv_type[1] = st->t;
    mx_session s;
    char label[256];
    snprintf(label, sizeof label, "kv/%s/%s", mx_kv_type_name(st->t), name);
    int rc = mx_session_init(&s, e, T + N + 1, 512, NULL);
    e->model.kp.kv_type[0] = e->model.kp.kv_type[1] = MX_KV_F32;
    if (rc) { CHECK(label, 0, "session: %s", mx_errmsg()); return; }
    mx_ctx_policy(s.ctx)->act12 = false;
    mx_ctx_policy(s.ctx)->bf16_dot = false;
    float *lg = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
    double worst = 0;
    long agree = 0;
    int bad_id = -1;
    if (mx_session_feed(&s, ids, T, lg, last)) { CHECK(label, 0, "prefill: %s", mx_errmsg()); goto out; }
    float scale = fmaxf(1, fmaxf(fx_maxabs(ref, (size_t)T * V), fx_maxabs(gref, (size_t)N * V)));
    worst = t_maxdiff(lg, ref, (size_t)T * V) / scale;
    for (int i = 0; i < T; i++) agree += mx_argmax(lg + (size_t)i * V, V) == mx_argmax(ref + (size_t)i * V, V);
    for (int i = 0; i < N; i++) {
        worst = fmax(worst, t_maxdiff(last, gref + (size_t)i * V, V) / scale);
        int32_t tok = mx_argmax(last, V);
        agree += tok == mx_argmax(gref + (size_t)i * V, V);
        if (tok != gids[i] && bad_id < 0) bad_id = i;
        if (i + 1 < N && mx_session_feed(&s, &gids[i], 1, NULL, last)) { CHECK(label, 0, "decode: %s", mx_errmsg()); goto out; }
    }
    st->worst = fmax(st->worst, worst);
    if (st->n < MAX_FX) st->each[st->n++] = worst;
    st->agree += agree;
    st->total += T + N;
    st->ids_bad += bad_id >= 0;
    if (g_table) printf("| %s | %s | %.2e | %ld/%d |%s\n", name, mx_kv_type_name(st->t), worst, agree, T + N, bad_id >= 0 ? " ids differ |" : " |");
    if (st->t == MX_KV_F32 || (st->t == MX_KV_F16 && !amplified(name))) {
        float tol = st->t == MX_KV_F16 ? 2e-3f : 1e-4f;
        CHECK(label, worst <= tol && bad_id < 0, "max diff %g (of max(1, max|ref|)) > %g or greedy ids differ from step %d", worst, tol, bad_id);
    }
out:
    free(lg);
    free(last);
    mx_session_free(&s);
}

static void one(const char *name, const char *dir, const char *task, void *ctx) {
    (void)ctx;
    mx_st_file ref;
    mx_engine e;
    if (!fx_causal_open(name, dir, task, &ref, &e)) return;
    int32_t *ids = NULL, *gids = NULL;
    int T = 0, N = 0;
    size_t nl = 0, ng = 0;
    fx_read_i64(&ref, "input_ids", &ids, &T);
    fx_read_i64(&ref, "greedy_ids", &gids, &N);
    float *logits = fx_read_f32(&ref, "logits", &nl), *gl = fx_read_f32(&ref, "greedy_logits", &ng);
    if (ids && gids && logits && gl)
        for (size_t k = 0; k < MX_ARRAY_LEN(g_st); k++) run_type(name, &e, &g_st[k], ids, T, logits, gids, N, gl);
    else CHECK(name, 0, "reference tensors missing");
    free(ids); free(gids); free(logits); free(gl);
    fx_causal_close(&ref, &e);
}

int main(int argc, char **argv) {
    const char *root = "tests/fixtures";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--table")) g_table = true;
        else root = argv[i];
    }
    layouts();
    round_trip();
    if (g_table) printf("| fixture | K/V type | max diff / max(1, max|ref|) | top-1 agreement |\n|---|---|---|---|\n");
    if (fx_each(root, one, NULL)) { printf("FAIL kv/fixtures: cannot open %s\n", root); return 1; }
    for (size_t k = 0; k < MX_ARRAY_LEN(g_st); k++) {
        type_stats *st = &g_st[k];
        double top1 = st->total ? 100.0 * st->agree / st->total : 0;
        qsort(st->each, (size_t)st->n, sizeof(double), cmp_dbl);
        double med = st->n ? (st->n & 1 ? st->each[st->n / 2] : 0.5 * (st->each[st->n / 2 - 1] + st->each[st->n / 2])) : 0;
        printf("# kv %s: %d fixtures, max diff median %.2e, largest %.2e, top-1 %.2f %% (%ld/%ld), fixtures with other greedy ids %d\n",
               mx_kv_type_name(st->t), st->n, med, st->worst, top1, st->agree, st->total, st->ids_bad);
        char nm[64];
        snprintf(nm, sizeof nm, "kv/%s/all_fixtures", mx_kv_type_name(st->t));
        CHECK(nm, st->n > 0 && top1 >= st->min_top1 && med <= st->max_median && st->worst <= st->max_worst,
              "top-1 %.2f %% (bound %.1f), median %.2e (bound %.1e), largest %.2e (bound %.1e)", top1, st->min_top1, med, st->max_median, st->worst,
              st->max_worst);
    }
    mx_cpu_level top = mx_cpu()->level;
    for (int l = (int)top; l >= 0; l--) { /* the rows on every ISA the CPU has (mx_cpu_force only lowers: last) */
        mx_cpu_force((mx_cpu_level)l);
        mx_kernels_redispatch();
        rows_vs_f32();
    }
    TEST_END();
}
