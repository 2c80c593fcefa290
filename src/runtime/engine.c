#include "engine.h"
#include "../base/base.h"
#include "../dist/dist.h"
#include <ctype.h>
#include <string.h>

const char *mx_task_name(mx_task t) {
    return t == MX_TASK_EMBEDDING ? "embedding" : t == MX_TASK_SEQ_CLS ? "sequence-classification" : "causal-lm";
}

mx_task mx_task_from_arch(const char *s) {
    size_t n = strlen(s);
    if (n >= 24 && !strcmp(s + n - 24, "ForSequenceClassification")) return MX_TASK_SEQ_CLS;
    if (strstr(s, "ForSequenceClassification")) return MX_TASK_SEQ_CLS;
    if (strstr(s, "ForCausalLM") || strstr(s, "LMHeadModel") || strstr(s, "ForConditionalGeneration")) return MX_TASK_CAUSAL_LM;
    if (n >= 5 && !strcmp(s + n - 5, "Model")) return MX_TASK_EMBEDDING;
    return MX_TASK_CAUSAL_LM;
}

static int read_eos(json_t *v, const char *file, mx_model *m) {
    if (!v || json_is_null(v)) return MX_OK;
    if (json_is_integer(v)) {
        if (m->n_eos < 16) m->eos[m->n_eos++] = (int32_t)json_integer_value(v);
        return MX_OK;
    }
    if (!json_is_array(v)) return mx_set_err("%s: eos_token_id: expected an integer or a list of integers", file);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x)) return mx_set_err("%s: eos_token_id[%zu]: expected an integer", file, i);
        if (m->n_eos < 16) m->eos[m->n_eos++] = (int32_t)json_integer_value(x);
    }
    return MX_OK;
}

int mx_engine_configure(mx_ckpt *ck, mx_engine *e) {
    memset(e, 0, sizeof *e);
    int err = 0;
    const char *mt = mx_cfg_str(&ck->cfg, "model_type", NULL, &err);
    if (err || !mt) {
        if (!err) mx_set_err("%s: model_type is missing", ck->config_path);
        return MX_ERR;
    }
    size_t i = 0;
    for (; mt[i] && i < sizeof e->model_type - 1; i++) e->model_type[i] = (char)tolower((unsigned char)mt[i]);
    e->model_type[i] = 0;
    e->family = mx_family_find(e->model_type);
    if (!e->family) return mx_set_err("%s: model_type '%s' is not supported (see `mlxcel arch`)", ck->config_path, mt);
    e->task = MX_TASK_CAUSAL_LM;
    json_t *archs = mx_cfg_get(&ck->cfg, "architectures");
    if (archs && json_is_array(archs) && json_is_string(json_array_get(archs, 0)))
        e->task = mx_task_from_arch(json_string_value(json_array_get(archs, 0)));
    mx_model *m = &e->model;
    if (mx_family_configure(e->family, &m->arch, &ck->cfg)) return MX_ERR;
    m->arch.family = e->family->name;
    m->bos = m->arch.bos_id;
    if (ck->gen_config) {
        if (read_eos(json_object_get(ck->gen_config, "eos_token_id"), "generation_config.json", m)) goto fail;
        json_t *b = json_object_get(ck->gen_config, "bos_token_id");
        if (json_is_integer(b)) m->bos = (int32_t)json_integer_value(b);
    }
    if (!m->n_eos && read_eos(mx_cfg_get(&ck->cfg, "eos_token_id"), ck->config_path, m)) goto fail;
    return MX_OK;
fail:
    mx_arch_free(&m->arch);
    return MX_ERR;
}

/* dist: this process's part of a distributed model (src/dist/), opened by
 * every process together; else the whole model, in this process alone */
static int loaded(bool dist, int rc) { return dist ? mx_dist_loaded(rc) : rc; }

static int engine_open(const char *dir, mx_engine *e, bool local) {
    memset(e, 0, sizeof *e);
    bool dist = mx_dist_active() && !local;
    mx_ckpt ck;
    if (mx_ckpt_open(dir, true, &ck)) return loaded(dist, MX_ERR);
    if (mx_engine_configure(&ck, e)) { mx_ckpt_close(&ck); return loaded(dist, MX_ERR); }
    /* the process's policy; the weights are prepared for it as they are
     * bound (repacked for the int8 kernels), on every core */
    mx_model *m = &e->model;
    m->kp = mx_kpolicy_default();
    mx_pool *pool = m->kp.pool ? NULL : mx_pool_new(mx_default_threads());
    if (pool) m->kp.pool = pool;
    int rc = !dist ? MX_OK
             : e->task != MX_TASK_CAUSAL_LM
                 ? mx_set_err("%s: a %s model is not run distributed (--tp / --pp take text generation models)", dir, mx_task_name(e->task))
                 : mx_dist_shard(m);
    if (rc) { mx_ckpt_close(&ck); mx_arch_free(&m->arch); }
    else rc = mx_model_bind(m, &ck);
    m->kp.pool = NULL;
    mx_pool_free(pool);
    if (loaded(dist, rc)) {
        if (!rc) mx_model_free(m);
        return MX_ERR;
    }
    /* The vision tower runs on rank 0 alone (each pass carries its rows to the others, src/dist/): the
     * others follow what rank 0 decides from it, the cache's rings and the head's scale (the last stage
     * computes the logits when the head is split), and stop with it when it cannot open it. */
    bool worker = dist && mx_dist_rank() != 0;
    rc = e->task == MX_TASK_CAUSAL_LM && !worker ? mx_vision_open(dir, m->arch.hidden, &e->vision) : MX_OK;
    int dec[2] = {m->kp.kv_ring, 0}; /* kv_ring, the head unscaled */
    if (!rc && e->vision) {
        const mx_vision_desc *d = mx_vision_spec(e->vision);
        dec[1] = d->head_unscaled;
        /* an image's rows are read both ways and must be written in one ring slice */
        if (d->mask == MX_VMASK_PREFIX || (d->mask == MX_VMASK_IMAGE_BLOCK && !(d->pool_tokens > 0 && d->pool_tokens <= MX_KV_RING_SLICE)))
            dec[0] = false;
    }
    if (dist) rc = mx_dist_follow(rc, dec, 2);
    if (rc) {
        mx_vision_free(e->vision);
        e->vision = NULL;
        mx_model_free(m);
        return MX_ERR;
    }
    m->kp.kv_ring = dec[0];
    if (dec[1]) m->arch.logit_scale = 1;
    return MX_OK;
}

int mx_engine_open(const char *dir, mx_engine *e) { return engine_open(dir, e, false); }
int mx_engine_open_local(const char *dir, mx_engine *e) { return engine_open(dir, e, true); }

void mx_engine_close(mx_engine *e) {
    mx_vision_free(e->vision);
    mx_model_free(&e->model);
    memset(e, 0, sizeof *e);
}

bool mx_engine_is_eos(const mx_engine *e, int32_t tok) {
    for (int i = 0; i < e->model.n_eos; i++)
        if (e->model.eos[i] == tok) return true;
    return false;
}
