/* engine: opening a model folder (family detection from config.json's
 * model_type, configuration, weight binding, EOS ids) — the entry point the
 * front ends use. */
#ifndef MX_ENGINE_H
#define MX_ENGINE_H
#include "../nn/model.h"
#include "../models/family.h"
#include "../vision/vision.h"

typedef struct {
    mx_model model;
    const mx_family *family;
    mx_task task;
    char model_type[64];
    mx_vision *vision; /* the image side of a vision-language model; NULL: text only */
} mx_engine;

/* Opens DIR; on failure returns MX_ERR with a message naming the file/field.
 * A vision-language folder also opens its tower, projector and image
 * processor (e->vision) when its family has a vision description. */
int mx_engine_open(const char *dir, mx_engine *e);
/* mx_engine_open of a model that stays whole in this process in a
 * distributed run too (a draft model, which rank 0 runs alone): no part
 * planned, no collective with the other processes; e->model.shard stays
 * NULL, so its passes and caches are local. Without MPI: mx_engine_open. */
int mx_engine_open_local(const char *dir, mx_engine *e);
/* Family detection and configuration from an opened checkpoint's config
 * (model_type, architectures, EOS ids), binding no weights: what `mlxcel
 * detect` shows. The arch is e->model.arch (the caller frees it with
 * mx_arch_free when it binds no weights); ck stays the caller's. */
int mx_engine_configure(mx_ckpt *ck, mx_engine *e);
void mx_engine_close(mx_engine *e);
bool mx_engine_is_eos(const mx_engine *e, int32_t tok);
/* The task an `architectures` entry implies (…ForCausalLM, …Model, …ForSequenceClassification). */
mx_task mx_task_from_arch(const char *arch_name);
const char *mx_task_name(mx_task t);
#endif
