/* rope: rotary position embeddings with Hugging Face's scaling variants.
 * A rope spec is fixed at load; the cos/sin tables for a run of positions are
 * built per forward chunk, because dynamic NTK and longrope choose their
 * frequencies from the sequence length reached (as HF does, so cached keys keep
 * the rotation they were computed with). */
#ifndef MX_ROPE_H
#define MX_ROPE_H
#include <stdbool.h>
#include "../format/json.h"

/* PROPORTIONAL (Gemma 4): the whole head in rotate-half pairs, with the
 * frequencies from n_freq on set to 0 (those pairs stay as they are) and the
 * rest divided by factor */
typedef enum { MX_ROPE_DEFAULT, MX_ROPE_LINEAR, MX_ROPE_DYNAMIC, MX_ROPE_YARN, MX_ROPE_LLAMA3, MX_ROPE_LONGROPE,
               MX_ROPE_PROPORTIONAL } mx_rope_kind;

#define MX_ROPE_MAX_HALF 512
#define MX_ROPE_MAX_AXES 3
typedef struct {
    mx_rope_kind kind;
    double theta;
    int dim;            /* rotated dims per head (partial rotary: < head_dim) */
    bool interleaved;   /* pairs (2i, 2i+1) instead of halves (GLM, Cohere) */
    double factor, attn_factor;
    int max_pos, orig_max_pos;
    double low_freq_factor, high_freq_factor, beta_fast, beta_slow;
    bool yarn_no_truncate; /* yarn "truncate": false (GPT-OSS): the correction range is not rounded to whole dims */
    float long_factor[MX_ROPE_MAX_HALF], short_factor[MX_ROPE_MAX_HALF];
    /* Multi-axis positions (Qwen2-VL): a token has n_axes positions (temporal,
     * height, width) and section[k] consecutive frequencies take axis k's
     * (M-RoPE; the sections sum to dim/2). With section_restart each section
     * has frequencies of its own, those of a rope of dim 2 * section[k]
     * (the vision tower's 2-D rope: rows, then columns). n_axes <= 1: one
     * position per token. */
    int n_axes;
    int section[MX_ROPE_MAX_AXES];
    bool section_restart;
    bool axes_interleaved; /* Qwen3-VL's interleaved M-RoPE: frequency i takes axis 1 when
                              i % 3 == 1 and i < 3 section[1], axis 2 when i % 3 == 2 and
                              i < 3 section[2], else axis 0 */
    /* With section_strided, axis k's section takes every n_axes-th frequency
     * of the whole rope from the k-th on (Pixtral's 2-D rope: rows the even
     * frequencies, columns the odd). */
    bool section_strided;
    int n_freq;         /* PROPORTIONAL: rotated pairs, int(partial_rotary_factor * dim // 2) */
    bool reversed;      /* rotate the other way (sin negated): NanoChat's rotate_half(x) = [x2, -x1] */
} mx_rope;

/* Parses config keys rope_theta (or the given theta), rope_scaling, and the
 * partial rotary fraction into r. head_dim and rot_dim must be set by caller. */
int mx_rope_from_config(mx_rope *r, const mx_cfg *c, double theta, int rot_dim, int max_pos);
/* The same with the scaling object given (rope_scaling, or a transformers v5
 * rope_parameters object; NULL = none); c gives the top-level keys. Yarn's
 * factor is max_pos / original_max_position_embeddings when the latter is
 * given (transformers 4.x), or with factor_given the config's factor as it
 * is (transformers v5). */
int mx_rope_from_scaling(mx_rope *r, const mx_cfg *c, json_t *rs, double theta, int rot_dim, int max_pos, bool factor_given);
/* cos/sin for positions pos[0..n) into cs[n][dim] (cos in the first dim/2,
 * sin in the second). max_len = the sequence length this forward reaches. */
void mx_rope_table(const mx_rope *r, const int *pos, int n, int max_len, float *cs);
/* The same with n_axes positions per token: pos[k][0..n) for axis k. */
void mx_rope_table_axes(const mx_rope *r, const int *const *pos, int n, int max_len, float *cs);
/* Reads mrope_section (from rope_scaling, where Qwen2-VL keeps it, or
 * rope_parameters) into r's sections over 3 axes, and mrope_interleaved;
 * no key: one axis. */
int mx_rope_mrope_section(mx_rope *r, const mx_cfg *c);
/* Rotates n_heads vectors of x (stride head_stride between heads). */
void mx_rope_apply(const mx_rope *r, float *x, int n_heads, int head_stride, const float *cs_row);
#endif
