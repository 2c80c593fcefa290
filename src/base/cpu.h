/* cpu: runtime detection of the x86 vector extensions the kernels use.
 * mx_cpu_force caps the level for the whole process (tests; MLXCEL_CPU,
 * read with the kernel policy: kernels/policy.h). */
#ifndef MX_CPU_H
#define MX_CPU_H
#include <stdbool.h>
typedef enum { MX_CPU_PORTABLE = 0, MX_CPU_AVX2 = 1, MX_CPU_AVX512 = 2 } mx_cpu_level;
typedef struct {
    mx_cpu_level level;
    bool avx512_vnni, avx512_bf16, avx512_vbmi, f16c, fma;
} mx_cpu_info;
const mx_cpu_info *mx_cpu(void);
void mx_cpu_force(mx_cpu_level max_level); /* cap the level (tests run every path) */
/* Tests: the kernels with a VBMI variant take the other one (off), or take
 * it again where the CPU has it and the level is AVX-512 (on). */
void mx_cpu_set_vbmi(bool on);
const char *mx_cpu_name(mx_cpu_level l);
#endif
