/* AVX2+FMA versions of the row-wise ops (compiled with -mavx2 -mfma; only
 * called after dispatch in ops.c). f32 throughout; sums are reordered
 * (several vector accumulators), exp is a Cephes-style polynomial (~2 ulp). */
#include "ops_impl.h"
#include <immintrin.h>
#include <string.h>
#include <math.h>

#define AI static inline __attribute__((always_inline))

AI float hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

AI float hmax(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

/* Lanes [0, r) set, r in [0, 8]. */
AI __m256i tailmask(int r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* e^x; 0 below ln(FLT_MIN), saturates at e^88. */
AI __m256 vexp(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654475f), hi = _mm256_set1_ps(88.0f);
    __m256 ok = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), ok);
}

static inline __attribute__((always_inline)) float dot_avx2(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    if (i < n) {
        __m256i m = tailmask(n - i);
        s1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), s1);
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

float mx_dot_avx2(const float *a, const float *b, int n) { return dot_avx2(a, b, n); }

/* Eight keys at a time, one accumulator each, reduced together: a dot per
 * key ended in a horizontal sum of its own, which cost more than its eight
 * FMAs at d = 64 (the scores were ~60 % of decode attention). */
void mx_attn_scores_avx2(const float *q, const float *K, size_t ldk, int n, int d, float scale, float *out) {
    int k = 0;
    if (d % 8 == 0) {
        const __m256 vs = _mm256_set1_ps(scale);
        for (; k + 8 <= n; k += 8) {
            __m256 a[8];
            const float *kr = K + (size_t)k * ldk;
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
            for (int c = 0; c < d; c += 8) {
                __m256 qv = _mm256_loadu_ps(q + c);
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + (size_t)j * ldk + c), a[j]);
            }
            /* lane j of the sum of the two halves below is key j's total */
            __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
            __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
            __m256 r = _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
            _mm256_storeu_ps(out + k, _mm256_mul_ps(r, vs));
        }
    }
    for (; k < n; k++) out[k] = dot_avx2(q, K + (size_t)k * ldk, d) * scale;
}

/* y = sum_k p[k] * V[k] with y in registers (NV vectors of 8): per element
 * the same fma sequence as repeated mx_axpy_avx2 from zero. */
static inline __attribute__((always_inline)) void mix_regs(float *y, const float *p, const float *V, size_t ldv, int n, const int NV, bool from_y) {
    __m256 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < NV; i++) acc[i] = from_y ? _mm256_loadu_ps(y + 8 * i) : _mm256_setzero_ps();
    for (int k = 0; k < n; k++) {
        __m256 va = _mm256_set1_ps(p[k]);
        const float *v = V + (size_t)k * ldv;
#pragma GCC unroll 16
        for (int i = 0; i < NV; i++) acc[i] = _mm256_fmadd_ps(va, _mm256_loadu_ps(v + 8 * i), acc[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < NV; i++) _mm256_storeu_ps(y + 8 * i, acc[i]);
}

void mx_attn_mix_avx2(float *y, const float *p, const float *V, size_t ldv, int n, int d, bool acc) {
    switch (d) {
    case 64: mix_regs(y, p, V, ldv, n, 8, acc); return;
    case 128: mix_regs(y, p, V, ldv, n, 16, acc); return;
    default:
        if (!acc) memset(y, 0, (size_t)d * sizeof(float));
        for (int k = 0; k < n; k++) mx_axpy_avx2(y, p[k], V + (size_t)k * ldv, d);
    }
}

void mx_axpy_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 y0 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
        __m256 y1 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8));
        __m256 y2 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16));
        __m256 y3 = _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24));
        _mm256_storeu_ps(y + i, y0);
        _mm256_storeu_ps(y + i + 8, y1);
        _mm256_storeu_ps(y + i + 16, y2);
        _mm256_storeu_ps(y + i + 24, y3);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

void mx_add_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

void mx_scale_avx2(float *y, float a, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; i++) y[i] *= a;
}

void mx_rmsnorm_row_avx2(float *y, const float *x, const float *w, float w_offset, int d, float eps) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    for (; i + 32 <= d; i += 32) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        __m256 c = _mm256_loadu_ps(x + i + 16), e = _mm256_loadu_ps(x + i + 24);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
        s2 = _mm256_fmadd_ps(c, c, s2);
        s3 = _mm256_fmadd_ps(e, e, s3);
    }
    for (; i + 8 <= d; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i);
        s0 = _mm256_fmadd_ps(a, a, s0);
    }
    float ss = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < d; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)d + eps);
    __m256 vi = _mm256_set1_ps(inv), vo = _mm256_set1_ps(w_offset);
    i = 0;
    if (w) {
        for (; i + 8 <= d; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi),
                                                  _mm256_add_ps(_mm256_loadu_ps(w + i), vo)));
        for (; i < d; i++) y[i] = x[i] * inv * (w[i] + w_offset);
    } else {
        for (; i + 8 <= d; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
        for (; i < d; i++) y[i] = x[i] * inv;
    }
}

float mx_max_avx2(const float *x, int n) {
    __m256 vm = _mm256_set1_ps(-INFINITY);
    int i = 0;
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    float m = hmax(vm);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* Two passes instead of the scan's dependent compares (a 1B model's 128256
 * logits: 0.57 ms a token, 5 % of a 4-bit decode step): the maximum over
 * the non-NaN values (vmaxps returns its second operand where the first is
 * NaN), then the first index holding it. */
int32_t mx_argmax_avx2(const float *x, int n) {
    if (n <= 0 || x[0] != x[0]) return 0;
    __m256 v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm256_set1_ps(x[0]);
    int i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) v[k] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * k), v[k]);
    for (; i + 8 <= n; i += 8) v[0] = _mm256_max_ps(_mm256_loadu_ps(x + i), v[0]);
    float m = hmax(_mm256_max_ps(_mm256_max_ps(v[0], v[1]), _mm256_max_ps(v[2], v[3])));
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    const __m256 vm = _mm256_set1_ps(m);
    for (i = 0; i + 8 <= n; i += 8) {
        int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vm, _CMP_EQ_OQ));
        if (mask) return i + __builtin_ctz((unsigned)mask);
    }
    for (; i < n; i++)
        if (x[i] == m) return i;
    return 0;
}

void mx_exp_acc_avx2(float *x, int n, float sub, float acc[8], int lane0) {
    __m256 vm = _mm256_set1_ps(sub);
    int i = 0;
    if ((lane0 & 7) == 0) {
        __m256 va = _mm256_loadu_ps(acc);
        for (; i + 8 <= n; i += 8) {
            __m256 e = vexp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
            _mm256_storeu_ps(x + i, e);
            va = _mm256_add_ps(va, e);
        }
        _mm256_storeu_ps(acc, va);
    } else
        for (; i + 8 <= n; i += 8) {
            __m256 e = vexp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
            _mm256_storeu_ps(x + i, e);
            for (int l = 0; l < 8; l++) acc[(lane0 + i + l) & 7] += x[i + l];
        }
    if (i < n) { /* the same vexp on the tail's lanes */
        __m256i mk = tailmask(n - i);
        _mm256_maskstore_ps(x + i, mk, vexp(_mm256_sub_ps(_mm256_maskload_ps(x + i, mk), vm)));
        for (; i < n; i++) acc[(lane0 + i) & 7] += x[i];
    }
}

void mx_softmax_avx2(float *x, int n) {
    if (n <= 0) return;
    float m = mx_max_avx2(x, n);
    int i;
    if (m == -INFINITY) {
        for (i = 0; i < n; i++) x[i] = 0;
        return;
    }
    __m256 vm = _mm256_set1_ps(m);
    __m256 vs = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = vexp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        vs = _mm256_add_ps(vs, e);
    }
    if (i < n) {
        __m256i mk = tailmask(n - i);
        __m256 e = _mm256_and_ps(vexp(_mm256_sub_ps(_mm256_maskload_ps(x + i, mk), vm)), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(x + i, mk, e);
        vs = _mm256_add_ps(vs, e);
    }
    __m256 inv = _mm256_set1_ps(1.0f / hsum(vs));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    float s = _mm256_cvtss_f32(inv);
    for (; i < n; i++) x[i] *= s;
}

/* x * sigmoid(k * z) with z = x (silu) or the gelu-tanh argument. */
AI __m256 silu8(__m256 x) {
    __m256 e = vexp(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* 0.5 x (1 + tanh(z)) = x * sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3) */
AI __m256 gelut8(__m256 x) {
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 z2 = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(2.0f * 0.7978845608028654f)),
                              _mm256_fmadd_ps(x2, _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f)));
    __m256 e = vexp(_mm256_sub_ps(_mm256_setzero_ps(), z2));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#define ACT_MUL(NAME, F)                                                                                     \
    void NAME(float *gate, const float *up, int n) {                                                        \
        int i = 0;                                                                                           \
        for (; i + 8 <= n; i += 8) {                                                                         \
            __m256 g = F(_mm256_loadu_ps(gate + i));                                                         \
            if (up) g = _mm256_mul_ps(g, _mm256_loadu_ps(up + i));                                           \
            _mm256_storeu_ps(gate + i, g);                                                                   \
        }                                                                                                    \
        if (i < n) {                                                                                         \
            __m256i mk = tailmask(n - i);                                                                    \
            __m256 g = F(_mm256_maskload_ps(gate + i, mk));                                                  \
            if (up) g = _mm256_mul_ps(g, _mm256_maskload_ps(up + i, mk));                                    \
            _mm256_maskstore_ps(gate + i, mk, g);                                                            \
        }                                                                                                    \
    }
ACT_MUL(mx_silu_mul_avx2, silu8)
ACT_MUL(mx_gelu_tanh_mul_avx2, gelut8)
