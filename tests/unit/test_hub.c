/* The hub client's pure parts: SHA-256 / SHA-1 (FIPS 180 vectors and the
 * git blob id), repo ids, safe paths, the revision answer, the shared
 * sampling table's ranges. */
#include "test.h"
#include "base/base.h"
#include "hub/hub.h"
#include "hub/sha.h"
#include "runtime/sampling_opts.h"

static void hex(int sha1, const void *p, size_t n, size_t split, char out[65]) {
    mx_sha *s = sha1 ? mx_sha1_new() : mx_sha256_new();
    if (!s) { out[0] = 0; return; }
    mx_sha_update(s, p, split); /* in two pieces: the streaming path */
    mx_sha_update(s, (const char *)p + split, n - split);
    mx_sha_hex_free(s, out);
}

int main(void) {
    char h[65];
    hex(0, "abc", 3, 1, h);
    CHECK("hub/sha256_abc", !strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s", h);
    hex(0, "", 0, 0, h);
    CHECK("hub/sha256_empty", !strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "%s", h);
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex(0, m448, strlen(m448), 55, h);
    CHECK("hub/sha256_448bits", !strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "%s", h);
    char *mil = malloc(1000000);
    memset(mil, 'a', 1000000);
    hex(0, mil, 1000000, 333333, h);
    CHECK("hub/sha256_million_a", !strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "%s", h);
    hex(1, mil, 1000000, 64, h);
    CHECK("hub/sha1_million_a", !strcmp(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"), "%s", h);
    free(mil);
    hex(1, "abc", 3, 0, h);
    CHECK("hub/sha1_abc", !strcmp(h, "a9993e364706816aba3e25717850c26c9cd0d89d"), "%s", h);
    /* git hash-object of "hello\n" */
    hex(1, "blob 6\0hello\n", 13, 7, h);
    CHECK("hub/git_blob_id", !strcmp(h, "ce013625030ba8dba906f756967f9e9ca394464a"), "%s", h);

    char repo[256], rev[256];
    CHECK("hub/id_plain", mx_hub_parse_id("Qwen/Qwen3-0.6B", repo, sizeof repo, rev, sizeof rev) && !strcmp(repo, "Qwen/Qwen3-0.6B") && !strcmp(rev, "main"), "%s %s", repo, rev);
    CHECK("hub/id_revision", mx_hub_parse_id("mlx-community/x_y.z:refs/pr/1", repo, sizeof repo, rev, sizeof rev) && !strcmp(repo, "mlx-community/x_y.z") && !strcmp(rev, "refs/pr/1"), "%s %s", repo, rev);
    const char *bad[] = {"gpt2", "a/b/c", "./a/b", "/abs/path", "a--b/c", "a/b..c", "a/-b", "a/b.", "a/b:", "a/b:../x", "org/na me", "a/b:x//y", ""};
    for (size_t i = 0; i < MX_ARRAY_LEN(bad); i++) {
        char name[64];
        snprintf(name, sizeof name, "hub/id_refused_%zu", i);
        CHECK(name, !mx_hub_parse_id(bad[i], repo, sizeof repo, rev, sizeof rev), "'%s' accepted", bad[i]);
    }
    CHECK("hub/safe_paths", mx_hub_safe_path("config.json") && mx_hub_safe_path("a/b/c.txt") && mx_hub_safe_path(".gitattributes"), "refused");
    const char *unsafe[] = {"", "/etc/passwd", "../x", "a/../b", "a//b", "a/", "./a", "a/.", "a\\b", "a\nb"};
    for (size_t i = 0; i < MX_ARRAY_LEN(unsafe); i++) {
        char name[64];
        snprintf(name, sizeof name, "hub/unsafe_path_%zu", i);
        CHECK(name, !mx_hub_safe_path(unsafe[i]), "'%s' accepted", unsafe[i]);
    }

    mx_hub_revision r;
    const char *good = "{\"id\":\"a/b\",\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":[{\"rfilename\":\"config.json\"},{\"rfilename\":\"sub/x.safetensors\"}]}";
    int rc = mx_hub_parse_revision(good, strlen(good), &r);
    CHECK("hub/revision_parsed", !rc && r.n_files == 2 && !strcmp(r.files[1], "sub/x.safetensors") && !strcmp(r.commit, "0123456789abcdef0123456789abcdef01234567"), "%s", rc ? mx_errmsg() : "");
    mx_hub_revision_free(&r);
    const char *bads[][2] = {
        {"[]", "not a JSON object"},
        {"{\"sha\":\"abc\",\"siblings\":[]}", "40-digit commit"},
        {"{\"sha\":\"0123456789ABCDEF0123456789abcdef01234567\",\"siblings\":[]}", "lowercase hex"},
        {"{\"sha\":\"0123456789abcdef0123456789abcdef01234567\"}", "'siblings'"},
        {"{\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":[{\"rfilename\":\"../../etc/passwd\"}]}", "not a safe relative path"},
        {"{\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":[{\"rfilename\":7}]}", "'rfilename'"},
        {"{\"sha\":", "JSON"},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(bads); i++) {
        char name[64];
        snprintf(name, sizeof name, "hub/revision_refused_%zu", i);
        rc = mx_hub_parse_revision(bads[i][0], strlen(bads[i][0]), &r);
        CHECK(name, rc && strstr(mx_errmsg(), bads[i][1]), "rc %d: %s", rc, mx_errmsg());
    }

    /* the shared sampling table: one range for the CLI and the server */
    mx_sampling s;
    mx_sampling_defaults(&s);
    json_t *req = json_pack("{s:f,s:i,s:f,s:I}", "temperature", 0.5, "top_k", 40, "presence_penalty", -1.5, "seed", (json_int_t)123456789012LL);
    rc = mx_sampling_from_json(&s, req);
    CHECK("sampling/json_fields", !rc && s.temperature == 0.5f && s.top_k == 40 && s.presence_penalty == -1.5f && s.seed == 123456789012ULL, "%s", mx_errmsg());
    json_decref(req);
    req = json_pack("{s:f}", "frequency_penalty", 2.5);
    rc = mx_sampling_from_json(&s, req);
    CHECK("sampling/json_range", rc && strstr(mx_errmsg(), "'frequency_penalty' must be a number in [-2, 2]"), "%s", mx_errmsg());
    json_decref(req);
    req = json_pack("{s:f}", "top_k", 2.5);
    rc = mx_sampling_from_json(&s, req);
    CHECK("sampling/json_int", rc && strstr(mx_errmsg(), "'top_k' must be an integer"), "%s", mx_errmsg());
    json_decref(req);
    const mx_samp_field *f = mx_samp_find_json("frequency_penalty");
    rc = f ? mx_samp_set_str(&s, f, "2.5", "--frequency-penalty") : -1;
    CHECK("sampling/cli_same_range", rc && strstr(mx_errmsg(), "[-2, 2]"), "%s", mx_errmsg());
    f = mx_samp_find_json("seed");
    rc = f ? mx_samp_set_str(&s, f, "18446744073709551615", "--seed") : -1;
    CHECK("sampling/seed_range", rc != 0, "2^64-1 accepted");
    rc = f ? mx_samp_set_str(&s, f, "9223372036854775807", "--seed") : -1;
    CHECK("sampling/seed_max", !rc && s.seed == 9223372036854775807ULL, "%s", mx_errmsg());
    TEST_END();
}
