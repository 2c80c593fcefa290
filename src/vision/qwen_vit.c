/* See qwen_vit.h. */
#include "qwen_vit.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>

int mx_qwen_vit_common(mx_vision_desc *d, mx_arch *t, const mx_cfg *vc, const mx_cfg *top, int depth, int D, int heads, int out,
                       int def_patch) {
    if (mx_cfg_i32(vc, "patch_size", def_patch, 1, 1024, &d->patch_size) || mx_cfg_i32(vc, "in_channels", 3, 1, 16, &d->channels) ||
        mx_cfg_i32(vc, "spatial_merge_size", 2, 1, 16, &d->merge) || mx_cfg_i32(vc, "temporal_patch_size", 2, 1, 16, &d->temporal) ||
        mx_cfg_i32(top, "image_token_id", 151655, 0, 1 << 30, &d->image_token) ||
        mx_cfg_i32(top, "vision_start_token_id", 151652, 0, 1 << 30, &d->vision_start) || mx_arch_layers(t, depth))
        return MX_ERR;
    if (D % heads || (D / heads) % 4) return mx_set_err("%s: vision width %d / num_heads %d is not a multiple of 4", vc->file, D, heads);
    if (out != d->proj_dim) return mx_set_err("%s: the vision output width %d differs from the text hidden size %d", vc->file, out, d->proj_dim);
    if (d->channels != 3) return mx_set_err("%s: vision in_channels %d (images have 3)", vc->file, d->channels);
    mx_attn_spec *s = t->attn;
    t->hidden = D;
    d->run_layers = depth;
    mx_vit_attn(s, heads, D / heads);
    s->q_bias = s->k_bias = s->v_bias = s->o_bias = true;
    s->names = (mx_attn_names){.qkv = "blocks.%d.attn.qkv", .o = "blocks.%d.attn.proj"};
    t->mlp_bias = true;
    t->embed_scale = t->logit_scale = t->residual_scale = 1;
    t->bos_id = -1;
    /* 2-D rope over the whole head: rows on the first half of the
     * frequencies, columns on the second, each a rope of dim head_dim / 2 */
    t->pos = MX_POS_ROPE;
    t->n_rope = 1;
    t->rope[0] = (mx_rope){.kind = MX_ROPE_DEFAULT, .theta = 10000, .dim = s->head_dim, .factor = 1, .attn_factor = 1,
                           .n_axes = 2, .section = {s->head_dim / 4, s->head_dim / 4}, .section_restart = true};
    d->prefix[0] = "visual.";
    d->prefix[1] = "model.visual.";
    d->prefix[2] = "vision_tower.";
    d->patch = "patch_embed.proj";
    d->proj_prefix[0] = "visual.merger.";
    d->proj_prefix[1] = "model.visual.merger.";
    d->proj_prefix[2] = "vision_tower.merger.";
    d->proj = MX_VPROJ_MERGER;
    d->proj_norm_eps = 1e-6f;
    d->mask = MX_VMASK_CAUSAL;
    d->mrope = true;
    return MX_OK;
}

int mx_qwen_windows(int gh, int gw, int w, int *perm, int *win_units) {
    int n = 0, j = 0;
    for (int r0 = 0; r0 < gh; r0 += w)
        for (int c0 = 0; c0 < gw; c0 += w) {
            int r1 = MX_MIN(gh, r0 + w), c1 = MX_MIN(gw, c0 + w);
            for (int r = r0; r < r1; r++)
                for (int c = c0; c < c1; c++) perm[j++] = r * gw + c;
            win_units[n++] = (r1 - r0) * (c1 - c0);
        }
    return n;
}

/* torch.linspace(0, S - 1, n) in float32: the first half from the start, the
 * second from the end */
static float linspace(int S, int n, int i) {
    if (n == 1) return 0;
    float step = (float)(S - 1) / (float)(n - 1);
    return i < n / 2 ? step * (float)i : (float)(S - 1) - step * (float)(n - 1 - i);
}

void mx_qwen_pos_interp(const mx_weight *table, int S, int gh, int gw, int merge, float *out, float *row) {
    int D = table->cols;
    float *e = row;
    for (int r = 0; r < gh; r++) {
        float hi = linspace(S, gh, r);
        int fh = (int)hi, ch = MX_MIN(fh + 1, S - 1);
        float dh = hi - (float)fh;
        for (int c = 0; c < gw; c++) {
            float wi = linspace(S, gw, c);
            int fw = (int)wi, cw = MX_MIN(fw + 1, S - 1);
            float dw = wi - (float)fw;
            int idx[4] = {fh * S + fw, fh * S + cw, ch * S + fw, ch * S + cw};
            float wt[4] = {(1 - dh) * (1 - dw), (1 - dh) * dw, dh * (1 - dw), dh * dw};
            /* merge-window order: unit (r / m, c / m), then (r % m, c % m) */
            int unit = (r / merge) * (gw / merge) + c / merge, at = unit * merge * merge + (r % merge) * merge + c % merge;
            float *o = out + (size_t)at * D;
            for (int k = 0; k < 4; k++) {
                mx_weight_row(table, idx[k], e);
                for (int i = 0; i < D; i++) {
                    float v = e[i] * wt[k];
                    o[i] = k ? o[i] + v : v;
                }
            }
        }
    }
}
