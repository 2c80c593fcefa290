/* Internal to kernels/: the KV cache row types' block sizes and the AVX2
 * attention rows over them (kvcache_avx2.c, compiled with -mavx2 -mfma
 * -mf16c, called only after dispatch and only for d % 8 == 0). */
#ifndef MX_KVCACHE_IMPL_H
#define MX_KVCACHE_IMPL_H
#include "kvcache.h"
enum { MX_KV_BLOCK = 32, MX_Q8_0_BYTES = 2 + 32, MX_Q4_0_BYTES = 2 + 16 };
void mx_attn_scores_kv_avx2(mx_kv_type t, const float *q, const void *K, size_t ldk, int n, int d, float scale, float *out);
void mx_attn_mix_kv_avx2(mx_kv_type t, float *y, const float *p, const void *V, size_t ldv, int n, int d, bool acc);
void mx_attn_scores2_kv_avx2(mx_kv_type t, const float *q0, const float *q1, const void *K, size_t ldk, int n, int d, float scale, float *o0,
                             float *o1);
void mx_attn_mix2_kv_avx2(mx_kv_type t, float *y, float *z, const float *p0, const float *p1, const void *V, size_t ldv, int n, int d, bool acc);
/* the portable rows (tests compare them with the dispatched ones) */
void mx_attn_scores_kv_c(mx_kv_type t, const float *q, const void *K, size_t ldk, int n, int d, float scale, float *out);
void mx_attn_mix_kv_c(mx_kv_type t, float *y, const float *p, const void *V, size_t ldv, int n, int d, bool acc);
#endif
