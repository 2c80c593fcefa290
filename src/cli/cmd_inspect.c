/* mlxcel inspect (what a model folder holds and what it needs) and mlxcel
 * detect (what its config maps to, without weights). */
#include "cli.h"
#include "../base/base.h"
#include "../base/threadpool.h"
#include "../nn/block.h"
#include "../runtime/engine.h"
#include "../template/template.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_strlist pos;
    int ctx;
    bool json;
    cli_kv_opts kv;
} insp_opts;

static void insp_init(void *p) { ((insp_opts *)p)->ctx = 4096; }

static const mx_opt insp_tab[] = {
    {"-c", "--ctx-size", NULL, OPT_INT, "N", 1, 1 << 24, offsetof(insp_opts, ctx), "the context the memory estimate is for", NULL, 0},
    OPT_KV(insp_opts, kv),
    {0},
};

static const char *yes(bool b) { return b ? "yes" : "no"; }

/* The layers' kinds as "attention x16, mamba2 x8" */
static void layer_mix(const mx_arch *a, char *out, size_t n) {
    const char *names[16];
    int counts[16], k = 0, len = 0;
    for (int l = 0; l < a->n_layers; l++) {
        const mx_block_ops *b = a->layers[l].mixer ? a->layers[l].mixer : &mx_block_attention;
        int i = 0;
        while (i < k && strcmp(names[i], b->name)) i++;
        if (i == k && k < 16) { names[k] = b->name; counts[k++] = 0; }
        if (i < k) counts[i]++;
    }
    out[0] = 0;
    for (int i = 0; i < k; i++) len += snprintf(out + len, n > (size_t)len ? n - (size_t)len : 0, "%s%s x%d", i ? ", " : "", names[i], counts[i]);
}

static void print_arch(const mx_engine *e) {
    const mx_arch *a = &e->model.arch;
    int windowed = 0;
    for (int l = 0; l < a->n_layers; l++) windowed += a->layers[l].window > 0;
    char mix[256];
    layer_mix(a, mix, sizeof mix);
    printf("family      %s (model_type %s), task %s\n", e->family->name, e->model_type, mx_task_name(e->task));
    printf("features    %s\n", e->family->features ? e->family->features : "-");
    printf("shape       %d layers (%s), hidden %d", a->n_layers, mix, a->hidden);
    if (a->attn && a->attn->n_heads) printf(", heads %d (kv %d, head dim %d)", a->attn->n_heads, a->attn->n_kv_heads, a->attn->head_dim);
    printf(", ffn %d, vocab %d\n", a->ffn, a->vocab);
    printf("context     %d positions (max_position_embeddings)\n", a->max_pos);
    if (windowed) printf("sliding     %d of %d layers attend to a window\n", windowed, a->n_layers);
    if (a->moe.n_experts) printf("experts     %d routed, %d per token\n", a->moe.n_experts, a->moe.top_k);
    printf("tied head   %s\n", yes(a->tied));
}

static void files_of(const char *dir) {
    const char *names[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
                           "generation_config.json"};
    printf("files      ");
    for (size_t i = 0; i < MX_ARRAY_LEN(names); i++) {
        char *p = mx_path_join(dir, names[i]);
        if (p && mx_file_exists(p)) printf(" %s", names[i]);
        free(p);
    }
    char *src = NULL;
    size_t len = 0;
    json_t *special = NULL;
    int rc = mx_chat_template_load(dir, false, &src, &len, &special);
    printf("\ntemplate    %s\n", rc ? mx_errmsg() : src ? "the model's chat template" : "none: chats use the plain User:/Assistant: format");
    free(src);
    json_decref(special);
}


static int detect_run(void *p) {
    insp_opts *o = p;
    if (o->pos.n != 1) { fprintf(stderr, "mlxcel detect: give one model folder\n"); return 2; }
    char *dir = cli_model_dir("detect", o->pos.v[0]);
    if (!dir) return 1;
    mx_ckpt ck;
    mx_engine *e = calloc(1, sizeof *e);
    int rc = 1;
    if (!e || mx_ckpt_open(dir, false, &ck)) { fprintf(stderr, "mlxcel detect: %s\n", mx_errmsg()); free(e); free(dir); return 1; }
    if (mx_engine_configure(&ck, e)) fprintf(stderr, "mlxcel detect: %s\n", mx_errmsg());
    else {
        printf("model       %s\n", o->pos.v[0]);
        print_arch(e);
        json_t *q = mx_cfg_get(&ck.cfg, "quantization");
        if (!q) q = mx_cfg_get(&ck.cfg, "quantization_config");
        char *qs = q ? json_dumps(q, JSON_COMPACT) : NULL;
        if (qs) printf("quantized   %.200s\n", qs);
        free(qs);
        files_of(dir);
        mx_arch_free(&e->model.arch);
        rc = 0;
    }
    mx_ckpt_close(&ck);
    free(e);
    free(dir);
    return rc;
}

/* parameters: a packed MLX weight (u32 with .scales beside it) counts its
 * values, bits from its shape: in = scales' columns * group */
static uint64_t count_params(const mx_ckpt *ck, int group) {
    uint64_t n = 0;
    for (int f = 0; f < ck->n_files; f++)
        for (int i = 0; i < ck->files[f].n_tensors; i++) {
            const mx_tensor *t = &ck->files[f].tensors[i];
            size_t l = strlen(t->name);
            if ((l > 7 && (!strcmp(t->name + l - 7, ".scales") || !strcmp(t->name + l - 7, ".biases"))) ||
                (l > 16 && !strcmp(t->name + l - 16, "weight_scale_inv")))
                continue;
            char sc[1024];
            snprintf(sc, sizeof sc, "%.*s.scales", (int)(l > 7 ? l - 7 : l), t->name);
            const mx_tensor *s = t->dtype == MX_DT_U32 && l > 7 && !strcmp(t->name + l - 7, ".weight") ? mx_ckpt_find(ck, sc) : NULL;
            if (s && s->ndim == t->ndim && group > 0) n += (uint64_t)(t->numel / t->shape[t->ndim - 1]) * (uint64_t)s->shape[s->ndim - 1] * (uint64_t)group;
            else n += (uint64_t)t->numel;
        }
    return n;
}

static int inspect_run(void *p) {
    insp_opts *o = p;
    if (o->pos.n != 1) { fprintf(stderr, "mlxcel inspect: give one model (folder or ORG/NAME)\n"); return 2; }
    if (cli_kv_apply("inspect", &o->kv)) return 2;
    char *dir = cli_model_dir("inspect", o->pos.v[0]);
    if (!dir) return 1;
    mx_engine *e = calloc(1, sizeof *e);
    if (!e || mx_engine_open(dir, e)) { fprintf(stderr, "mlxcel inspect: %s\n", mx_errmsg()); free(e); free(dir); return 1; }
    const mx_model *m = &e->model;
    const mx_ckpt *ck = &m->ck;
    printf("model       %s\nfolder      %s\n", o->pos.v[0], dir);
    print_arch(e);
    /* formats: tensors and bytes per dtype, and the quantization block */
    uint64_t by_dt[MX_DT_COUNT] = {0}, bytes = 0;
    int n_dt[MX_DT_COUNT] = {0};
    for (int f = 0; f < ck->n_files; f++) {
        bytes += ck->files[f].map_len;
        for (int i = 0; i < ck->files[f].n_tensors; i++) {
            by_dt[ck->files[f].tensors[i].dtype] += ck->files[f].tensors[i].nbytes;
            n_dt[ck->files[f].tensors[i].dtype]++;
        }
    }
    int group = 0;
    json_t *q = mx_cfg_get(&ck->cfg, "quantization");
    if (json_is_object(q) && json_is_integer(json_object_get(q, "group_size"))) group = (int)json_integer_value(json_object_get(q, "group_size"));
    uint64_t params = count_params(ck, group);
    char b[32], c[32];
    cli_fmt_bytes((double)bytes, b, sizeof b);
    char pc[32];
    cli_fmt_count((double)params, pc, sizeof pc);
    printf("parameters  %s (%.2f bits each on disk)\n", pc, params ? bytes * 8.0 / (double)params : 0.0);
    printf("weights     %s in %d file%s:", b, ck->n_files, ck->n_files == 1 ? "" : "s");
    for (int d = 0; d < MX_DT_COUNT; d++)
        if (n_dt[d]) {
            cli_fmt_bytes((double)by_dt[d], c, sizeof c);
            printf(" %s %d tensors (%s);", mx_dtype_name((mx_dtype)d), n_dt[d], c);
        }
    printf("\n");
    if (json_is_object(q)) {
        json_t *mode = json_object_get(q, "mode"), *bits = json_object_get(q, "bits");
        printf("quantized   %s, %lld bits, group %d\n", json_is_string(mode) ? json_string_value(mode) : "affine",
               json_is_integer(bits) ? (long long)json_integer_value(bits) : 0LL, group);
    }
    files_of(dir);
    /* memory at the context: the weights as mapped, the cache (as mx_kv_new lays it out, in the
     * cache types asked for) and the scratch of one sequence */
    size_t kv = mx_kv_new_bytes(m, o->ctx);
    size_t scratch = mx_blocks_scratch_floats(m, MX_MIN(512, o->ctx), o->ctx, mx_default_threads()) * sizeof(float);
    char k[32], s[32], t[32];
    cli_fmt_bytes((double)kv, k, sizeof k);
    cli_fmt_bytes((double)scratch, s, sizeof s);
    cli_fmt_bytes((double)(bytes + kv + scratch), t, sizeof t);
    printf("memory      %s at %d tokens: weights %s + cache %s (%s keys, %s values) + scratch %s (one sequence; serve --parallel N: N caches)\n",
           t, o->ctx, b, k, mx_kv_type_name(m->kp.kv_type[0]), mx_kv_type_name(m->kp.kv_type[1]), s);
    mx_engine_close(e);
    free(e);
    free(dir);
    return 0;
}

const mx_cmd mx_cmd_inspect = {
    .name = "inspect",
    .summary = "what a model holds: family, parameters, formats, memory needed at a context",
    .usage = "MODEL [-c N]",
    .details = "MODEL is a folder or a hub id ORG/NAME[:REVISION]. The weights are mapped, not read.",
    .opts = insp_tab,
    .size = sizeof(insp_opts),
    .init = insp_init,
    .samp_off = OPT_NO_SAMPLING,
    .pos_meta = "MODEL",
    .pos_off = offsetof(insp_opts, pos),
    .run = inspect_run,
    .loads_model = true,
};

const mx_cmd mx_cmd_detect = {
    .name = "detect",
    .summary = "which family and features a folder's config maps to, without loading weights",
    .usage = "MODEL",
    .details = "Reads config.json (and generation_config.json) only: the family, its shape, and the files found.",
    .size = sizeof(insp_opts),
    .samp_off = OPT_NO_SAMPLING,
    .pos_meta = "MODEL",
    .pos_off = offsetof(insp_opts, pos),
    .run = detect_run,
};
