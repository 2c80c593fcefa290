/* KV cache row types: quantize at append, attention rows that read the
 * stored rows in place (portable C here, AVX2 in kvcache_avx2.c, picked by
 * the process's CPU level on each call as the elementwise ops are). */
#include "kvcache.h"
#include "kernels.h"
#include "kvcache_impl.h"
#include "../base/cpu.h"
#include "../base/half.h"
#include <math.h>
#include <string.h>

static const char *const names[MX_KV_N_TYPES] = {"f32", "f16", "bf16", "q8_0", "q4_0"};

const char *mx_kv_type_name(mx_kv_type t) { return (unsigned)t < MX_KV_N_TYPES ? names[t] : "?"; }

int mx_kv_type_parse(const char *s, mx_kv_type *t) {
    for (int i = 0; s && i < MX_KV_N_TYPES; i++)
        if (!strcmp(s, names[i])) { *t = (mx_kv_type)i; return 0; }
    return -1;
}

size_t mx_kv_row_bytes(mx_kv_type t, int d) {
    size_t nb = ((size_t)d + MX_KV_BLOCK - 1) / MX_KV_BLOCK;
    switch (t) {
    case MX_KV_F16:
    case MX_KV_BF16: return (size_t)d * 2;
    case MX_KV_Q8_0: return nb * MX_Q8_0_BYTES;
    case MX_KV_Q4_0: return nb * MX_Q4_0_BYTES;
    default: return (size_t)d * 4;
    }
}

/* (int)v for v in [lo, hi]; a value out of range (inf, NaN: an overflowed
 * activation) takes the nearest end, NaN lo, instead of an undefined cast */
static int to_int(float v, int lo, int hi) { return v >= (float)lo && v <= (float)hi ? (int)v : v > (float)hi ? hi : lo; }

/* one block of n <= 32 values, llama.cpp's quantize_row_q8_0 / q4_0 rules */
static void store_q8_0(uint8_t *b, const float *x, int n) {
    float amax = 0;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = mx_f32_to_f16(d);
    memcpy(b, &h, 2);
    int8_t *q = (int8_t *)(b + 2);
    for (int i = 0; i < MX_KV_BLOCK; i++) q[i] = i < n ? (int8_t)to_int(roundf(x[i] * id), -127, 127) : 0;
}

static void store_q4_0(uint8_t *b, const float *x, int n) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = mx_f32_to_f16(d);
    memcpy(b, &h, 2);
    for (int j = 0; j < MX_KV_BLOCK / 2; j++) {
        float x0 = j < n ? x[j] * id : 0.0f, x1 = j + 16 < n ? x[j + 16] * id : 0.0f;
        int q0 = to_int(x0 + 8.5f, 0, 15), q1 = to_int(x1 + 8.5f, 0, 15); /* truncation, as llama.cpp's (int8_t) cast */
        b[2 + j] = (uint8_t)(q0 | (q1 << 4));
    }
}

void mx_kv_store(mx_kv_type t, void *dst, const float *x, int d) {
    uint8_t *o = dst;
    switch (t) {
    case MX_KV_F16:
        for (int i = 0; i < d; i++) { uint16_t h = mx_f32_to_f16(x[i]); memcpy(o + 2 * i, &h, 2); }
        return;
    case MX_KV_BF16:
        for (int i = 0; i < d; i++) { uint16_t h = mx_f32_to_bf16(x[i]); memcpy(o + 2 * i, &h, 2); }
        return;
    case MX_KV_Q8_0:
        for (int i = 0; i < d; i += MX_KV_BLOCK, o += MX_Q8_0_BYTES) store_q8_0(o, x + i, d - i < MX_KV_BLOCK ? d - i : MX_KV_BLOCK);
        return;
    case MX_KV_Q4_0:
        for (int i = 0; i < d; i += MX_KV_BLOCK, o += MX_Q4_0_BYTES) store_q4_0(o, x + i, d - i < MX_KV_BLOCK ? d - i : MX_KV_BLOCK);
        return;
    default: memcpy(dst, x, (size_t)d * 4);
    }
}

/* block b (values 32b .. 32b + n) of a stored row as floats */
static void tile(mx_kv_type t, float *y, const uint8_t *row, int b, int n) {
    switch (t) {
    case MX_KV_F16:
        for (int i = 0; i < n; i++) { uint16_t h; memcpy(&h, row + 2 * ((size_t)b * MX_KV_BLOCK + i), 2); y[i] = mx_f16_to_f32(h); }
        return;
    case MX_KV_BF16:
        for (int i = 0; i < n; i++) { uint16_t h; memcpy(&h, row + 2 * ((size_t)b * MX_KV_BLOCK + i), 2); y[i] = mx_bf16_to_f32(h); }
        return;
    case MX_KV_Q8_0: {
        const uint8_t *p = row + (size_t)b * MX_Q8_0_BYTES;
        uint16_t h;
        memcpy(&h, p, 2);
        float d = mx_f16_to_f32(h);
        for (int i = 0; i < n; i++) y[i] = d * (float)(int8_t)p[2 + i];
        return;
    }
    case MX_KV_Q4_0: {
        const uint8_t *p = row + (size_t)b * MX_Q4_0_BYTES;
        uint16_t h;
        memcpy(&h, p, 2);
        float d = mx_f16_to_f32(h);
        for (int i = 0; i < n; i++) y[i] = d * (float)((i < 16 ? p[2 + i] & 15 : p[2 + i - 16] >> 4) - 8);
        return;
    }
    default: memcpy(y, (const float *)(const void *)row + (size_t)b * MX_KV_BLOCK, (size_t)n * 4);
    }
}

void mx_kv_load(mx_kv_type t, float *y, const void *src, int d) {
    for (int i = 0, b = 0; i < d; i += MX_KV_BLOCK, b++) tile(t, y + i, src, b, d - i < MX_KV_BLOCK ? d - i : MX_KV_BLOCK);
}

static void scores_c(mx_kv_type t, const float *q, const uint8_t *K, size_t ldk, int n, int d, float scale, float *out) {
    float tl[MX_KV_BLOCK];
    for (int k = 0; k < n; k++) {
        float s = 0;
        for (int i = 0, b = 0; i < d; i += MX_KV_BLOCK, b++) {
            int m = d - i < MX_KV_BLOCK ? d - i : MX_KV_BLOCK;
            tile(t, tl, K + (size_t)k * ldk, b, m);
            for (int c = 0; c < m; c++) s += q[i + c] * tl[c];
        }
        out[k] = s * scale;
    }
}

static void mix_c(mx_kv_type t, float *y, const float *p, const uint8_t *V, size_t ldv, int n, int d, bool acc) {
    float tl[MX_KV_BLOCK];
    if (!acc) memset(y, 0, (size_t)d * sizeof(float));
    for (int k = 0; k < n; k++)
        for (int i = 0, b = 0; i < d; i += MX_KV_BLOCK, b++) {
            int m = d - i < MX_KV_BLOCK ? d - i : MX_KV_BLOCK;
            tile(t, tl, V + (size_t)k * ldv, b, m);
            for (int c = 0; c < m; c++) y[i + c] += p[k] * tl[c];
        }
}

static bool use_avx2(int d) { return d % 8 == 0 && mx_cpu()->level >= MX_CPU_AVX2; }

void mx_attn_scores_kv(mx_kv_type t, const float *q, const void *K, size_t ldk, int n, int d, float scale, float *out) {
    if (t == MX_KV_F32) mx_attn_scores(q, K, ldk / 4, n, d, scale, out);
    else if (use_avx2(d)) mx_attn_scores_kv_avx2(t, q, K, ldk, n, d, scale, out);
    else scores_c(t, q, K, ldk, n, d, scale, out);
}

void mx_attn_mix_kv(mx_kv_type t, float *y, const float *p, const void *V, size_t ldv, int n, int d, bool acc) {
    if (t == MX_KV_F32) mx_attn_mix(y, p, V, ldv / 4, n, d, acc);
    else if (use_avx2(d)) mx_attn_mix_kv_avx2(t, y, p, V, ldv, n, d, acc);
    else mix_c(t, y, p, V, ldv, n, d, acc);
}

void mx_attn_scores2_kv(mx_kv_type t, const float *q0, const float *q1, const void *K, size_t ldk, int n, int d, float scale, float *o0, float *o1) {
    if (t != MX_KV_F32 && t != MX_KV_Q4_0 && use_avx2(d)) { mx_attn_scores2_kv_avx2(t, q0, q1, K, ldk, n, d, scale, o0, o1); return; }
    mx_attn_scores_kv(t, q0, K, ldk, n, d, scale, o0);
    mx_attn_scores_kv(t, q1, K, ldk, n, d, scale, o1);
}

void mx_attn_mix2_kv(mx_kv_type t, float *y, float *z, const float *p0, const float *p1, const void *V, size_t ldv, int n, int d, bool acc) {
    if (t != MX_KV_F32 && t != MX_KV_Q4_0 && use_avx2(d)) { mx_attn_mix2_kv_avx2(t, y, z, p0, p1, V, ldv, n, d, acc); return; }
    mx_attn_mix_kv(t, y, p0, V, ldv, n, d, acc);
    mx_attn_mix_kv(t, z, p1, V, ldv, n, d, acc);
}

/* the portable rows, for the tests that compare the ISAs */
void mx_attn_scores_kv_c(mx_kv_type t, const float *q, const void *K, size_t ldk, int n, int d, float scale, float *out) {
    scores_c(t, q, K, ldk, n, d, scale, out);
}
void mx_attn_mix_kv_c(mx_kv_type t, float *y, const float *p, const void *V, size_t ldv, int n, int d, bool acc) {
    mix_c(t, y, p, V, ldv, n, d, acc);
}
