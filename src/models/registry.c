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

/* c with the families' defaults for the keys it lacks (the nearest family's
 * first), in a section of its own under the config's; *owned to free. */
static int with_defaults(const mx_family *const *chain, int n, const mx_cfg *c, mx_cfg *out, json_t **owned) {
    *out = *c;
    *owned = NULL;
    for (int i = 0; i < n; i++) {
        if (!chain[i]->defaults) continue;
        json_error_t e;
        json_t *d = json_loads(chain[i]->defaults, 0, &e);
        if (!json_is_object(d)) {
            json_decref(d);
            return mx_set_err("family '%s': its defaults are not a JSON object", chain[i]->name);
        }
        if (!*owned) *owned = c->sub ? json_deep_copy(c->sub) : json_object();
        const char *k;
        json_t *v;
        json_object_foreach(d, k, v)
            if (!mx_cfg_get(out, k) && !json_object_get(*owned, k)) json_object_set(*owned, k, v);
        json_decref(d);
        out->sub = *owned;
    }
    return MX_OK;
}

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
    mx_cfg cd;
    json_t *owned;
    if (with_defaults(chain, n, c, &cd, &owned)) return -1;
    int rc = 0;
    while (!rc && n--)
        if (chain[n]->configure && chain[n]->configure(a, &cd)) rc = -1;
    if (!rc && (mx_arch_ropes(a, &cd) || mx_mtp_configure(a, &cd))) rc = -1;
    json_decref(owned);
    if (rc) mx_arch_free(a);
    return rc;
}

const mx_family *mx_family_find(const char *model_type) {
    for (mx_family *f = g_families; f; f = f->next) {
        if (!strcasecmp(f->name, model_type)) return f;
        for (const char *const *a = f->aliases; a && *a; a++)
            if (!strcasecmp(*a, model_type)) return f;
    }
    return NULL;
}
