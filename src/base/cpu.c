#include "cpu.h"
#include <stdlib.h>
#include <string.h>

static mx_cpu_info g_info;
static int g_init;

static void detect(void) {
    memset(&g_info, 0, sizeof g_info);
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    g_info.fma = avx2;
    g_info.f16c = avx2;
    g_info.level = avx512 ? MX_CPU_AVX512 : avx2 ? MX_CPU_AVX2 : MX_CPU_PORTABLE;
    if (avx512) {
        g_info.avx512_vnni = __builtin_cpu_supports("avx512vnni");
#if __GNUC__ >= 11 || defined(__clang__)
        g_info.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
#endif
    }
#endif
    const char *env = getenv("MLXCEL_CPU");
    if (env) {
        if (!strcmp(env, "portable")) mx_cpu_force(MX_CPU_PORTABLE);
        else if (!strcmp(env, "avx2")) mx_cpu_force(MX_CPU_AVX2);
    }
    g_init = 1;
}

const mx_cpu_info *mx_cpu(void) {
    if (!g_init) detect();
    return &g_info;
}

void mx_cpu_force(mx_cpu_level max_level) {
    if (!g_init) detect();
    if (g_info.level > max_level) g_info.level = max_level;
    if (g_info.level < MX_CPU_AVX512) g_info.avx512_vnni = g_info.avx512_bf16 = false;
    if (g_info.level < MX_CPU_AVX2) g_info.fma = g_info.f16c = false;
}

const char *mx_cpu_name(mx_cpu_level l) {
    return l == MX_CPU_AVX512 ? "avx512" : l == MX_CPU_AVX2 ? "avx2" : "portable";
}
