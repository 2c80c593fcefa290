#include "rope.h"
#include "../base/base.h"
#include <math.h>
#include <string.h>
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static int read_factors(json_t *arr, const char *file, const char *key, int half, float *out) {
    if (!json_is_array(arr) || (int)json_array_size(arr) != half)
        return mx_set_err("%s: rope_scaling.%s: expected %d numbers", file, key, half);
    for (int i = 0; i < half; i++) {
        double d;
        if (mx_json_num(json_array_get(arr, (size_t)i), file, key, 1e-6, 1e6, &d)) return MX_ERR;
        out[i] = (float)d;
    }
    return MX_OK;
}

int mx_rope_from_config(mx_rope *r, const mx_cfg *c, double theta, int rot_dim, int max_pos) {
    return mx_rope_from_scaling(r, c, mx_cfg_get(c, "rope_scaling"), theta, rot_dim, max_pos, false);
}

int mx_rope_from_scaling(mx_rope *r, const mx_cfg *c, json_t *rs, double theta, int rot_dim, int max_pos, bool factor_given) {
    memset(r, 0, sizeof *r);
    r->theta = theta;
    r->dim = rot_dim;
    r->max_pos = max_pos;
    r->orig_max_pos = max_pos;
    r->factor = 1;
    r->attn_factor = 1;
    if (rot_dim < 2 || rot_dim % 2 || rot_dim / 2 > MX_ROPE_MAX_HALF) return mx_set_err("%s: rotary dimension %d is invalid", c->file, rot_dim);
    if (!(theta > 0) || !isfinite(theta)) return mx_set_err("%s: rope_theta must be positive", c->file);
    if (!rs) return MX_OK;
    if (!json_is_object(rs)) return mx_set_err("%s: rope_scaling: expected an object", c->file);
    mx_cfg s = {rs, NULL, c->file};
    int err = 0;
    const char *type = mx_cfg_str(&s, "rope_type", NULL, &err);
    if (!type) type = mx_cfg_str(&s, "type", "default", &err);
    if (err) return MX_ERR;
    if (mx_cfg_float(&s, "factor", 1.0, 1e-6, 1e6, &r->factor)) return MX_ERR;
    int half = rot_dim / 2;
    if (!strcmp(type, "default") || !strcmp(type, "mrope")) r->kind = MX_ROPE_DEFAULT; /* mrope: sections read by the family */
    else if (!strcmp(type, "linear")) r->kind = MX_ROPE_LINEAR;
    else if (!strcmp(type, "dynamic")) r->kind = MX_ROPE_DYNAMIC;
    else if (!strcmp(type, "llama3")) {
        r->kind = MX_ROPE_LLAMA3;
        if (mx_cfg_float(&s, "low_freq_factor", 1, 1e-6, 1e6, &r->low_freq_factor) ||
            mx_cfg_float(&s, "high_freq_factor", 4, 1e-6, 1e6, &r->high_freq_factor) ||
            mx_cfg_i32(&s, "original_max_position_embeddings", 8192, 1, 1 << 30, &r->orig_max_pos))
            return MX_ERR;
        if (r->high_freq_factor == r->low_freq_factor) return mx_set_err("%s: rope_scaling: high_freq_factor equals low_freq_factor", c->file);
    } else if (!strcmp(type, "yarn")) {
        r->kind = MX_ROPE_YARN;
        double af, ms, msa;
        bool trunc;
        if (mx_cfg_bool(&s, "truncate", true, &trunc)) return MX_ERR;
        r->yarn_no_truncate = !trunc;
        if (mx_cfg_float(&s, "beta_fast", 32, 1e-6, 1e6, &r->beta_fast) || mx_cfg_float(&s, "beta_slow", 1, 1e-6, 1e6, &r->beta_slow) ||
            mx_cfg_float(&s, "attention_factor", -1, 0, 1e6, &af) || mx_cfg_float(&s, "mscale", 0, 0, 1e6, &ms) ||
            mx_cfg_float(&s, "mscale_all_dim", 0, 0, 1e6, &msa))
            return MX_ERR;
        if (mx_cfg_has(&s, "original_max_position_embeddings")) {
            if (mx_cfg_i32(&s, "original_max_position_embeddings", max_pos, 1, 1 << 30, &r->orig_max_pos)) return MX_ERR;
            if (!factor_given) r->factor = (double)max_pos / r->orig_max_pos;
        }
#define YARN_MSCALE(scale, m) ((scale) <= 1 ? 1.0 : 0.1 * (m) * log(scale) + 1.0)
        if (af >= 0) r->attn_factor = af;
        else if (ms > 0 && msa > 0) r->attn_factor = YARN_MSCALE(r->factor, ms) / YARN_MSCALE(r->factor, msa);
        else r->attn_factor = YARN_MSCALE(r->factor, 1.0);
    } else if (!strcmp(type, "longrope") || !strcmp(type, "su")) {
        r->kind = MX_ROPE_LONGROPE;
        if (read_factors(json_object_get(rs, "long_factor"), c->file, "long_factor", half, r->long_factor) ||
            read_factors(json_object_get(rs, "short_factor"), c->file, "short_factor", half, r->short_factor))
            return MX_ERR;
        double af;
        if (mx_cfg_float(&s, "attention_factor", -1, 0, 1e6, &af)) return MX_ERR;
        if (mx_cfg_has(c, "original_max_position_embeddings")) {
            if (mx_cfg_i32(c, "original_max_position_embeddings", max_pos, 1, 1 << 30, &r->orig_max_pos)) return MX_ERR;
            r->factor = (double)max_pos / r->orig_max_pos;
        }
        if (af >= 0) r->attn_factor = af;
        else r->attn_factor = r->factor <= 1 ? 1.0 : sqrt(1 + log(r->factor) / log((double)r->orig_max_pos));
    } else if (!strcmp(type, "proportional")) {
        r->kind = MX_ROPE_PROPORTIONAL;
        double partial;
        if (mx_cfg_float(&s, "partial_rotary_factor", 1.0, 0, 1.0, &partial)) return MX_ERR;
        r->n_freq = (int)(partial * rot_dim / 2);
    } else return mx_set_err("%s: rope_scaling: unsupported rope_type '%s'", c->file, type);
    return MX_OK;
}

/* inv_freq as HF computes it: base ** (arange(0, dim, 2).float() / dim) in f32. */
static void inv_freq(const mx_rope *r, int max_len, float *f) {
    int half = r->dim / 2;
    double base = r->theta;
    if (r->kind == MX_ROPE_DYNAMIC) {
        int L = max_len > r->max_pos ? max_len : r->max_pos;
        base = r->theta * pow(r->factor * L / r->max_pos - (r->factor - 1), (double)r->dim / (r->dim - 2));
    }
    float fb = (float)base;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)r->dim;
        float p = powf(fb, e);
        f[i] = 1.0f / p;
    }
    switch (r->kind) {
    case MX_ROPE_LINEAR:
        for (int i = 0; i < half; i++) f[i] /= (float)r->factor;
        break;
    case MX_ROPE_PROPORTIONAL:
        for (int i = 0; i < half; i++) f[i] = i < r->n_freq ? f[i] / (float)r->factor : 0.0f;
        break;
    case MX_ROPE_LLAMA3: {
        double lw = r->orig_max_pos / r->low_freq_factor, hw = r->orig_max_pos / r->high_freq_factor;
        for (int i = 0; i < half; i++) {
            float wl = 2 * (float)M_PI / f[i];
            float v = f[i];
            if (wl > lw) v = f[i] / (float)r->factor;
            else if (!(wl < hw)) {
                float sm = ((float)r->orig_max_pos / wl - (float)r->low_freq_factor) / (float)(r->high_freq_factor - r->low_freq_factor);
                v = (1 - sm) * f[i] / (float)r->factor + sm * f[i];
            }
            f[i] = v;
        }
        break;
    }
    case MX_ROPE_YARN: {
        double d = r->dim, b = r->theta;
        double lo = d * log(r->orig_max_pos / (r->beta_fast * 2 * M_PI)) / (2 * log(b));
        double hi = d * log(r->orig_max_pos / (r->beta_slow * 2 * M_PI)) / (2 * log(b));
        if (!r->yarn_no_truncate) { lo = floor(lo); hi = ceil(hi); }
        if (lo < 0) lo = 0;
        if (hi > d - 1) hi = d - 1;
        float flo = (float)lo, fhi = (float)hi;
        if (flo == fhi) fhi += 0.001f;
        for (int i = 0; i < half; i++) {
            float pf = powf((float)b, (float)(2 * i) / (float)r->dim);
            float extra = 1.0f / pf, inter = 1.0f / ((float)r->factor * pf);
            float ramp = ((float)i - flo) / (fhi - flo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            float ef = 1 - ramp;
            f[i] = inter * (1 - ef) + extra * ef;
        }
        break;
    }
    case MX_ROPE_LONGROPE: {
        const float *ext = max_len > r->orig_max_pos ? r->long_factor : r->short_factor;
        for (int i = 0; i < half; i++) {
            float p = powf((float)r->theta, (float)(2 * i) / (float)r->dim);
            f[i] = 1.0f / (ext[i] * p);
        }
        break;
    }
    default: break;
    }
}

void mx_rope_table_axes(const mx_rope *r, const int *const *pos, int n, int max_len, float *cs) {
    float f[MX_ROPE_MAX_HALF], whole[MX_ROPE_MAX_HALF];
    int half = r->dim / 2, axis[MX_ROPE_MAX_HALF];
    inv_freq(r, max_len, f);
    if (r->section_strided) memcpy(whole, f, sizeof(float) * (size_t)half);
    for (int i = 0; i < half; i++) axis[i] = 0;
    if (r->n_axes > 1 && r->axes_interleaved)
        for (int i = 0; i < half; i++)
            axis[i] = i % 3 == 1 && i < 3 * r->section[1] ? 1 : i % 3 == 2 && i < 3 * r->section[2] ? 2 : 0;
    else if (r->n_axes > 1)
        for (int k = 0, i0 = 0; k < r->n_axes; i0 += r->section[k], k++)
            for (int i = i0; i < i0 + r->section[k] && i < half; i++) {
                axis[i] = k;
                if (r->section_restart) { /* as a rope of dim 2 * section: theta^(-2j / (2 section)) */
                    float e = (float)(2 * (i - i0)) / (float)(2 * r->section[k]);
                    f[i] = 1.0f / powf((float)r->theta, e);
                } else if (r->section_strided) {
                    int j = (i - i0) * r->n_axes + k;
                    f[i] = j < half ? whole[j] : 0;
                }
            }
    float af = (float)r->attn_factor, sa = r->reversed ? -af : af;
    for (int t = 0; t < n; t++) {
        float *row = cs + (size_t)t * r->dim;
        for (int i = 0; i < half; i++) {
            float a = (float)pos[axis[i]][t] * f[i];
            row[i] = cosf(a) * af;
            row[half + i] = sinf(a) * sa;
        }
    }
}

void mx_rope_table(const mx_rope *r, const int *pos, int n, int max_len, float *cs) {
    const int *axes[MX_ROPE_MAX_AXES] = {pos, pos, pos};
    mx_rope_table_axes(r, axes, n, max_len, cs);
}

int mx_rope_mrope_section(mx_rope *r, const mx_cfg *c) {
    json_t *rs = mx_cfg_get(c, "rope_scaling"), *sec = rs && json_is_object(rs) ? json_object_get(rs, "mrope_section") : NULL;
    if (!sec && (rs = mx_cfg_get(c, "rope_parameters")) && json_is_object(rs)) sec = json_object_get(rs, "mrope_section");
    if (!sec) return MX_OK;
    json_t *il = json_object_get(rs, "mrope_interleaved");
    if (il && !json_is_boolean(il)) return mx_set_err("%s: rope_scaling.mrope_interleaved: expected true or false", c->file);
    r->axes_interleaved = il && json_is_true(il);
    int half = r->dim / 2, sum = 0;
    if (!json_is_array(sec) || json_array_size(sec) != 3) return mx_set_err("%s: rope_scaling.mrope_section: expected 3 numbers", c->file);
    for (int k = 0; k < 3; k++) {
        double d;
        if (mx_json_num(json_array_get(sec, (size_t)k), c->file, "rope_scaling.mrope_section", 0, half, &d)) return MX_ERR;
        r->section[k] = (int)d;
        sum += r->section[k];
    }
    if (sum != half) return mx_set_err("%s: rope_scaling.mrope_section sums to %d, not head_dim/2 = %d", c->file, sum, half);
    r->n_axes = 3;
    return MX_OK;
}

void mx_rope_apply(const mx_rope *r, float *x, int n_heads, int head_stride, const float *cs) {
    int half = r->dim / 2;
    const float *c = cs, *s = cs + half;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_stride;
        if (r->interleaved) {
            for (int i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c[i] - b * s[i];
                v[2 * i + 1] = b * c[i] + a * s[i];
            }
        } else {
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[half + i];
                v[i] = a * c[i] - b * s[i];
                v[half + i] = b * c[i] + a * s[i];
            }
        }
    }
}
