/* Quantized weights: decoders against the README formulas, every format x
 * bits x group through every kernel dispatch level against dequantize-then-
 * multiply, quantizers, binding with hostile configs, and the fixtures'
 * modules when tests/fixtures/mlxq_* are present. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "base/cpu.h"
#include "base/half.h"
#include "base/threadpool.h"
#include "format/checkpoint.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "quant/quant_impl.h"
#include "convert/convert.h"
#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

/* ---- independent decoders written from the README ---- */
static double ref_e4m3(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return (b & 0x80) ? -v : v;
}
static double ref_e2m1(uint8_t n) {
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (n & 8) ? -mag[n & 7] : mag[n & 7];
}
static unsigned ref_code(const uint8_t *row, int c, int bits) { /* LSB-first stream, bit by bit */
    unsigned v = 0;
    for (int i = 0; i < bits; i++) {
        size_t bit = (size_t)c * bits + i;
        v |= (unsigned)((row[bit / 8] >> (bit % 8)) & 1) << i;
    }
    return v;
}
static float rd(const uint8_t *p, mx_dtype dt, size_t i) {
    if (dt == MX_DT_F32) { float f; memcpy(&f, p + 4 * i, 4); return f; }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return dt == MX_DT_F16 ? mx_f16_to_f32(h) : mx_bf16_to_f32(h);
}
static float ref_elem(const mx_weight *w, int r, int c) {
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    int ng = (w->cols + w->group - 1) / w->group, g = c / w->group;
    switch (w->fmt) {
    case MX_W_AFFINE: {
        float s = rd(w->scales, w->scale_dtype, (size_t)r * ng + g), b = rd(w->biases, w->scale_dtype, (size_t)r * ng + g);
        volatile float p = s * (float)ref_code(row, c, w->bits);
        return p + b;
    }
    case MX_W_MXFP4: return (float)(ref_e2m1((uint8_t)ref_code(row, c, 4)) * ldexp(1.0, w->scales[(size_t)r * ng + g] - 127));
    case MX_W_NVFP4: return (float)(ref_e2m1((uint8_t)ref_code(row, c, 4)) * ref_e4m3(w->scales[(size_t)r * ng + g]));
    case MX_W_MXFP8: return (float)(ref_e4m3(row[c]) * ldexp(1.0, w->scales[(size_t)r * ng + g] - 127));
    case MX_W_FP8B: {
        float s;
        memcpy(&s, w->scales + 4 * ((size_t)(r / 128) * ng + g), 4);
        return (float)ref_e4m3(row[c]) * s;
    }
    default: return NAN;
    }
}

/* ---- synthetic weights with random codes (every code value occurs) ---- */
typedef struct {
    mx_weight w;
    uint8_t *buf;
} tw;

static void store_sc(uint8_t *p, mx_dtype dt, size_t i, float v) {
    if (dt == MX_DT_F32) memcpy(p + 4 * i, &v, 4);
    else {
        uint16_t h = dt == MX_DT_F16 ? mx_f32_to_f16(v) : mx_f32_to_bf16(v);
        memcpy(p + 2 * i, &h, 2);
    }
}

static tw make_tw(mx_wfmt fmt, int bits, int group, int rows, int cols, mx_dtype sdt, unsigned seed) {
    tw t;
    memset(&t, 0, sizeof t);
    mx_weight *w = &t.w;
    w->fmt = fmt;
    w->rows = rows;
    w->cols = cols;
    w->bits = bits;
    w->group = group;
    w->row_bytes = fmt == MX_W_FP8B ? (size_t)cols : (size_t)cols * bits / 8;
    int ng = (cols + group - 1) / group;
    size_t srows = fmt == MX_W_FP8B ? (size_t)(rows + 127) / 128 : (size_t)rows;
    size_t es = fmt == MX_W_AFFINE ? mx_dtype_size(sdt) : fmt == MX_W_FP8B ? 4 : 1;
    size_t np = (size_t)rows * w->row_bytes, ns = srows * ng * es;
    t.buf = calloc(np + 2 * ns + 64, 1);
    uint8_t *p = t.buf + 1, *s = p + np + 3, *b = s + ns + 5; /* deliberately unaligned */
    for (size_t i = 0; i < np; i++) p[i] = (uint8_t)t_rng(&seed);
    for (size_t i = 0; i < srows * ng; i++) {
        switch (fmt) {
        case MX_W_AFFINE:
            store_sc(s, sdt, i, 0.05f * t_randf(&seed));
            store_sc(b, sdt, i, 0.2f * t_randf(&seed));
            break;
        case MX_W_MXFP4: case MX_W_MXFP8: s[i] = (uint8_t)(118 + t_rng(&seed) % 12); break;
        case MX_W_NVFP4: s[i] = (uint8_t)(0x18 + t_rng(&seed) % 0x30); break;
        case MX_W_FP8B: { float f = 1e-3f * (1 + 9 * (t_randf(&seed) + 1)); memcpy(s + 4 * i, &f, 4); break; }
        default: break;
        }
    }
    w->data = p;
    w->scales = s;
    w->biases = fmt == MX_W_AFFINE ? b : NULL;
    w->scale_dtype = fmt == MX_W_AFFINE ? sdt : fmt == MX_W_FP8B ? MX_DT_F32 : MX_DT_U8;
    return t;
}

/* Checks mx_weight_row against the README formulas, exactly. */
static int check_rows(const mx_weight *w, char *why, size_t whylen) {
    float *row = malloc((size_t)w->cols * sizeof(float));
    int bad = 0;
    for (int r = 0; r < w->rows && !bad; r++) {
        mx_weight_row(w, r, row);
        for (int c = 0; c < w->cols; c++) {
            float e = ref_elem(w, r, c);
            if (memcmp(&e, &row[c], 4) && !(e == row[c])) {
                snprintf(why, whylen, "row %d col %d: %.9g, README formula gives %.9g", r, c, row[c], e);
                bad = 1;
                break;
            }
        }
    }
    free(row);
    return bad;
}

/* Kernel vs dequantize-then-multiply, for several n, with and without a pool.
 * act8: the fast mode's 8-bit codes (each x off by max|x| of its group /
 * (2 * 127)). On the int8 path each token's row must also be, bit for bit,
 * what the token gives alone (the batched kernels take 16 or 32 rows a pass,
 * Winograd's from MXQ_WG_MIN tokens). */
static int check_mm(const mx_weight *w, mx_pool *pool, bool act8, char *why, size_t whylen) {
    static const int ns[] = {1, 2, 5, 7, 13, 29}; /* 29: Winograd's pairing (MXQ_WG_MIN), 3 passes of 8 and one of 5 */
    unsigned seed = 99;
    for (size_t in = 0; in < MX_ARRAY_LEN(ns); in++) {
        int n = ns[in], ldx = w->cols + 3, ldy = w->rows + 5;
        float *x = malloc(sizeof(float) * (size_t)n * ldx), *y = malloc(sizeof(float) * (size_t)n * ldy),
              *yr = malloc(sizeof(float) * (size_t)n * ldy), *row = malloc(sizeof(float) * (size_t)w->cols);
        for (int i = 0; i < n * ldx; i++) x[i] = t_randf(&seed);
        for (int i = 0; i < n * ldy; i++) y[i] = yr[i] = 12345.0f;
        unsigned long c0 = mx_qmatmul_int8_calls();
        mx_kpolicy kp = mx_kpolicy_on(pool);
        kp.act8 = act8;
        mx_matmul(w, x, n, ldx, y, ldy, &kp);
        bool int8 = mx_qmatmul_int8_calls() != c0;
        const double lim = act8 ? 127.0 : 2047.0;
        mx_matmul_ref(w, x, n, ldx, yr, ldy);
        int bad = 0;
        for (int r = 0; r < w->rows && !bad; r++) {
            mx_weight_row(w, r, row);
            for (int t = 0; t < n; t++) {
                double mag = 0, coded = 0;
                for (int c = 0; c < w->cols; c++) mag += fabs((double)row[c] * x[(size_t)t * ldx + c]);
                /* int8 path (12-bit codes of x): each x is off by at most
                 * max|x| of its group / (2 * 2047) */
                for (int g = 0; int8 && g < w->cols / w->group; g++) {
                    double am = 0, sw = 0;
                    for (int c = g * w->group; c < (g + 1) * w->group; c++) {
                        am = fmax(am, fabs((double)x[(size_t)t * ldx + c]));
                        sw += fabs((double)row[c]);
                    }
                    coded += sw * am / (2.0 * lim);
                }
                float a = y[(size_t)t * ldy + r], b = yr[(size_t)t * ldy + r];
                if (!(fabs((double)a - b) <= 2e-6 * mag + coded + 1e-30)) {
                    snprintf(why, whylen, "n=%d t=%d r=%d: %.8g vs ref %.8g (|w||x| %.3g%s)", n, t, r, a, b, mag, int8 ? ", int8" : "");
                    bad = 1;
                    break;
                }
            }
        }
        if (int8 && n > 1) { /* y1: one token's outputs, computed alone */
            float *y1 = malloc(sizeof(float) * (size_t)w->rows);
            for (int t = 0; t < n && !bad; t++) {
                mx_matmul(w, x + (size_t)t * ldx, 1, ldx, y1, w->rows, &kp);
                int rd = 0;
                while (rd < w->rows && !memcmp(y1 + rd, y + (size_t)t * ldy + rd, sizeof(float))) rd++;
                if (rd < w->rows) {
                    snprintf(why, whylen, "%sn=%d t=%d: batched row %d differs from the token alone (%.9g vs %.9g)", act8 ? "act8 " : "", n, t, rd,
                             y[(size_t)t * ldy + rd], y1[rd]);
                    bad = 1;
                }
            }
            free(y1);
        }
        for (int t = 0; t < n && !bad; t++) /* padding past rows untouched */
            for (int r = w->rows; r < ldy; r++)
                if (y[(size_t)t * ldy + r] != 12345.0f) { snprintf(why, whylen, "wrote past rows (t=%d r=%d)", t, r); bad = 1; break; }
        free(x); free(y); free(yr); free(row);
        if (bad) return 1;
    }
    return 0;
}

typedef struct { mx_wfmt fmt; int bits, group, rows, cols; mx_dtype sdt; } spec;

/* The VBMI build of the one-token E2M1 kernel gives the other's bits (E8M0
 * and E4M3 scales, both streams of a pair and the blocks left alone). */
/* The int8 path's integer sums at their extremes: 8-bit codes of 255 or 0
 * in groups of 128 (Winograd's kernel) and 64 (the two-block kernel that
 * reads the 12-bit codes as they are) against x at +-max (b' = 4095 or 1)
 * give the many-token kernels' largest int32 sums; each must give the
 * one-token kernel's bits and stay within the coding bound of the reference. */
static void extreme_tests(mx_pool *pool) {
    if (mx_cpu()->level < MX_CPU_AVX512 || !mx_cpu()->avx512_vnni) { printf("# no AVX-512 VNNI: int8 extremes skipped\n"); return; }
    enum { R = 32, C = 512, N = 26 }; /* N >= MXQ_WG_MIN */
    for (int v = 0; v < 8; v++) {
        tw t = make_tw(MX_W_AFFINE, 8, v < 4 ? 128 : 64, R, C, MX_DT_BF16, 500u + (unsigned)v);
        memset((void *)t.w.data, v % 4 == 3 ? 0 : 0xFF, (size_t)R * C);
        mx_kpolicy kp = mx_kpolicy_on(pool);
        mx_weight_prepare(&t.w, &kp);
        float *x = malloc(sizeof(float) * N * C), *y1 = malloc(sizeof(float) * N * R), *yn = malloc(sizeof(float) * N * R),
              *yr = malloc(sizeof(float) * N * R), *row = malloc(sizeof(float) * C);
        for (int i = 0; i < N * C; i++) x[i] = v % 4 == 0 ? 1.5f : v % 4 == 1 ? -1.5f : (i / 2) % 2 ? 1.5f : -1.5f;
        for (int i = 0; i < N; i++) mx_matmul(&t.w, x + (size_t)i * C, 1, C, y1 + (size_t)i * R, R, &kp);
        unsigned long c0 = mx_qmatmul_int8_calls();
        mx_matmul(&t.w, x, N, C, yn, R, &kp);
        bool int8 = mx_qmatmul_int8_calls() != c0;
        mx_matmul_ref(&t.w, x, N, C, yr, R);
        double worst = 0;
        for (int r = 0; r < R; r++) {
            mx_weight_row(&t.w, r, row);
            double sw = 0;
            for (int k = 0; k < C; k++) sw += fabs((double)row[k]);
            for (int i = 0; i < N; i++) /* |x| = 1.5 everywhere: one bound per row */
                worst = fmax(worst, fabs((double)yn[i * R + r] - yr[i * R + r]) / (2e-6 * sw * 1.5 + sw * 1.5 / (2.0 * 2047.0)));
        }
        char name[64];
        snprintf(name, sizeof name, "int8_extremes_g%d_%s", v < 4 ? 128 : 64, (const char *[]){"plus", "minus", "alternating", "zero_codes"}[v % 4]);
        CHECK(name, int8 && !memcmp(y1, yn, sizeof(float) * N * R) && worst <= 1, "%s, worst %.3g of the bound",
              !int8 ? "int8 path not taken" : memcmp(y1, yn, sizeof(float) * N * R) ? "one token and all differ" : "off", worst);
        free(x); free(y1); free(yn); free(yr); free(row);
        mx_weight_free(&t.w);
        free(t.buf);
    }
}

static void vbmi_tests(mx_pool *pool) {
    if (!mx_cpu()->avx512_vbmi || !mx_cpu()->avx512_vnni) { printf("# no AVX-512 VBMI here: its E2M1 kernel untested\n"); return; }
    static const spec sp[] = {{MX_W_MXFP4, 4, 32, 53, 448, MX_DT_U8}, {MX_W_MXFP4, 4, 32, 1000, 1024, MX_DT_U8},
                              {MX_W_NVFP4, 4, 16, 33, 384, MX_DT_U8}, {MX_W_NVFP4, 4, 16, 517, 2048, MX_DT_U8}};
    for (size_t i = 0; i < MX_ARRAY_LEN(sp); i++) {
        tw t = make_tw(sp[i].fmt, sp[i].bits, sp[i].group, sp[i].rows, sp[i].cols, sp[i].sdt, 77u + (unsigned)i);
        mx_kpolicy kp = mx_kpolicy_on(pool);
        mx_weight_prepare(&t.w, &kp);
        unsigned seed = 5;
        float *x = malloc(sizeof(float) * (size_t)t.w.cols), *y[2];
        for (int c = 0; c < t.w.cols; c++) x[c] = t_randf(&seed);
        for (int v = 0; v < 2; v++) {
            y[v] = malloc(sizeof(float) * (size_t)t.w.rows);
            mx_cpu_set_vbmi(v == 0);
            mx_matmul(&t.w, x, 1, t.w.cols, y[v], t.w.rows, &kp);
        }
        mx_cpu_set_vbmi(true);
        char name[96];
        snprintf(name, sizeof name, "vbmi_same_bits_%s_%dx%d", mx_wfmt_name(sp[i].fmt), sp[i].rows, sp[i].cols);
        CHECK(name, t.w.prep && !memcmp(y[0], y[1], sizeof(float) * (size_t)t.w.rows), "VBMI and plain kernels differ");
        free(x); free(y[0]); free(y[1]);
        mx_weight_free(&t.w);
        free(t.buf);
    }
}

static void kernel_tests(mx_pool *pool) {
    spec specs[64];
    int ns = 0;
    static const int abits[] = {1, 2, 3, 4, 5, 6, 8};
    static const mx_dtype sdts[] = {MX_DT_BF16, MX_DT_F16, MX_DT_F32};
    int k = 0;
    for (size_t b = 0; b < MX_ARRAY_LEN(abits); b++)
        for (int g = 32; g <= 128; g *= 2, k++) specs[ns++] = (spec){MX_W_AFFINE, abits[b], g, 37 + k, 384, sdts[k % 3]};
    specs[ns++] = (spec){MX_W_AFFINE, 4, 64, 70, 4096 + 64, MX_DT_BF16}; /* many groups, KC tail */
    specs[ns++] = (spec){MX_W_MXFP4, 4, 32, 45, 416, MX_DT_U8};
    specs[ns++] = (spec){MX_W_MXFP4, 4, 32, 53, 448, MX_DT_U8};  /* int8 path: 14 groups, a half-filled last unit of 4 */
    specs[ns++] = (spec){MX_W_NVFP4, 4, 16, 33, 384, MX_DT_U8};
    specs[ns++] = (spec){MX_W_NVFP4, 4, 16, 19, 48, MX_DT_U8};  /* cols not a multiple of 32 */
    specs[ns++] = (spec){MX_W_MXFP8, 8, 32, 41, 352, MX_DT_U8};
    specs[ns++] = (spec){MX_W_MXFP8, 8, 32, 35, 384, MX_DT_U8};  /* bf16-dot path: cols a multiple of 64 */
    specs[ns++] = (spec){MX_W_FP8B, 8, 128, 200, 330, MX_DT_F32}; /* partial blocks both ways, odd tail */
    specs[ns++] = (spec){MX_W_FP8B, 8, 128, 200, 384, MX_DT_F32}; /* bf16-dot path; a partial 128-row block */
    /* AVX-512 twice where the CPU has VBMI: its E2M1 decode kernel, then the other */
    static const mx_cpu_level levels[] = {MX_CPU_AVX512, MX_CPU_AVX512, MX_CPU_AVX2, MX_CPU_PORTABLE};
    for (size_t li = 0; li < MX_ARRAY_LEN(levels); li++) {
        if (mx_cpu()->level < levels[li]) { printf("# skipping %s (not supported here)\n", mx_cpu_name(levels[li])); continue; }
        if (li == 1 && !mx_cpu()->avx512_vbmi) { printf("# no VBMI here: one AVX-512 pass\n"); continue; }
        mx_cpu_force(levels[li]);
        if (li == 1) mx_cpu_set_vbmi(false);
        const char *lname = li == 1 ? "avx512novbmi" : mx_cpu_name(levels[li]);
        for (int i = 0; i < ns; i++) {
            spec s = specs[i];
            tw t = make_tw(s.fmt, s.bits, s.group, s.rows, s.cols, s.sdt, 1000u + (unsigned)i);
            char name[128], why[256] = "";
            snprintf(name, sizeof name, "qmm_%s_%s_b%d_g%d_%dx%d_%s", lname, mx_wfmt_name(s.fmt), s.bits, s.group,
                     s.rows, s.cols, mx_dtype_name(s.sdt));
            if (s.fmt == MX_W_FP8B) {
                char *p = strstr(name, "none");
                if (p) memcpy(p, "fp8b", 4);
            }
            int bad = li == 0 || mx_cpu()->level == MX_CPU_PORTABLE ? check_rows(&t.w, why, sizeof why) : 0;
            mx_kpolicy kp = mx_kpolicy_on(pool); /* as a model's weights at load */
            if (!bad) bad = mx_weight_prepare(&t.w, &kp);
            if (!bad) bad = check_mm(&t.w, NULL, false, why, sizeof why);
            if (!bad) bad = check_mm(&t.w, pool, false, why, sizeof why);
            if (!bad) bad = check_mm(&t.w, pool, true, why, sizeof why);
            /* rows read back from the int8 kernels' repacked copy are the same values */
            if (!bad && t.w.prep) bad = check_rows(&t.w, why, sizeof why);
            CHECK(name, !bad, "%s", why);
            mx_weight_free(&t.w);
            free(t.buf);
        }
    }
}

/* ---- quantizers ---- */
static void quantizer_tests(void) {
    int bad = 0;
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f) continue;
        if (mxq_enc_e4m3(mxq_e4m3((uint8_t)c)) != c) { bad = c + 1; break; }
    }
    CHECK("e4m3_roundtrip", !bad, "code 0x%02x", bad - 1);
    CHECK("e4m3_saturate", mxq_enc_e4m3(1e6f) == 0x7e && mxq_enc_e4m3(-460.0f) == 0xfe && mxq_enc_e4m3(464.0f) == 0x7e, "got %02x", mxq_enc_e4m3(1e6f));
    CHECK("e4m3_ties_even", mxq_enc_e4m3(1.0625f) == 0x38 && mxq_enc_e4m3(1.1875f) == 0x3a, "%02x %02x", mxq_enc_e4m3(1.0625f), mxq_enc_e4m3(1.1875f));
    bad = 0;
    for (int c = 0; c < 16; c++)
        if (mxq_enc_e2m1(mxq_e2m1_lut[c]) != c) bad = c + 1;
    CHECK("e2m1_roundtrip", !bad, "code %d", bad - 1);
    CHECK("e2m1_ties_even", mxq_enc_e2m1(0.25f) == 0 && mxq_enc_e2m1(0.75f) == 2 && mxq_enc_e2m1(1.25f) == 2 && mxq_enc_e2m1(2.5f) == 4 &&
                                mxq_enc_e2m1(5.0f) == 6 && mxq_enc_e2m1(-0.1f) == 8 && mxq_enc_e2m1(100.f) == 7, "tie rule");
    /* quantize -> dequantize stays within half a step */
    struct { mx_wfmt f; int bits, group; } qs[] = {{MX_W_AFFINE, 2, 64}, {MX_W_AFFINE, 3, 32}, {MX_W_AFFINE, 4, 64}, {MX_W_AFFINE, 5, 128},
                                                   {MX_W_AFFINE, 6, 64}, {MX_W_AFFINE, 8, 32}, {MX_W_AFFINE, 1, 64},
                                                   {MX_W_MXFP4, 4, 32}, {MX_W_NVFP4, 4, 16}, {MX_W_MXFP8, 8, 32}};
    unsigned seed = 5;
    int cols = 256;
    for (size_t i = 0; i < MX_ARRAY_LEN(qs); i++) {
        float w[256], sc[16], bi[16], out[256];
        uint8_t packed[256], scodes[16], scb[64], bib[64];
        for (int c = 0; c < cols; c++) w[c] = mx_bf16_to_f32(mx_f32_to_bf16(0.3f * t_randf(&seed) + (c % 64 == 5 ? 0.9f : 0)));
        mxq_quantize_row(qs[i].f, qs[i].bits, qs[i].group, w, cols, packed, sc, bi, scodes);
        mx_weight v = {.fmt = qs[i].f, .rows = 1, .cols = cols, .bits = qs[i].bits, .group = qs[i].group, .data = packed,
                       .row_bytes = (size_t)cols * qs[i].bits / 8};
        int ng = cols / qs[i].group;
        if (qs[i].f == MX_W_AFFINE) {
            for (int g = 0; g < ng; g++) { store_sc(scb, MX_DT_F32, g, sc[g]); store_sc(bib, MX_DT_F32, g, bi[g]); }
            v.scales = scb; v.biases = bib; v.scale_dtype = MX_DT_F32;
        } else { v.scales = scodes; v.scale_dtype = MX_DT_U8; }
        mx_weight_row(&v, 0, out);
        double worst = 0;
        for (int g = 0; g < ng; g++) {
            float amax = 0, lo = INFINITY, hi = 0;
            for (int c = g * qs[i].group; c < (g + 1) * qs[i].group; c++) {
                amax = fmaxf(amax, fabsf(w[c]));
                lo = fminf(lo, w[c]);
                hi = fmaxf(hi, w[c]);
            }
            /* affine: half a step of the (adjusted) scale, or the clamped range end;
             * fp: MLX rounds log2 of the scale, so the largest values can
             * saturate (up to ~30% of amax), else half an element step. */
            double bound = qs[i].f == MX_W_AFFINE ? 1.0 * fabs(sc[g]) + 1e-6 : 0.32 * amax + 1e-6;
            (void)lo; (void)hi;
            for (int c = g * qs[i].group; c < (g + 1) * qs[i].group; c++) worst = fmax(worst, fabs(out[c] - w[c]) / bound);
        }
        char name[64];
        snprintf(name, sizeof name, "quantize_%s_b%d_g%d", mx_wfmt_name(qs[i].f), qs[i].bits, qs[i].group);
        CHECK(name, worst <= 1.0, "error %.3f of the bound", worst);
    }
}

/* ---- binding, with hostile configs ---- */
static char g_dir[256];

static void write_file(const char *name, const char *text) {
    char *p = mx_path_join(g_dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    free(p);
}

typedef struct { const char *name; mx_dtype dt; int64_t d0, d1; } tdesc;

static void write_st(const tdesc *ts, int n) {
    mx_st_out o[8];
    void *bufs[8];
    unsigned seed = 3;
    for (int i = 0; i < n; i++) {
        size_t nb = (size_t)ts[i].d0 * ts[i].d1 * mx_dtype_size(ts[i].dt);
        uint8_t *b = malloc(nb);
        for (size_t k = 0; k < nb; k++) b[k] = (uint8_t)t_rng(&seed);
        if (ts[i].dt == MX_DT_BF16 || ts[i].dt == MX_DT_F16)
            for (size_t k = 1; k < nb; k += 2) b[k] = 0x3c ^ (b[k] & 0x80); /* finite, moderate */
        if (ts[i].dt == MX_DT_F32)
            for (size_t k = 0; k < nb; k += 4) { float f = 0.01f * (1 + (float)(k % 7)); memcpy(b + k, &f, 4); }
        if (ts[i].dt == MX_DT_U8)
            for (size_t k = 0; k < nb; k++) b[k] = (uint8_t)(120 + b[k] % 10); /* moderate E8M0 / E4M3 scales */
        if (ts[i].dt == MX_DT_F8_E4M3)
            for (size_t k = 0; k < nb; k++) if ((b[k] & 0x7f) == 0x7f) b[k] = 0x10;
        bufs[i] = b;
        o[i] = (mx_st_out){ts[i].name, ts[i].dt, 2, {ts[i].d0, ts[i].d1}, b, nb};
    }
    char *p = mx_path_join(g_dir, "model.safetensors");
    mx_st_write(p, o, n, "{\"format\":\"mlx\"}");
    free(p);
    for (int i = 0; i < n; i++) free(bufs[i]);
}

/* Loads module m as [rows, cols]; returns MX_OK/MX_ERR and the weight. */
static int try_load(const char *config, const tdesc *ts, int n, int rows, int cols, mx_weight *w) {
    write_file("config.json", config);
    write_st(ts, n);
    mx_ckpt ck;
    if (mx_ckpt_open(g_dir, true, &ck)) return MX_ERR;
    mx_kpolicy kp = mx_kpolicy_default();
    int rc = mx_load_weight(&ck, "m", rows, cols, 0, &kp, w);
    if (!rc) { /* check the kernel on it while the mapping is alive */
        char why[256];
        if (check_mm(w, NULL, false, why, sizeof why)) rc = mx_set_err("kernel mismatch: %s", why);
    }
    mx_weight_free(w);
    mx_ckpt_close(&ck);
    return rc;
}

static void expect_err(const char *name, int rc, const char *const *needles, int nn) {
    if (rc == MX_OK) { CHECK(name, 0, "loaded, expected an error"); return; }
    const char *m = mx_errmsg();
    int ok = strchr(m, '\n') == NULL;
    for (int i = 0; i < nn && ok; i++) ok = strstr(m, needles[i]) != NULL;
    CHECK(name, ok, "message: %s", m);
}

static void bind_tests(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/mlxcel_tq_XXXXXX");
    if (!mkdtemp(g_dir)) { CHECK("bind_tmpdir", 0, "mkdtemp failed"); return; }
    mx_weight w;
    const tdesc aff4[] = {{"m.weight", MX_DT_U32, 8, 16}, {"m.scales", MX_DT_BF16, 8, 2}, {"m.biases", MX_DT_BF16, 8, 2}};
    int rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":4}}", aff4, 3, 8, 128, &w);
    CHECK("bind_affine4", rc == MX_OK, "%s", mx_errmsg());
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":0}}", aff4, 3, 8, 128, &w);
    expect_err("bind_bits0", rc, (const char *const[]){"config.json", "m", "bits 0"}, 3);
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":7}}", aff4, 3, 8, 128, &w);
    expect_err("bind_bits7", rc, (const char *const[]){"config.json", "module m", "7 bits"}, 3);
    rc = try_load("{\"quantization\":{\"group_size\":128,\"bits\":4}}", aff4, 3, 8, 96, &w);
    expect_err("bind_group_not_dividing", rc, (const char *const[]){"config.json", "module m", "does not divide"}, 3);
    rc = try_load("{\"quantization\":{\"group_size\":48,\"bits\":4}}", aff4, 3, 8, 96, &w);
    expect_err("bind_group_48", rc, (const char *const[]){"config.json", "module m", "group_size 48"}, 3);
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":8}}", aff4, 3, 8, 128, &w);
    expect_err("bind_packed_shape", rc, (const char *const[]){"model.safetensors", "module m", "m.weight", "[8, 16]", "expected [8, 32]"}, 5);
    rc = try_load("{\"quantization\":{\"group_size\":32,\"bits\":4}}", aff4, 3, 8, 128, &w);
    expect_err("bind_scales_shape", rc, (const char *const[]){"model.safetensors", "module m", "m.scales"}, 3);
    const tdesc aff4u8[] = {{"m.weight", MX_DT_U32, 8, 16}, {"m.scales", MX_DT_U8, 8, 2}, {"m.biases", MX_DT_BF16, 8, 2}};
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":4}}", aff4u8, 3, 8, 128, &w);
    expect_err("bind_scales_dtype", rc, (const char *const[]){"model.safetensors", "m.scales", "U8"}, 3);
    const tdesc nob[] = {{"m.weight", MX_DT_U32, 8, 16}, {"m.scales", MX_DT_BF16, 8, 2}};
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":4}}", nob, 2, 8, 128, &w);
    expect_err("bind_missing_biases", rc, (const char *const[]){"module m", "m.biases"}, 2);
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":4,\"mode\":\"int4x\"}}", aff4, 3, 8, 128, &w);
    expect_err("bind_bad_mode", rc, (const char *const[]){"config.json", "module m", "int4x"}, 3);
    /* per-module dict without mode means affine even under an mxfp4 top level */
    rc = try_load("{\"quantization\":{\"group_size\":32,\"bits\":4,\"mode\":\"mxfp4\",\"m\":{\"group_size\":64,\"bits\":4}}}", aff4, 3, 8, 128, &w);
    CHECK("bind_per_module_default_affine", rc == MX_OK, "%s", mx_errmsg());
    const tdesc fl[] = {{"m.weight", MX_DT_BF16, 8, 128}};
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":4,\"m\":false}}", fl, 1, 8, 128, &w);
    CHECK("bind_per_module_false", rc == MX_OK, "%s", mx_errmsg());
    const tdesc mx4[] = {{"m.weight", MX_DT_U32, 8, 16}, {"m.scales", MX_DT_U8, 8, 4}};
    rc = try_load("{\"quantization\":{\"group_size\":32,\"bits\":4,\"mode\":\"mxfp4\"}}", mx4, 2, 8, 128, &w);
    CHECK("bind_mxfp4", rc == MX_OK, "%s", mx_errmsg());
    rc = try_load("{\"quantization\":{\"group_size\":64,\"bits\":4,\"mode\":\"mxfp4\"}}", mx4, 2, 8, 128, &w);
    expect_err("bind_mxfp4_group64", rc, (const char *const[]){"config.json", "module m", "mxfp4"}, 3);
    const tdesc nv4[] = {{"m.weight", MX_DT_U32, 8, 16}, {"m.scales", MX_DT_U8, 8, 8}};
    rc = try_load("{\"quantization\":{\"group_size\":16,\"bits\":4,\"mode\":\"nvfp4\"}}", nv4, 2, 8, 128, &w);
    CHECK("bind_nvfp4", rc == MX_OK, "%s", mx_errmsg());
    const tdesc mx8[] = {{"m.weight", MX_DT_U32, 8, 32}, {"m.scales", MX_DT_U8, 8, 4}};
    rc = try_load("{\"quantization\":{\"group_size\":32,\"bits\":8,\"mode\":\"mxfp8\"}}", mx8, 2, 8, 128, &w);
    CHECK("bind_mxfp8", rc == MX_OK, "%s", mx_errmsg());
    rc = try_load("{}", aff4, 3, 8, 128, &w);
    expect_err("bind_scales_without_config", rc, (const char *const[]){"m.scales", "no quantization block"}, 2);
    /* HF fine-grained FP8 */
    const char *fp8cfg = "{\"quantization_config\":{\"activation_scheme\":\"dynamic\",\"fmt\":\"e4m3\",\"quant_method\":\"fp8\",\"weight_block_size\":[128,128]}}";
    const tdesc f8[] = {{"m.weight", MX_DT_F8_E4M3, 130, 200}, {"m.weight_scale_inv", MX_DT_F32, 2, 2}};
    rc = try_load(fp8cfg, f8, 2, 130, 200, &w);
    CHECK("bind_fp8_block128", rc == MX_OK, "%s", mx_errmsg());
    rc = try_load("{\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[64,64]}}", f8, 2, 130, 200, &w);
    expect_err("bind_fp8_block64", rc, (const char *const[]){"config.json", "module m", "weight_block_size [64, 64]"}, 3);
    rc = try_load("{\"quantization_config\":{\"quant_method\":\"compressed-tensors\"}}", f8, 2, 130, 200, &w);
    expect_err("bind_fp8_compressed_tensors", rc, (const char *const[]){"config.json", "module m", "compressed-tensors"}, 3);
    const tdesc f8ws[] = {{"m.weight", MX_DT_F8_E4M3, 130, 200}, {"m.weight_scale", MX_DT_F32, 1, 1}};
    rc = try_load(fp8cfg, f8ws, 2, 130, 200, &w);
    expect_err("bind_fp8_weight_scale", rc, (const char *const[]){"module m", "weight_scale", "not supported"}, 3);
    const tdesc f8bad[] = {{"m.weight", MX_DT_F8_E4M3, 130, 200}, {"m.weight_scale_inv", MX_DT_F32, 1, 2}};
    rc = try_load(fp8cfg, f8bad, 2, 130, 200, &w);
    expect_err("bind_fp8_scale_shape", rc, (const char *const[]){"model.safetensors", "m.weight_scale_inv", "expected [2, 2]"}, 3);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) {}
}

/* ---- the quantized fixtures' own modules, when present ---- */
static void fixture_tests(mx_pool *pool) {
    DIR *d = opendir("tests/fixtures");
    if (!d) { printf("# no tests/fixtures: fixture module checks skipped\n"); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "mlxq_", 5) && strncmp(e->d_name, "hf_fp8", 6)) continue;
        char dir[512];
        snprintf(dir, sizeof dir, "tests/fixtures/%s", e->d_name);
        mx_ckpt ck;
        if (mx_ckpt_open(dir, true, &ck)) { CHECK(e->d_name, 0, "%s", mx_errmsg()); continue; }
        int H, I, V, L, nh, nkv, hd;
        mx_cfg_i32(&ck.cfg, "hidden_size", 0, 1, 1 << 20, &H);
        mx_cfg_i32(&ck.cfg, "intermediate_size", 0, 1, 1 << 20, &I);
        mx_cfg_i32(&ck.cfg, "vocab_size", 0, 1, 1 << 24, &V);
        mx_cfg_i32(&ck.cfg, "num_hidden_layers", 0, 1, 1024, &L);
        mx_cfg_i32(&ck.cfg, "num_attention_heads", 0, 1, 1024, &nh);
        mx_cfg_i32(&ck.cfg, "num_key_value_heads", nh, 1, 1024, &nkv);
        mx_cfg_i32(&ck.cfg, "head_dim", H / nh, 1, 1 << 16, &hd);
        struct { const char *n; int rows, cols; } mods[] = {{"self_attn.q_proj", nh * hd, H}, {"self_attn.k_proj", nkv * hd, H},
                                                            {"self_attn.v_proj", nkv * hd, H}, {"self_attn.o_proj", H, nh * hd},
                                                            {"mlp.gate_proj", I, H}, {"mlp.up_proj", I, H}, {"mlp.down_proj", H, I}};
        int bad = 0, nq = 0;
        char why[300] = "";
        mx_kpolicy kp = mx_kpolicy_on(pool);
        for (int l = 0; l < L && !bad; l++)
            for (size_t m = 0; m < MX_ARRAY_LEN(mods) && !bad; m++) {
                char name[128];
                snprintf(name, sizeof name, "model.layers.%d.%s", l, mods[m].n);
                mx_weight w;
                if (mx_load_weight(&ck, name, mods[m].rows, mods[m].cols, 0, &kp, &w)) { snprintf(why, sizeof why, "%s", mx_errmsg()); bad = 1; break; }
                if (w.fmt != MX_W_F32 && w.fmt != MX_W_F16 && w.fmt != MX_W_BF16) {
                    nq++;
                    if (check_rows(&w, why, sizeof why) || check_mm(&w, pool, false, why, sizeof why)) bad = 1;
                }
                mx_weight_free(&w);
            }
        mx_weight w;
        if (!bad && mx_load_weight(&ck, "model.embed_tokens", V, H, 0, &kp, &w) == MX_OK) {
            if (w.fmt >= MX_W_AFFINE && (check_rows(&w, why, sizeof why) || check_mm(&w, pool, false, why, sizeof why))) bad = 1;
            mx_weight_free(&w);
        } else if (!bad) { snprintf(why, sizeof why, "%s", mx_errmsg()); bad = 1; }
        char name[300];
        snprintf(name, sizeof name, "fixture_modules_%s_%s", e->d_name, mx_cpu_name(mx_cpu()->level));
        CHECK(name, !bad && nq > 0, "%s (%d quantized)", why, nq);
        mx_ckpt_close(&ck);
    }
    closedir(d);
}

int main(void) {
    mx_pool *pool = mx_pool_new(3);
    quantizer_tests();
    bind_tests();
    fixture_tests(pool); /* at the best level */
    vbmi_tests(pool);
    extreme_tests(pool);
    kernel_tests(pool);  /* walks the levels down to portable */
    fixture_tests(pool); /* portable */
    mx_pool_free(pool);
    TEST_END();
}
