/* grid_sample: PyTorch's F.grid_sample(mode="bicubic", align_corners=False,
 * padding_mode="border") of a learned position table at one point, the way
 * GLM-4V resamples its [S, S] table of vision positions to each image's
 * patch grid (Glm4vVisionEmbeddings). */
#ifndef MX_GRID_SAMPLE_H
#define MX_GRID_SAMPLE_H

/* table: [S*S, D] row-major (row y*S + x holds the D channels at (y, x));
 * the sampling point of patch (row, col) of a gh x gw grid is the centre of
 * that patch in normalised coordinates, ((col + 0.5)/gw*2 - 1,
 * (row + 0.5)/gh*2 - 1). Adds the D interpolated channels to out. */
void mx_grid_sample_bicubic_add(const float *table, int S, int D, int gh, int gw, int row, int col, float *out);
#endif
