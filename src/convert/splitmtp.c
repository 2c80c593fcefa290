/* split-mtp: the next-n (multi-token prediction) module of a checkpoint
 * written as a folder of its own, which `--draft-model` then runs (nn/mtp.c):
 * its decoder layer as layer 0 of a one-layer model of the same family, its
 * final norm, head and table (the target's where it has none of its own),
 * and its input stage as model.mtp.{enorm,hnorm,eh_proj}. Two layouts:
 * DeepSeek V3's (DeepSeek V3 / R1, GLM-4.5, GLM-4.7-Flash): after the last
 * decoder layer as model.layers.<n_layers + i>.{enorm, hnorm, eh_proj,
 * shared_head.norm, shared_head.head, embed_tokens, and the layer's own};
 * Qwen3-Next's (Qwen3-Next, Qwen3.5): mtp.{pre_fc_norm_embedding,
 * pre_fc_norm_hidden, fc, norm, layers.<i>.*}, the layer a full-attention
 * one (vLLM's qwen3_next_mtp.py). Tensors are copied byte for byte
 * (quantized ones with their scales); the config is the target's with one
 * layer, that layer's kinds, and "mlxcel_mtp": true. */
#include "convert.h"
#include "../base/base.h"
#include "../format/checkpoint.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The draft's name for what follows the module's prefix in the target (a
 * tensor, or a module in a quantization override); NULL (no error) for
 * another module's layer. qwen: Qwen3-Next's layout, whose layer `layer`
 * lies under layers.<layer>. */
static char *map_name(const char *rest, bool qwen, int layer) {
    static const char *const ds[][2] = {
        {"enorm", "model.mtp.enorm"}, {"hnorm", "model.mtp.hnorm"}, {"eh_proj", "model.mtp.eh_proj"},
        {"shared_head.norm", "model.norm"}, {"shared_head.head", "lm_head"}, {"embed_tokens", "model.embed_tokens"},
    };
    static const char *const qw[][2] = {
        {"pre_fc_norm_embedding", "model.mtp.enorm"}, {"pre_fc_norm_hidden", "model.mtp.hnorm"}, {"fc", "model.mtp.eh_proj"}, {"norm", "model.norm"},
    };
    const char *const(*map)[2] = qwen ? qw : ds;
    size_t nm = qwen ? MX_ARRAY_LEN(qw) : MX_ARRAY_LEN(ds);
    for (size_t i = 0; i < nm; i++) {
        size_t n = strlen(map[i][0]);
        if (!strncmp(rest, map[i][0], n) && (!rest[n] || rest[n] == '.')) return mx_asprintf("%s%s", map[i][1], rest + n);
    }
    if (!qwen) return mx_asprintf("model.layers.0.%s", rest);
    char lp[32];
    int n = snprintf(lp, sizeof lp, "layers.%d.", layer);
    return strncmp(rest, lp, (size_t)n) ? NULL : mx_asprintf("model.layers.0.%s", rest + n);
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

typedef struct {
    mx_st_out *t;
    int n, cap;
} outs;

static int add(outs *o, const mx_tensor *t, char *name) {
    if (!name) return mx_set_err("split-mtp: out of memory");
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 64;
        mx_st_out *nt = realloc(o->t, sizeof *nt * (size_t)cap);
        if (!nt) { free(name); return mx_set_err("split-mtp: out of memory"); }
        o->t = nt;
        o->cap = cap;
    }
    mx_st_out *d = &o->t[o->n++];
    *d = (mx_st_out){.name = name, .dtype = t->dtype, .ndim = t->ndim, .data = t->data, .nbytes = t->nbytes};
    memcpy(d->shape, t->shape, sizeof d->shape);
    return MX_OK;
}

static int cmp_out(const void *a, const void *b) { return strcmp(((const mx_st_out *)a)->name, ((const mx_st_out *)b)->name); }

/* A quantization object's per-module overrides: the module's renamed, other
 * layers' dropped, the rest (bits, group_size, ...) kept. */
static void map_overrides(json_t *q, const char *prefix, bool qwen, int layer) {
    if (!json_is_object(q)) return;
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(q, k, v) {
        if (starts(k, prefix)) {
            char *nk = map_name(k + strlen(prefix), qwen, layer);
            if (nk) json_object_set(out, nk, v);
            free(nk);
        } else if (!starts(k, "model.layers.") && !starts(k, "mtp.")) json_object_set(out, k, v);
    }
    json_object_clear(q);
    json_object_update(q, out);
    json_decref(out);
}

int mx_split_mtp(const char *src, const char *dst, int layer) {
    mx_ckpt ck;
    if (mx_ckpt_open(src, true, &ck)) return MX_ERR;
    int rc = MX_ERR, n_layers, n_mtp;
    outs o = {0};
    json_t *cfg = NULL;
    /* Qwen3-Next's layout: mtp.fc; its config may not count the modules (vLLM reads 1 then) */
    bool qwen = mx_ckpt_find(&ck, "mtp.fc.weight") != NULL;
    const char *count_key = !mx_cfg_absent(&ck.cfg, "mtp_num_hidden_layers") ? "mtp_num_hidden_layers" : "num_nextn_predict_layers";
    if (mx_cfg_i32(&ck.cfg, "num_hidden_layers", 0, 1, 1 << 16, &n_layers) || mx_cfg_i32(&ck.cfg, count_key, qwen, 0, 8, &n_mtp)) goto done;
    if (!n_mtp) { mx_set_err("%s: %s is 0 or absent: the model has no next-n module", ck.config_path, count_key); goto done; }
    if (layer < 0 || layer >= n_mtp) { mx_set_err("split-mtp: --layer %d: the model has %d next-n module(s)", layer, n_mtp); goto done; }
    if (!qwen && mx_cfg_get(&ck.cfg, "layer_types")) {
        mx_set_err("%s: layer_types: a next-n module of a model with per-layer attention kinds is not supported", ck.config_path);
        goto done;
    }
    char prefix[48];
    if (qwen) snprintf(prefix, sizeof prefix, "mtp.");
    else snprintf(prefix, sizeof prefix, "model.layers.%d.", n_layers + layer);
    bool embed = false, head = false, eh = false, moe = false;
    for (int f = 0; f < ck.n_files; f++)
        for (int i = 0; i < ck.files[f].n_tensors; i++) {
            const mx_tensor *t = &ck.files[f].tensors[i];
            if (!starts(t->name, prefix)) continue;
            char *nm = map_name(t->name + strlen(prefix), qwen, layer);
            if (!nm) continue; /* another module's layer */
            const char *lr = strncmp(nm, "model.layers.0.", 15) ? "" : nm + 15; /* within the layer */
            embed |= !strncmp(nm, "model.embed_tokens.", 19);
            head |= !strncmp(nm, "lm_head.", 8);
            eh |= !strncmp(nm, "model.mtp.eh_proj.", 18);
            moe |= starts(lr, "mlp.gate.") || starts(lr, "mlp.experts.") || starts(lr, "mlp.switch_mlp.");
            if (add(&o, t, nm)) goto done;
        }
    if (!eh) {
        mx_set_err("%s: no tensor %s%s.*: the checkpoint does not hold its next-n module (mlx-lm's conversions drop it)", src, prefix, qwen ? "fc" : "eh_proj");
        goto done;
    }
    bool tied = json_is_true(mx_cfg_get(&ck.cfg, "tie_word_embeddings"));
    for (int f = 0; f < ck.n_files; f++) /* the target's table and head where the module has none of its own */
        for (int i = 0; i < ck.files[f].n_tensors; i++) {
            const mx_tensor *t = &ck.files[f].tensors[i];
            if (((!embed && starts(t->name, "model.embed_tokens.")) || (!head && !tied && starts(t->name, "lm_head."))) &&
                add(&o, t, mx_strdup(t->name)))
                goto done;
        }
    qsort(o.t, (size_t)o.n, sizeof *o.t, cmp_out);
    if (!(cfg = json_deep_copy(ck.config))) { mx_set_err("split-mtp: out of memory"); goto done; }
    json_object_del(cfg, "_name_or_path");
    json_object_set_new(cfg, "num_hidden_layers", json_integer(1));
    json_object_set_new(cfg, "num_nextn_predict_layers", json_integer(0));
    if (json_object_get(cfg, "mtp_num_hidden_layers")) json_object_set_new(cfg, "mtp_num_hidden_layers", json_integer(0));
    if (qwen) { /* a full-attention layer; its MLP sparse where the model's are */
        json_object_set_new(cfg, "layer_types", json_pack("[s]", "full_attention"));
        if (json_object_get(cfg, "mlp_only_layers")) json_object_set_new(cfg, "mlp_only_layers", json_array());
        if (json_object_get(cfg, "decoder_sparse_step")) json_object_set_new(cfg, "decoder_sparse_step", json_integer(1));
    } else json_object_set_new(cfg, "first_k_dense_replace", json_integer(moe ? 0 : 1));
    if (json_object_get(cfg, "moe_layer_freq")) json_object_set_new(cfg, "moe_layer_freq", json_integer(1));
    if (json_object_get(cfg, "mlp_layer_types")) json_object_set_new(cfg, "mlp_layer_types", json_pack("[s]", moe ? "sparse" : "dense"));
    if (!tied && head) json_object_set_new(cfg, "tie_word_embeddings", json_false());
    map_overrides(json_object_get(cfg, "quantization"), prefix, qwen, layer);
    map_overrides(json_object_get(cfg, "quantization_config"), prefix, qwen, layer);
    json_object_set_new(cfg, "mlxcel_mtp", json_true());
    if (mx_conv_new_dir(dst)) goto done;
    char *wp = mx_path_join(dst, "model.safetensors"), *cp = mx_path_join(dst, "config.json");
    const char *fmt = ck.n_files && ck.files[0].metadata_format ? ck.files[0].metadata_format : "pt";
    char meta[96];
    snprintf(meta, sizeof meta, "{\"format\":\"%s\"}", strlen(fmt) < 64 && !strpbrk(fmt, "\"\\") ? fmt : "pt");
    int wr = wp && cp ? mx_st_write(wp, o.t, o.n, meta) : MX_ERR;
    if (!wr) wr = mx_conv_write_json(cp, cfg);
    free(wp);
    free(cp);
    if (!wr) rc = mx_conv_copy_aux(src, dst);
done:
    for (int i = 0; i < o.n; i++) free((char *)o.t[i].name);
    free(o.t);
    json_decref(cfg);
    mx_ckpt_close(&ck);
    return rc;
}
