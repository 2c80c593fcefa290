#include "family.h"
#include "../base/base.h"
#include <string.h>
#include <strings.h>

static mx_family *g_families;

void mx_family_register(mx_family *f) {
    /* keep the list sorted by name so `mlxcel arch` is stable */
    mx_family **p = &g_families;
    while (*p && strcmp((*p)->name, f->name) < 0) p = &(*p)->next;
    f->next = *p;
    *p = f;
}

const mx_family *mx_family_list(void) { return g_families; }

int mx_family_configure(const mx_family *f, mx_arch *a, const mx_cfg *c) {
    enum { MAX_CHAIN = 8 };
    const mx_family *chain[MAX_CHAIN];
    int n = 0;
    mx_arch_free(a);
    for (const mx_family *g = f; g; g = g->base ? mx_family_find(g->base) : NULL) {
        if (n == MAX_CHAIN) return mx_set_err("family '%s': its bases chain more than %d deep", f->name, MAX_CHAIN);
        chain[n++] = g;
        if (g->base && !mx_family_find(g->base)) return mx_set_err("family '%s' builds on '%s', which is not registered", g->name, g->base);
    }
    while (n--)
        if (chain[n]->configure && chain[n]->configure(a, c)) {
            mx_arch_free(a);
            return -1;
        }
    if (mx_arch_ropes(a, c)) {
        mx_arch_free(a);
        return -1;
    }
    return 0;
}

const mx_family *mx_family_find(const char *model_type) {
    for (mx_family *f = g_families; f; f = f->next) {
        if (!strcasecmp(f->name, model_type)) return f;
        for (const char *const *a = f->aliases; a && *a; a++)
            if (!strcasecmp(*a, model_type)) return f;
    }
    return NULL;
}
