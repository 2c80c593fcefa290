/* kernels: the numeric primitives the nn layer is built from, with runtime
 * CPU dispatch (AVX-512, AVX2, portable C) inside each.
 *
 * Matrix product convention: x is [n, cols] row-major with row stride ldx,
 * y is [n, rows] with row stride ldy, y[t][r] = sum_c x[t][c] * W[r][c].
 * n = 1 is decode (matrix-vector), n > 1 prefill (matrix-matrix). */
#ifndef MX_KERNELS_H
#define MX_KERNELS_H
#include <stdbool.h>
#include "policy.h"
#include "weight.h"
#include "../base/threadpool.h"

/* Through w's format record; kp: the policy (kernels/policy.h; NULL: the
 * default, on the calling thread alone). */
void mx_matmul(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy, const mx_kpolicy *kp);
/* Activations prepared in two parts per token (int8 codes q1 and q2, bf16
 * hi and lo), for kernels that read the parts of 6 tokens at once: a part of
 * rb bytes (a multiple of 64), the second part mx_pad_q2(rb) bytes after the
 * first, tokens mx_pad_ld(rb) bytes apart. Unpadded, rows 2^k bytes apart
 * share one L1 set and the 12 rows thrash its 8 ways; padded, a token's row
 * starts 13 lines (mod 64 sets) after the previous one's and its second
 * part 33 lines after its first: 12 distinct sets for every rb. */
static inline size_t mx_pad_q2(size_t rb) { size_t m = rb / 64; return 64 * (m + ((33 - m) & 63)); }
static inline size_t mx_pad_ld(size_t rb) { size_t e = mx_pad_q2(rb) / 64 + rb / 64; return 64 * (e + ((13 - e) & 63)); }
/* x (n rows, ldx apart, K columns) split into bf16 hi = bf16(x) and lo =
 * bf16(x - hi), ~16 significant bits (at most 2^-17 |x| off), as the
 * vdpbf16ps kernels read it (BF16 weights; mxfp8 and FP8 blocks): per token
 * hi in words [0, K), lo mx_split_q2(K) words after it, tokens
 * mx_split_ld(K) words apart (padded as above). */
static inline size_t mx_split_q2(int K) { return mx_pad_q2(((size_t)K * 2 + 63) & ~(size_t)63) / 2; }
static inline size_t mx_split_ld(int K) { return mx_pad_ld(((size_t)K * 2 + 63) & ~(size_t)63) / 2; }
void mx_bf16_split(const float *x, int n, int ldx, int K, uint16_t *xb);
/* mx_matmul for count weights that read the same x (q/k/v, gate/up), into
 * y[i] with the same ldy: the same results, fewer passes over the pool where
 * the kernels allow (the record's matmul_multi). */
void mx_matmul_multi(int count, const mx_weight *const *w, const float *x, int n, int ldx, float *const *y, int ldy, const mx_kpolicy *kp);
/* Float matmuls that took x as bf16 hi + lo (BF16 weights on AVX-512 BF16
 * CPUs; counted per weight, for bench and tests). */
unsigned long mx_matmul_bf2_calls(void);
/* Those that took x rounded to bf16 (the policy's bf16_dot), counted alike. */
unsigned long mx_matmul_bf16dot_calls(void);
/* Reference implementation (dequantize row, then dot) used by tests. */
void mx_matmul_ref(const mx_weight *w, const float *x, int n, int ldx, float *y, int ldy);

/* Row-wise ops on [n, d] arrays with row stride ld (in place when x == y). */
void mx_rmsnorm(float *y, const float *x, const float *w, float w_offset, int n, int d, int ld, float eps);
void mx_layernorm(float *y, const float *x, const float *w, const float *b, float w_offset, int n, int d, int ld, float eps);
void mx_softmax(float *x, int n);
/* x[i] = exp(x[i] - sub) in place, each added to acc[(lane0 + i) % 8]: a row's sum split into fixed lanes
 * by its key index, so it comes out the same however the row is cut into calls (attention's key blocks) */
void mx_exp_acc(float *x, int n, float sub, float acc[8], int lane0);
float mx_max(const float *x, int n); /* -inf for n = 0 */
int32_t mx_argmax(const float *x, int n); /* the first index of the largest value */
float mx_dot(const float *a, const float *b, int n);
void mx_axpy(float *y, float a, const float *x, int n); /* y += a*x */
void mx_add(float *y, const float *x, int n);           /* y += x */
void mx_scale(float *y, float a, int n);
/* Attention rows: out[k] = q . K[k] * scale for n keys (rows ldk apart), and
 * y = sum_k p[k] * V[k] (the values mx_axpy from zero gives, one dispatch
 * per row instead of per key); with acc, y += the sum, continuing the same
 * per-element sequence (keys taken in blocks give the same bits). */
void mx_attn_scores(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out);
void mx_attn_mix(float *y, const float *p, const float *V, size_t ldv, int n, int d, bool acc);
/* The same for two rows that read the same keys / values (two heads of a GQA
 * group): each row's result is bit for bit the one-row function's, with
 * every K or V row loaded once for both where the CPU allows. */
void mx_attn_scores2(const float *q0, const float *q1, const float *K, size_t ldk, int n, int d, float scale, float *o0, float *o1, bool pf);
void mx_attn_mix2(float *y0, float *y1, const float *p0, const float *p1, const float *V, size_t ldv, int n, int d, bool acc, bool pf);
/* The ops above pick their ISA on first use; call this after mx_cpu_force()
 * so they pick again (mx_matmul takes the level from its policy and
 * mx_cpu() on every call). */
void mx_kernels_redispatch(void);

/* MX_ACT_XIELU has learned per-layer parameters: only the dense MLP block
 * applies it (arch names.act_params); mx_act_apply / mx_act_mul do not. */
typedef enum { MX_ACT_SILU, MX_ACT_GELU, MX_ACT_GELU_TANH, MX_ACT_RELU, MX_ACT_RELU2, MX_ACT_IDENTITY, MX_ACT_SIGMOID, MX_ACT_TANH, MX_ACT_XIELU,
               MX_ACT_QUICK_GELU /* x sigmoid(1.702 x) (CLIP) */ } mx_act;
int mx_act_parse(const char *name, mx_act *out);
void mx_act_apply(mx_act a, float *x, int n);
/* x[i] = act(gate[i]) * up[i] into gate */
void mx_act_mul(mx_act a, float *gate, const float *up, int n);

/* STREAM-style read bandwidth in GB/s: `bytes` (rounded down to 4 KiB; use
 * more than the L3, e.g. 1 GiB) read by the pool's threads, each its own
 * slice, median of `reps` passes after one warm-up. Huge pages requested
 * (MADV_HUGEPAGE). Returns 0 when the buffer cannot be allocated. */
double mx_measure_read_bw(mx_pool *pool, size_t bytes, int reps);
/* The same probe on a buffer mapped and faulted in once, for a caller that
 * measures many times (bench pairs every stretch of decode with probes
 * taken right before and after it). new: NULL when it cannot be mapped. */
typedef struct mx_bw_probe mx_bw_probe;
mx_bw_probe *mx_bw_probe_new(size_t bytes);
double mx_bw_probe_run(mx_bw_probe *b, mx_pool *pool, int reps);
void mx_bw_probe_free(mx_bw_probe *b);
#endif
