#define _GNU_SOURCE
/* Shared prefix pages (nn/kvpages.c, docs/kv-cache.md "Shared prefix pages"):
 *  - the pool alone: three mappings sharing chunks in changing patterns,
 *    every byte read back as the mapping that last wrote it should, the
 *    shared count equal to one kept by the test, copies on unshare, and
 *    release / free giving the memory back (the file's blocks); unsharing
 *    with live ranges keeps the chunks wholly inside them shared, copies
 *    those partly inside and maps fresh ones for the dead;
 *  - fixtures (plain attention, MLA, sliding windows, a DeltaNet hybrid): a
 *    cache taking another's prompt by mx_kv_share_prefix gives logits
 *    bit-identical to a cache that computed the prompt itself, with the
 *    prefix's whole chunks shared, not copied; the lender writing on past the
 *    prompt, and cut back into it and writing again, changes nothing for the
 *    borrower, and both stay bit-identical to plain caches throughout. */
#include "test.h"
#include "base/base.h"
#include "nn/kvpages.h"
#include "fixtures.h"
#include <sys/mman.h>
#include <unistd.h>

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void pool_alone(void) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), C = pg, n = 1500; /* the count table grows past 1024 */
    mx_kv_pool *p = mx_kv_pool_new(C);
    CHECK("kvshare/pool_new", p != NULL, "%s", mx_errmsg());
    if (!p) return;
    CHECK("kvshare/chunk_not_page", mx_kv_pool_new(pg + 8) == NULL, "a chunk that is not whole pages is refused");
    mx_kvmap m[3];
    uint8_t *want[3]; /* what each mapping should read: chunk i holds bytes of value want[k][i] */
    bool ok = true;
    for (int k = 0; k < 3; k++) {
        ok &= mx_kvp_map_new(p, &m[k], n * C) == MX_OK;
        want[k] = calloc(n, 1);
    }
    CHECK("kvshare/map_new", ok, "%s", mx_errmsg());
    if (!ok) return;
    unsigned rng = 7;
    bool content = true, counts = true, zero = true;
    uint64_t *all = malloc(sizeof(uint64_t) * 3 * n);
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < n; i++) zero &= m[k].base[i * C] == 0 && m[k].base[i * C + C - 1] == 0;
    CHECK("kvshare/fresh_zero", zero, "fresh chunks read as zeros");
    for (int round = 0; round < 40; round++) {
        int k = (int)(t_rng(&rng) % 3), o = (int)((k + 1 + t_rng(&rng) % 2) % 3), op = (int)(t_rng(&rng) % 4);
        size_t a = t_rng(&rng) % n, b = a + t_rng(&rng) % (n - a) + 1;
        if (op == 0) { /* k writes its own chunks [a, b): unshared first, as a cache is before it writes */
            mx_kvp_unshare(p, &m[k], NULL, 0, NULL);
            uint8_t v = (uint8_t)(1 + t_rng(&rng) % 250);
            for (size_t i = a; i < b; i++) {
                memset(m[k].base + i * C, v, C);
                want[k][i] = v;
            }
        } else if (op == 1) { /* k maps o's chunks [a, b) (byte bounds inside chunks: only whole ones map) */
            mx_kvp_unshare(p, &m[k], NULL, 0, NULL);
            size_t lo = a * C + (round % 2 ? C / 2 : 0), hi = b * C;
            mx_kvp_share(p, &m[k], &m[o], lo, hi);
            for (size_t i = (lo + C - 1) / C; i < hi / C; i++) want[k][i] = want[o][i];
        } else if (op == 2 && round % 2) {
            mx_kvp_unshare(p, &m[k], NULL, 0, NULL);
        } else if (op == 2) { /* live bytes [a, b) at uneven bounds, and a second range past them */
            size_t live[2][2] = {{a * C + C / 3, b * C - C / 4}, {b * C + C / 2, MX_MIN(b + 7, n) * C}}, nl = b + 1 < n ? 2 : 1, kept;
            if (live[0][1] < live[0][0]) live[0][1] = live[0][0];
            uint64_t *others = malloc(sizeof(uint64_t) * 2 * n), *before = malloc(sizeof(uint64_t) * n);
            size_t no = 0, want_kept = 0;
            for (int x = 0; x < 3; x++)
                for (size_t i = 0; x != k && i < n; i++)
                    if (m[x].id[i]) others[no++] = m[x].id[i];
            qsort(others, no, sizeof *others, cmp_u64);
            memcpy(before, m[k].id, sizeof(uint64_t) * n);
            mx_kvp_unshare(p, &m[k], (const size_t(*)[2])live, nl, &kept);
            for (size_t i = 0; i < n; i++) {
                if (!before[i] || !bsearch(&before[i], others, no, sizeof *others, cmp_u64)) continue; /* not shared: untouched */
                size_t c0 = i * C, c1 = c0 + C;
                bool inside = false, meets = false;
                for (size_t q = 0; q < nl; q++) {
                    inside |= live[q][0] <= c0 && live[q][1] >= c1;
                    meets |= live[q][0] < c1 && live[q][1] > c0;
                }
                if (inside) { content &= m[k].id[i] == before[i]; want_kept++; }
                else {
                    content &= m[k].id[i] != before[i];
                    if (!meets) want[k][i] = 0; /* dead: a fresh chunk */
                }
            }
            content &= kept == want_kept * C;
            free(others);
            free(before);
        } else if (round % 3 == 0) {
            mx_kvp_release(p, &m[k], true);
            memset(want[k], 0, n);
        }
        /* shared maps: per chunk id in the file (not 0), maps beyond the first */
        size_t extra = 0, na = 0;
        for (int x = 0; x < 3; x++)
            for (size_t i = 0; i < n; i++) {
                if (m[x].id[i]) all[na++] = m[x].id[i];
                content &= m[x].base[i * C] == want[x][i] && m[x].base[i * C + C - 1] == want[x][i];
            }
        qsort(all, na, sizeof *all, cmp_u64);
        for (size_t i = 1; i < na; i++) extra += all[i] == all[i - 1];
        counts &= mx_kv_pool_shared_bytes(p) == extra * C;
        if (!content || !counts) { printf("# round %d op %d k %d o %d [%zu, %zu)\n", round, op, k, o, a, b); break; }
    }
    CHECK("kvshare/content", content, "a mapping reads bytes another wrote, or lost its own");
    CHECK("kvshare/shared_count", counts, "the pool's shared bytes differ from the maps counted");
    /* sharing takes no memory, unsharing takes it, releasing gives it back */
    for (int k = 0; k < 3; k++) mx_kvp_release(p, &m[k], true);
    for (size_t i = 0; i < n; i++) m[0].base[i * C] = 1;
    size_t r0 = mx_kv_pool_resident(p);
    mx_kvp_share(p, &m[1], &m[0], 0, n * C);
    mx_kvp_share(p, &m[2], &m[0], 0, n * C);
    size_t r1 = mx_kv_pool_resident(p);
    CHECK("kvshare/share_no_memory", r0 >= n * C && r1 == r0 && mx_kv_pool_shared_bytes(p) == 2 * n * C, "resident %zu -> %zu, shared %zu",
          r0, r1, mx_kv_pool_shared_bytes(p));
    mx_kvp_unshare(p, &m[1], NULL, 0, NULL);
    size_t r2 = mx_kv_pool_resident(p);
    bool same = true;
    for (size_t i = 0; i < n; i++) same &= m[1].base[i * C] == 1 && m[2].base[i * C] == 1;
    CHECK("kvshare/unshare_copies", r2 == r1 + n * C && mx_kv_pool_shared_bytes(p) == n * C && same, "resident %zu -> %zu", r1, r2);
    for (int k = 0; k < 3; k++) mx_kvp_release(p, &m[k], false);
    CHECK("kvshare/release_frees", mx_kv_pool_resident(p) == 0 && mx_kv_pool_shared_bytes(p) == 0, "resident %zu after every release",
          mx_kv_pool_resident(p));
    for (int k = 0; k < 3; k++) free(want[k]);
    free(all);
    mx_kv_pool_free(p);
}

/* tokens fed to kv, the logits of every position into out ([n][V]) */
static bool feed(mx_ctx *c, mx_kv *kv, const int32_t *tok, int n, float *out) {
    mx_seq_in s = {0};
    s.kv = kv;
    s.tokens = tok;
    s.n = n;
    return mx_forward(c, &s, 1, out, true) == MX_OK;
}

static void fixture(const char *name) {
    char *dir = mx_path_join("tests/fixtures", name);
    mx_engine e;
    char lab[128];
    snprintf(lab, sizeof lab, "kvshare/%s/load", name);
    if (mx_engine_open(dir, &e)) { CHECK(lab, 0, "%s", mx_errmsg()); free(dir); return; }
    free(dir);
    const mx_model *m = &e.model;
    int V = m->arch.vocab, T = 96, Q = 12, cap = 128, cut = 40;
    bool rec = mx_model_recurrent(m);
    mx_ctx *c = mx_ctx_new(m, T, cap, NULL);
    mx_kv_pool *p = mx_kv_pool_new((size_t)sysconf(_SC_PAGESIZE));
    mx_kv *A = mx_kv_new_in(m, cap, p), *B = mx_kv_new_in(m, cap, p), *R = mx_kv_new(m, cap);
    float *lg = malloc(sizeof(float) * (size_t)T * V), *ref = malloc(sizeof(float) * (size_t)T * V);
    int32_t tok[96], q1[12], q2[12], q3[12];
    unsigned rng = 11;
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(3 + t_rng(&rng) % (unsigned)(V - 3));
    for (int i = 0; i < Q; i++) {
        q1[i] = (int32_t)(3 + t_rng(&rng) % (unsigned)(V - 3));
        q2[i] = (int32_t)(3 + t_rng(&rng) % (unsigned)(V - 3));
        q3[i] = (int32_t)(3 + t_rng(&rng) % (unsigned)(V - 3));
    }
    size_t QV = sizeof(float) * (size_t)Q * V;
    bool ok = c && p && A && B && R && feed(c, A, tok, T, lg);
    snprintf(lab, sizeof lab, "kvshare/%s/setup", name);
    CHECK(lab, ok, "%s", mx_errmsg());
    if (!ok) goto out;
    size_t r0 = mx_kv_pool_resident(p), shared = mx_kv_share_prefix(m, B, A, T), r1 = mx_kv_pool_resident(p);
    snprintf(lab, sizeof lab, "kvshare/%s/shared", name);
    CHECK(lab, shared > 0 && mx_kv_pool_shared_bytes(p) == shared && r1 - r0 + shared <= mx_kv_used_bytes(m, cap, T) && B->len == T,
          "%zu bytes shared, resident +%zu, used bound %zu", shared, r1 - r0, mx_kv_used_bytes(m, cap, T));
    /* B goes on from the prompt as a cache that computed it */
    ok = feed(c, B, q1, Q, lg) && feed(c, R, tok, T, ref) && feed(c, R, q1, Q, ref);
    snprintf(lab, sizeof lab, "kvshare/%s/borrower", name);
    CHECK(lab, ok && !memcmp(lg, ref, QV), "max diff %g", ok ? t_maxdiff(lg, ref, (size_t)Q * V) : -1.0f);
    /* A writes on past the prompt */
    mx_kv_release(R);
    ok = feed(c, A, q2, Q, lg) && feed(c, R, tok, T, ref) && feed(c, R, q2, Q, ref);
    snprintf(lab, sizeof lab, "kvshare/%s/lender_on", name);
    CHECK(lab, ok && !memcmp(lg, ref, QV), "max diff %g", ok ? t_maxdiff(lg, ref, (size_t)Q * V) : -1.0f);
    if (!rec) { /* A cut back into the shared prompt writes there again: its own copies of the chunks
                 * holding rows past the cut, B unchanged; the chunks wholly below the cut stay shared */
        mx_kv *S = mx_kv_new_in(m, cap, p);
        size_t below = S ? mx_kv_share_prefix(m, S, B, cut) : 0;
        mx_kv_free(S);
        A->len = cut;
        mx_kv_release(R);
        ok = feed(c, A, q3, Q, lg) && feed(c, R, tok, cut, ref) && feed(c, R, q3, Q, ref);
        snprintf(lab, sizeof lab, "kvshare/%s/lender_cut", name);
        CHECK(lab, ok && !memcmp(lg, ref, QV) && mx_kv_pool_shared_bytes(p) == below && A->share_len == (below ? cut : 0),
              "max diff %g, %zu bytes still shared, %zu wholly below the cut", ok ? t_maxdiff(lg, ref, (size_t)Q * V) : -1.0f,
              mx_kv_pool_shared_bytes(p), below);
    }
    mx_kv_release(R);
    ok = feed(c, B, q3, 4, lg) && feed(c, R, tok, T, ref) && feed(c, R, q1, Q, ref) && feed(c, R, q3, 4, ref);
    snprintf(lab, sizeof lab, "kvshare/%s/borrower_after", name);
    CHECK(lab, ok && !memcmp(lg, ref, sizeof(float) * 4 * (size_t)V), "max diff %g", ok ? t_maxdiff(lg, ref, 4 * (size_t)V) : -1.0f);
    /* the borrower released: the lender keeps its rows (nothing shared is given back under it) */
    if (rec) {
        mx_kv_release(B);
        mx_kv_release(R);
        ok = feed(c, A, q3, 4, lg) && feed(c, R, tok, T, ref) && feed(c, R, q2, Q, ref) && feed(c, R, q3, 4, ref);
        snprintf(lab, sizeof lab, "kvshare/%s/lender_after_release", name);
        CHECK(lab, ok && !memcmp(lg, ref, sizeof(float) * 4 * (size_t)V) && mx_kv_pool_shared_bytes(p) == 0, "max diff %g",
              ok ? t_maxdiff(lg, ref, 4 * (size_t)V) : -1.0f);
    }
out:
    free(lg);
    free(ref);
    mx_kv_free(A);
    mx_kv_free(B);
    mx_kv_free(R);
    if (p) {
        snprintf(lab, sizeof lab, "kvshare/%s/freed", name);
        CHECK(lab, mx_kv_pool_resident(p) == 0, "%zu bytes left in the pool's file", mx_kv_pool_resident(p));
    }
    mx_kv_pool_free(p);
    mx_ctx_free(c);
    mx_engine_close(&e);
}

/* mx_kv_dedupe_prefix: two caches that computed the same prompt apart keep
 * the chunks whose bytes agree once; the deduplicated cache's contents are
 * unchanged and it goes on as before. Fed alike (one pass of the prompt)
 * every chunk of the prompt's rows agrees; fed in other chunks, or with
 * the source's rows changed, only the equal ones are mapped. */
static void dedupe(const char *name) {
    char *dir = mx_path_join("tests/fixtures", name);
    mx_engine e;
    char lab[128];
    snprintf(lab, sizeof lab, "kvdedupe/%s/load", name);
    if (mx_engine_open(dir, &e)) { CHECK(lab, 0, "%s", mx_errmsg()); free(dir); return; }
    free(dir);
    const mx_model *m = &e.model;
    int V = m->arch.vocab, T = 96, Q = 8, cap = 128;
    mx_ctx *c = mx_ctx_new(m, T, cap, NULL);
    mx_kv_pool *p = mx_kv_pool_new((size_t)sysconf(_SC_PAGESIZE));
    mx_kv *A = mx_kv_new_in(m, cap, p), *D = mx_kv_new_in(m, cap, p), *R = mx_kv_new(m, cap);
    float *lg = malloc(sizeof(float) * (size_t)T * V), *ref = malloc(sizeof(float) * (size_t)T * V);
    int32_t tok[96], q[8];
    unsigned rng = 23;
    for (int i = 0; i < T; i++) tok[i] = (int32_t)(3 + t_rng(&rng) % (unsigned)(V - 3));
    for (int i = 0; i < Q; i++) q[i] = (int32_t)(3 + t_rng(&rng) % (unsigned)(V - 3));
    size_t bytes = 0;
    float *before = NULL;
    for (int variant = 0; variant < 3; variant++) {
        const char *vn[] = {"alike", "other_chunks", "changed_source"};
        mx_kv_release(A);
        mx_kv_release(D);
        mx_kv_release(R);
        bool ok = c && p && A && D && R && feed(c, A, tok, T, lg) && feed(c, A, q, 2, lg);
        if (ok && variant == 1) ok = feed(c, D, tok, 40, lg) && feed(c, D, tok + 40, T - 40, lg) && feed(c, R, tok, 40, ref) && feed(c, R, tok + 40, T - 40, ref);
        else if (ok) ok = feed(c, D, tok, T, lg) && feed(c, R, tok, T, ref);
        if (ok && variant == 2) A->data[A->offset[m->arch.n_layers - 1] + 5] += 1.0f; /* a row of A's last layer no longer agrees */
        if (!bytes) bytes = D->offset[D->n_layers] * sizeof(float);
        if (!before) before = malloc(bytes);
        if (ok) memcpy(before, D->data, bytes);
        size_t sh = ok ? mx_kv_dedupe_prefix(m, D, A, T) : 0;
        bool same = ok && !memcmp(before, D->data, bytes);
        ok = ok && feed(c, D, q, Q, lg) && feed(c, R, q, Q, ref);
        snprintf(lab, sizeof lab, "kvdedupe/%s/%s", name, vn[variant]);
        CHECK(lab, ok && same && (variant == 1 || sh > 0) && !memcmp(lg, ref, sizeof(float) * (size_t)Q * V),
              "%s, %zu bytes shared, contents %s, max diff %g", ok ? "fed" : mx_errmsg(), sh, same ? "kept" : "changed",
              ok ? t_maxdiff(lg, ref, (size_t)Q * V) : -1.0f);
    }
    free(before);
    free(lg);
    free(ref);
    mx_kv_free(A);
    mx_kv_free(D);
    mx_kv_free(R);
    mx_kv_pool_free(p);
    mx_ctx_free(c);
    mx_engine_close(&e);
}

int main(void) {
    pool_alone();
    /* plain GQA attention, MLA (latent rows), sliding-window layers, a DeltaNet hybrid (its recurrent
     * layers copied whole, its attention layers shared) */
    const char *names[] = {"llama", "deepseek_v3", "gemma2", "qwen3_next"};
    for (size_t i = 0; i < MX_ARRAY_LEN(names); i++) fixture(names[i]);
    for (size_t i = 0; i < MX_ARRAY_LEN(names); i++) dedupe(names[i]);
    TEST_END();
}
