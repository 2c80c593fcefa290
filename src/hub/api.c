/* The hub's JSON answers, read as untrusted input. */
#include "hub.h"
#include "../base/base.h"
#include "../format/json.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILES 100000
#define MAX_PATH_LEN 1024

bool mx_hub_safe_path(const char *p) {
    size_t n = strlen(p);
    if (!n || n > MAX_PATH_LEN || p[0] == '/') return false;
    for (const char *s = p; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '\\') return false;
    /* every component non-empty and neither "." nor ".." */
    for (const char *c = p; *c;) {
        size_t l = strcspn(c, "/");
        if (!l || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.')) return false;
        c += l;
        if (*c == '/') {
            c++;
            if (!*c) return false;
        }
    }
    return true;
}

void mx_hub_revision_free(mx_hub_revision *r) {
    for (int i = 0; i < r->n_files; i++) free(r->files[i]);
    free(r->files);
    r->files = NULL;
    r->n_files = 0;
}

int mx_hub_parse_revision(const char *text, size_t len, mx_hub_revision *r) {
    memset(r, 0, sizeof *r);
    json_t *j = mx_json_parse(text, len, "the hub's revision answer");
    if (!j) return MX_ERR;
    int rc = MX_ERR;
    json_t *sha = json_object_get(j, "sha"), *sib = json_object_get(j, "siblings");
    if (!json_is_object(j)) { mx_set_err("the hub's revision answer is not a JSON object"); goto out; }
    if (!json_is_string(sha) || json_string_length(sha) != 40) { mx_set_err("the hub's revision answer has no 40-digit commit 'sha'"); goto out; }
    for (size_t i = 0; i < 40; i++) {
        char c = json_string_value(sha)[i];
        if (!isxdigit((unsigned char)c) || isupper((unsigned char)c)) { mx_set_err("the hub's revision answer: 'sha' is not lowercase hex"); goto out; }
    }
    memcpy(r->commit, json_string_value(sha), 41);
    if (!json_is_array(sib)) { mx_set_err("the hub's revision answer has no 'siblings' list"); goto out; }
    if (json_array_size(sib) > MAX_FILES) { mx_set_err("the hub's revision answer lists %zu files (at most %d)", json_array_size(sib), MAX_FILES); goto out; }
    r->files = mx_calloc(json_array_size(sib) + 1, sizeof(char *));
    if (!r->files) goto out;
    size_t i;
    json_t *s;
    json_array_foreach(sib, i, s) {
        json_t *fn = json_object_get(s, "rfilename");
        if (!json_is_string(fn) || strlen(json_string_value(fn)) != json_string_length(fn)) {
            mx_set_err("the hub's revision answer: siblings[%zu] has no 'rfilename' string", i);
            goto out;
        }
        if (!mx_hub_safe_path(json_string_value(fn))) {
            mx_set_err("the hub's revision answer: file name '%.80s' is not a safe relative path", json_string_value(fn));
            goto out;
        }
        if (!(r->files[r->n_files] = mx_strdup(json_string_value(fn)))) goto out;
        r->n_files++;
    }
    rc = MX_OK;
out:
    if (rc) mx_hub_revision_free(r);
    json_decref(j);
    return rc;
}
