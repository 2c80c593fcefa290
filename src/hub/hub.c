#define _GNU_SOURCE
/* The cache side of the hub: environment, ids, lookup, list, removal. */
#include "hub.h"
#include "../base/base.h"
#include "../format/json.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *env(const char *k) {
    const char *v = getenv(k);
    return v && *v ? v : NULL;
}

/* huggingface_hub's true values: 1, ON, YES, TRUE (any case). */
static bool env_true(const char *k) {
    const char *v = env(k);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"));
}

static char *home_dir(void) {
    const char *hf = env("HF_HOME");
    if (hf) return mx_strdup(hf);
    const char *xdg = env("XDG_CACHE_HOME"), *home = env("HOME");
    if (xdg) return mx_asprintf("%s/huggingface", xdg);
    if (!home) { mx_set_err("neither HF_HOME nor HOME is set: no Hugging Face cache folder"); return NULL; }
    return mx_asprintf("%s/.cache/huggingface", home);
}

static char *trim_token(char *t) {
    if (!t) return NULL;
    char *s = t;
    while (*s && isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    memmove(t, s, n + 1);
    if (!*t) { free(t); return NULL; }
    return t;
}

int mx_hub_init(mx_hub *h) {
    memset(h, 0, sizeof *h);
    char *home = home_dir();
    if (!home) return MX_ERR;
    const char *c = env("HF_HUB_CACHE") ? env("HF_HUB_CACHE") : env("HUGGINGFACE_HUB_CACHE");
    h->cache = c ? mx_strdup(c) : mx_asprintf("%s/hub", home);
    const char *ep = env("HF_ENDPOINT") ? env("HF_ENDPOINT") : "https://huggingface.co";
    h->endpoint = mx_strdup(ep);
    if (h->endpoint) {
        size_t n = strlen(h->endpoint);
        while (n && h->endpoint[n - 1] == '/') h->endpoint[--n] = 0;
    }
    if (env("HF_TOKEN")) h->token = trim_token(mx_strdup(env("HF_TOKEN")));
    else {
        char *tp = env("HF_TOKEN_PATH") ? mx_strdup(env("HF_TOKEN_PATH")) : mx_asprintf("%s/token", home);
        char *t = NULL;
        size_t len;
        if (tp && mx_file_exists(tp) && mx_read_file(tp, 4096, &t, &len) == MX_OK) h->token = trim_token(t);
        free(tp);
    }
    h->offline = env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE");
    free(home);
    if (!h->cache || !h->endpoint) { mx_hub_free(h); return MX_ERR; }
    return MX_OK;
}

void mx_hub_free(mx_hub *h) {
    free(h->cache);
    free(h->endpoint);
    free(h->token);
    memset(h, 0, sizeof *h);
}

/* One part of a repo id: [A-Za-z0-9_.-]{1,96}, starting and ending with a
 * letter, digit or '_', without "--" or ".." (huggingface_hub's rule). */
static bool id_part(const char *s, size_t n) {
    if (!n || n > 96) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i])) return false;
    if (!isalnum((unsigned char)s[0]) && s[0] != '_') return false;
    if (!isalnum((unsigned char)s[n - 1]) && s[n - 1] != '_') return false;
    for (size_t i = 0; i + 1 < n; i++)
        if ((s[i] == '-' && s[i + 1] == '-') || (s[i] == '.' && s[i + 1] == '.')) return false;
    return true;
}

static bool rev_ok(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 255 || s[0] == '/' || s[n - 1] == '/' || strstr(s, "..") || strstr(s, "//")) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-/", s[i])) return false;
    return true;
}

bool mx_hub_parse_id(const char *s, char *repo, size_t repo_n, char *rev, size_t rev_n) {
    const char *slash = strchr(s, '/'), *colon = strchr(s, ':');
    if (!slash || (colon && colon < slash)) return false;
    size_t end = colon ? (size_t)(colon - s) : strlen(s);
    const char *name = slash + 1;
    if (!id_part(s, (size_t)(slash - s)) || !id_part(name, end - (size_t)(name - s))) return false;
    const char *r = colon ? colon + 1 : "main";
    if (!rev_ok(r) || end >= repo_n || strlen(r) >= rev_n) return false;
    memcpy(repo, s, end);
    repo[end] = 0;
    snprintf(rev, rev_n, "%s", r);
    return true;
}

char *mx_hub_repo_dir(const mx_hub *h, const char *repo) {
    const char *slash = strchr(repo, '/');
    if (!slash) return mx_asprintf("%s/models--%s", h->cache, repo);
    return mx_asprintf("%s/models--%.*s--%s", h->cache, (int)(slash - repo), repo, slash + 1);
}

static bool is_commit(const char *s) {
    if (strlen(s) != 40) return false;
    for (int i = 0; i < 40; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return false;
    return true;
}

/* The commit refs/REV names (REV itself when it is one); "" when unknown. */
static void resolve_ref(const char *rdir, const char *rev, char commit[41]) {
    commit[0] = 0;
    if (is_commit(rev)) { memcpy(commit, rev, 41); return; }
    char *ref = mx_asprintf("%s/refs/%s", rdir, rev), *t = NULL;
    size_t len;
    if (ref && mx_file_exists(ref) && mx_read_file(ref, 256, &t, &len) == MX_OK) {
        while (len && isspace((unsigned char)t[len - 1])) t[--len] = 0;
        if (is_commit(t)) memcpy(commit, t, 41);
    }
    free(t);
    free(ref);
}

/* config.json and every shard the index names are there. */
static bool snapshot_complete(const char *snap) {
    char *cfg = mx_path_join(snap, "config.json"), *idx = mx_path_join(snap, "model.safetensors.index.json");
    bool ok = cfg && idx && mx_file_exists(cfg);
    if (ok && mx_file_exists(idx)) {
        json_t *j = mx_json_load_file(idx, 64u << 20);
        json_t *wm = json_object_get(j, "weight_map");
        const char *k;
        json_t *v;
        ok = json_is_object(wm);
        if (ok) json_object_foreach(wm, k, v) {
            if (!json_is_string(v) || !mx_hub_safe_path(json_string_value(v))) { ok = false; break; }
            char *p = mx_path_join(snap, json_string_value(v));
            ok = p && mx_file_exists(p);
            free(p);
            if (!ok) break;
        }
        json_decref(j);
    }
    free(cfg);
    free(idx);
    return ok;
}

char *mx_hub_cached(const mx_hub *h, const char *repo, const char *rev) {
    char *rdir = mx_hub_repo_dir(h, repo);
    if (!rdir) return NULL;
    char commit[41];
    resolve_ref(rdir, rev, commit);
    char *snap = commit[0] ? mx_asprintf("%s/snapshots/%s", rdir, commit) : NULL;
    free(rdir);
    if (snap && !snapshot_complete(snap)) { free(snap); snap = NULL; }
    return snap;
}

/* ---- list and remove ---- */

static uint64_t g_bytes;
static int add_size(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)p; (void)f;
    if (flag == FTW_F && S_ISREG(st->st_mode)) g_bytes += (uint64_t)st->st_size;
    return 0;
}

static uint64_t tree_bytes(const char *dir) {
    g_bytes = 0;
    nftw(dir, add_size, 16, FTW_PHYS);
    return g_bytes;
}

static int cmp_entry(const void *a, const void *b) { return strcmp(((const mx_hub_entry *)a)->repo, ((const mx_hub_entry *)b)->repo); }

int mx_hub_list(const mx_hub *h, mx_hub_entry **out, int *n) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(h->cache);
    if (!d) return errno == ENOENT ? MX_OK : mx_set_err("%s: cannot read the cache folder: %s", h->cache, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name, *sep;
        if (strncmp(nm, "models--", 8) || !(sep = strstr(nm + 8, "--"))) continue;
        mx_hub_entry *ne = realloc(*out, sizeof **out * (size_t)(*n + 1));
        if (!ne) { closedir(d); return mx_set_err("out of memory"); }
        *out = ne;
        mx_hub_entry *e = &ne[(*n)++];
        memset(e, 0, sizeof *e);
        snprintf(e->repo, sizeof e->repo, "%.*s/%s", (int)(sep - nm - 8), nm + 8, sep + 2);
        char *rdir = mx_asprintf("%s/%s", h->cache, nm), *blobs = rdir ? mx_asprintf("%s/blobs", rdir) : NULL;
        if (blobs) e->bytes = tree_bytes(blobs);
        if (rdir) resolve_ref(rdir, "main", e->commit);
        if (rdir && !e->commit[0]) { /* no main: the newest snapshot */
            char *sd = mx_asprintf("%s/snapshots", rdir);
            DIR *s = sd ? opendir(sd) : NULL;
            struct dirent *se;
            time_t best = 0;
            while (s && (se = readdir(s))) {
                struct stat st;
                char *p = is_commit(se->d_name) ? mx_asprintf("%s/%s", sd, se->d_name) : NULL;
                if (p && !stat(p, &st) && st.st_mtime >= best) { best = st.st_mtime; memcpy(e->commit, se->d_name, 41); }
                free(p);
            }
            if (s) closedir(s);
            free(sd);
        }
        if (rdir && e->commit[0]) {
            e->snapshot = mx_asprintf("%s/snapshots/%s", rdir, e->commit);
            struct stat st;
            if (e->snapshot && stat(e->snapshot, &st)) { free(e->snapshot); e->snapshot = NULL; }
        }
        free(blobs);
        free(rdir);
    }
    closedir(d);
    if (*n) qsort(*out, (size_t)*n, sizeof **out, cmp_entry);
    return MX_OK;
}

void mx_hub_list_free(mx_hub_entry *e, int n) {
    for (int i = 0; i < n; i++) free(e[i].snapshot);
    free(e);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st; (void)f;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) ? -1 : 0;
}

int mx_hub_remove(const mx_hub *h, const char *repo, uint64_t *freed) {
    char *rdir = mx_hub_repo_dir(h, repo);
    if (!rdir) return MX_ERR;
    struct stat st;
    if (lstat(rdir, &st) || !S_ISDIR(st.st_mode)) {
        int rc = mx_set_err("%s is not in the cache (%s)", repo, h->cache);
        free(rdir);
        return rc;
    }
    *freed = tree_bytes(rdir);
    int rc = nftw(rdir, rm_one, 16, FTW_DEPTH | FTW_PHYS) ? mx_set_err("%s: cannot remove: %s", rdir, strerror(errno)) : MX_OK;
    const char *base = strrchr(rdir, '/');
    char *locks = mx_asprintf("%s/.locks/%s", h->cache, base ? base + 1 : rdir);
    if (locks && !lstat(locks, &st)) nftw(locks, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(locks);
    free(rdir);
    return rc;
}
