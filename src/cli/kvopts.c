/* The KV cache type options (cli.h OPT_KV): into the default kernel policy,
 * which every model loaded afterwards copies (kernels/policy.h). */
#include "cli.h"
#include <stdio.h>

int cli_kv_apply(const char *cmd, const cli_kv_opts *o) {
    mx_kv_type t[2] = {MX_KV_F32, MX_KV_F32};
    if (o->bits) {
        if (o->bits != 4 && o->bits != 8) { fprintf(stderr, "mlxcel %s: --kv-bits: %d is not 4 or 8\n", cmd, o->bits); return 2; }
        if (o->k || o->v) { fprintf(stderr, "mlxcel %s: give --kv-bits or --cache-type-k / --cache-type-v, not both\n", cmd); return 2; }
        t[0] = t[1] = o->bits == 8 ? MX_KV_Q8_0 : MX_KV_Q4_0;
    }
    /* the table only lets the names through */
    if ((o->k && mx_kv_type_parse(o->k, &t[0])) || (o->v && mx_kv_type_parse(o->v, &t[1]))) {
        fprintf(stderr, "mlxcel %s: --cache-type-k/-v: not one of %s\n", cmd, MX_KV_TYPE_CHOICES);
        return 2;
    }
    mx_kpolicy kp = mx_kpolicy_default();
    kp.kv_type[0] = t[0];
    kp.kv_type[1] = t[1];
    kp.kv_max = o->max_kv;
    mx_kpolicy_set_default(&kp);
    return 0;
}

void cli_fast_apply(bool on) {
    if (!on) return; /* MLXCEL_FAST=1 may have set it */
    mx_kpolicy kp = mx_kpolicy_default();
    kp.fast = true;
    mx_kpolicy_set_default(&kp);
}

void cli_kv_note(const char *cmd, const mx_model *m) {
    if ((m->kp.kv_type[0] != MX_KV_F32 || m->kp.kv_type[1] != MX_KV_F32) && !mx_model_has_kv_rows(m))
        fprintf(stderr, "mlxcel %s: no attention or MLA layer of this model keeps a cache the types apply to (recurrent layers; Zamba2's "
                        "shared attention stays f32): --cache-type-k/-v and --kv-bits are ignored\n", cmd);
}

void cli_kv_describe(const mx_kv *kv, char *out, size_t n) {
    char b[32];
    cli_fmt_bytes((double)mx_kv_bytes(kv), b, sizeof b);
    snprintf(out, n, "KV cache %s (%zu bytes) for %d positions (%s keys, %s values)", b, mx_kv_bytes(kv), kv->cap, mx_kv_type_name(kv->type[0]),
             mx_kv_type_name(kv->type[1]));
}
