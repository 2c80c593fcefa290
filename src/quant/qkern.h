/* qkern.h: the SIMD quantized kernels, written once over a small vector
 * vocabulary that qmatmul_avx2.c (VL = 8, ymm) and qmatmul_avx512.c
 * (VL = 16, zmm) define before including this file:
 *   vf/vi, VL, VF_ZERO, VF_LD, VF_ST, VF_SET1, VF_FMA(a,b,c)=a*b+c, VF_MUL,
 *   VF_ADD, VF_HSUM, VF_SPLIT2(a,b) (low half a, high half b), VI_U8(p)
 *   (VL bytes zero-extended to VL int32), VI_AND(v,imm), VI_SRL(v,n),
 *   VI_CVT (int32 -> f32), VF_FP4(v) (4-bit E2M1 codes in int32 lanes ->
 *   their f32 values), VF_E4M3(p) (VL E4M3 bytes -> their values x 2^-8),
 *   VI_BITS(p, avail, B) (VL codes of B bits from MLX's packed stream at p,
 *   `avail` bytes readable), QK(name).
 *
 * Decode (n = 1) streams each row once, two rows at a time sharing the x
 * loads. Prefill (n > 1) dequantizes a panel of 2*VL rows x 256 columns once
 * into a transposed f32 buffer and runs a 2*VL-row x 6-token outer-product
 * micro-kernel over every token against it. 4-bit formats read x in the
 * "perm" order set up by mx_qmatmul (even columns then odd ones per chunk of
 * 2*VL), which lets low and high nibbles be used without shuffles. */
#define QK_RB (3 * VL)
#define QK_KC 128
#define QK_NT 8
#define QK_GB 256 /* groups whose scales are converted at once */
#ifndef QK_PF
#define QK_PF 4096 /* software prefetch distance (bytes) in the 4-bit decode streams */
#endif
#ifndef VF_NIB
#define VF_NIB(v) VI_CVT(v) /* 4-bit code (0..15) -> f32 */
#endif
/* Two rows (p0, p1) of 4-bit codes for columns k..k+2VL (low nibbles the
 * first VL, high ones the next, kernel order), decoded by DEC, into the low
 * and high sums l0/h0 and l1/h1. */
#define QK_NIB2(DEC)                                                     \
    do {                                                                 \
        vf xl_ = VF_LD(x + k), xh_ = VF_LD(x + k + VL);                  \
        vi v0_ = VI_U8(p0 + k / 2), v1_ = VI_U8(p1 + k / 2);             \
        l0 = VF_FMA(DEC(VI_AND(v0_, 15)), xl_, l0);                      \
        h0 = VF_FMA(DEC(VI_SRL(v0_, 4)), xh_, h0);                       \
        l1 = VF_FMA(DEC(VI_AND(v1_, 15)), xl_, l1);                      \
        h1 = VF_FMA(DEC(VI_SRL(v1_, 4)), xh_, h1);                       \
    } while (0)

static inline bool QK(is_affine4)(const mxq_ctx *c) { return c->w->fmt == MX_W_AFFINE && c->w->bits == 4 && c->perm == VL; }
static inline bool QK(is_fp4)(const mxq_ctx *c) { return (c->w->fmt == MX_W_MXFP4 || c->w->fmt == MX_W_NVFP4) && c->perm == VL; }

/* ---- dequantization of a row chunk into kernel order (prefill) ---- */
static void QK(deq)(const mxq_ctx *c, int r, int c0, int len, float *out) {
    const mx_weight *w = c->w;
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    bool a8 = w->fmt == MX_W_AFFINE && w->bits == 8, f8 = w->fmt == MX_W_MXFP8 || w->fmt == MX_W_FP8B;
    bool ab = w->fmt == MX_W_AFFINE && !a8 && w->bits != 4; /* 1, 2, 3, 5, 6 bits */
    if (!QK(is_affine4)(c) && !QK(is_fp4)(c) && !a8 && !f8 && !ab) { mxq_deq(w, r, c0, len, out); return; }
    float S[QK_KC / 16 + 2], B[QK_KC / 16 + 2];
    int g0 = c0 / w->group, gn = (c0 + len - 1) / w->group - g0 + 1;
    mxq_scales(w, r, g0, gn, S, w->fmt == MX_W_AFFINE ? B : NULL);
    if (QK(is_affine4)(c)) {
        for (int k = c0; k < c0 + len; k += 2 * VL) {
            int g = k / w->group - g0;
            vf s = VF_SET1(S[g]), b = VF_SET1(B[g]);
            vi v = VI_U8(row + k / 2);
            VF_ST(out + k - c0, VF_FMA(VI_CVT(VI_AND(v, 15)), s, b));
            VF_ST(out + k - c0 + VL, VF_FMA(VI_CVT(VI_SRL(v, 4)), s, b));
        }
        return;
    }
    if (QK(is_fp4)(c)) {
        for (int k = c0; k < c0 + len; k += 2 * VL) {
            int g = k / w->group - g0;
            vf s = w->group >= 2 * VL ? VF_SET1(S[g]) : VF_SPLIT2(S[g], S[g + 1]);
            vi v = VI_U8(row + k / 2);
            VF_ST(out + k - c0, VF_MUL(VF_FP4(VI_AND(v, 15)), s));
            VF_ST(out + k - c0 + VL, VF_MUL(VF_FP4(VI_SRL(v, 4)), s));
        }
        return;
    }
    for (int k = c0; k < c0 + len;) {
        int g = k / w->group, ge = MX_MIN((g + 1) * w->group, c0 + len);
        float sc = S[g - g0];
        if (a8) {
            vf s = VF_SET1(sc), b = VF_SET1(B[g - g0]);
            for (; k + VL <= ge; k += VL) VF_ST(out + k - c0, VF_FMA(VI_CVT(VI_U8(row + k)), s, b));
        } else if (ab) {
            vf s = VF_SET1(sc), b = VF_SET1(B[g - g0]);
            for (; !(k & 7) && k + VL <= ge; k += VL) {
                size_t o = (size_t)k * (size_t)w->bits / 8;
                VF_ST(out + k - c0, VF_FMA(VI_CVT(VI_BITS(row + o, w->row_bytes - o, w->bits)), s, b));
            }
        } else {
            float f = sc * 0x1p8f;
            if (f == f && f - f == 0) { /* finite: exact in one rounding */
                vf s = VF_SET1(f);
                for (; k + VL <= ge; k += VL) VF_ST(out + k - c0, VF_MUL(VF_E4M3(row + k), s));
            }
        }
        if (k < ge) { mxq_deq(w, r, k, ge - k, out + k - c0); k = ge; }
    }
}

/* ---- prefill: transposed panel x outer-product micro-kernel ---- */
static inline __attribute__((always_inline)) void QK(micro)(int nt, const float *wT, int len, const float *x, int ldx, float *y, int ldy, int nr) {
    vf a0[QK_NT], a1[QK_NT], a2[QK_NT];
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = a2[t] = VF_ZERO();
    for (int k = 0; k < len; k++) {
        vf w0 = VF_LD(wT + (size_t)k * QK_RB), w1 = VF_LD(wT + (size_t)k * QK_RB + VL), w2 = VF_LD(wT + (size_t)k * QK_RB + 2 * VL);
        for (int t = 0; t < nt; t++) {
            vf xb = VF_SET1(x[(size_t)t * ldx + k]);
            a0[t] = VF_FMA(w0, xb, a0[t]);
            a1[t] = VF_FMA(w1, xb, a1[t]);
            a2[t] = VF_FMA(w2, xb, a2[t]);
        }
    }
    for (int t = 0; t < nt; t++) {
        float *yt = y + (size_t)t * ldy;
        if (nr == QK_RB) {
            VF_ST(yt, VF_ADD(VF_LD(yt), a0[t]));
            VF_ST(yt + VL, VF_ADD(VF_LD(yt + VL), a1[t]));
            VF_ST(yt + 2 * VL, VF_ADD(VF_LD(yt + 2 * VL), a2[t]));
        } else {
            float tmp[QK_RB];
            VF_ST(tmp, a0[t]);
            VF_ST(tmp + VL, a1[t]);
            VF_ST(tmp + 2 * VL, a2[t]);
            for (int i = 0; i < nr; i++) yt[i] += tmp[i];
        }
    }
}

static void QK(gemm)(const mxq_ctx *c, int r0, int r1) {
    const mx_weight *w = c->w;
    _Alignas(64) float wT[QK_KC * QK_RB];
    _Alignas(64) float tmp[QK_KC];
    for (int t = 0; t < c->n; t++) memset(c->y + (size_t)t * c->ldy + r0, 0, (size_t)(r1 - r0) * sizeof(float));
    for (int rb = r0; rb < r1; rb += QK_RB) {
        int nr = MX_MIN(QK_RB, r1 - rb);
        for (int kc = 0; kc < w->cols; kc += QK_KC) {
            int len = MX_MIN(QK_KC, w->cols - kc);
            for (int i = 0; i < QK_RB; i++) {
                if (i < nr) QK(deq)(c, rb + i, kc, len, tmp);
                else memset(tmp, 0, (size_t)len * sizeof(float));
                for (int k = 0; k < len; k++) wT[(size_t)k * QK_RB + i] = tmp[k];
            }
            for (int t = 0; t < c->n; t += QK_NT) {
                int nt = MX_MIN(QK_NT, c->n - t);
                const float *xt = c->x + (size_t)t * c->ldx + kc;
                float *yt = c->y + (size_t)t * c->ldy + rb;
                switch (nt) {
                case 8: QK(micro)(8, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                case 7: QK(micro)(7, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                case 6: QK(micro)(6, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                case 5: QK(micro)(5, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                case 4: QK(micro)(4, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                case 3: QK(micro)(3, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                case 2: QK(micro)(2, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                default: QK(micro)(1, wT, len, xt, c->ldx, yt, c->ldy, nr); break;
                }
            }
        }
    }
}

/* ---- decode: one token, rows in pairs sharing x ---- */
/* Affine rows: y = s * sum(code * x) + b * sum(x) per group. KIND says how a
 * group's codes are read: 4 (nibbles; x in the perm order), 8 (bytes), or 0
 * (any width, VL at a time from the bit stream). */
static inline __attribute__((always_inline)) void QK(dec_aff)(const mxq_ctx *c, int r, int nr, float *out, const int kind) {
    const mx_weight *w = c->w;
    int ng = w->cols / w->group, B = w->bits;
    const float *x = c->x;
    size_t rb = w->row_bytes;
    const uint8_t *p0 = w->data + (size_t)r * rb, *p1 = nr > 1 ? p0 + rb : p0;
    vf acc0 = VF_ZERO(), acc1 = VF_ZERO();
    float b0 = 0, b1 = 0;
    float S0[QK_GB], B0[QK_GB], S1[QK_GB], B1[QK_GB];
    for (int g = 0; g < ng; g++) {
        if (g % QK_GB == 0) {
            int n = MX_MIN(QK_GB, ng - g);
            mxq_scales(w, r, g, n, S0, B0);
            if (nr > 1) mxq_scales(w, r + 1, g, n, S1, B1);
        }
        vf l0 = VF_ZERO(), h0 = VF_ZERO(), l1 = VF_ZERO(), h1 = VF_ZERO();
        int k = g * w->group, ke = k + w->group;
        for (size_t o = (size_t)k * B / 8; o < (size_t)ke * B / 8; o += 64) {
            _mm_prefetch((const char *)p0 + o + QK_PF, _MM_HINT_T0);
            _mm_prefetch((const char *)p1 + o + QK_PF, _MM_HINT_T0);
        }
        if (kind == 4)
            for (; k < ke; k += 2 * VL) QK_NIB2(VF_NIB);
        else if (kind == 8) {
            for (; k + 2 * VL <= ke; k += 2 * VL) {
                vf xa = VF_LD(x + k), xb = VF_LD(x + k + VL);
                l0 = VF_FMA(VI_CVT(VI_U8(p0 + k)), xa, l0);
                h0 = VF_FMA(VI_CVT(VI_U8(p0 + k + VL)), xb, h0);
                l1 = VF_FMA(VI_CVT(VI_U8(p1 + k)), xa, l1);
                h1 = VF_FMA(VI_CVT(VI_U8(p1 + k + VL)), xb, h1);
            }
            for (; k < ke; k += VL) { /* group of VL (not reached for group >= 32) */
                vf xa = VF_LD(x + k);
                l0 = VF_FMA(VI_CVT(VI_U8(p0 + k)), xa, l0);
                l1 = VF_FMA(VI_CVT(VI_U8(p1 + k)), xa, l1);
            }
        } else
            for (; k < ke; k += VL) { /* the group is a multiple of VL */
                size_t o = (size_t)k * (size_t)B / 8;
                vf xv = VF_LD(x + k);
                l0 = VF_FMA(VI_CVT(VI_BITS(p0 + o, rb - o, B)), xv, l0);
                if (nr > 1) l1 = VF_FMA(VI_CVT(VI_BITS(p1 + o, rb - o, B)), xv, l1);
            }
        float xs = c->xs[g];
        int gi = g % QK_GB;
        acc0 = VF_FMA(kind ? VF_ADD(l0, h0) : l0, VF_SET1(S0[gi]), acc0);
        b0 += B0[gi] * xs;
        if (nr > 1) {
            acc1 = VF_FMA(kind ? VF_ADD(l1, h1) : l1, VF_SET1(S1[gi]), acc1);
            b1 += B1[gi] * xs;
        }
    }
    out[0] = VF_HSUM(acc0) + b0;
    if (nr > 1) out[1] = VF_HSUM(acc1) + b1;
}
static void QK(dec_affine4)(const mxq_ctx *c, int r, int nr, float *out) { QK(dec_aff)(c, r, nr, out, 4); }
static void QK(dec_affine8)(const mxq_ctx *c, int r, int nr, float *out) { QK(dec_aff)(c, r, nr, out, 8); }
static void QK(dec_affbits)(const mxq_ctx *c, int r, int nr, float *out) { QK(dec_aff)(c, r, nr, out, 0); }

static void QK(dec_fp4)(const mxq_ctx *c, int r, int nr, float *out) {
    const mx_weight *w = c->w;
    const float *x = c->x;
    const uint8_t *p0 = w->data + (size_t)r * w->row_bytes, *p1 = nr > 1 ? p0 + w->row_bytes : p0;
    vf acc0 = VF_ZERO(), acc1 = VF_ZERO(), acc2 = VF_ZERO(), acc3 = VF_ZERO();
    float S0[QK_GB], S1[QK_GB];
    int ng = w->cols / w->group;
    if (w->group >= 2 * VL) {
        for (int g = 0; g < ng; g++) {
            if (g % QK_GB == 0) {
                int n = MX_MIN(QK_GB, ng - g);
                mxq_scales(w, r, g, n, S0, NULL);
                if (nr > 1) mxq_scales(w, r + 1, g, n, S1, NULL);
            }
            vf l0 = VF_ZERO(), h0 = VF_ZERO(), l1 = VF_ZERO(), h1 = VF_ZERO();
            if ((g * w->group / 2) % 64 == 0) {
                _mm_prefetch((const char *)p0 + g * w->group / 2 + QK_PF, _MM_HINT_T0);
                _mm_prefetch((const char *)p1 + g * w->group / 2 + QK_PF, _MM_HINT_T0);
            }
            for (int k = g * w->group; k < (g + 1) * w->group; k += 2 * VL) QK_NIB2(VF_FP4);
            acc0 = VF_FMA(VF_ADD(l0, h0), VF_SET1(S0[g % QK_GB]), acc0);
            if (nr > 1) acc1 = VF_FMA(VF_ADD(l1, h1), VF_SET1(S1[g % QK_GB]), acc1);
        }
    } else { /* two groups per chunk (nvfp4 with VL = 16): per-lane scales */
        for (int k = 0; k < w->cols; k += 2 * VL) {
            int g = k / w->group;
            if (g % QK_GB == 0) { /* QK_GB is even: a chunk's two groups share a block */
                int n = MX_MIN(QK_GB, ng - g);
                mxq_scales(w, r, g, n, S0, NULL);
                if (nr > 1) mxq_scales(w, r + 1, g, n, S1, NULL);
            }
            g %= QK_GB;
            if ((k / 2) % 64 == 0) {
                _mm_prefetch((const char *)p0 + k / 2 + QK_PF, _MM_HINT_T0);
                _mm_prefetch((const char *)p1 + k / 2 + QK_PF, _MM_HINT_T0);
            }
            vf xl = VF_LD(x + k), xh = VF_LD(x + k + VL);
            vf s0 = VF_SPLIT2(S0[g], S0[g + 1]);
            vi v0 = VI_U8(p0 + k / 2);
            acc0 = VF_FMA(VF_MUL(VF_FP4(VI_AND(v0, 15)), s0), xl, acc0);
            acc2 = VF_FMA(VF_MUL(VF_FP4(VI_SRL(v0, 4)), s0), xh, acc2);
            if (nr > 1) {
                vf s1 = VF_SPLIT2(S1[g], S1[g + 1]);
                vi v1 = VI_U8(p1 + k / 2);
                acc1 = VF_FMA(VF_MUL(VF_FP4(VI_AND(v1, 15)), s1), xl, acc1);
                acc3 = VF_FMA(VF_MUL(VF_FP4(VI_SRL(v1, 4)), s1), xh, acc3);
            }
        }
    }
    out[0] = VF_HSUM(VF_ADD(acc0, acc2));
    if (nr > 1) out[1] = VF_HSUM(VF_ADD(acc1, acc3));
}

static void QK(dec_fp8)(const mxq_ctx *c, int r, int nr, float *out) {
    const mx_weight *w = c->w;
    const float *x = c->x;
    int ng = mxq_ngroups(w);
    for (int i = 0; i < nr; i++) {
        const uint8_t *p = w->data + (size_t)(r + i) * w->row_bytes;
        vf a0 = VF_ZERO(), a1 = VF_ZERO();
        float tail = 0, S0[QK_GB];
        for (int g = 0; g < ng; g++) {
            if (g % QK_GB == 0) mxq_scales(w, r + i, g, MX_MIN(QK_GB, ng - g), S0, NULL);
            int k = g * w->group, ke = MX_MIN(k + w->group, w->cols);
            for (int o = k; o < ke; o += 64) _mm_prefetch((const char *)p + o + QK_PF, _MM_HINT_T0);
            float sc = S0[g % QK_GB], f = sc * 0x1p8f;
            if (f == f && f - f == 0) {
                vf s = VF_SET1(f);
                for (; k + 2 * VL <= ke; k += 2 * VL) {
                    vf wa = VF_MUL(VF_E4M3(p + k), s);
                    vf wb = VF_MUL(VF_E4M3(p + k + VL), s);
                    a0 = VF_FMA(wa, VF_LD(x + k), a0);
                    a1 = VF_FMA(wb, VF_LD(x + k + VL), a1);
                }
            }
            for (; k < ke; k++) tail += mxq_e4m3(p[k]) * sc * x[k];
        }
        out[i] = VF_HSUM(VF_ADD(a0, a1)) + tail;
    }
}

static void QK(dec_generic)(const mxq_ctx *c, int r, int nr, float *out) {
    const mx_weight *w = c->w;
    _Alignas(64) float buf[QK_KC];
    for (int i = 0; i < nr; i++) {
        vf a0 = VF_ZERO();
        float tail = 0;
        for (int c0 = 0; c0 < w->cols; c0 += QK_KC) {
            int len = MX_MIN(QK_KC, w->cols - c0), k = 0;
            mxq_deq(w, r + i, c0, len, buf);
            for (; k + VL <= len; k += VL) a0 = VF_FMA(VF_LD(buf + k), VF_LD(c->x + c0 + k), a0);
            for (; k < len; k++) tail += buf[k] * c->x[c0 + k];
        }
        out[i] = VF_HSUM(a0) + tail;
    }
}

void QK(mxq_mm)(const mxq_ctx *c, int r0, int r1) {
    if (c->n > 1 || c->invariant) { QK(gemm)(c, r0, r1); return; }
    const mx_weight *w = c->w;
    void (*fn)(const mxq_ctx *, int, int, float *) = QK(dec_generic);
    if (QK(is_affine4)(c)) fn = QK(dec_affine4);
    else if (QK(is_fp4)(c)) fn = QK(dec_fp4);
    else if (w->fmt == MX_W_AFFINE && w->bits == 8) fn = QK(dec_affine8);
    else if (w->fmt == MX_W_AFFINE && c->xs && w->group % VL == 0 && w->cols % w->group == 0) fn = QK(dec_affbits);
    else if (w->fmt == MX_W_MXFP8 || w->fmt == MX_W_FP8B) fn = QK(dec_fp8);
    for (int r = r0; r < r1; r += 2) {
        float o[2];
        int nr = MX_MIN(2, r1 - r);
        fn(c, r, nr, o);
        for (int i = 0; i < nr; i++) c->y[r + i] = o[i];
    }
}
