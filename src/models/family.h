/* family: how a family file registers itself. Each src/models/<family>.c
 * defines a configure function and registers with MX_FAMILY; the registry
 * finds families by config.json's model_type, so adding one never means
 * editing the core. */
#ifndef MX_FAMILY_H
#define MX_FAMILY_H
#include "../nn/arch.h"

typedef enum { MX_TASK_CAUSAL_LM, MX_TASK_EMBEDDING, MX_TASK_SEQ_CLS } mx_task;

typedef struct mx_family {
    const char *name;                 /* primary model_type */
    const char *const *aliases;       /* other model_type values, NULL-terminated */
    const char *features;             /* what the family exercises, for `mlxcel arch` */
    const char *task;                 /* "causal-lm" (NULL), "embedding", "sequence-classification" */
    int (*configure)(mx_arch *a, const mx_cfg *c);
    struct mx_family *next;
} mx_family;

void mx_family_register(mx_family *f);
/* Fills a (any previous content freed) for config c as family f describes
 * it; on failure a is left empty. */
int mx_family_configure(const mx_family *f, mx_arch *a, const mx_cfg *c);
const mx_family *mx_family_find(const char *model_type);
const mx_family *mx_family_list(void);

#define MX_ALIASES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MX_FAMILY(id, ...)                                                        \
    static mx_family mx_family_##id = {__VA_ARGS__};                              \
    __attribute__((constructor)) static void mx_register_##id(void) { mx_family_register(&mx_family_##id); }
#endif
