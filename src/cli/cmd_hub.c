/* Getting models: -m ORG/NAME resolution, mlxcel download / list / rm. */
#include "cli.h"
#include "../base/base.h"
#include "../format/checkpoint.h"
#include "../hub/hub.h"
#include "../models/family.h"
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* What -m ORG/NAME fetches when it is not cached: what a model folder is
 * read from (configs, weights, tokenizer, templates), not other formats. */
static const char *const g_model_files[] = {"*.json", "*.safetensors", "tokenizer.model", "*.jinja", "*.tiktoken", "*.txt"};

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcasecmp(s + a - b, suf);
}

/* A folder of GGUF files and no config.json */
static bool gguf_only(const char *dir) {
    char *cfg = mx_path_join(dir, "config.json");
    bool has_cfg = cfg && mx_file_exists(cfg), gguf = false;
    free(cfg);
    if (has_cfg) return false;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) gguf |= ends_with(de->d_name, ".gguf");
    if (d) closedir(d);
    return gguf;
}

static const char gguf_msg[] = "GGUF files are not supported: give a folder with config.json and *.safetensors "
                               "(the model's original hub repository, or an mlx-community one)";

char *cli_model_dir(const char *cmd, const char *spec) {
    struct stat st;
    if (!stat(spec, &st)) {
        if (!S_ISDIR(st.st_mode)) {
            if (ends_with(spec, ".gguf")) fprintf(stderr, "mlxcel %s: %s: %s\n", cmd, spec, gguf_msg);
            else fprintf(stderr, "mlxcel %s: %s is a file, not a model folder\n", cmd, spec);
            return NULL;
        }
        if (gguf_only(spec)) { fprintf(stderr, "mlxcel %s: %s: %s\n", cmd, spec, gguf_msg); return NULL; }
        return mx_strdup(spec);
    }
    char repo[256], rev[256];
    if (!mx_hub_parse_id(spec, repo, sizeof repo, rev, sizeof rev)) {
        fprintf(stderr, "mlxcel %s: %s: no such directory (nor a hub id ORG/NAME[:REVISION])\n", cmd, spec);
        return NULL;
    }
    mx_hub h;
    if (mx_hub_init(&h)) { fprintf(stderr, "mlxcel %s: %s\n", cmd, mx_errmsg()); return NULL; }
    char *dir = mx_hub_cached(&h, repo, rev);
    if (!dir && h.offline)
        fprintf(stderr, "mlxcel %s: %s: no such directory; this looks like a hub id and it is not cached in %s (HF_HUB_OFFLINE is set): "
                        "run mlxcel download %s\n", cmd, spec, h.cache, spec);
    else if (!dir) {
        fprintf(stderr, "mlxcel %s: %s is not cached in %s: downloading it from %s\n", cmd, spec, h.cache, h.endpoint);
        mx_hub_filter f = {g_model_files, (int)MX_ARRAY_LEN(g_model_files)};
        if (mx_hub_download(&h, repo, rev, &f, &dir)) fprintf(stderr, "mlxcel %s: %s\n", cmd, mx_errmsg());
        char *cfg = dir ? mx_path_join(dir, "config.json") : NULL;
        if (cfg && !mx_file_exists(cfg)) {
            fprintf(stderr, "mlxcel %s: %s has no config.json, so it is not a model folder mlxcel reads (%s)\n", cmd, spec, gguf_msg);
            free(dir);
            dir = NULL;
        }
        free(cfg);
    }
    mx_hub_free(&h);
    return dir;
}

/* ---- download ---- */

typedef struct {
    mx_strlist pos, include;
    const char *revision;
} dl_opts;

static const mx_opt dl_tab[] = {
    {NULL, "--include", NULL, OPT_LIST, "GLOB", 0, 0, offsetof(dl_opts, include), "only the files matching GLOB (repeatable; '*' also crosses '/')", NULL, 0},
    {NULL, "--revision", NULL, OPT_STR, "REV", 0, 0, offsetof(dl_opts, revision), "a branch, tag or commit (default main; also ORG/NAME:REV)", NULL, 0},
    {0},
};

static int one_id(const char *cmd, const mx_strlist *pos, char *repo, char *rev) {
    if (pos->n != 1) { fprintf(stderr, "mlxcel %s: give one ORG/NAME\n", cmd); return 2; }
    if (!mx_hub_parse_id(pos->v[0], repo, 256, rev, 256)) {
        fprintf(stderr, "mlxcel %s: '%s' is not a hub id ORG/NAME[:REVISION]\n", cmd, pos->v[0]);
        return 2;
    }
    return 0;
}

static int dl_run(void *p) {
    dl_opts *o = p;
    char repo[256], rev[256];
    int rc = one_id("download", &o->pos, repo, rev);
    if (rc) return rc;
    if (o->revision) {
        if (strchr(o->pos.v[0], ':')) { fprintf(stderr, "mlxcel download: give the revision as ORG/NAME:REV or --revision, not both\n"); return 2; }
        char id[600];
        snprintf(id, sizeof id, "%s:%s", repo, o->revision);
        if (!mx_hub_parse_id(id, repo, sizeof repo, rev, sizeof rev)) { fprintf(stderr, "mlxcel download: --revision '%s' is not a valid revision\n", o->revision); return 2; }
    }
    mx_hub h;
    if (mx_hub_init(&h)) { fprintf(stderr, "mlxcel download: %s\n", mx_errmsg()); return 1; }
    cli_progress_init(0); /* every file gets its line */
    mx_hub_filter f = {o->include.v, o->include.n};
    char *snap = NULL;
    double t0 = mx_now();
    rc = mx_hub_download(&h, repo, rev, &f, &snap);
    if (rc) fprintf(stderr, "mlxcel download: %s\n", mx_errmsg());
    else {
        fprintf(stderr, "mlxcel download: %s (%s) is in %s (%.1f s)\n", repo, rev, snap, mx_now() - t0);
        printf("%s\n", snap);
    }
    free(snap);
    mx_hub_free(&h);
    return rc ? 1 : 0;
}

const mx_cmd mx_cmd_download = {
    .name = "download",
    .summary = "download a model from the Hugging Face hub into the shared cache",
    .usage = "ORG/NAME[:REVISION] [--include GLOB]... [--revision REV]",
    .details = "Files go into the cache huggingface_hub uses ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), "
               "so other tools share them; an interrupted download resumes, every file is checked against the hub's "
               "checksum (sha256 for LFS files, the git blob id otherwise). HF_TOKEN (or $HF_HOME/token) is sent for private "
               "and gated models, HF_ENDPOINT points at another hub, HF_HUB_OFFLINE=1 forbids the network. Prints the "
               "snapshot folder.",
    .opts = dl_tab,
    .size = sizeof(dl_opts),
    .samp_off = OPT_NO_SAMPLING,
    .pos_meta = "ORG/NAME",
    .pos_off = offsetof(dl_opts, pos),
    .run = dl_run,
};

/* ---- list ---- */

typedef struct {
    mx_strlist pos;
} list_opts;

/* model_type and family of a snapshot's config.json, without weights */
static void family_of(const char *snap, char *out, size_t n) {
    snprintf(out, n, "-");
    mx_ckpt ck;
    if (!snap || mx_ckpt_open(snap, false, &ck)) return;
    int err = 0;
    const char *mt = mx_cfg_str(&ck.cfg, "model_type", NULL, &err);
    if (mt) {
        char low[64];
        size_t i = 0;
        for (; mt[i] && i < sizeof low - 1; i++) low[i] = (char)tolower((unsigned char)mt[i]);
        low[i] = 0;
        const mx_family *f = mx_family_find(low);
        snprintf(out, n, "%s", f ? f->name : "(unsupported)");
        if (f && strcmp(f->name, low)) snprintf(out, n, "%s (%s)", f->name, low);
        else if (!f) snprintf(out, n, "%s (unsupported)", low);
    }
    mx_ckpt_close(&ck);
}

static int list_run(void *p) {
    (void)p;
    mx_hub h;
    if (mx_hub_init(&h)) { fprintf(stderr, "mlxcel list: %s\n", mx_errmsg()); return 1; }
    mx_hub_entry *e;
    int n;
    if (mx_hub_list(&h, &e, &n)) { fprintf(stderr, "mlxcel list: %s\n", mx_errmsg()); mx_hub_free(&h); return 1; }
    if (!n) fprintf(stderr, "mlxcel list: no models in %s\n", h.cache);
    else printf("%-44s %10s  %-24s %s\n", "model", "size", "family", "commit");
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        char sz[32], fam[96];
        cli_fmt_bytes((double)e[i].bytes, sz, sizeof sz);
        family_of(e[i].snapshot, fam, sizeof fam);
        printf("%-44s %10s  %-24s %.12s\n", e[i].repo, sz, fam, e[i].commit[0] ? e[i].commit : "-");
        total += e[i].bytes;
    }
    if (n) {
        char sz[32];
        cli_fmt_bytes((double)total, sz, sizeof sz);
        fprintf(stderr, "%d models, %s in %s\n", n, sz, h.cache);
    }
    mx_hub_list_free(e, n);
    mx_hub_free(&h);
    return 0;
}

const mx_cmd mx_cmd_list = {
    .name = "list",
    .summary = "the models in the Hugging Face cache, with size and detected family",
    .usage = "",
    .details = NULL,
    .size = sizeof(list_opts),
    .samp_off = OPT_NO_SAMPLING,
    .run = list_run,
};

/* ---- rm ---- */

static int rm_run(void *p) {
    dl_opts *o = p;
    char repo[256], rev[256];
    int rc = one_id("rm", &o->pos, repo, rev);
    if (rc) return rc;
    if (strchr(o->pos.v[0], ':')) { fprintf(stderr, "mlxcel rm: removes the whole repository: give ORG/NAME without a revision\n"); return 2; }
    mx_hub h;
    if (mx_hub_init(&h)) { fprintf(stderr, "mlxcel rm: %s\n", mx_errmsg()); return 1; }
    uint64_t freed = 0;
    rc = mx_hub_remove(&h, repo, &freed);
    if (rc) fprintf(stderr, "mlxcel rm: %s\n", mx_errmsg());
    else {
        char sz[32];
        cli_fmt_bytes((double)freed, sz, sizeof sz);
        fprintf(stderr, "mlxcel rm: removed %s (%s)\n", repo, sz);
    }
    mx_hub_free(&h);
    return rc ? 1 : 0;
}

const mx_cmd mx_cmd_rm = {
    .name = "rm",
    .summary = "remove a model from the Hugging Face cache",
    .usage = "ORG/NAME",
    .details = "Removes every revision of the repository and its lock files.",
    .size = sizeof(dl_opts),
    .samp_off = OPT_NO_SAMPLING,
    .pos_meta = "ORG/NAME",
    .pos_off = offsetof(dl_opts, pos),
    .run = rm_run,
};
