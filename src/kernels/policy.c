#include "policy.h"
#include <stdlib.h>
#include <string.h>

static mx_kpolicy g_default = {.isa = MX_CPU_AVX512, .act12 = true, .bf16_repack = true, .qmode = MX_QMODE_AUTO, .kv_type = {MX_KV_F32, MX_KV_F32}, .kv_ring = true};

mx_kpolicy mx_kpolicy_default(void) { return g_default; }

void mx_kpolicy_set_default(const mx_kpolicy *kp) { g_default = *kp; }

mx_kpolicy mx_kpolicy_on(mx_pool *pool) {
    mx_kpolicy kp = g_default;
    kp.pool = pool;
    return kp;
}

void mx_kpolicy_env(mx_kpolicy *kp) {
    const char *e = getenv("MLXCEL_INT8");
    if (e && !strcmp(e, "0")) kp->act12 = false;
    e = getenv("MLXCEL_BF16_DOT");
    if (e && *e && strcmp(e, "0")) kp->bf16_dot = true;
    e = getenv("MLXCEL_BF16_REPACK");
    if (e && !strcmp(e, "0")) kp->bf16_repack = false;
    e = getenv("MLXCEL_FAST");
    if (e && *e && strcmp(e, "0")) kp->fast = true;
    e = getenv("MLXCEL_KV_RING");
    if (e && !strcmp(e, "0")) kp->kv_ring = false;
    e = getenv("MLXCEL_CPU");
    if (e && (!strcmp(e, "portable") || !strcmp(e, "avx2"))) {
        kp->isa = !strcmp(e, "portable") ? MX_CPU_PORTABLE : MX_CPU_AVX2;
        mx_cpu_force(kp->isa);
    }
}

mx_cpu_info mx_kpolicy_cpu(const mx_kpolicy *kp) {
    mx_cpu_info c = *mx_cpu();
    mx_cpu_level cap = kp ? kp->isa : g_default.isa;
    if (c.level > cap) c.level = cap;
    if (c.level < MX_CPU_AVX512) c.avx512_vnni = c.avx512_bf16 = c.avx512_vbmi = false;
    if (c.level < MX_CPU_AVX2) c.fma = c.f16c = false;
    return c;
}
