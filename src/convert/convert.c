/* Checkpoint conversion in the layout mlx_lm.convert writes: float tensors
 * cast to the target dtype, and (with quantize) every 2-D `.weight` whose
 * last dimension the group divides packed as MLX does (P.weight U32,
 * P.scales, P.biases), the quantization / quantization_config blocks in a
 * config.json with sorted top-level keys and indent 4, safetensors with
 * {"format":"mlx"} metadata (5 GB shards), model.safetensors.index.json, and
 * the other files of the source folder copied. */
#define _GNU_SOURCE
#include "convert.h"
#include "../base/base.h"
#include "../base/half.h"
#include "../base/progress.h"
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARD_BYTES ((size_t)5 << 30)

static bool is_float(mx_dtype d) { return d == MX_DT_F32 || d == MX_DT_F16 || d == MX_DT_BF16; }

static int parse_dtype(const char *s, mx_dtype *out) {
    if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16")) *out = MX_DT_BF16;
    else if (!strcmp(s, "f16") || !strcmp(s, "float16")) *out = MX_DT_F16;
    else if (!strcmp(s, "f32") || !strcmp(s, "float32")) *out = MX_DT_F32;
    else return MX_ERR;
    return MX_OK;
}
static const char *torch_name(mx_dtype d) { return d == MX_DT_BF16 ? "bfloat16" : d == MX_DT_F16 ? "float16" : "float32"; }

static void round_to(float *v, size_t n, mx_dtype d) {
    if (d == MX_DT_BF16) for (size_t i = 0; i < n; i++) v[i] = mx_bf16_to_f32(mx_f32_to_bf16(v[i]));
    else if (d == MX_DT_F16) for (size_t i = 0; i < n; i++) v[i] = mx_f16_to_f32(mx_f32_to_f16(v[i]));
}
static void store_as(const float *v, size_t n, mx_dtype d, uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        if (d == MX_DT_F32) memcpy(out + 4 * i, &v[i], 4);
        else {
            uint16_t h = d == MX_DT_BF16 ? mx_f32_to_bf16(v[i]) : mx_f32_to_f16(v[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    }
}

/* One output tensor, with its owned data. */
typedef struct {
    char *name;
    mx_dtype dtype;
    int ndim;
    int64_t shape[MX_MAX_DIMS];
    uint8_t *data;
    size_t nbytes;
    int shard;
} otensor;

typedef struct {
    const float *w;
    int rows, cols;
    mx_wfmt fmt;
    int bits, group;
    mx_dtype sdt;
    uint8_t *packed, *scales, *biases;
    int rows_per_task;
} qjob;

static void q_rows(void *ctx, int i, int tid) {
    (void)tid;
    qjob *j = ctx;
    int r0 = i * j->rows_per_task, r1 = MX_MIN(j->rows, r0 + j->rows_per_task);
    int ng = j->cols / j->group;
    size_t rb = (size_t)j->cols * j->bits / 8;
    float *sc = malloc(sizeof(float) * 2 * (size_t)ng), *bi = sc + ng;
    if (!sc) return;
    for (int r = r0; r < r1; r++) {
        if (j->fmt == MX_W_AFFINE) {
            mxq_quantize_row(j->fmt, j->bits, j->group, j->w + (size_t)r * j->cols, j->cols, j->packed + (size_t)r * rb, sc, bi, NULL);
            store_as(sc, (size_t)ng, j->sdt, j->scales + (size_t)r * ng * mx_dtype_size(j->sdt));
            store_as(bi, (size_t)ng, j->sdt, j->biases + (size_t)r * ng * mx_dtype_size(j->sdt));
        } else {
            mxq_quantize_row(j->fmt, j->bits, j->group, j->w + (size_t)r * j->cols, j->cols, j->packed + (size_t)r * rb, NULL, NULL,
                             j->scales + (size_t)r * ng);
        }
    }
    free(sc);
}

static int cmp_ot(const void *a, const void *b) { return strcmp(((const otensor *)a)->name, ((const otensor *)b)->name); }

static int copy_file(const char *src, const char *dst) {
    char *data;
    size_t len;
    if (mx_read_file(src, (size_t)1 << 31, &data, &len)) return MX_ERR;
    FILE *f = fopen(dst, "wb");
    if (!f) { free(data); return mx_set_err("%s: cannot create: %s", dst, strerror(errno)); }
    bool ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    free(data);
    return ok ? MX_OK : mx_set_err("%s: write failed", dst);
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int mx_conv_write_json(const char *path, json_t *j) {
    char *s = json_dumps(j, JSON_INDENT(4) | JSON_REAL_PRECISION(15));
    if (!s) return mx_set_err("%s: cannot encode JSON", path);
    FILE *f = fopen(path, "wb");
    if (!f) { free(s); return mx_set_err("%s: cannot create: %s", path, strerror(errno)); }
    bool ok = fputs(s, f) >= 0;
    ok = fclose(f) == 0 && ok;
    free(s);
    return ok ? MX_OK : mx_set_err("%s: write failed", path);
}

/* mkdir -p for the parents of path, then path itself (0 or -1/errno). */
static int mkdir_p(const char *path) {
    char *p = mx_strdup(path);
    if (!p) return -1;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) { free(p); return -1; }
            *s = '/';
        }
    free(p);
    return mkdir(path, 0755);
}

int mx_conv_new_dir(const char *dst) {
    if (mkdir_p(dst) == 0) return MX_OK;
    if (errno != EEXIST) return mx_set_err("%s: cannot create: %s", dst, strerror(errno));
    DIR *d = opendir(dst);
    struct dirent *e;
    bool empty = true;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
    if (d) closedir(d);
    return empty ? MX_OK : mx_set_err("%s: already exists and is not empty", dst);
}

int mx_conv_copy_aux(const char *src, const char *dst) {
    DIR *d = opendir(src);
    struct dirent *e;
    int rc = MX_OK;
    while (!rc && d && (e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] == '.' || !strcmp(n, "config.json") || ends_with(n, ".safetensors") || ends_with(n, ".safetensors.index.json") ||
            ends_with(n, ".bin") || ends_with(n, ".pt") || ends_with(n, ".pth") || ends_with(n, ".gguf") || !strncmp(n, "reference.", 10))
            continue;
        char *sp = mx_path_join(src, n), *dp = mx_path_join(dst, n);
        struct stat st;
        if (!sp || !dp) rc = MX_ERR;
        else if (stat(sp, &st) == 0 && S_ISREG(st.st_mode)) rc = copy_file(sp, dp);
        free(sp);
        free(dp);
    }
    if (d) closedir(d);
    return rc;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A copy of obj with its keys inserted in sorted order (Python's
 * dict(sorted(config.items())); nested objects keep their order). */
static json_t *sorted_copy(json_t *obj) {
    size_t n = json_object_size(obj), i = 0;
    const char **keys = malloc(sizeof(char *) * (n ? n : 1));
    json_t *out = json_object();
    if (!keys || !out) { free(keys); json_decref(out); return NULL; }
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) keys[i++] = k;
    qsort(keys, n, sizeof(char *), cmp_cstr);
    for (i = 0; i < n; i++) json_object_set(out, keys[i], json_object_get(obj, keys[i]));
    free(keys);
    return out;
}

int mx_convert(const char *src, const char *dst, const mx_convert_opts *o) {
    mx_wfmt fmt = MX_W_AFFINE;
    const char *mode = o->mode ? o->mode : "affine";
    int bits = o->bits, group = o->group;
    if (o->quantize) {
        int db, dg;
        if (!strcmp(mode, "affine")) { fmt = MX_W_AFFINE; db = 4; dg = 64; }
        else if (!strcmp(mode, "mxfp4")) { fmt = MX_W_MXFP4; db = 4; dg = 32; }
        else if (!strcmp(mode, "nvfp4")) { fmt = MX_W_NVFP4; db = 4; dg = 16; }
        else if (!strcmp(mode, "mxfp8")) { fmt = MX_W_MXFP8; db = 8; dg = 32; }
        else return mx_set_err("convert: --q-mode '%s' is not one of affine, mxfp4, nvfp4, mxfp8", mode);
        if (!bits) bits = db;
        if (!group) group = dg;
        if (fmt == MX_W_AFFINE) {
            if (bits < 1 || bits > 8 || bits == 7) return mx_set_err("convert: affine --q-bits %d is not supported (1, 2, 3, 4, 5, 6 or 8)", bits);
            if (group != 32 && group != 64 && group != 128) return mx_set_err("convert: affine --q-group-size %d is not supported (32, 64 or 128)", group);
        } else if (bits != db || group != dg) {
            return mx_set_err("convert: %s needs --q-bits %d and --q-group-size %d", mode, db, dg);
        }
    }
    mx_ckpt ck;
    if (mx_ckpt_open(src, true, &ck)) return MX_ERR;
    int rc = MX_ERR;
    void *prog = NULL; /* the progress task of the tensor loop */
    otensor *ots = NULL;
    int n_ot = 0, cap_ot = 0;
    json_t *cfg = NULL, *sorted = NULL, *index = NULL;
    mx_pool *pool = NULL;
    char **shard_names = NULL;
    int n_shards = 0;
    if (json_object_get(ck.config, "quantization") || json_object_get(ck.config, "quantization_config")) {
        mx_set_err("%s: the source checkpoint is already quantized; convert needs a float checkpoint", ck.config_path);
        goto done;
    }
    mx_dtype out_dt = MX_DT_COUNT; /* keep */
    if (o->dtype) {
        if (parse_dtype(o->dtype, &out_dt)) { mx_set_err("convert: --dtype '%s' is not bf16, f16 or f32", o->dtype); goto done; }
    } else {
        json_t *td = json_object_get(ck.config, "torch_dtype");
        if (json_is_string(td) && parse_dtype(json_string_value(td), &out_dt)) out_dt = MX_DT_COUNT;
    }
    if (mx_conv_new_dir(dst)) goto done;
    json_t *tie = json_object_get(ck.config, "tie_word_embeddings");
    bool tied = json_is_true(tie);
    pool = mx_pool_new(o->threads > 0 ? o->threads : mx_default_threads());
    int total = 0;
    for (int f = 0; f < ck.n_files; f++) total += ck.files[f].n_tensors;
    int done_n = 0;
    prog = mx_progress_begin("converting tensors", (uint64_t)total, false);
    size_t shard_bytes = 0;
    int shard = 0;
    int64_t total_params = 0;
    size_t total_size = 0;
    for (int f = 0; f < ck.n_files; f++) {
        for (int i = 0; i < ck.files[f].n_tensors; i++) {
            const mx_tensor *t = &ck.files[f].tensors[i];
            mx_progress_update(prog, (uint64_t)++done_n);
            if (ends_with(t->name, "rotary_emb.inv_freq")) continue;
            if (tied && !strcmp(t->name, "lm_head.weight")) continue;
            if (n_ot + 3 > cap_ot) {
                cap_ot = cap_ot ? cap_ot * 2 : 256;
                otensor *nt = realloc(ots, sizeof(otensor) * (size_t)cap_ot);
                if (!nt) { mx_set_err("convert: out of memory"); goto done; }
                ots = nt;
            }
            bool fl = is_float(t->dtype);
            mx_dtype dt = fl && out_dt != MX_DT_COUNT ? out_dt : t->dtype;
            bool quant = o->quantize && fl && t->ndim == 2 && ends_with(t->name, ".weight") && t->shape[1] % group == 0 &&
                         ((int64_t)t->shape[1] * bits) % 32 == 0 && t->shape[0] <= INT32_MAX && t->shape[1] <= INT32_MAX;
            total_params += t->numel;
            if (!fl && !quant) { /* copied as is */
                otensor *ot = &ots[n_ot++];
                memset(ot, 0, sizeof *ot);
                ot->name = mx_strdup(t->name);
                ot->dtype = t->dtype;
                ot->ndim = t->ndim;
                memcpy(ot->shape, t->shape, sizeof t->shape);
                ot->nbytes = t->nbytes;
                ot->data = malloc(t->nbytes ? t->nbytes : 1);
                if (!ot->name || !ot->data) { mx_set_err("convert: out of memory"); goto done; }
                memcpy(ot->data, t->data, t->nbytes);
                continue;
            }
            float *v = malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1));
            if (!v) { mx_set_err("convert: out of memory for '%s'", t->name); goto done; }
            if (mx_tensor_to_f32(t, v)) { free(v); goto done; }
            round_to(v, (size_t)t->numel, dt);
            if (!quant) {
                otensor *ot = &ots[n_ot++];
                memset(ot, 0, sizeof *ot);
                ot->name = mx_strdup(t->name);
                ot->dtype = dt;
                ot->ndim = t->ndim;
                memcpy(ot->shape, t->shape, sizeof t->shape);
                ot->nbytes = (size_t)t->numel * mx_dtype_size(dt);
                ot->data = malloc(ot->nbytes ? ot->nbytes : 1);
                if (!ot->name || !ot->data) { free(v); mx_set_err("convert: out of memory"); goto done; }
                store_as(v, (size_t)t->numel, dt, ot->data);
                free(v);
            } else {
                int rows = (int)t->shape[0], cols = (int)t->shape[1], ng = cols / group;
                size_t base = strlen(t->name) - strlen(".weight");
                mx_dtype sdt = fmt == MX_W_AFFINE ? dt : MX_DT_U8;
                const char *suf[3] = {"weight", "scales", "biases"};
                int nparts = fmt == MX_W_AFFINE ? 3 : 2;
                for (int p = 0; p < nparts; p++) {
                    otensor *ot = &ots[n_ot + p];
                    memset(ot, 0, sizeof *ot);
                    ot->name = mx_asprintf("%.*s.%s", (int)base, t->name, suf[p]);
                    ot->ndim = 2;
                    ot->shape[0] = rows;
                    ot->dtype = p == 0 ? MX_DT_U32 : sdt;
                    ot->shape[1] = p == 0 ? (int64_t)cols * bits / 32 : ng;
                    ot->nbytes = (size_t)rows * ot->shape[1] * mx_dtype_size(ot->dtype);
                    ot->data = calloc(ot->nbytes ? ot->nbytes : 1, 1);
                    if (!ot->name || !ot->data) { free(v); n_ot += p + 1; mx_set_err("convert: out of memory"); goto done; }
                }
                qjob j = {v, rows, cols, fmt, bits, group, sdt, ots[n_ot].data, ots[n_ot + 1].data,
                          nparts == 3 ? ots[n_ot + 2].data : NULL, 0};
                int tasks = MX_MIN(rows, mx_pool_size(pool) * 8);
                j.rows_per_task = (rows + tasks - 1) / tasks;
                tasks = (rows + j.rows_per_task - 1) / j.rows_per_task;
                mx_pool_run(pool, q_rows, &j, tasks);
                n_ot += nparts;
                free(v);
            }
        }
    }
    mx_progress_end(prog, true);
    prog = NULL;
    /* shard assignment in sorted order, as mlx-lm (5 GB per shard) */
    qsort(ots, (size_t)n_ot, sizeof(otensor), cmp_ot);
    for (int i = 0; i < n_ot; i++) {
        if (shard_bytes && shard_bytes + ots[i].nbytes > SHARD_BYTES) { shard++; shard_bytes = 0; }
        ots[i].shard = shard;
        shard_bytes += ots[i].nbytes;
        total_size += ots[i].nbytes;
    }
    n_shards = shard + 1;
    shard_names = calloc((size_t)n_shards, sizeof(char *));
    if (!shard_names) { mx_set_err("convert: out of memory"); goto done; }
    for (int s = 0; s < n_shards; s++) {
        shard_names[s] = n_shards == 1 ? mx_strdup("model.safetensors") : mx_asprintf("model-%05d-of-%05d.safetensors", s + 1, n_shards);
        if (!shard_names[s]) goto done;
        int a = 0;
        while (a < n_ot && ots[a].shard != s) a++;
        int b = a;
        while (b < n_ot && ots[b].shard == s) b++;
        mx_st_out *outs = calloc((size_t)(b - a + 1), sizeof(mx_st_out));
        if (!outs) { mx_set_err("convert: out of memory"); goto done; }
        for (int i = a; i < b; i++) {
            outs[i - a] = (mx_st_out){ots[i].name, ots[i].dtype, ots[i].ndim, {0}, ots[i].data, ots[i].nbytes};
            memcpy(outs[i - a].shape, ots[i].shape, sizeof ots[i].shape);
        }
        char *p = mx_path_join(dst, shard_names[s]);
        int wr = p ? mx_st_write(p, outs, b - a, "{\"format\":\"mlx\"}") : MX_ERR;
        free(p);
        free(outs);
        if (wr) goto done;
    }
    /* quantized parameter count as mlx-lm reports it: logical elements */
    if (o->quantize) {
        total_params = 0;
        for (int i = 0; i < n_ot; i++) {
            int64_t ne = 1;
            for (int d = 0; d < ots[i].ndim; d++) ne *= ots[i].shape[d];
            if (ots[i].dtype == MX_DT_U32 && ends_with(ots[i].name, ".weight")) total_params += ne * 32 / bits;
            else if (ends_with(ots[i].name, ".scales") || ends_with(ots[i].name, ".biases")) {
                char *wn = mx_strndup(ots[i].name, strlen(ots[i].name) - 7);
                bool q = false;
                for (int k = 0; wn && k < n_ot && !q; k++)
                    q = !strncmp(ots[k].name, wn, strlen(wn)) && !strcmp(ots[k].name + strlen(wn), ".weight") && ots[k].dtype == MX_DT_U32;
                free(wn);
                if (!q) total_params += ne;
            } else total_params += ne;
        }
    }
    index = json_object();
    json_t *meta = json_object(), *wm = json_object();
    json_object_set_new(meta, "total_size", json_integer((json_int_t)total_size));
    json_object_set_new(meta, "total_parameters", json_integer((json_int_t)total_params));
    json_object_set_new(index, "metadata", meta);
    for (int i = 0; i < n_ot; i++) json_object_set_new(wm, ots[i].name, json_string(shard_names[ots[i].shard]));
    json_object_set_new(index, "weight_map", wm);
    char *ip = mx_path_join(dst, "model.safetensors.index.json");
    int wr = ip ? mx_conv_write_json(ip, index) : MX_ERR;
    free(ip);
    if (wr) goto done;
    /* config.json */
    cfg = json_deep_copy(ck.config);
    if (!cfg) { mx_set_err("convert: out of memory"); goto done; }
    json_object_del(cfg, "_name_or_path");
    if (out_dt != MX_DT_COUNT) json_object_set_new(cfg, "torch_dtype", json_string(torch_name(out_dt)));
    if (o->quantize) {
        json_t *q = json_object();
        json_object_set_new(q, "group_size", json_integer(group));
        json_object_set_new(q, "bits", json_integer(bits));
        json_object_set_new(q, "mode", json_string(mode));
        json_object_set_new(cfg, "quantization", json_deep_copy(q));
        json_object_set_new(cfg, "quantization_config", q);
    }
    sorted = sorted_copy(cfg);
    char *cp = mx_path_join(dst, "config.json");
    wr = cp && sorted ? mx_conv_write_json(cp, sorted) : MX_ERR;
    free(cp);
    if (wr) goto done;
    /* the other files: tokenizer, generation config, chat template, code */
    if (mx_conv_copy_aux(src, dst)) goto done;
    rc = MX_OK;
done:
    if (prog) mx_progress_end(prog, false);
    for (int i = 0; i < n_ot; i++) { free(ots[i].name); free(ots[i].data); }
    free(ots);
    for (int s = 0; shard_names && s < n_shards; s++) free(shard_names[s]);
    free(shard_names);
    json_decref(cfg);
    json_decref(sorted);
    json_decref(index);
    mx_pool_free(pool);
    mx_ckpt_close(&ck);
    return rc;
}
