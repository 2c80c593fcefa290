/* policy: how the matrix products compute, as one value. It is set once at
 * start (the CLI from the environment, mx_kpolicy_env, then
 * mx_kpolicy_set_default), copied by every engine when it loads a model (the
 * weights are prepared for it: mx_weight_prepare) and by every forward
 * context (which adds its pool), and passed with each product: no kernel
 * reads the environment or a mode of its thread.
 *
 * The elementwise ops (kernels.h: norms, softmax, attention rows) take no
 * policy; they follow the process's level (base/cpu.h), which MLXCEL_CPU
 * caps as well. */
#ifndef MX_POLICY_H
#define MX_POLICY_H
#include <stdbool.h>
#include "../base/cpu.h"
#include "../base/threadpool.h"
#include "kvcache.h"

/* Which kernel serves n tokens of a quantized product on f32 activations.
 * The one-token decode kernel and the multi-token panel kernel sum in
 * different orders, so with AUTO (n == 1 decode, n > 1 panel) a token's
 * result depends on how many tokens share its product. The server pins the
 * choice per pass so results are bit-identical alone or batched: decode
 * passes run the decode kernel once per token (PER_TOKEN), prompt chunks the
 * panel kernel for every n (PANEL). The 12-bit path (act12) computes a
 * token alike in any batch and ignores it. */
typedef enum { MX_QMODE_AUTO, MX_QMODE_PER_TOKEN, MX_QMODE_PANEL } mx_qmode;

typedef struct mx_kpolicy {
    mx_pool *pool;    /* the threads a product splits over (NULL: the caller alone) */
    mx_cpu_level isa; /* the highest instruction set the products use (the CPU's where lower) */
    /* Quantized weights multiply activations coded as 12-bit integers per
     * group (AVX-512 VNNI; mxfp8 and HF FP8: x as bf16 hi + lo on AVX-512
     * BF16): on by default, MLXCEL_INT8=0 turns it off (exact f32
     * activations). Only weights prepared under it take it (docs/quant.md). */
    bool act12;
    /* BF16 weights take x rounded to bf16 from 24 tokens (one vdpbf16ps per
     * pair, ~2x the prefill rate; the logits move ~1e-2 of their scale):
     * opt-in, MLXCEL_BF16_DOT=1. */
    bool bf16_dot;
    /* BF16 weights are repacked at load, 16 rows in the lanes of each line
     * (AVX-512 BF16; kernels/matmul.c, mm_simd.h "bfr"): on by default,
     * MLXCEL_BF16_REPACK=0 keeps them as stored (the dot tiles). Only
     * weights prepared under it take it. */
    bool bf16_repack;
    /* The fast mode (opt-in: --fast, MLXCEL_FAST=1; docs/fast-mode.md):
     * BF16 weights take x rounded to bf16 for every n, and the products the
     * decoder lets take it (mx_linear_as: the dense MLP's gate and up) code
     * x as one 8-bit value per column (act8) on the int8 path: one vpdpbusd
     * per 4 columns instead of two or the 16-bit pairing. Its bounds are
     * statistical (mean KL, top-1; tests/unit/test_fast.c). */
    bool fast;
    bool act8; /* this product: one 8-bit code per activation (set per op from fast) */
    mx_qmode qmode; /* per pass: the scheduler's (see above) */
    /* The types attention caches store their K and V rows as (kvcache.h;
     * --cache-type-k / --cache-type-v, --kv-bits): copied into every cache
     * mx_kv_new makes for the model. Default f32 (exact). */
    mx_kv_type kv_type[2];
    /* Sliding-window layers keep a ring of rows instead of the whole
     * context (nn/attention.c kv_shape_of): on by default, MLXCEL_KV_RING=0
     * off; the engine turns it off for vision-language models whose
     * bidirectional spans can be longer than a ring slice (PaliGemma). */
    bool kv_ring;
    /* mlx-lm's --max-kv-size N (0: off): every causal attention layer reads
     * its first 4 keys and the N - 4 most recent ones, in a ring of rows
     * (nn/attention.c), so a sequence may grow past any cache size. Changes
     * the model's output once a sequence is longer than N. */
    int kv_max;
} mx_kpolicy;

/* The process's default: the built-in one (act12 and bf16_repack on, bf16_dot off, no cap,
 * AUTO, no pool) until mx_kpolicy_set_default replaces it (at start, before
 * any model is loaded). */
mx_kpolicy mx_kpolicy_default(void);
void mx_kpolicy_set_default(const mx_kpolicy *kp);
/* The documented environment, read here and nowhere else: MLXCEL_INT8=0
 * (act12 off), MLXCEL_BF16_DOT=1 (bf16_dot on), MLXCEL_BF16_REPACK=0
 * (bf16_repack off), MLXCEL_FAST=1 (fast on),
 * MLXCEL_KV_RING=0 (kv_ring off), MLXCEL_CPU=portable|avx2
 * (isa, and the process's level for the elementwise ops: mx_cpu_force). */
void mx_kpolicy_env(mx_kpolicy *kp);
/* The default policy on `pool` (tests, tools). */
mx_kpolicy mx_kpolicy_on(mx_pool *pool);
/* The CPU features a product may use under kp (NULL: the default): the
 * process's (mx_cpu()), capped at kp->isa. */
mx_cpu_info mx_kpolicy_cpu(const mx_kpolicy *kp);
#endif
