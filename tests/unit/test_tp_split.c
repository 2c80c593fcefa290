/* The weight copies tensor parallelism binds its parts with (src/dist/,
 * nn/load.c): columns of a float and of an MLX affine 4-bit weight, rows
 * gathered from several ranges, each row equal to the original's part; a
 * column range off the quantization groups and an out-of-range row range are
 * refused. No MPI here: tests/cli/mpi.sh runs the distributed passes. */
#include "test.h"
#include "kernels/kernels.h"
#include "base/base.h"

enum { R = 6, C = 256, G = 64 };

static float a_scales[R * C / G], a_biases[R * C / G], f32[R * C];
static uint8_t a_codes[R * C / 2];

int main(void) {
    unsigned seed = 7;
    for (int i = 0; i < R * C; i++) f32[i] = t_randf(&seed);
    for (int i = 0; i < R * C / 2; i++) a_codes[i] = (uint8_t)t_rng(&seed);
    for (int i = 0; i < R * C / G; i++) a_scales[i] = 0.01f + 0.001f * (float)i, a_biases[i] = -0.05f * (float)(i % 3);
    mx_weight wf = {.fmt = MX_W_F32, .rows = R, .cols = C, .data = (const uint8_t *)f32, .row_bytes = C * 4};
    mx_weight wa = {.fmt = MX_W_AFFINE, .rows = R, .cols = C, .data = a_codes, .row_bytes = C / 2, .bits = 4, .group = G,
                    .scales = (const uint8_t *)a_scales, .biases = (const uint8_t *)a_biases, .scale_dtype = MX_DT_F32};
    const mx_weight *ws[2] = {&wf, &wa};
    const char *nm[2] = {"f32", "affine4"};
    float full[C], part[C];
    for (int k = 0; k < 2; k++) {
        char name[64];
        /* columns [128, 192) */
        mx_weight c;
        int rc = mx_weight_copy_cols(ws[k], 128, 64, &c);
        float d = rc ? 1e30f : 0;
        for (int r = 0; !rc && r < R; r++) {
            mx_weight_row(ws[k], r, full);
            mx_weight_row(&c, r, part);
            d = fmaxf(d, t_maxdiff(full + 128, part, 64));
        }
        snprintf(name, sizeof name, "tp_split/%s/cols", nm[k]);
        CHECK(name, !rc && c.cols == 64 && c.rows == R && d == 0, "rc %d, max diff %g", rc, d);
        mx_weight_free(&c);
        /* rows 4..5 then 0..1 (a [gate | up] part's two halves) */
        const int ranges[2][2] = {{4, 6}, {0, 2}};
        mx_weight g;
        rc = mx_weight_copy_rows(ws[k], ranges, 2, &g);
        const int src[4] = {4, 5, 0, 1};
        d = rc ? 1e30f : 0;
        for (int r = 0; !rc && r < 4; r++) {
            mx_weight_row(ws[k], src[r], full);
            mx_weight_row(&g, r, part);
            d = fmaxf(d, t_maxdiff(full, part, C));
        }
        snprintf(name, sizeof name, "tp_split/%s/rows", nm[k]);
        CHECK(name, !rc && g.rows == 4 && d == 0, "rc %d, max diff %g", rc, d);
        mx_weight_free(&g);
    }
    mx_weight bad;
    CHECK("tp_split/affine4/off_group", mx_weight_copy_cols(&wa, 32, 64, &bad) != 0 && strstr(mx_errmsg(), "groups"), "%s", mx_errmsg());
    const int out_of_range[1][2] = {{4, 7}};
    CHECK("tp_split/rows_out_of_range", mx_weight_copy_rows(&wf, out_of_range, 1, &bad) != 0, "accepted rows past the end");
    TEST_END();
}
