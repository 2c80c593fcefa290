/* vision: the image side of a vision-language model. A VLM family is a
 * short description (src/vision/fam_*.c, registered by config.json's
 * model_type with MX_VISION_FAMILY) of
 *   - its tower: a ViT whose layers are an mx_arch run by the encoder
 *     (bidirectional attention, LayerNorm, biases; Qwen2-VL's with a 2-D
 *     rope), plus the patch embedding, class / position embeddings and which
 *     layer's output is used;
 *   - its projector into the text model's embedding space (one of a few
 *     kinds: MLP, linear, Gemma 3's pool + norm + matrix, Idefics3's pixel
 *     shuffle + linear, Qwen2-VL's merger) and LLaVA-NeXT's any-res packing;
 *   - how the image rows enter the text model: scaled like tokens or not,
 *     causal / prefix / bidirectional image blocks, M-RoPE positions.
 * The image processor (src/image/processor.h) comes from the same folder.
 *
 * Tensor names: the family's names are the Hugging Face layout its fixture
 * uses; a checkpoint written by other tools (mlx-vlm: "vision_tower." and
 * "language_model.model.", transformers >= 4.52: "model.vision_tower.") is
 * matched by trying the family's prefix alternatives in order. */
#ifndef MX_VISION_H
#define MX_VISION_H
#include "../nn/model.h"
#include "../image/processor.h"
#include "mrope.h"

typedef enum {
    MX_VPROJ_MLP,       /* in -> act -> out (LLaVA) */
    MX_VPROJ_LINEAR,    /* in (PaliGemma) */
    MX_VPROJ_POOL_NORM, /* avg pool to pool_tokens, RMSNorm (1 + w), x @ matrix (Gemma 3) */
    MX_VPROJ_SHUFFLE,   /* pixel shuffle by `shuffle`, in without bias (Idefics3) */
    MX_VPROJ_MERGER,    /* LayerNorm, merge x merge rows joined, in -> GELU -> out (Qwen2-VL) */
    MX_VPROJ_GLU_MERGER, /* merge x merge rows -> Conv2d `downsample` to the text width, in -> LayerNorm
                            -> GELU -> down(act(gate) * up) (GLM-4V) */
    MX_VPROJ_PATCH_MERGE, /* RMSNorm, merge x merge neighbours of the row-major grid joined
                           * channel-major, proj_merge, in -> act -> out (Mistral 3) */
    MX_VPROJ_SHUFFLE_MLP, /* pixel shuffle by `shuffle`, LayerNorm, in -> act (or SwiGLU with
                           * proj_glu) -> out, with biases (InternVL, Aya Vision) */
} mx_vproj_kind;

typedef enum {
    MX_VMASK_CAUSAL,      /* image tokens attend causally (LLaVA, Idefics3, Qwen2-VL) */
    MX_VMASK_PREFIX,      /* the whole prompt attends both ways (PaliGemma) */
    MX_VMASK_IMAGE_BLOCK, /* each image's tokens attend each other (Gemma 3) */
} mx_vmask;

#define MX_VISION_PREFIXES 3
#define MX_VISION_MAX_DEEP 8
typedef struct mx_vision_desc {
    /* tower; module paths relative to the prefix that matched */
    const char *prefix[MX_VISION_PREFIXES]; /* where the tower lives, tried in order */
    const char *patch;        /* patch embedding conv, weight [D, C (, T), P, P] read as [D, C*T*P*P] */
    bool patch_bias;
    const char *cls;          /* class embedding [D]; NULL: none */
    const char *pos;          /* learned position embedding [n, D] module; NULL: none (or rope) */
    bool pos_bicubic;         /* pos is an [S*S, D] table resampled to each image's patch grid (bicubic
                                 grid_sample, GLM-4V), not rows looked up */
    const char *patch_norm;   /* RMSNorm on the patch embeddings before positions are added; NULL: none */
    float patch_norm_eps;
    int patch_size, channels, temporal, merge;
    int run_layers;           /* encoder layers to run (hidden_states[run_layers]) */
    int max_side;             /* > 0: the tower's 2-D rope takes each view's (row, column) of
                               * its row-major patch grid, at most max_side per side (Pixtral) */
    bool drop_cls;            /* the CLS row is not a feature ("default" strategy) */
    /* projector; module paths tried with each prefix of proj_prefix */
    const char *proj_prefix[MX_VISION_PREFIXES];
    mx_vproj_kind proj;
    const char *proj_in, *proj_out, *proj_norm; /* proj_in of POOL_NORM: a plain [D, H] tensor name */
    const char *proj_merge;   /* PATCH_MERGE: the [D, merge^2 D] merging linear (no bias) */
    int proj_mid;             /* SHUFFLE_MLP: proj_in's output width (0: the text hidden size) */
    bool proj_glu;            /* SHUFFLE_MLP: proj_in's output is [x | gate], silu(gate) * x goes on */
    bool proj_bias;
    mx_act proj_act;
    float proj_norm_eps;
    int shuffle, pool_tokens;
    const char *downsample, *proj_gate, *proj_up; /* GLU_MERGER: the conv and the SwiGLU (proj_out: down) */
    int proj_ctx;             /* GLU_MERGER: the SwiGLU's width */
    const char *newline[MX_VISION_PREFIXES]; /* LLaVA-NeXT's image_newline [H], full names tried in
                                              order; none: no any-res packing */
    int proj_dim;             /* projector output width (the text hidden size) */
    bool proj_norm_rms;       /* MERGER: RMSNorm (weight only) instead of LayerNorm (Qwen2.5-VL) */
    /* Qwen ViT variants (src/vision/qwen_vit.h) */
    bool pos_interp;          /* pos: a [S*S, D] table interpolated bilinearly to the patch grid (Qwen3-VL) */
    int window;               /* window attention: windows of this many merged units per side (Qwen2.5-VL); 0: none */
    bool windowed[MX_MAX_LAYERS]; /* layers attending inside windows */
    int n_deep;               /* DeepStack (Qwen3-VL): extra rows per image token from these layers' outputs, */
    int deep_layer[MX_VISION_MAX_DEEP]; /* each through a merger with the norm after the 2x2 grouping */
    const char *deep_proj;    /* those mergers' module pattern under the tower prefix ("deepstack_merger_list.%d.") */
    /* text side */
    bool rows_scaled;         /* rows take the text model's embedding scale */
    bool rows_div_sqrt;       /* rows are divided by sqrt(text hidden) first (PaliGemma) */
    bool head_unscaled;       /* the package's own lm_head runs without the text model's
                                 logit_scale (Aya Vision over Cohere2); the engine applies it */
    mx_vmask mask;
    bool mrope;
    int32_t image_token, vision_start;
} mx_vision_desc;

typedef struct mx_vision_family {
    const char *name; /* config.json model_type */
    const char *const *aliases;
    const char *features; /* one line for `mlxcel arch` (tower, projector, processor) */
    /* vc: vision_config alone (its absent keys take the HF vision config
     * class defaults, never the text model's values); top: config.json's
     * top level; text: the text part (text_config over the top level). Fills
     * d and the tower's arch, its names relative to the tower prefix
     * ("encoder.layers.%d.self_attn.q_proj"). */
    int (*configure)(mx_vision_desc *d, mx_arch *tower, const mx_cfg *vc, const mx_cfg *top, const mx_cfg *text);
    struct mx_vision_family *next;
} mx_vision_family;

void mx_vision_register(mx_vision_family *f);
const mx_vision_family *mx_vision_family_find(const char *model_type);
const mx_vision_family *mx_vision_family_list(void); /* all, linked by next */
#define MX_VISION_FAMILY(id, ...)                                                     \
    static mx_vision_family mx_vfam_##id = {__VA_ARGS__};                             \
    __attribute__((constructor)) static void mx_vfam_register_##id(void) { mx_vision_register(&mx_vfam_##id); }

/* Shared by the descriptions: a ViT as CLIP / SigLIP write it (pre-norm
 * LayerNorm blocks with biases, bidirectional attention, fc1 -> act -> fc2;
 * names "encoder.layers.%d.layer_norm1", "...self_attn.q_proj", "...mlp.fc1")
 * from vision_config with the given class defaults. */
int mx_vit_configure(mx_arch *a, const mx_cfg *vc, int hidden, int ffn, int layers, int heads, const char *act, float eps);
/* A tower's attention: heads query and key/value heads of head_dim, scaled by
 * 1/sqrt(head_dim), every patch seeing every other (biases and names stay the
 * caller's). */
void mx_vit_attn(mx_attn_spec *s, int heads, int head_dim);
/* A SigLIP tower as PaliGemma, Idefics3 and Gemma 3 use it: every layer
 * run, then post_layernorm; patch embedding with bias, learned positions;
 * the tower tried under prefix0, then prefix1. */
void mx_siglip_tower(mx_vision_desc *d, mx_arch *t, const char *prefix0, const char *prefix1);
/* hidden_states index -> layers run (negative counts from the end; HF's
 * vision_feature_layer). */
int mx_vision_feature_layer(const mx_cfg *top, int n_layers, int def, int *run);

typedef struct mx_vision mx_vision;
/* Opens the tower, projector and image processor of the model in dir;
 * *out = NULL (and MX_OK) when config.json has no vision_config.
 * text_hidden: the text model's hidden size. */
int mx_vision_open(const char *dir, int text_hidden, mx_vision **out);
void mx_vision_free(mx_vision *v);
const mx_image_processor *mx_vision_processor(const mx_vision *v);
const mx_vision_desc *mx_vision_spec(const mx_vision *v);

/* Floats per image row: the text hidden size, times 1 + n_deep with
 * DeepStack (mx_seq_in.n_deep). */
int mx_vision_row_floats(const mx_vision *v);
/* Runs tower + projector (+ packing) on one preprocessed image: rows
 * [in->n_tokens, mx_vision_row_floats] as they enter the text model (before its
 * embedding scale; PaliGemma's already divided). Calls are serialized (the
 * server's handlers share the tower). */
int mx_vision_encode(mx_vision *v, const mx_image_input *in, mx_pool *pool, float *rows);
/* The same, remembering the rows under key (the SHA-256 of the image file's
 * bytes, hex): an image seen before (an earlier turn of a conversation) is
 * not encoded again. The least recently used rows go first beyond
 * MX_VISION_CACHE_BYTES. */
#define MX_VISION_CACHE_BYTES ((size_t)256 << 20)
int mx_vision_encode_cached(mx_vision *v, const char *key, const mx_image_input *in, mx_pool *pool, float *rows);
/* Encodes done and cache hits so far (tests, stats). */
void mx_vision_counts(mx_vision *v, unsigned long *encoded, unsigned long *hits);

/* The text model's inputs for a prompt holding the images' tokens: per token
 * the image row it takes (-1: its own embedding), the bidirectional spans,
 * M-RoPE positions and the rope shift decoding continues with. */
typedef struct {
    int n;
    int *embed_row;        /* [n] */
    int *span_lo, *span_hi; /* [n] each; NULL when the model has none */
    int *mpos;             /* [3][n]; NULL unless M-RoPE */
    int rope_shift;
    int n_deep;            /* DeepStack parts per image row (mx_seq_in.n_deep) */
} mx_vision_layout;
int mx_vision_layout_make(const mx_vision *v, const int32_t *ids, int n, const mx_image_input *imgs, int n_images,
                          mx_vision_layout *lay);
void mx_vision_layout_free(mx_vision_layout *lay);
#endif
