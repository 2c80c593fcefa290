/* See grid_sample.h. Follows ATen's grid sampler (bicubic): the normalised
 * coordinate is unnormalised as ((x + 1) * size - 1) / 2, the 4 x 4 taps
 * around floor() are each clamped to the border, and the cubic convolution
 * coefficients use A = -0.75; rows are interpolated along x first, then the
 * four results along y. Float arithmetic as PyTorch's float kernel. */
#include "grid_sample.h"
#include <math.h>
#include <stddef.h>

static void cubic_coeffs(float t, float c[4]) {
    const float A = -0.75f;
    float x1 = t + 1.0f, x2 = 1.0f - t, x3 = 2.0f - t;
    c[0] = ((A * x1 - 5.0f * A) * x1 + 8.0f * A) * x1 - 4.0f * A;
    c[1] = ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    c[2] = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
    c[3] = ((A * x3 - 5.0f * A) * x3 + 8.0f * A) * x3 - 4.0f * A;
}

static int clampi(int v, int n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

void mx_grid_sample_bicubic_add(const float *table, int S, int D, int gh, int gw, int row, int col, float *out) {
    float gx = ((float)col + 0.5f) / (float)gw * 2.0f - 1.0f, gy = ((float)row + 0.5f) / (float)gh * 2.0f - 1.0f;
    float x = ((gx + 1.0f) * (float)S - 1.0f) / 2.0f, y = ((gy + 1.0f) * (float)S - 1.0f) / 2.0f;
    float fx = floorf(x), fy = floorf(y), cx[4], cy[4];
    cubic_coeffs(x - fx, cx);
    cubic_coeffs(y - fy, cy);
    int ix[4], iy[4];
    for (int k = 0; k < 4; k++) {
        ix[k] = clampi((int)fx - 1 + k, S);
        iy[k] = clampi((int)fy - 1 + k, S);
    }
    for (int d = 0; d < D; d++) {
        float acc = 0;
        for (int j = 0; j < 4; j++) {
            const float *r = table + (size_t)iy[j] * S * D + d;
            float v = r[(size_t)ix[0] * D] * cx[0] + r[(size_t)ix[1] * D] * cx[1] + r[(size_t)ix[2] * D] * cx[2] +
                      r[(size_t)ix[3] * D] * cx[3];
            acc += v * cy[j];
        }
        out[d] += acc;
    }
}
