/* Mixture of experts and latent attention: every router variant on
 * hand-computed cases; grouped prefill against per-token decode on the MoE
 * fixtures (logits, and the expert bytes each step reads); the stacked
 * expert layouts (MLX switch_mlp, float and 4-bit affine) against the
 * per-expert one; the MLA cache size. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "base/threadpool.h"
#include "format/checkpoint.h"
#include "nn/moe.h"
#include "quant/quant.h"
#include "quant/quant_impl.h"
#include "convert/convert.h"
#include "runtime/engine.h"
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool near(float a, float b, float tol) { return fabsf(a - b) <= tol; }

/* ---- routing ---- */

static void test_routing(void) {
    float tmp[64];
    int idx[8];
    float w[8];
    const float l4[4] = {1.0f, 3.0f, 2.0f, 0.0f};
    double z = exp(1.0) + exp(3.0) + exp(2.0) + exp(0.0);

    mx_moe_spec s = {.n_experts = 4, .top_k = 2, .route = MX_ROUTE_SOFTMAX};
    mx_moe_route(&s, l4, NULL, idx, w, tmp);
    CHECK("route_softmax", idx[0] == 1 && idx[1] == 2 && near(w[0], (float)(exp(3.0) / z), 1e-6f) && near(w[1], (float)(exp(2.0) / z), 1e-6f),
          "got %d %d %g %g", idx[0], idx[1], w[0], w[1]);

    s.norm_p = 1;
    mx_moe_route(&s, l4, NULL, idx, w, tmp);
    float p1 = (float)(1.0 / (1.0 + exp(-1.0)));
    CHECK("route_softmax_renorm", idx[0] == 1 && idx[1] == 2 && near(w[0], p1, 1e-6f) && near(w[1], 1 - p1, 1e-6f), "got %g %g", w[0], w[1]);

    s.norm_p = 2; /* DBRX moe_normalize_expert_weights = 2 */
    mx_moe_route(&s, l4, NULL, idx, w, tmp);
    double a = exp(3.0), b = exp(2.0), n2 = sqrt(a * a + b * b);
    CHECK("route_softmax_pnorm", near(w[0], (float)(a / n2), 1e-6f) && near(w[1], (float)(b / n2), 1e-6f), "got %g %g", w[0], w[1]);

    mx_moe_spec t = {.n_experts = 4, .top_k = 2, .route = MX_ROUTE_TOPK_SOFTMAX, .routed_scale = 3};
    mx_moe_route(&t, l4, NULL, idx, w, tmp);
    CHECK("route_topk_softmax_scaled", idx[0] == 1 && idx[1] == 2 && near(w[0], 3 * p1, 1e-5f) && near(w[1], 3 * (1 - p1), 1e-5f),
          "got %d %d %g %g", idx[0], idx[1], w[0], w[1]);

    /* sigmoid + correction bias + group limit (DeepSeek V3). 8 experts in 4
     * groups of 2, best 2 groups eligible, top 2 experts, renormalised, x2.5.
     * logits 0 for all except: e1 = 2, e2 = 1, e5 = 1.5, e6 = -1;
     * bias: e6 += 3 (so group 3 = {6,7} is best by choice but e6's weight is
     * its plain sigmoid), e2 -= 0.2. */
    float l8[8] = {0, 2, 1, 0, 0, 1.5f, -1, 0}, bias[8] = {0, 0, -0.2f, 0, 0, 0, 3, 0};
    mx_moe_spec d = {.n_experts = 8, .top_k = 2, .route = MX_ROUTE_SIGMOID, .n_group = 4, .topk_group = 2, .norm_p = 1,
                     .norm_eps = 1e-20f, .routed_scale = 2.5f};
    mx_moe_route(&d, l8, bias, idx, w, tmp);
    /* choice: e0 .5, e1 .881, e2 .531, e3 .5, e4 .5, e5 .818, e6 3.269, e7 .5
     * group sums (top-2): g0 1.381, g1 1.031, g2 1.318, g3 3.769 -> groups 3, 0
     * eligible: e0 .5, e1 .881, e6 3.269, e7 .5 -> top-2 e6, e1 */
    double s6 = 1 / (1 + exp(1.0)), s1 = 1 / (1 + exp(-2.0));
    CHECK("route_sigmoid_group_bias", idx[0] == 6 && idx[1] == 1 && near(w[0], (float)(2.5 * s6 / (s6 + s1)), 1e-5f) &&
                                          near(w[1], (float)(2.5 * s1 / (s6 + s1)), 1e-5f),
          "got %d %d %g %g", idx[0], idx[1], w[0], w[1]);
    /* without the group limit, e5 (group 2) beats e1? no: .881 > .818; make e5 win */
    l8[5] = 2.5f;
    mx_moe_route(&d, l8, bias, idx, w, tmp);
    CHECK("route_sigmoid_group_excludes", idx[0] == 6 && idx[1] == 5, "got %d %d (group 2 now best with e5)", idx[0], idx[1]);
    d.n_group = 1;
    l8[5] = 1.5f;
    bias[6] = 0;
    mx_moe_route(&d, l8, bias, idx, w, tmp);
    CHECK("route_sigmoid_plain", idx[0] == 1 && idx[1] == 5, "got %d %d", idx[0], idx[1]);

    /* masked groups score 0, not -inf (HF): with all eligible choices negative,
     * a masked expert (choice 0) wins */
    float ln[4] = {-3, -3, -2, -2}, bn[4] = {-1, -1, -1, -1};
    mx_moe_spec g = {.n_experts = 4, .top_k = 1, .route = MX_ROUTE_SIGMOID, .n_group = 2, .topk_group = 1};
    mx_moe_route(&g, ln, bn, idx, w, tmp);
    CHECK("route_sigmoid_masked_zero", idx[0] == 0, "got %d", idx[0]);
    g.group_mask_inf = true; /* GLM-4.7-Flash, DeepSeek-V3.2: masked to -inf, the eligible group's best wins */
    mx_moe_route(&g, ln, bn, idx, w, tmp);
    CHECK("route_sigmoid_masked_inf", idx[0] == 2, "got %d", idx[0]);

    /* softmax with a selection bias (ERNIE 4.5): logits {1, 3, 2, 0}, bias
     * e3 += 0.9 -> choice p + b: e3 (.032 + .9) then e1; weights are the plain
     * probabilities, renormalised over max(sum, norm_min) */
    float be[4] = {0, 0, 0, 0.9f};
    mx_moe_spec e = {.n_experts = 4, .top_k = 2, .route = MX_ROUTE_SOFTMAX, .norm_p = 1, .norm_min = 1e-12f};
    mx_moe_route(&e, l4, be, idx, w, tmp);
    double p3 = 1 / z, p1b = exp(3.0) / z;
    CHECK("route_softmax_bias", idx[0] == 3 && idx[1] == 1 && near(w[0], (float)(p3 / (p3 + p1b)), 1e-6f) &&
                                    near(w[1], (float)(p1b / (p3 + p1b)), 1e-6f),
          "got %d %d %g %g", idx[0], idx[1], w[0], w[1]);
    /* the clamp: weights over max(sum, norm_min) when the sum is smaller */
    e.norm_min = 10.0f;
    mx_moe_route(&e, l4, be, idx, w, tmp);
    CHECK("route_norm_min", near(w[0], (float)(p3 / 10), 1e-7f) && near(w[1], (float)(p1b / 10), 1e-7f), "got %g %g", w[0], w[1]);

    /* DeepSeek-V2 group_limited_greedy: a group scores its best probability.
     * logits {2, -5, 1.5, 1.5, 0, 0, 0, 0}, 4 groups of 2, 1 group kept, top-2:
     * g0 (max e0) beats g1 (1.5 each: sum of top-2 would win) -> e0, e1 */
    float lg[8] = {2, -5, 1.5f, 1.5f, 0, 0, 0, 0};
    mx_moe_spec v2 = {.n_experts = 8, .top_k = 2, .route = MX_ROUTE_SOFTMAX, .n_group = 4, .topk_group = 1, .group_max = true,
                      .routed_scale = 2};
    mx_moe_route(&v2, lg, NULL, idx, w, tmp);
    double zg = exp(2.0) + exp(-5.0) + 2 * exp(1.5) + 4;
    CHECK("route_group_max", idx[0] == 0 && idx[1] == 1 && near(w[0], (float)(2 * exp(2.0) / zg), 1e-6f) &&
                                 near(w[1], (float)(2 * exp(-5.0) / zg), 1e-6f),
          "got %d %d %g %g", idx[0], idx[1], w[0], w[1]);
    v2.group_max = false;
    mx_moe_route(&v2, lg, NULL, idx, w, tmp);
    CHECK("route_group_top2", idx[0] == 2 && idx[1] == 3, "got %d %d (top-2 sums pick group 1)", idx[0], idx[1]);

    /* sparsemixer (PhiMoE), eps 0.01: logits {2, 1.99, 0, 1}. Round 1: max 2
     * (e0); masked where (2 - s) / max(|s|, 2) > 0.02 -> e2, e3; weight =
     * softmax over {2, 1.99} at e0. Round 2 (e0 out): max 1.99 (e1); e2, e3
     * masked again -> weight 1. */
    float lp[4] = {2.0f, 1.99f, 0.0f, 1.0f};
    mx_moe_spec p = {.n_experts = 4, .top_k = 2, .route = MX_ROUTE_SPARSEMIXER, .jitter_eps = 0.01f};
    mx_moe_route(&p, lp, NULL, idx, w, tmp);
    CHECK("route_sparsemixer", idx[0] == 0 && idx[1] == 1 && near(w[0], (float)(1 / (1 + exp(-0.01))), 1e-6f) && near(w[1], 1.0f, 1e-6f),
          "got %d %d %g %g", idx[0], idx[1], w[0], w[1]);
    /* a runner-up close enough to share the second softmax */
    float lq[4] = {3.0f, 1.0f, 0.99f, -5.0f};
    mx_moe_route(&p, lq, NULL, idx, w, tmp);
    CHECK("route_sparsemixer_second", idx[0] == 0 && idx[1] == 1 && near(w[0], 1.0f, 1e-6f) &&
                                          near(w[1], (float)(1 / (1 + exp(-0.01))), 1e-6f),
          "got %d %d %g %g", idx[0], idx[1], w[0], w[1]);
}

/* ---- grouped prefill vs per-token decode, and the bytes each step reads ---- */

static int count_moe_layers(const mx_model *m) {
    int n = 0;
    for (int l = 0; l < m->arch.n_layers; l++) n += m->arch.layers[l].ffn == &mx_block_moe;
    return n;
}

/* Runs T tokens in one forward and one at a time; returns the max logit diff
 * relative to max(1, max|logit|) through *rel. */
static void prefill_vs_decode(const char *name, const char *dir, mx_pool *pool) {
    char label[128];
    mx_engine e;
    if (access(dir, R_OK)) { snprintf(label, sizeof label, "%s_present", name); CHECK(label, 0, "%s missing", dir); return; }
    if (mx_engine_open(dir, &e)) { snprintf(label, sizeof label, "%s_open", name); CHECK(label, 0, "%s", mx_errmsg()); return; }
    const mx_model *m = &e.model;
    int T = 24, V = m->arch.vocab;
    int32_t toks[24];
    unsigned seed = 11;
    for (int i = 0; i < T; i++) toks[i] = (int32_t)(t_rng(&seed) % (unsigned)V);
    float *a = malloc(sizeof(float) * (size_t)T * V), *b = malloc(sizeof(float) * (size_t)T * V);
    mx_ctx *c = mx_ctx_new(m, T, T, pool);
    mx_kv *k1 = mx_kv_new(m, T), *k2 = mx_kv_new(m, T);
    mx_moe_stats st;
    mx_moe_stats_get(m, &st, true);
    mx_seq_in s1 = {.kv = k1, .tokens = toks, .n = T};
    /* grouping is what is compared: both passes with f32 activations (the
     * int8 decode path is checked against the fixtures in test_fixtures) */
    mx_ctx_policy(c)->act12 = false;
    int rc = mx_forward(c, &s1, 1, a, true);
    mx_moe_stats pre;
    mx_moe_stats_get(m, &pre, true);
    int L = count_moe_layers(m), K = m->arch.moe.top_k, E = m->arch.moe.n_experts;
    bool step_ok = true;
    uint64_t per_expert = pre.all_expert_bytes / (uint64_t)(E * L); /* experts are equal-sized */
    for (int i = 0; i < T && !rc; i++) {
        mx_seq_in s2 = {.kv = k2, .tokens = toks + i, .n = 1};
        rc = mx_forward(c, &s2, 1, b + (size_t)i * V, true);
        mx_moe_stats_get(m, &st, true);
        /* a decode step runs exactly top_k experts per MoE layer and reads only their bytes */
        if (st.expert_groups != (uint64_t)(K * L) || st.routed_pairs != (uint64_t)(K * L) ||
            st.expert_bytes != per_expert * (uint64_t)(K * L))
            step_ok = false;
    }
    snprintf(label, sizeof label, "%s_forward", name);
    CHECK(label, !rc, "%s", mx_errmsg());
    float mx = 1;
    for (size_t i = 0; i < (size_t)T * V; i++) mx = fmaxf(mx, fabsf(a[i]));
    float d = t_maxdiff(a, b, (size_t)T * V);
    snprintf(label, sizeof label, "%s_grouped_prefill_eq_decode", name);
    CHECK(label, d <= 1e-5f * mx, "max diff %g (scale %g)", d, mx);
    printf("# %s: a decode step reads %llu of the %llu bytes of routed experts (%d of %d per layer, %d MoE layers); "
           "weight_bytes per step %zu\n", name, (unsigned long long)(per_expert * (uint64_t)(K * L)),
           (unsigned long long)pre.all_expert_bytes, K, E, L, m->weight_bytes);
    snprintf(label, sizeof label, "%s_decode_reads_routed_experts_only", name);
    CHECK(label, step_ok, "last step: %llu groups, %llu bytes; expected %d groups, %llu bytes", (unsigned long long)st.expert_groups,
          (unsigned long long)st.expert_bytes, K * L, (unsigned long long)(per_expert * (uint64_t)(K * L)));
    /* prefill: each expert's weights read at most once per layer, T*K pairs routed */
    snprintf(label, sizeof label, "%s_prefill_reads_each_expert_once", name);
    CHECK(label, pre.expert_groups <= (uint64_t)(E * L) && pre.expert_bytes <= pre.all_expert_bytes &&
                     pre.routed_pairs == (uint64_t)(T * K * L),
          "%llu groups, %llu of %llu bytes, %llu pairs", (unsigned long long)pre.expert_groups, (unsigned long long)pre.expert_bytes,
          (unsigned long long)pre.all_expert_bytes, (unsigned long long)pre.routed_pairs);
    mx_kv_free(k1);
    mx_kv_free(k2);
    mx_ctx_free(c);
    free(a);
    free(b);
    mx_engine_close(&e);
}

/* ---- physical check: a decode step faults in only the routed experts' pages ----
 * Every page lying wholly inside one expert tensor of the mmap'd checkpoint
 * is made inaccessible; a SIGSEGV handler records which page was touched and
 * makes it readable again. After one decode step, each MoE layer must have
 * had exactly top_k experts touched. */
#define PG_MAX 4096
typedef struct { uintptr_t addr; int layer, expert; volatile int hit; } guard_pg;
static guard_pg g_pg[PG_MAX];
static int g_npg;
static size_t g_psz;
static struct sigaction g_old_segv;

static void on_segv(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr & ~(uintptr_t)(g_psz - 1);
    for (int i = 0; i < g_npg; i++)
        if (g_pg[i].addr == a) {
            g_pg[i].hit = 1;
            mprotect((void *)a, g_psz, PROT_READ);
            return;
        }
    (void)uc;
    sigaction(sig, &g_old_segv, NULL); /* not ours: crash as usual */
}

static void test_decode_page_faults(const char *name, const char *dir) {
    char label[128];
    mx_engine e;
    if (mx_engine_open(dir, &e)) { snprintf(label, sizeof label, "%s_pages_open", name); CHECK(label, 0, "%s", mx_errmsg()); return; }
    const mx_model *m = &e.model;
    g_psz = (size_t)sysconf(_SC_PAGESIZE);
    g_npg = 0;
    int E = m->arch.moe.n_experts, K = m->arch.moe.top_k;
    for (int fi = 0; fi < m->ck.n_files; fi++)
        for (int ti = 0; ti < m->ck.files[fi].n_tensors; ti++) {
            const mx_tensor *t = &m->ck.files[fi].tensors[ti];
            int l, x;
            char rest[64];
            if (sscanf(t->name, "model.layers.%d.mlp.experts.%d.%63s", &l, &x, rest) != 3) continue;
            uintptr_t lo = ((uintptr_t)t->data + g_psz - 1) & ~(uintptr_t)(g_psz - 1), hi = (uintptr_t)t->data + t->nbytes;
            for (uintptr_t p = lo; p + g_psz <= hi && g_npg < PG_MAX; p += g_psz) g_pg[g_npg++] = (guard_pg){p, l, x, 0};
        }
    int T = 8;
    int32_t toks[8] = {5, 17, 33, 2, 250, 7, 99, 101};
    mx_ctx *c = mx_ctx_new(m, T, T + 1, NULL);
    mx_kv *kv = mx_kv_new(m, T + 1);
    mx_seq_in pre = {.kv = kv, .tokens = toks, .n = T - 1, .seg_end = 0}, step = {.kv = kv, .tokens = toks + T - 1, .n = 1, .seg_end = 0};
    float *lg = malloc(sizeof(float) * (size_t)m->arch.vocab);
    int rc = mx_forward(c, &pre, 1, lg, false);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, &g_old_segv);
    for (int i = 0; i < g_npg; i++) mprotect((void *)g_pg[i].addr, g_psz, PROT_NONE);
    if (!rc) rc = mx_forward(c, &step, 1, lg, false);
    for (int i = 0; i < g_npg; i++) mprotect((void *)g_pg[i].addr, g_psz, PROT_READ);
    sigaction(SIGSEGV, &g_old_segv, NULL);
    bool ok = !rc && g_npg > 0;
    int worst = -1, layers = 0;
    for (int l = 0; l < m->arch.n_layers && ok; l++) {
        if (m->arch.layers[l].ffn != &mx_block_moe) continue;
        layers++;
        int touched = 0;
        for (int x = 0; x < E; x++) {
            bool hit = false;
            for (int i = 0; i < g_npg; i++) hit |= g_pg[i].layer == l && g_pg[i].expert == x && g_pg[i].hit;
            touched += hit;
        }
        if (touched != K) { ok = false; worst = touched; }
    }
    snprintf(label, sizeof label, "%s_decode_faults_in_routed_experts_only", name);
    CHECK(label, ok && layers > 0, "rc %d, %d guarded pages, a layer touched %d experts (top_k %d)", rc, g_npg, worst, K);
    free(lg);
    mx_kv_free(kv);
    mx_ctx_free(c);
    mx_engine_close(&e);
}

/* ---- stacked expert layouts ---- */

static char g_tmp[256];

typedef struct { mx_st_out o; void *buf; } outt;

/* Writes dst/model.safetensors + config.json from a fixture with its experts
 * stored per expert or stacked (MLX switch_mlp), float or 4-bit affine (group
 * 32); mla_split: kv_b_proj split per head as MLX does (embed_q [H, kv_lora,
 * nope] = W_k^T, unembed_out [H, v, kv_lora]). Returns 0 on success. */
static int convert(const char *src, const char *dst, bool stacked, bool quant, bool mla_split) {
    char *mp = mx_path_join(src, "model.safetensors"), *cp = mx_path_join(src, "config.json");
    mx_st_file f;
    int rc = mx_st_open(mp, &f);
    free(mp);
    if (rc) { free(cp); return -1; }
    outt *outs = calloc((size_t)f.n_tensors * 3 + 16, sizeof(outt));
    int n = 0;
    enum { NP = 3 };
    const char *projs[NP] = {"gate_proj", "up_proj", "down_proj"};
    int L = 0, E = 0, rows[NP] = {0}, cols[NP] = {0};
    bool has[64] = {0};
    json_t *cfg = mx_json_load_file(cp, 1 << 20);
    int Hn = (int)json_integer_value(json_object_get(cfg, "num_attention_heads"));
    int dn = (int)json_integer_value(json_object_get(cfg, "qk_nope_head_dim")), dv = (int)json_integer_value(json_object_get(cfg, "v_head_dim"));
    int kvr = (int)json_integer_value(json_object_get(cfg, "kv_lora_rank"));
    for (int i = 0; i < f.n_tensors; i++) {
        int l, e;
        char rest[64];
        if (mla_split && sscanf(f.tensors[i].name, "model.layers.%d.self_attn.kv_b_proj.%63s", &l, rest) == 2) {
            float *kb = malloc(sizeof(float) * (size_t)f.tensors[i].numel);
            float *eq = malloc(sizeof(float) * (size_t)Hn * kvr * dn), *uo = malloc(sizeof(float) * (size_t)Hn * dv * kvr);
            mx_tensor_to_f32(&f.tensors[i], kb);
            for (int h = 0; h < Hn; h++) {
                const float *W = kb + (size_t)h * (dn + dv) * kvr;
                for (int r = 0; r < dn; r++)
                    for (int c = 0; c < kvr; c++) eq[((size_t)h * kvr + c) * dn + r] = W[(size_t)r * kvr + c];
                memcpy(uo + (size_t)h * dv * kvr, W + (size_t)dn * kvr, sizeof(float) * (size_t)dv * kvr);
            }
            free(kb);
            outs[n].buf = eq;
            outs[n++].o = (mx_st_out){mx_asprintf("model.layers.%d.self_attn.embed_q.weight", l), MX_DT_F32, 3, {Hn, kvr, dn}, eq,
                                      sizeof(float) * (size_t)Hn * kvr * dn};
            outs[n].buf = uo;
            outs[n++].o = (mx_st_out){mx_asprintf("model.layers.%d.self_attn.unembed_out.weight", l), MX_DT_F32, 3, {Hn, dv, kvr}, uo,
                                      sizeof(float) * (size_t)Hn * dv * kvr};
            continue;
        }
        if (sscanf(f.tensors[i].name, "model.layers.%d.mlp.experts.%d.%63s", &l, &e, rest) == 3) {
            has[l] = true;
            L = l + 1 > L ? l + 1 : L;
            E = e + 1 > E ? e + 1 : E;
            for (int p = 0; p < NP; p++)
                if (!strncmp(rest, projs[p], strlen(projs[p]))) { rows[p] = (int)f.tensors[i].shape[0]; cols[p] = (int)f.tensors[i].shape[1]; }
            continue;
        }
        outs[n++].o = (mx_st_out){f.tensors[i].name, f.tensors[i].dtype, f.tensors[i].ndim,
                                  {f.tensors[i].shape[0], f.tensors[i].shape[1]}, f.tensors[i].data, f.tensors[i].nbytes};
    }
    char names[64][96];
    int nn = 0;
    for (int l = 0; l < L; l++)
        for (int p = 0; p < NP && has[l]; p++) {
            int R = rows[p], C = cols[p], G = 32, words = C * 4 / 32, ng = C / G;
            size_t per = (size_t)R * C;
            float *wf = malloc(per * E * sizeof(float));
            for (int e = 0; e < E; e++) {
                char nm[128];
                snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%d.%s.weight", l, e, projs[p]);
                mx_tensor_to_f32(mx_st_find(&f, nm), wf + e * per);
            }
            uint32_t *qw = NULL;
            float *qs = NULL, *qb = NULL;
            if (quant) {
                qw = calloc((size_t)E * R * words, 4);
                qs = malloc(sizeof(float) * (size_t)E * R * ng);
                qb = malloc(sizeof(float) * (size_t)E * R * ng);
                uint8_t scodes[64];
                for (size_t r = 0; r < (size_t)E * R; r++)
                    mxq_quantize_row(MX_W_AFFINE, 4, G, wf + r * C, C, (uint8_t *)(qw + r * words), qs + r * ng, qb + r * ng, scodes);
            }
            int ne = stacked ? 1 : E;
            for (int e = 0; e < ne; e++) {
                char *base = names[nn++];
                if (stacked) snprintf(base, 96, "model.layers.%d.mlp.switch_mlp.%s", l, projs[p]);
                else snprintf(base, 96, "model.layers.%d.mlp.experts.%d.%s", l, e, projs[p]);
                int lead = stacked ? E : 1;
                char *wn = mx_asprintf("%s.weight", base);
                if (!quant) {
                    void *buf = malloc(per * lead * 4);
                    memcpy(buf, wf + (stacked ? 0 : e * per), per * lead * 4);
                    outs[n].buf = buf;
                    outs[n++].o = stacked ? (mx_st_out){wn, MX_DT_F32, 3, {E, R, C}, buf, per * E * 4}
                                          : (mx_st_out){wn, MX_DT_F32, 2, {R, C}, buf, per * 4};
                    continue;
                }
                size_t r0 = stacked ? 0 : (size_t)e * R, nr = (size_t)R * lead;
                const char *sfx[3] = {"weight", "scales", "biases"};
                for (int k = 0; k < 3; k++) {
                    size_t w = k == 0 ? (size_t)words : (size_t)ng;
                    void *buf = malloc(nr * w * 4), *src0 = k == 0 ? (void *)(qw + r0 * words) : k == 1 ? (void *)(qs + r0 * ng) : (void *)(qb + r0 * ng);
                    memcpy(buf, src0, nr * w * 4);
                    char *tn = k == 0 ? wn : mx_asprintf("%s.%s", base, sfx[k]);
                    mx_dtype dt = k == 0 ? MX_DT_U32 : MX_DT_F32;
                    outs[n].buf = buf;
                    outs[n++].o = stacked ? (mx_st_out){tn, dt, 3, {E, R, (int64_t)w}, buf, nr * w * 4}
                                          : (mx_st_out){tn, dt, 2, {R, (int64_t)w}, buf, nr * w * 4};
                }
            }
            free(wf); free(qw); free(qs); free(qb);
        }
    mkdir(dst, 0755);
    char *op = mx_path_join(dst, "model.safetensors");
    mx_st_out *arr = malloc(sizeof(mx_st_out) * (size_t)n);
    for (int i = 0; i < n; i++) arr[i] = outs[i].o;
    rc = mx_st_write(op, arr, n, "{\"format\":\"mlx\"}");
    free(arr);
    free(op);
    if (quant) json_object_set_new(cfg, "quantization", json_pack("{s:i,s:i}", "group_size", 32, "bits", 4));
    char *oc = mx_path_join(dst, "config.json");
    if (!cfg || json_dump_file(cfg, oc, 0)) rc = -1;
    json_decref(cfg);
    free(oc);
    free(cp);
    for (int i = 0; i < n; i++) {
        free(outs[i].buf);
        bool owned = false;
        for (int k = 0; k < f.n_tensors; k++) owned |= outs[i].o.name == f.tensors[k].name;
        if (!owned) free((void *)outs[i].o.name);
    }
    free(outs);
    mx_st_close(&f);
    return rc;
}

static bool g_act12 = true; /* the activation path of prompt_logits' passes */

static float *prompt_logits(const char *dir, int T, const int32_t *toks, mx_pool *pool, int *V, uint64_t *bytes) {
    mx_engine e;
    if (mx_engine_open(dir, &e)) { printf("# %s: %s\n", dir, mx_errmsg()); return NULL; }
    *V = e.model.arch.vocab;
    *bytes = e.model.weight_bytes;
    float *lg = malloc(sizeof(float) * (size_t)T * *V);
    mx_ctx *c = mx_ctx_new(&e.model, T, T, pool);
    mx_kv *kv = mx_kv_new(&e.model, T);
    mx_seq_in s = {.kv = kv, .tokens = toks, .n = T, .seg_end = 0};
    if (c) mx_ctx_policy(c)->act12 = g_act12;
    if (mx_forward(c, &s, 1, lg, true)) { free(lg); lg = NULL; }
    mx_kv_free(kv);
    mx_ctx_free(c);
    mx_engine_close(&e);
    return lg;
}

static void rm_dir(const char *d) {
    const char *fs[] = {"model.safetensors", "config.json"};
    for (size_t i = 0; i < MX_ARRAY_LEN(fs); i++) {
        char *p = mx_path_join(d, fs[i]);
        unlink(p);
        free(p);
    }
    rmdir(d);
}

static void test_layouts(mx_pool *pool) {
    const char *src = "tests/fixtures/qwen3_moe";
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mlxcel_moe_XXXXXX");
    if (!mkdtemp(g_tmp)) { CHECK("layouts_tmpdir", 0, "mkdtemp failed"); return; }
    const char *kinds[4] = {"per_expert_f32", "stacked_f32", "per_expert_q4", "stacked_q4"};
    char dirs[4][300];
    int T = 16, V = 0;
    int32_t toks[16];
    unsigned seed = 7;
    for (int i = 0; i < T; i++) toks[i] = (int32_t)(t_rng(&seed) % 300u);
    float *lg[5] = {0};
    uint64_t bytes[5] = {0};
    lg[4] = prompt_logits(src, T, toks, pool, &V, &bytes[4]);
    for (int k = 0; k < 4; k++) {
        snprintf(dirs[k], sizeof dirs[k], "%s/%s", g_tmp, kinds[k]);
        char label[96];
        snprintf(label, sizeof label, "layout_%s_write", kinds[k]);
        int rc = convert(src, dirs[k], k & 1, k >= 2, false);
        CHECK(label, !rc, "conversion failed");
        if (!rc) lg[k] = prompt_logits(dirs[k], T, toks, pool, &V, &bytes[k]);
        snprintf(label, sizeof label, "layout_%s_load", kinds[k]);
        CHECK(label, lg[k] != NULL, "load/forward failed");
    }
    size_t n = (size_t)T * V;
    if (lg[4] && lg[0] && lg[1]) {
        CHECK("layout_per_expert_rewrite_eq_fixture", t_maxdiff(lg[4], lg[0], n) == 0, "diff %g", t_maxdiff(lg[4], lg[0], n));
        CHECK("layout_stacked_f32_eq_per_expert", t_maxdiff(lg[0], lg[1], n) == 0, "diff %g", t_maxdiff(lg[0], lg[1], n));
        CHECK("layout_stacked_f32_same_bytes", bytes[0] == bytes[1], "%llu vs %llu", (unsigned long long)bytes[0], (unsigned long long)bytes[1]);
    }
    if (lg[2] && lg[3] && lg[0]) {
        float d = t_maxdiff(lg[2], lg[3], n), mx = 1;
        for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(lg[0][i]));
        CHECK("layout_stacked_q4_eq_per_expert_q4", d <= 1e-6f * mx, "diff %g", d);
        CHECK("layout_q4_fewer_bytes", bytes[3] < bytes[1] && bytes[2] == bytes[3], "%llu / %llu / %llu", (unsigned long long)bytes[1],
              (unsigned long long)bytes[2], (unsigned long long)bytes[3]);
        printf("# 4-bit experts vs float: max logit diff %g (max |logit| %g)\n", t_maxdiff(lg[0], lg[3], n), mx);
    }
    for (int k = 0; k < 5; k++) free(lg[k]);
    for (int k = 0; k < 4; k++) rm_dir(dirs[k]);
    rmdir(g_tmp);
}

/* transformers v5's fused experts (experts.gate_up_proj [E, 2F, H], experts.down_proj
 * [E, H, F]; bound through moe.alt2) rewritten per expert (experts.<e>.{gate,up,
 * down}_proj, the primary names): the layout checkpoints saved before the fusion use. */
static int split_fused(const char *src, const char *dst) {
    char *mp = mx_path_join(src, "model.safetensors"), *cp = mx_path_join(src, "config.json");
    mx_st_file f;
    int rc = mx_st_open(mp, &f);
    free(mp);
    if (rc) { free(cp); return -1; }
    int cap = f.n_tensors * 3 * 64 + 16, n = 0;
    mx_st_out *outs = calloc((size_t)cap, sizeof *outs);
    char **names = calloc((size_t)cap, sizeof(char *));
    for (int i = 0; i < f.n_tensors; i++) {
        const mx_tensor *t = &f.tensors[i];
        int l;
        char which[32];
        if (sscanf(t->name, "model.layers.%d.mlp.experts.%31s", &l, which) == 2 && t->ndim == 3 && t->dtype == MX_DT_F32 &&
            (!strcmp(which, "gate_up_proj") || !strcmp(which, "down_proj"))) {
            bool gu = !strcmp(which, "gate_up_proj");
            int E = (int)t->shape[0], R = (int)t->shape[1], C = (int)t->shape[2], parts = gu ? 2 : 1, r = R / parts;
            for (int e = 0; e < E; e++)
                for (int q = 0; q < parts; q++) {
                    names[n] = mx_asprintf("model.layers.%d.mlp.experts.%d.%s.weight", l, e, gu ? (q ? "up_proj" : "gate_proj") : "down_proj");
                    outs[n] = (mx_st_out){names[n], MX_DT_F32, 2, {r, C}, t->data + ((size_t)e * R + (size_t)q * r) * C * 4, (size_t)r * C * 4};
                    n++;
                }
            continue;
        }
        outs[n++] = (mx_st_out){t->name, t->dtype, t->ndim, {t->shape[0], t->ndim > 1 ? t->shape[1] : 0}, t->data, t->nbytes};
    }
    mkdir(dst, 0755);
    char *op = mx_path_join(dst, "model.safetensors"), *oc = mx_path_join(dst, "config.json");
    json_t *cfg = mx_json_load_file(cp, 1 << 20);
    rc = mx_st_write(op, outs, n, "{\"format\":\"pt\"}") || !cfg || json_dump_file(cfg, oc, 0) ? -1 : 0;
    json_decref(cfg);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names); free(outs); free(op); free(oc); free(cp);
    mx_st_close(&f);
    return rc;
}

static void test_fused_split(mx_pool *pool, const char *fx) {
    char src[128], dst[300], label[128];
    snprintf(src, sizeof src, "tests/fixtures/%s", fx);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mlxcel_moe_XXXXXX");
    if (!mkdtemp(g_tmp)) { CHECK("fused_split_tmpdir", 0, "mkdtemp failed"); return; }
    snprintf(dst, sizeof dst, "%s/per_expert", g_tmp);
    int T = 16, V = 0;
    int32_t toks[16];
    unsigned seed = 9;
    for (int i = 0; i < T; i++) toks[i] = (int32_t)(t_rng(&seed) % 300u);
    uint64_t b0 = 0, b1 = 0;
    float *a = prompt_logits(src, T, toks, pool, &V, &b0), *b = NULL;
    snprintf(label, sizeof label, "fused_split_%s_write", fx);
    int rc = split_fused(src, dst);
    CHECK(label, !rc, "rewrite failed");
    if (!rc) b = prompt_logits(dst, T, toks, pool, &V, &b1);
    snprintf(label, sizeof label, "fused_split_%s_per_expert_eq_fused", fx);
    CHECK(label, a && b && t_maxdiff(a, b, (size_t)T * V) == 0 && b0 == b1, "logits or bytes differ");
    free(a);
    free(b);
    rm_dir(dst);
    rmdir(g_tmp);
}

/* MLX's DeepSeek layout: kv_b_proj pre-split per head (embed_q /
 * unembed_out) and switch_mlp experts, float and 4-bit */
static void test_mla_layout(mx_pool *pool) {
    const char *src = "tests/fixtures/deepseek_v3";
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mlxcel_mla_XXXXXX");
    if (!mkdtemp(g_tmp)) { CHECK("mla_layout_tmpdir", 0, "mkdtemp failed"); return; }
    char da[300], db[300], dc[300];
    snprintf(da, sizeof da, "%s/split_f32", g_tmp);
    snprintf(db, sizeof db, "%s/split_q4", g_tmp);
    snprintf(dc, sizeof dc, "%s/kvb_q4", g_tmp);
    int ok = !convert(src, da, true, false, true) && !convert(src, db, true, true, true) && !convert(src, dc, true, true, false);
    CHECK("mla_layout_write", ok, "conversion failed");
    int T = 16, V = 0;
    int32_t toks[16];
    unsigned seed = 9;
    for (int i = 0; i < T; i++) toks[i] = (int32_t)(t_rng(&seed) % 300u);
    uint64_t by[4];
    /* the layouts are compared with f32 activations: int8 coding of the
     * differently factored products would differ by its own rounding */
    g_act12 = false;
    float *r = prompt_logits(src, T, toks, pool, &V, &by[0]), *a = ok ? prompt_logits(da, T, toks, pool, &V, &by[1]) : NULL;
    float *b = ok ? prompt_logits(db, T, toks, pool, &V, &by[2]) : NULL, *c = ok ? prompt_logits(dc, T, toks, pool, &V, &by[3]) : NULL;
    g_act12 = true;
    CHECK("mla_layout_load", r && a && b && c, "load/forward failed");
    if (r && a && b && c) {
        size_t n = (size_t)T * V;
        float mx = 1;
        for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(r[i]));
        CHECK("mla_split_f32_eq_kv_b", t_maxdiff(r, a, n) <= 1e-5f * mx, "diff %g", t_maxdiff(r, a, n));
        CHECK("mla_split_q4_eq_kv_b_q4", t_maxdiff(b, c, n) <= 1e-5f * mx, "diff %g", t_maxdiff(b, c, n));
        CHECK("mla_split_same_bytes", by[0] == by[1], "%llu vs %llu", (unsigned long long)by[0], (unsigned long long)by[1]);
    }
    if (ok) prefill_vs_decode("deepseek_v3_mlx_q4", db, pool);
    free(r); free(a); free(b); free(c);
    rm_dir(da);
    rm_dir(db);
    rm_dir(dc);
    rmdir(g_tmp);
}

/* GPT-OSS experts in MXFP4: HF's released layout (gate_up_proj_blocks /
 * _scales [E, 2I, H/32, 16], gate/up in alternate rows, biases apart) and
 * mlx-lm's split (experts.gate_proj / up_proj / down_proj, mode mxfp4), both
 * quantized from the fixture's float experts, must agree. */
static int convert_gpt_oss(const char *src, const char *dst, bool hf_blocks) {
    char *mp = mx_path_join(src, "model.safetensors"), *cp = mx_path_join(src, "config.json");
    mx_st_file f;
    if (mx_st_open(mp, &f)) { free(mp); free(cp); return -1; }
    free(mp);
    outt *outs = calloc((size_t)f.n_tensors * 4 + 16, sizeof(outt));
    int n = 0;
    char **names = calloc((size_t)f.n_tensors * 4 + 16, sizeof(char *));
    for (int i = 0; i < f.n_tensors; i++) {
        const mx_tensor *t = &f.tensors[i];
        int l;
        char rest[64];
        if (sscanf(t->name, "model.layers.%d.mlp.experts.%63s", &l, rest) != 2) {
            outs[n++].o = (mx_st_out){t->name, t->dtype, t->ndim, {t->shape[0], t->shape[1], t->shape[2]}, t->data, t->nbytes};
            continue;
        }
        bool gu = !strcmp(rest, "gate_up_proj"), dn = !strcmp(rest, "down_proj");
        if (strstr(rest, "_bias")) {
            float *b = malloc(t->nbytes);
            mx_tensor_to_f32(t, b);
            int E = (int)t->shape[0], W = (int)t->shape[1];
            if (hf_blocks || strstr(rest, "down")) {
                outs[n].buf = b;
                char *nm = hf_blocks ? mx_asprintf("%s", t->name) : mx_asprintf("model.layers.%d.mlp.experts.down_proj.bias", l);
                names[n] = nm;
                outs[n++].o = (mx_st_out){nm, MX_DT_F32, 2, {E, W}, b, t->nbytes};
                continue;
            }
            for (int k = 0; k < 2; k++) { /* gate = even, up = odd */
                float *h = malloc(sizeof(float) * (size_t)E * W / 2);
                for (int e = 0; e < E; e++)
                    for (int j = 0; j < W / 2; j++) h[(size_t)e * W / 2 + j] = b[(size_t)e * W + 2 * j + k];
                char *nm = mx_asprintf("model.layers.%d.mlp.experts.%s.bias", l, k ? "up_proj" : "gate_proj");
                names[n] = nm;
                outs[n].buf = h;
                outs[n++].o = (mx_st_out){nm, MX_DT_F32, 2, {E, W / 2}, h, sizeof(float) * (size_t)E * W / 2};
            }
            free(b);
            continue;
        }
        if (!gu && !dn) continue;
        /* stored x @ W: [E, in, out] -> rows [E, out, in], quantized to MXFP4 */
        int E = (int)t->shape[0], C = (int)t->shape[1], R = (int)t->shape[2];
        float *w = malloc(t->nbytes), *row = malloc(sizeof(float) * (size_t)C);
        mx_tensor_to_f32(t, w);
        uint8_t *pk = malloc((size_t)E * R * C / 2), *sc = malloc((size_t)E * R * C / 32);
        float dummy[256];
        for (int e = 0; e < E; e++)
            for (int r = 0; r < R; r++) {
                for (int c = 0; c < C; c++) row[c] = w[((size_t)e * C + c) * R + r];
                size_t q = (size_t)e * R + r;
                mxq_quantize_row(MX_W_MXFP4, 4, 32, row, C, pk + q * C / 2, dummy, dummy, sc + q * C / 32);
            }
        free(w);
        free(row);
        if (hf_blocks) {
            char *bn = mx_asprintf("%s_blocks", t->name), *sn = mx_asprintf("%s_scales", t->name);
            names[n] = bn;
            outs[n].buf = pk;
            outs[n++].o = (mx_st_out){bn, MX_DT_U8, 4, {E, R, C / 32, 16}, pk, (size_t)E * R * C / 2};
            names[n] = sn;
            outs[n].buf = sc;
            outs[n++].o = (mx_st_out){sn, MX_DT_U8, 3, {E, R, C / 32}, sc, (size_t)E * R * C / 32};
            continue;
        }
        int parts = gu ? 2 : 1, Rp = R / parts;
        for (int k = 0; k < parts; k++) {
            uint8_t *p2 = malloc((size_t)E * Rp * C / 2), *s2 = malloc((size_t)E * Rp * C / 32);
            for (int e = 0; e < E; e++)
                for (int r = 0; r < Rp; r++) {
                    size_t from = (size_t)e * R + (gu ? 2 * r + k : r), to = (size_t)e * Rp + r;
                    memcpy(p2 + to * C / 2, pk + from * C / 2, (size_t)C / 2);
                    memcpy(s2 + to * C / 32, sc + from * C / 32, (size_t)C / 32);
                }
            const char *pn = gu ? (k ? "up_proj" : "gate_proj") : "down_proj";
            char *wn = mx_asprintf("model.layers.%d.mlp.experts.%s.weight", l, pn), *sn = mx_asprintf("model.layers.%d.mlp.experts.%s.scales", l, pn);
            names[n] = wn;
            outs[n].buf = p2;
            outs[n++].o = (mx_st_out){wn, MX_DT_U32, 3, {E, Rp, C / 8}, p2, (size_t)E * Rp * C / 2};
            names[n] = sn;
            outs[n].buf = s2;
            outs[n++].o = (mx_st_out){sn, MX_DT_U8, 3, {E, Rp, C / 32}, s2, (size_t)E * Rp * C / 32};
        }
        free(pk);
        free(sc);
    }
    mkdir(dst, 0755);
    char *op = mx_path_join(dst, "model.safetensors");
    mx_st_out *arr = malloc(sizeof(mx_st_out) * (size_t)n);
    for (int i = 0; i < n; i++) arr[i] = outs[i].o;
    int rc = mx_st_write(op, arr, n, hf_blocks ? "{\"format\":\"pt\"}" : "{\"format\":\"mlx\"}");
    free(arr);
    free(op);
    json_t *cfg = mx_json_load_file(cp, 1 << 20);
    if (!hf_blocks) json_object_set_new(cfg, "quantization", json_pack("{s:i,s:i,s:s}", "group_size", 32, "bits", 4, "mode", "mxfp4"));
    char *oc = mx_path_join(dst, "config.json");
    if (!cfg || json_dump_file(cfg, oc, 0)) rc = -1;
    json_decref(cfg);
    free(oc);
    free(cp);
    for (int i = 0; i < n; i++) { free(outs[i].buf); free(names[i]); }
    free(outs);
    free(names);
    mx_st_close(&f);
    return rc;
}

static void test_gpt_oss_mxfp4(mx_pool *pool) {
    const char *src = "tests/fixtures/gpt_oss";
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mlxcel_oss_XXXXXX");
    if (!mkdtemp(g_tmp)) { CHECK("gpt_oss_mxfp4_tmpdir", 0, "mkdtemp failed"); return; }
    char dh[300], dm[300];
    snprintf(dh, sizeof dh, "%s/hf_blocks", g_tmp);
    snprintf(dm, sizeof dm, "%s/mlx_split", g_tmp);
    int ok = !convert_gpt_oss(src, dh, true) && !convert_gpt_oss(src, dm, false);
    CHECK("gpt_oss_mxfp4_write", ok, "conversion failed");
    int T = 16, V = 0;
    int32_t toks[16];
    unsigned seed = 5;
    for (int i = 0; i < T; i++) toks[i] = (int32_t)(3 + t_rng(&seed) % 300u);
    uint64_t by[3];
    float *r = prompt_logits(src, T, toks, pool, &V, &by[0]), *h = ok ? prompt_logits(dh, T, toks, pool, &V, &by[1]) : NULL;
    float *x = ok ? prompt_logits(dm, T, toks, pool, &V, &by[2]) : NULL;
    CHECK("gpt_oss_mxfp4_load", r && h && x, "load/forward failed");
    if (r && h && x) {
        size_t n = (size_t)T * V;
        float mx = 1;
        for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(r[i]));
        CHECK("gpt_oss_hf_mxfp4_eq_mlx_mxfp4", t_maxdiff(h, x, n) <= 1e-5f * mx, "diff %g", t_maxdiff(h, x, n));
        CHECK("gpt_oss_mxfp4_bytes", by[1] == by[2] && by[1] < by[0], "%llu / %llu / %llu", (unsigned long long)by[0],
              (unsigned long long)by[1], (unsigned long long)by[2]);
        printf("# gpt_oss mxfp4 experts vs float: max logit diff %g (max |logit| %g)\n", t_maxdiff(r, h, n), mx);
    }
    if (ok) prefill_vs_decode("gpt_oss_hf_mxfp4", dh, pool);
    free(r); free(h); free(x);
    rm_dir(dh);
    rm_dir(dm);
    rmdir(g_tmp);
}

/* ---- MLA cache ---- */

static void test_mla_cache(void) {
    mx_engine e;
    if (mx_engine_open("tests/fixtures/deepseek_v3", &e)) { CHECK("mla_open", 0, "%s", mx_errmsg()); return; }
    const mx_arch *a = &e.model.arch;
    const mx_mla_spec *s = &a->mla;
    int cap = 100;
    mx_kv *kv = mx_kv_new(&e.model, cap);
    size_t per_pos = kv->offset[a->n_layers] / (size_t)cap; /* (each layer padded to 16 floats) */
    size_t latent = (size_t)a->n_layers * (s->kv_lora_rank + s->qk_rope_dim);
    size_t full = (size_t)a->n_layers * a->attn->n_heads * (s->qk_nope_dim + s->qk_rope_dim + s->v_head_dim); /* per-head K and V, as HF caches them */
    CHECK("mla_cache_is_latent", per_pos >= latent && per_pos < latent + 1, "%zu floats/position, latent %zu", per_pos, latent);
    printf("# mla cache: %zu floats per position (latent %d + rope %d per layer) vs %zu for full K/V (%.1fx smaller)\n", latent,
           s->kv_lora_rank, s->qk_rope_dim, full, (double)full / (double)latent);
    mx_kv_free(kv);
    mx_engine_close(&e);
}

int main(void) {
    test_routing();
    mx_pool *pool = mx_pool_new(2);
    const char *fx[] = {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "phimoe", "dbrx", "granitemoe", "gpt_oss", "deepseek_v3",
                        "qwen3_5_moe_text", "lfm2_moe", "minimax", "llama4_text", "mellum", "solar_open", "exaone_moe", "afmoe", "laguna", "cohere2_moe"};
    for (size_t i = 0; i < MX_ARRAY_LEN(fx); i++) {
        char dir[128];
        snprintf(dir, sizeof dir, "tests/fixtures/%s", fx[i]);
        prefill_vs_decode(fx[i], dir, pool);
    }
    test_decode_page_faults("qwen3_moe", "tests/fixtures/qwen3_moe");
    test_decode_page_faults("deepseek_v3", "tests/fixtures/deepseek_v3");
    test_decode_page_faults("olmoe", "tests/fixtures/olmoe");
    test_layouts(pool);
    test_fused_split(pool, "solar_open");
    test_mla_layout(pool);
    test_gpt_oss_mxfp4(pool);
    test_mla_cache();
    mx_pool_free(pool);
    TEST_END();
}
