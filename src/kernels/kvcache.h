/* kvcache: the number types a KV cache row is stored in, and the attention
 * rows that read them in place (docs/kv-cache.md).
 *
 * A row of d values (one head's key or value at one position) is stored as
 *   f32   d floats (exact; the default)
 *   f16   d IEEE half floats
 *   bf16  d bfloat16
 *   q8_0  ceil(d/32) blocks of {f16 scale, 32 int8}            (34 bytes)
 *   q4_0  ceil(d/32) blocks of {f16 scale, 16 bytes of nibbles} (18 bytes)
 * q8_0 and q4_0 are llama.cpp's block layouts: x = scale * q for q8_0,
 * x = scale * (nibble - 8) for q4_0, byte j of a q4_0 block holding value j
 * in its low nibble and value j + 16 in its high one. A row whose d is not a
 * multiple of 32 ends in a block whose missing values are zeros.
 *
 * Writes quantize once (mx_kv_store); the attention rows dequantize a block
 * at a time into registers (AVX2) or a 32-value tile (portable C) inside
 * their loop, never a copy of the cache. For f32 they are exactly
 * mx_attn_scores / mx_attn_mix. */
#ifndef MX_KVCACHE_H
#define MX_KVCACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { MX_KV_F32, MX_KV_F16, MX_KV_BF16, MX_KV_Q8_0, MX_KV_Q4_0, MX_KV_N_TYPES } mx_kv_type;
#define MX_KV_TYPE_CHOICES "f32|f16|bf16|q8_0|q4_0"

const char *mx_kv_type_name(mx_kv_type t);
/* llama.cpp's names above; -1 when s is none of them. */
int mx_kv_type_parse(const char *s, mx_kv_type *t);
/* Bytes of one stored row of d values. */
size_t mx_kv_row_bytes(mx_kv_type t, int d);
/* Stores x[0..d) as one row at dst (quantizing for q8_0 / q4_0). */
void mx_kv_store(mx_kv_type t, void *dst, const float *x, int d);
/* The row's values as floats (tests and tools; the attention rows read in place). */
void mx_kv_load(mx_kv_type t, float *y, const void *src, int d);
/* mx_attn_scores / mx_attn_mix over rows of type t, ldk / ldv bytes apart. */
void mx_attn_scores_kv(mx_kv_type t, const float *q, const void *K, size_t ldk, int n, int d, float scale, float *out);
void mx_attn_mix_kv(mx_kv_type t, float *y, const float *p, const void *V, size_t ldv, int n, int d, bool acc);
/* The same for two rows over the same keys / values (two heads of a GQA
 * group): each result bit for bit the one-row function's, every stored row
 * widened once for both where the CPU allows (f16, bf16, q8_0). */
void mx_attn_scores2_kv(mx_kv_type t, const float *q0, const float *q1, const void *K, size_t ldk, int n, int d, float scale, float *o0, float *o1);
void mx_attn_mix2_kv(mx_kv_type t, float *y, float *z, const float *p0, const float *p1, const void *V, size_t ldv, int n, int d, bool acc);
#endif
