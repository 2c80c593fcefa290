/* The generate CLI contract, driven as a user would (through the binary):
 * greedy ids and --logits-out against the reference fixture, chunked prefill,
 * seeds, EOS and sampling defaults from generation_config.json, bad
 * arguments. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "format/json.h"
#include "format/safetensors.h"
#include <unistd.h>

static const char *bin(void) {
    const char *b = getenv("MLXCEL");
    return b ? b : "build/mlxcel";
}

/* Runs a shell command; returns its exit status and stdout in *out. */
static int run(const char *cmd, mx_buf *out) {
    out->len = 0;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) mx_buf_append(out, buf, n);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *last_json_line(mx_buf *b) {
    if (!b->data) return NULL;
    char *line = b->data, *nl;
    while ((nl = strchr(line, '\n')) && nl[1]) line = nl + 1;
    return json_loads(line, 0, NULL);
}

static int ids_of(const mx_st_file *f, const char *name, int32_t *out, int max) {
    const mx_tensor *t = mx_st_find(f, name);
    int n = 0;
    for (; t && n < t->numel && n < max; n++) { int64_t v; memcpy(&v, t->data + 8 * n, 8); out[n] = (int32_t)v; }
    return n;
}

static float maxdiff_tensor(const mx_st_file *a, const char *an, const mx_st_file *b, const char *bn, float *maxref) {
    const mx_tensor *x = mx_st_find(a, an), *y = mx_st_find(b, bn);
    if (!x || !y || x->numel != y->numel) return INFINITY;
    float m = 0;
    *maxref = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        float u, v;
        memcpy(&u, x->data + 4 * i, 4);
        memcpy(&v, y->data + 4 * i, 4);
        if (fabsf(u - v) > m) m = fabsf(u - v);
        if (fabsf(v) > *maxref) *maxref = fabsf(v);
    }
    return m;
}

int main(void) {
    const char *fx = "tests/fixtures/llama";
    char *refp = mx_path_join(fx, "reference.safetensors");
    mx_st_file ref;
    if (mx_st_open(refp, &ref)) { printf("FAIL cli/setup: %s\n", mx_errmsg()); return 1; }
    int32_t ids[512], gids[64];
    int T = ids_of(&ref, "input_ids", ids, 512), N = ids_of(&ref, "greedy_ids", gids, 64);
    mx_buf idstr = {0}, out = {0}, cmd = {0};
    for (int i = 0; i < T; i++) mx_buf_printf(&idstr, "%s%d", i ? "," : "", ids[i]);
    char tmp[128];
    snprintf(tmp, sizeof tmp, "/tmp/mlxcel-test-cli-%d", (int)getpid());
    mx_buf_printf(&cmd, "rm -rf %s && mkdir -p %s", tmp, tmp);
    if (system(cmd.data)) {}
    for (int chunk = 512; chunk >= 1; chunk = chunk == 512 ? 7 : chunk == 7 ? 1 : 0) {
        char name[64], lo[256];
        snprintf(lo, sizeof lo, "%s/logits-%d.safetensors", tmp, chunk);
        cmd.len = 0;
        mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids %s -n %d --ignore-eos --prefill-chunk %d --output-format json --logits-out %s",
                      bin(), fx, idstr.data, N, chunk, lo);
        int rc = run(cmd.data, &out);
        json_t *j = last_json_line(&out);
        json_t *g = json_object_get(j, "generated_ids");
        bool same = json_is_array(g) && (int)json_array_size(g) == N;
        for (int i = 0; same && i < N; i++) same = json_integer_value(json_array_get(g, (size_t)i)) == gids[i];
        snprintf(name, sizeof name, "cli/generate_greedy_chunk%d", chunk);
        CHECK(name, rc == 0 && same && json_object_get(j, "prompt_ids") && json_object_get(j, "timings"), "rc=%d output=%s", rc, out.data ? out.data : "");
        json_decref(j);
        mx_st_file lf;
        snprintf(name, sizeof name, "cli/logits_out_chunk%d", chunk);
        if (mx_st_open(lo, &lf)) { CHECK(name, 0, "%s", mx_errmsg()); continue; }
        float mr1, mr2;
        float d1 = maxdiff_tensor(&lf, "logits", &ref, "logits", &mr1);
        float d2 = maxdiff_tensor(&lf, "step_logits", &ref, "greedy_logits", &mr2);
        CHECK(name, d1 <= 1e-4f * fmaxf(1, mr1) && d2 <= 1e-4f * fmaxf(1, mr2), "logits diff %g, step_logits diff %g", d1, d2);
        mx_st_close(&lf);
    }
    /* every dispatch level gives the reference greedy ids (and never SIGILL) */
    /* ... and so do weights copied into huge-page memory (--no-mmap, or its env form) */
    const char *levels[] = {"portable", "avx2", "native", "native"};
    const char *extra[] = {"", "", "--no-mmap", ""};
    const char *names[] = {"portable", "avx2", "no_mmap", "no_mmap_env"};
    for (int k = 0; k < 4; k++) {
        char name[64];
        cmd.len = 0;
        mx_buf_printf(&cmd, "%sMLXCEL_CPU=%s %s generate %s -m %s --prompt-ids %s -n %d --ignore-eos --output-format json",
                      k == 3 ? "MLXCEL_NO_MMAP=1 " : "", levels[k], bin(), extra[k], fx, idstr.data, N);
        int rc = run(cmd.data, &out);
        json_t *j = last_json_line(&out);
        json_t *g = json_object_get(j, "generated_ids");
        bool same = json_is_array(g) && (int)json_array_size(g) == N;
        for (int i = 0; same && i < N; i++) same = json_integer_value(json_array_get(g, (size_t)i)) == gids[i];
        snprintf(name, sizeof name, "cli/dispatch_%s", names[k]);
        CHECK(name, rc == 0 && same, "rc=%d output=%s", rc, out.data ? out.data : "");
        json_decref(j);
    }
    /* same seed, same output; sampling differs from greedy somewhere */
    mx_buf a = {0}, b = {0};
    cmd.len = 0;
    mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids 1,2,3 -n 24 --temp 1.5 --top-k 50 --top-p 0.95 --seed 7 --ignore-eos --output-format json", bin(), fx);
    int r1 = run(cmd.data, &a), r2 = run(cmd.data, &b);
    json_t *ja = last_json_line(&a), *jb = last_json_line(&b);
    CHECK("cli/seed_reproducible", r1 == 0 && r2 == 0 && ja && jb && json_equal(json_object_get(ja, "generated_ids"), json_object_get(jb, "generated_ids")), "runs differ");
    cmd.len = 0;
    mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids 1,2,3 -n 24 --temp 1.5 --top-k 50 --top-p 0.95 --seed 8 --ignore-eos --output-format json", bin(), fx);
    run(cmd.data, &b);
    json_t *jc = last_json_line(&b);
    CHECK("cli/seed_changes_output", jc && !json_equal(json_object_get(ja, "generated_ids"), json_object_get(jc, "generated_ids")), "seeds 7 and 8 gave the same 24 tokens");
    json_decref(ja); json_decref(jb); json_decref(jc);
    /* EOS from generation_config.json (a list) stops generation */
    cmd.len = 0;
    mx_buf_printf(&cmd, "cp %s/config.json %s/model.safetensors %s/ && printf '{\"eos_token_id\": [999, %d]}' > %s/generation_config.json", fx, fx, tmp, gids[3], tmp);
    if (system(cmd.data)) {}
    cmd.len = 0;
    mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids %s -n 16 --output-format json", bin(), tmp, idstr.data);
    run(cmd.data, &out);
    json_t *je = last_json_line(&out);
    int first_eos = 0;
    while (first_eos < N && gids[first_eos] != gids[3]) first_eos++;
    CHECK("cli/eos_stops", je && (int)json_array_size(json_object_get(je, "generated_ids")) == first_eos + 1, "got %s", out.data ? out.data : "");
    json_decref(je);
    /* generation_config.json's sampling fields are the defaults; a flag given wins */
    {
        static const char *const cases[][3] = {
            /* folder flags, the same run's flags on the plain fixture */
            {"--seed 7", "--temp 1.5 --top-k 50 --top-p 0.95 --seed 7", "cli/gencfg_defaults"},
            {"--seed 7 --temp 0", "--seed 7", "cli/gencfg_flag_wins"},
            {"--seed 7 --top-k 1", "--temp 1.5 --top-k 1 --top-p 0.95 --seed 7", "cli/gencfg_flag_wins_one_field"},
        };
        cmd.len = 0;
        mx_buf_printf(&cmd, "printf '{\"eos_token_id\": [999], \"do_sample\": true, \"temperature\": 1.5, \"top_k\": 50, \"top_p\": 0.95}' > %s/generation_config.json", tmp);
        if (system(cmd.data)) {}
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            cmd.len = 0;
            mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids 1,2,3 -n 24 %s --ignore-eos --output-format json", bin(), tmp, cases[k][0]);
            int r1 = run(cmd.data, &a);
            cmd.len = 0;
            mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids 1,2,3 -n 24 %s --ignore-eos --output-format json", bin(), fx, cases[k][1]);
            int r2 = run(cmd.data, &b);
            json_t *x = last_json_line(&a), *y = last_json_line(&b);
            CHECK(cases[k][2], r1 == 0 && r2 == 0 && x && y && json_equal(json_object_get(x, "generated_ids"), json_object_get(y, "generated_ids")), "%s vs %s",
                  a.data ? a.data : "", b.data ? b.data : "");
            json_decref(x);
            json_decref(y);
        }
        cmd.len = 0;
        mx_buf_printf(&cmd, "printf '{\"do_sample\": false, \"temperature\": 1.5}' > %s/generation_config.json && %s generate -m %s --prompt-ids %s -n 8 --ignore-eos --temp 0.9 --seed 1 --output-format json", tmp, bin(), tmp, idstr.data);
        int r3 = run(cmd.data, &a);
        cmd.len = 0;
        mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids %s -n 8 --ignore-eos --temp 0.9 --seed 1 --output-format json", bin(), fx, idstr.data);
        run(cmd.data, &b);
        json_t *x = last_json_line(&a), *y = last_json_line(&b);
        CHECK("cli/gencfg_do_sample_false_yields_to_temp_flag", r3 == 0 && x && y && json_equal(json_object_get(x, "generated_ids"), json_object_get(y, "generated_ids")), "%s", a.data ? a.data : "");
        json_decref(x);
        json_decref(y);
        cmd.len = 0;
        mx_buf_printf(&cmd, "printf '{\"top_p\": 7}' > %s/generation_config.json && %s generate -m %s --prompt-ids 1,2 -n 1 2>&1", tmp, bin(), tmp);
        int r4 = run(cmd.data, &out);
        CHECK("cli/gencfg_bad_value", r4 == 1 && out.data && strstr(out.data, "generation_config.json: 'top_p' must be a number in [0, 1]"), "rc=%d out=%s", r4,
              out.data ? out.data : "");
    }
    /* bad arguments: exit status 2 and a message naming the option */
    cmd.len = 0;
    mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids 1,x,3 2>&1", bin(), fx);
    int rb = run(cmd.data, &out);
    CHECK("cli/bad_prompt_ids", rb == 2 && out.data && strstr(out.data, "--prompt-ids"), "rc=%d out=%s", rb, out.data ? out.data : "");
    cmd.len = 0;
    mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids 1,2 --top-p 7 2>&1", bin(), fx);
    rb = run(cmd.data, &out);
    CHECK("cli/bad_top_p", rb == 2 && out.data && strstr(out.data, "--top-p"), "rc=%d out=%s", rb, out.data ? out.data : "");
    cmd.len = 0;
    mx_buf_printf(&cmd, "%s generate -m %s --prompt-ids 1,999999 -n 1 2>&1", bin(), fx);
    rb = run(cmd.data, &out);
    CHECK("cli/token_out_of_vocab", rb == 1 && out.data && strstr(out.data, "outside the vocabulary"), "rc=%d out=%s", rb, out.data ? out.data : "");
    cmd.len = 0;
    mx_buf_printf(&cmd, "rm -rf %s", tmp);
    if (system(cmd.data)) {}
    mx_buf_free(&a); mx_buf_free(&b); mx_buf_free(&idstr); mx_buf_free(&out); mx_buf_free(&cmd);
    mx_st_close(&ref);
    free(refp);
    TEST_END();
}
