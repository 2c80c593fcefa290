#define _GNU_SOURCE
/* The fast mode's bounds (kernels/policy.h `fast`; issue 29): over every
 * causal fixture whose products it changes (quantized weights on the int8
 * path, BF16 weights), the prompt's logits with whole-prompt prefill and
 * with one-token chunks (the decode path) against the Hugging Face
 * reference: mean KL(ref || fast) <= 1e-3 nats per fixture and mode, and
 * the argmax the reference's at >= 95 % of all positions taken together.
 * Prints a "# fast" line per fixture (docs/fast-mode.md's table). */
#include "test.h"
#include "base/base.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "fixtures.h"
#include "quant/quant.h"
#include "kernels/kernels.h"
#include <math.h>

static long g_pos, g_agree;

/* mean KL(p || q) over T rows of V logits, and rows whose argmax agree */
static double kl_rows(const float *ref, const float *got, int T, int V, int *agree) {
    double sum = 0;
    *agree = 0;
    for (int t = 0; t < T; t++) {
        const float *a = ref + (size_t)t * V, *b = got + (size_t)t * V;
        double ma = a[0], mb = b[0], za = 0, zb = 0;
        for (int i = 1; i < V; i++) { ma = fmax(ma, a[i]); mb = fmax(mb, b[i]); }
        for (int i = 0; i < V; i++) { za += exp(a[i] - ma); zb += exp(b[i] - mb); }
        double kl = 0;
        for (int i = 0; i < V; i++) {
            double la = a[i] - ma - log(za), lb = b[i] - mb - log(zb);
            kl += exp(la) * (la - lb);
        }
        sum += kl;
        *agree += mx_argmax(a, V) == mx_argmax(b, V);
    }
    return sum / T;
}

static void one(const char *name, const char *dir, const char *task, void *ctx) {
    (void)ctx;
    mx_st_file ref;
    mx_engine e;
    if (!fx_causal_open(name, dir, task, &ref, &e)) return;
    int32_t *ids = NULL;
    int T = 0, V = e.model.arch.vocab;
    size_t nl = 0;
    fx_read_i64(&ref, "input_ids", &ids, &T);
    float *logits = fx_read_f32(&ref, "logits", &nl), *lg = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
    for (int chunk = 512; ids && logits && chunk >= 1; chunk = chunk == 512 ? 1 : 0) {
        mx_session s;
        if (mx_session_init(&s, &e, T + 1, chunk, NULL)) { CHECK(name, 0, "session: %s", mx_errmsg()); break; }
        mx_ctx_policy(s.ctx)->fast = true;
        unsigned long o0 = mx_qmatmul_one_calls(), d0 = mx_matmul_bf16dot_calls();
        int rc = mx_session_feed(&s, ids, T, lg, last);
        bool used = mx_qmatmul_one_calls() != o0 || mx_matmul_bf16dot_calls() != d0;
        mx_session_free(&s);
        if (rc) { CHECK(name, 0, "prefill: %s", mx_errmsg()); break; }
        if (!used) break; /* a format the fast mode leaves exact (f32 weights, E4M3, or no VNNI / BF16 here) */
        int agree;
        double kl = kl_rows(logits, lg, T, V, &agree);
        g_pos += T;
        g_agree += agree;
        char label[256];
        snprintf(label, sizeof label, "%s/chunk%d/kl", name, chunk);
        printf("# fast %-28s chunk %3d  KL %.2e  top-1 %d/%d\n", name, chunk, kl, agree, T);
        CHECK(label, kl <= 1e-3, "mean KL %.3g nats > 1e-3", kl);
    }
    free(ids); free(logits); free(lg); free(last);
    fx_causal_close(&ref, &e);
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : "tests/fixtures";
    if (fx_each(root, one, NULL)) { printf("FAIL fast: cannot open %s\n", root); return 1; }
    if (g_pos) {
        printf("# fast: top-1 %ld of %ld positions (%.2f %%)\n", g_agree, g_pos, 100.0 * g_agree / g_pos);
        CHECK("fast/top1", g_agree * 100 >= g_pos * 95, "top-1 agreement %ld of %ld < 95 %%", g_agree, g_pos);
    } else printf("# fast: no fixture's products changed (no AVX-512 VNNI / BF16 here)\n");
    TEST_END();
}
