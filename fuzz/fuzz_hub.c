/* libFuzzer target: the hub's answers and ids as untrusted input.
 * The bytes are (1) the JSON of GET /api/models/REPO/revision/REV
 * (mx_hub_parse_revision: an accepted answer must have a 40-digit
 * lowercase commit and only safe relative file names; a refused one a
 * message), (2) a server request body for the shared sampling table
 * (mx_sampling_from_json: accepted values lie in the table's ranges), and
 * (3) as text, a repo id (mx_hub_parse_id) and a path (mx_hub_safe_path). */
#include "base/base.h"
#include "format/json.h"
#include "hub/hub.h"
#include "runtime/sampling_opts.h"
#include <stdlib.h>
#include <string.h>

/* a ".." component */
static bool dotdot(const char *p) {
    size_t n = strlen(p);
    return !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") || (n >= 3 && !strcmp(p + n - 3, "/.."));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mx_hub_revision r;
    if (mx_hub_parse_revision((const char *)data, size, &r) == MX_OK) {
        if (strlen(r.commit) != 40) abort();
        for (int i = 0; i < 40; i++)
            if (!strchr("0123456789abcdef", r.commit[i])) abort();
        for (int i = 0; i < r.n_files; i++)
            if (!mx_hub_safe_path(r.files[i]) || dotdot(r.files[i])) abort();
        mx_hub_revision_free(&r);
    } else if (!mx_errmsg()[0]) abort();

    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    if (j) {
        mx_sampling s;
        memset(&s, 0, sizeof s);
        s.top_p = 1;
        s.repetition_penalty = 1;
        s.penalty_last_n = -1;
        if (mx_sampling_from_json(&s, j) == MX_OK) {
            if (!(s.temperature >= 0 && s.temperature <= 100) || !(s.top_p >= 0 && s.top_p <= 1) || !(s.min_p >= 0 && s.min_p <= 1) ||
                !(s.repetition_penalty >= 0.01f && s.repetition_penalty <= 100) || !(s.presence_penalty >= -2 && s.presence_penalty <= 2) ||
                !(s.frequency_penalty >= -2 && s.frequency_penalty <= 2) || s.top_k < 0 || s.penalty_last_n < -1 || s.seed > (uint64_t)INT64_MAX)
                abort();
        } else if (!mx_errmsg()[0]) abort();
        json_decref(j);
    }

    char *t = malloc(size + 1);
    if (!t) return 0;
    memcpy(t, data, size);
    t[size] = 0;
    char repo[256], rev[256];
    if (mx_hub_parse_id(t, repo, sizeof repo, rev, sizeof rev)) {
        if (!strchr(repo, '/') || strstr(repo, "..") || strstr(rev, "..") || repo[0] == '/') abort();
    }
    if (mx_hub_safe_path(t) && (t[0] == '/' || dotdot(t))) abort();
    free(t);
    return 0;
}
