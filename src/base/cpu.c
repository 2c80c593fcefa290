#include "cpu.h"
#include <string.h>

static mx_cpu_info g_info;
static int g_init;
static bool g_has_vbmi; /* what the CPU has (mx_cpu_set_vbmi may turn it off) */

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
/* XCR0: which register states the OS saves (AVX needs YMM, AVX-512 also
 * opmask and ZMM); a CPU flag without OS support would still fault. */
static unsigned long long xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

static void detect(void) {
    memset(&g_info, 0, sizeof g_info);
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
        unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
        bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6;
        unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0, t;
        if (__get_cpuid_count(7, 0, &t, &b7, &c7, &d7)) __get_cpuid_count(7, 1, &a71, &t, &t, &t);
        bool avx2 = avx && ymm && fma && f16c && (b7 & (1u << 5));
        bool avx512 = avx2 && zmm && (b7 & (1u << 16)) /* F */ && (b7 & (1u << 30)) /* BW */ &&
                      (b7 & (1u << 31)) /* VL */ && (b7 & (1u << 17)) /* DQ */;
        g_info.fma = g_info.f16c = avx2;
        g_info.level = avx512 ? MX_CPU_AVX512 : avx2 ? MX_CPU_AVX2 : MX_CPU_PORTABLE;
        if (avx512) {
            g_info.avx512_vnni = c7 & (1u << 11);
            g_info.avx512_bf16 = a71 & (1u << 5);
            g_info.avx512_vbmi = g_has_vbmi = c7 & (1u << 1);
        }
    }
#endif
    g_init = 1;
}

const mx_cpu_info *mx_cpu(void) {
    if (!g_init) detect();
    return &g_info;
}

void mx_cpu_force(mx_cpu_level max_level) {
    if (!g_init) detect();
    if (g_info.level > max_level) g_info.level = max_level;
    if (g_info.level < MX_CPU_AVX512) g_info.avx512_vnni = g_info.avx512_bf16 = g_info.avx512_vbmi = false;
    if (g_info.level < MX_CPU_AVX2) g_info.fma = g_info.f16c = false;
}

void mx_cpu_set_vbmi(bool on) {
    if (!g_init) detect();
    g_info.avx512_vbmi = on && g_has_vbmi && g_info.level >= MX_CPU_AVX512;
}

const char *mx_cpu_name(mx_cpu_level l) {
    return l == MX_CPU_AVX512 ? "avx512" : l == MX_CPU_AVX2 ? "avx2" : "portable";
}
