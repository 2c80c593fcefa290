/* Batch invariance: a sequence's logits must be bit-identical whether it runs
 * alone or stacked with others in one forward pass (continuous batching must
 * not change greedy output). Checked on every causal fixture in
 * tests/fixtures, for prefill and for batched decode steps, with the kernel
 * settings the server uses. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "runtime/engine.h"
#include "fixtures.h"

#define NS 3
static const int LENS[NS] = {9, 4, 13};

static void check_fixture(const char *name, const char *dir) {
    mx_engine e;
    if (mx_engine_open(dir, &e)) { CHECK(name, 0, "%s", mx_errmsg()); return; }
    int V = e.model.arch.vocab, cap = 64, steps = 4;
    int32_t toks[NS][64];
    unsigned seed = 99;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < 64; i++) toks[s][i] = (int32_t)(t_rng(&seed) % (unsigned)V);
    mx_pool *pool = mx_pool_new(2);
    mx_ctx *ctx = mx_ctx_new(&e.model, 64, cap, pool);
    mx_kv *alone[NS], *joint[NS];
    float *la = malloc(sizeof(float) * NS * V), *lj = malloc(sizeof(float) * NS * V);
    for (int s = 0; s < NS; s++) { alone[s] = mx_kv_new(&e.model, cap); joint[s] = mx_kv_new(&e.model, cap); }
    bool same = true;
    int bad_step = -1;
    for (int step = 0; step <= steps && same; step++) {
        /* the kernel choices the scheduler makes: prompt chunks, then decode steps */
        mx_ctx_policy(ctx)->qmode = step ? MX_QMODE_PER_TOKEN : MX_QMODE_PANEL;
        mx_seq_in in[NS];
        for (int s = 0; s < NS; s++) {
            int off = step ? LENS[s] + step - 1 : 0, n = step ? 1 : LENS[s];
            in[s] = (mx_seq_in){.kv = joint[s], .tokens = toks[s] + off, .n = n, .seg_end = 0};
            mx_seq_in one = {.kv = alone[s], .tokens = toks[s] + off, .n = n, .seg_end = 0};
            if (mx_forward(ctx, &one, 1, la + (size_t)s * V, false)) { CHECK(name, 0, "%s", mx_errmsg()); goto out; }
        }
        if (mx_forward(ctx, in, NS, lj, false)) { CHECK(name, 0, "%s", mx_errmsg()); goto out; }
        if (memcmp(la, lj, sizeof(float) * NS * V)) { same = false; bad_step = step; }
    }
    char label[256];
    snprintf(label, sizeof label, "batching/%s", name);
    CHECK(label, same, "stacked logits differ from alone at step %d (max diff %g)", bad_step, t_maxdiff(la, lj, (size_t)NS * V));
out:
    for (int s = 0; s < NS; s++) { mx_kv_free(alone[s]); mx_kv_free(joint[s]); }
    free(la);
    free(lj);
    mx_ctx_free(ctx);
    mx_pool_free(pool);
    mx_engine_close(&e);
}

/* Prompts longer than the MLP's token slice (128), alone and stacked so a
 * slice spans two sequences: still bit-identical. */
static void check_long(const char *name, const char *dir) {
    mx_engine e;
    if (mx_engine_open(dir, &e)) { CHECK(name, 0, "%s", mx_errmsg()); return; }
    enum { L0 = 150, L1 = 7 };
    int V = e.model.arch.vocab, lens[2] = {L0, L1};
    int32_t toks[2][L0];
    unsigned seed = 5;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < L0; i++) toks[s][i] = (int32_t)(t_rng(&seed) % (unsigned)V);
    mx_pool *pool = mx_pool_new(2);
    mx_ctx *ctx = mx_ctx_new(&e.model, L0 + L1, L0 + 1, pool);
    float *la = malloc(sizeof(float) * 2 * V), *lj = malloc(sizeof(float) * 2 * V);
    bool ok = ctx != NULL;
    if (ok) mx_ctx_policy(ctx)->qmode = MX_QMODE_PANEL;
    mx_seq_in in[2];
    for (int s = 0; s < 2 && ok; s++) {
        mx_kv *k = mx_kv_new(&e.model, L0 + 1);
        mx_seq_in one = {.kv = k, .tokens = toks[s], .n = lens[s], .seg_end = 0};
        ok = !mx_forward(ctx, &one, 1, la + (size_t)s * V, false);
        mx_kv_free(k);
    }
    mx_kv *kj[2] = {mx_kv_new(&e.model, L0 + 1), mx_kv_new(&e.model, L0 + 1)};
    for (int s = 0; s < 2; s++) in[s] = (mx_seq_in){.kv = kj[s], .tokens = toks[s], .n = lens[s], .seg_end = 0};
    mx_attention_set_key_block(16); /* stacked run also takes keys in blocks: same bits */
    ok = ok && !mx_forward(ctx, in, 2, lj, false);
    mx_attention_set_key_block(0);
    char label[256];
    snprintf(label, sizeof label, "batching/%s/long_prompts", name);
    CHECK(label, ok && !memcmp(la, lj, sizeof(float) * 2 * V), "%s", ok ? "stacked logits differ from alone" : mx_errmsg());
    mx_kv_free(kj[0]);
    mx_kv_free(kj[1]);
    free(la);
    free(lj);
    mx_ctx_free(ctx);
    mx_pool_free(pool);
    mx_engine_close(&e);
}

static void one(const char *name, const char *dir, const char *task, void *ctx) {
    (void)ctx;
    if (!task || strcmp(task, "causal-lm")) return;
    check_fixture(name, dir);
    if (!strcmp(name, "llama") || !strcmp(name, "mlxq_affine_b4_g64") || !strcmp(name, "mlxq_mxfp8")) check_long(name, dir);
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : "tests/fixtures";
    if (fx_each(root, one, NULL)) { printf("FAIL batching: cannot open %s\n", root); return 1; }
    TEST_END();
}
