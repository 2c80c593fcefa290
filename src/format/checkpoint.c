#define _GNU_SOURCE
#include "checkpoint.h"
#include "../base/base.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static int index_add(mx_ckpt *ck, mx_tensor *t) {
    size_t m = ck->index_cap - 1;
    for (size_t i = hash_str(t->name) & m;; i = (i + 1) & m) {
        if (!ck->index[i]) { ck->index[i] = t; return MX_OK; }
        if (!strcmp(ck->index[i]->name, t->name)) {
            return mx_set_err("%s: tensor '%s' appears in both %s and %s", ck->dir, t->name,
                              ck->files[ck->index[i]->file_index].path, ck->files[t->file_index].path);
        }
    }
}

static mx_tensor *find_exact(const mx_ckpt *ck, const char *name) {
    if (!ck->index_cap) return NULL;
    size_t m = ck->index_cap - 1;
    for (size_t i = hash_str(name) & m; ck->index[i]; i = (i + 1) & m)
        if (!strcmp(ck->index[i]->name, name)) return ck->index[i];
    return NULL;
}

mx_tensor *mx_ckpt_find(const mx_ckpt *ck, const char *name) {
    mx_tensor *t = find_exact(ck, name);
    if (t || !ck->text_prefix) return t;
    char buf[1024];
    if (!strncmp(name, "model.", 6)) snprintf(buf, sizeof buf, "%s%s", ck->text_prefix, name + 6);
    else if (!strncmp(name, "lm_head.", 8)) snprintf(buf, sizeof buf, "%s%s", ck->head_prefix, name + 8);
    else return NULL;
    return find_exact(ck, buf);
}

/* Where vision-language checkpoints keep their text model, newest first:
 * transformers >= 4.52 (Gemma 3, Mistral 3, ...), older transformers and
 * mlx-vlm (LLaVA, PaliGemma), Idefics3 / SmolVLM. */
static void find_packaging(mx_ckpt *ck) {
    static const char *const packs[][2] = {
        {"model.language_model.", "lm_head."},
        {"language_model.model.", "language_model.lm_head."},
        {"model.text_model.", "lm_head."},
    };
    if (!ck->config || !json_object_get(ck->config, "vision_config")) return;
    ck->scope = MX_CKPT_TEXT;
    ck->text_prefix = "model.";
    ck->head_prefix = "lm_head.";
    for (size_t k = 0; k < MX_ARRAY_LEN(packs); k++)
        for (int f = 0; f < ck->n_files; f++)
            for (int i = 0; i < ck->files[f].n_tensors; i++)
                if (!strncmp(ck->files[f].tensors[i].name, packs[k][0], strlen(packs[k][0]))) {
                    ck->text_prefix = packs[k][0];
                    ck->head_prefix = packs[k][1];
                    return;
                }
}

static bool in_text_model(const mx_ckpt *ck, const char *name) {
    return !strncmp(name, ck->text_prefix, strlen(ck->text_prefix)) || !strncmp(name, ck->head_prefix, strlen(ck->head_prefix));
}

mx_tensor *mx_ckpt_take(mx_ckpt *ck, const char *name) {
    mx_tensor *t = mx_ckpt_find(ck, name);
    if (t) t->used = true;
    return t;
}

mx_tensor *mx_ckpt_require(mx_ckpt *ck, const char *name) {
    mx_tensor *t = mx_ckpt_take(ck, name);
    if (!t) mx_set_err("%s: missing tensor '%s'", ck->dir, name);
    return t;
}

bool mx_glob_match(const char *p, const char *s) {
    const char *star = NULL, *ss = NULL;
    while (*s) {
        if (*p == '*') { star = p++; ss = s; }
        else if (*p == *s) { p++; s++; }
        else if (star) { p = star + 1; s = ++ss; }
        else return false;
    }
    while (*p == '*') p++;
    return !*p;
}

int mx_ckpt_check_unused(const mx_ckpt *ck, const char *const *ignore, int n_ignore) {
    for (int f = 0; f < ck->n_files; f++) {
        for (int i = 0; i < ck->files[f].n_tensors; i++) {
            const mx_tensor *t = &ck->files[f].tensors[i];
            if (t->used || (ck->scope == MX_CKPT_TEXT && !in_text_model(ck, t->name)) ||
                (ck->scope == MX_CKPT_VISION && in_text_model(ck, t->name)))
                continue;
            bool ok = false;
            for (int k = 0; k < n_ignore && !ok; k++) ok = mx_glob_match(ignore[k], t->name);
            if (!ok) return mx_set_err("%s: unexpected tensor '%s' (not used by this model)", ck->files[f].path, t->name);
        }
    }
    return MX_OK;
}

/* Matches name against a rename rule's `from`; on success *len is the length
 * of the matched prefix and i, j the numbers read. */
static bool rename_match(const char *from, const char *name, int *i, int *j, size_t *len) {
    const char *p = from, *s = name;
    int n = 0, v[2] = {0, 0};
    while (*p) {
        if (p[0] == '%' && p[1] == 'd') {
            if (n == 2 || *s < '0' || *s > '9') return false;
            long x = 0;
            while (*s >= '0' && *s <= '9' && x < (1L << 24)) x = x * 10 + (*s++ - '0');
            if (*s >= '0' && *s <= '9') return false;
            v[n++] = (int)x;
            p += 2;
        } else if (*p++ != *s++) return false;
    }
    *i = v[0];
    *j = v[1];
    *len = (size_t)(s - name);
    return n >= 1;
}

int mx_ckpt_rename(mx_ckpt *ck, const mx_rename *rules, int n) {
    if (!n) return MX_OK;
    for (int f = 0; f < ck->n_files; f++)
        for (int k = 0; k < ck->files[f].n_tensors; k++) {
            mx_tensor *t = &ck->files[f].tensors[k];
            for (int r = 0; r < n; r++) {
                int i, j;
                size_t len;
                if (!rename_match(rules[r].from, t->name, &i, &j, &len)) continue;
                char pre[512];
                snprintf(pre, sizeof pre, rules[r].to, i * rules[r].mult + j);
                char *nm = mx_asprintf("%s%s", pre, t->name + len);
                if (!nm) return MX_ERR;
                free(t->name);
                t->name = nm;
                break;
            }
        }
    memset(ck->index, 0, ck->index_cap * sizeof(mx_tensor *));
    for (int f = 0; f < ck->n_files; f++)
        for (int k = 0; k < ck->files[f].n_tensors; k++)
            if (index_add(ck, &ck->files[f].tensors[k])) return MX_ERR;
    return MX_OK;
}

static int add_file(mx_ckpt *ck, const char *path) {
    for (int i = 0; i < ck->n_files; i++)
        if (!strcmp(ck->files[i].path, path)) return MX_OK;
    mx_st_file *nf = mx_realloc(ck->files, sizeof(mx_st_file) * (size_t)(ck->n_files + 1));
    if (!nf) return MX_ERR;
    ck->files = nf;
    if (mx_st_open(path, &ck->files[ck->n_files])) return MX_ERR;
    ck->n_files++;
    return MX_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int load_weights(mx_ckpt *ck) {
    char *idx = mx_path_join(ck->dir, "model.safetensors.index.json");
    if (!idx) return MX_ERR;
    int rc = MX_ERR;
    if (mx_file_exists(idx)) {
        json_t *j = mx_json_load_file(idx, 64u << 20);
        if (!j) { free(idx); return MX_ERR; }
        json_t *wm = json_object_get(j, "weight_map");
        if (!json_is_object(wm)) { mx_set_err("%s: weight_map is missing or not an object", idx); json_decref(j); free(idx); return MX_ERR; }
        const char *k;
        json_t *v;
        rc = MX_OK;
        json_object_foreach(wm, k, v) {
            if (!json_is_string(v)) { rc = mx_set_err("%s: weight_map['%s'] is not a file name", idx, k); break; }
            const char *fn = json_string_value(v);
            if (strchr(fn, '/') || !strcmp(fn, "..")) { rc = mx_set_err("%s: shard name '%s' must be a plain file name", idx, fn); break; }
            char *p = mx_path_join(ck->dir, fn);
            if (!p) { rc = MX_ERR; break; }
            if (!mx_file_exists(p)) { rc = mx_set_err("%s: missing shard '%s' (named by %s)", ck->dir, fn, idx); free(p); break; }
            rc = add_file(ck, p);
            free(p);
            if (rc) break;
        }
        json_decref(j);
    } else {
        DIR *d = opendir(ck->dir);
        if (!d) { free(idx); return mx_set_err("%s: cannot open directory", ck->dir); }
        char **names = NULL;
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            /* mlx-lm loads model*.safetensors; other files (outputs, adapters) are not weights */
            if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors") && !strncmp(e->d_name, "model", 5)) {
                char **nn = realloc(names, sizeof(char *) * (size_t)(n + 1));
                if (!nn) break;
                names = nn;
                names[n++] = strdup(e->d_name);
            }
        }
        closedir(d);
        qsort(names, (size_t)n, sizeof(char *), cmp_str);
        rc = n ? MX_OK : mx_set_err("%s: no model*.safetensors weights found", ck->dir);
        for (int i = 0; i < n; i++) {
            if (!rc) {
                char *p = mx_path_join(ck->dir, names[i]);
                rc = p ? add_file(ck, p) : MX_ERR;
                free(p);
            }
            free(names[i]);
        }
        free(names);
    }
    free(idx);
    if (rc) return rc;
    size_t total = 0;
    for (int f = 0; f < ck->n_files; f++) total += (size_t)ck->files[f].n_tensors;
    size_t cap = 16;
    while (cap < total * 2) cap *= 2;
    ck->index = mx_calloc(cap, sizeof(mx_tensor *));
    if (!ck->index) return MX_ERR;
    ck->index_cap = cap;
    for (int f = 0; f < ck->n_files; f++)
        for (int i = 0; i < ck->files[f].n_tensors; i++) {
            ck->files[f].tensors[i].file_index = f;
            if (index_add(ck, &ck->files[f].tensors[i])) return MX_ERR;
            ck->n_tensors++;
        }
    return MX_OK;
}

int mx_ckpt_open(const char *dir, bool weights, mx_ckpt *ck) {
    memset(ck, 0, sizeof *ck);
    ck->dir = mx_strdup(dir);
    ck->config_path = mx_path_join(dir, "config.json");
    if (!ck->dir || !ck->config_path) return MX_ERR;
    if (!mx_file_exists(ck->config_path)) {
        if (weights) {
            mx_set_err("%s: missing config.json", dir);
            mx_ckpt_close(ck);
            return MX_ERR;
        }
    } else {
        ck->config = mx_json_load_file(ck->config_path, 16u << 20);
        if (!ck->config) { mx_ckpt_close(ck); return MX_ERR; }
        if (!json_is_object(ck->config)) { mx_set_err("%s: not a JSON object", ck->config_path); mx_ckpt_close(ck); return MX_ERR; }
    }
    ck->cfg.root = ck->config;
    ck->cfg.file = ck->config_path;
    json_t *tc = ck->config ? json_object_get(ck->config, "text_config") : NULL;
    if (tc && json_is_object(tc)) ck->cfg.sub = tc;
    char *gp = mx_path_join(dir, "generation_config.json");
    if (gp && mx_file_exists(gp)) {
        ck->gen_config = mx_json_load_file(gp, 1u << 20);
        if (!ck->gen_config || !json_is_object(ck->gen_config)) {
            if (ck->gen_config) mx_set_err("%s: not a JSON object", gp);
            free(gp);
            mx_ckpt_close(ck);
            return MX_ERR;
        }
    }
    free(gp);
    if (weights && load_weights(ck)) { mx_ckpt_close(ck); return MX_ERR; }
    if (weights) find_packaging(ck);
    return MX_OK;
}

void mx_ckpt_close(mx_ckpt *ck) {
    if (!ck) return;
    for (int i = 0; i < ck->n_files; i++) mx_st_close(&ck->files[i]);
    free(ck->files);
    free(ck->index);
    json_decref(ck->config);
    json_decref(ck->gen_config);
    free(ck->dir);
    free(ck->config_path);
    memset(ck, 0, sizeof *ck);
}
