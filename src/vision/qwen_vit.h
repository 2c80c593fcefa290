/* qwen_vit: what the Qwen ViTs share (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): a
 * tower over temporal x spatial patches (Conv3d patch embedding read as a
 * linear), fused qkv with bias, a 2-D rope (rows on the first half of the
 * frequencies, columns on the second), rows in 2x2 merge-window order and the
 * merger; their image tokens and M-RoPE text positions. Plus the parts only
 * some use: Qwen2.5-VL's windows and Qwen3-VL's interpolated positions. */
#ifndef MX_QWEN_VIT_H
#define MX_QWEN_VIT_H
#include "vision.h"

/* The common description for a tower of depth layers of width D with heads
 * heads and output (text) width out; the family sets the norms, the MLP and
 * the merger's names. def_patch: the config class's patch_size. */
int mx_qwen_vit_common(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, int depth, int D, int heads, int out,
                       int def_patch);

/* Qwen2.5-VL's windows over a merged grid of gh x gw units: windows of w
 * units per side, row-major (the last row / column of windows smaller),
 * units row-major inside each. perm[j]: the merge unit at window order j;
 * win_units[k]: units in window k; returns the number of windows. */
int mx_qwen_windows(int gh, int gw, int w, int *perm, int *win_units);

/* Qwen3-VL's learned positions: the table [S*S, D] (weight) bilinearly
 * interpolated to a gh x gw patch grid as HF's fast_pos_embed_interpolate,
 * written in merge-window order (merge x merge) to out [gh*gw, D]; row: a
 * scratch of 4 D floats. */
void mx_qwen_pos_interp(const mx_weight *table, int S, int gh, int gw, int merge, float *out, float *row);
#endif
