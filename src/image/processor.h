/* processor: Hugging Face image processors as data. A family's processor is
 * a short description (src/image/proc_*.c, registered by the
 * image_processor_type of preprocessor_config.json) that reads its configs
 * into an mx_image_processor: which resize rule, which layout of views, which
 * prompt expansion, and their parameters. The steps themselves are shared
 * (processor.c): Pillow resizes on uint8, center crop, LLaVA-NeXT any-res
 * tiling, Idefics3 splitting, Qwen2-VL smart resize and patch grids, rescale
 * and normalize in HF's arithmetic (x * factor in double, then float32
 * (x - mean) / std), and the placeholder expansion the HF processor writes
 * into the prompt before tokenizing.
 *
 * Configs are untrusted: every size is range-checked when read, and what is
 * computed from an image (tiles, tokens) is bounded before anything is
 * allocated. */
#ifndef MX_IMAGE_PROCESSOR_H
#define MX_IMAGE_PROCESSOR_H
#include "image.h"
#include "../format/json.h"
#include "../base/base.h"
#include <stdbool.h>

typedef enum {
    MX_IP_RESIZE_SHORTEST_EDGE, /* short side -> size, long side int(size * long / short) (CLIP) */
    MX_IP_RESIZE_EXACT,         /* straight to size_h x size_w (SigLIP, Gemma 3) */
    MX_IP_RESIZE_SMART,         /* Qwen2-VL smart_resize to multiples of patch * merge */
    MX_IP_RESIZE_LONGEST_EDGE,  /* long side -> size, other int(...) made even (Idefics3) */
} mx_ip_resize;

typedef enum {
    MX_IP_LAYOUT_SINGLE,   /* one view */
    MX_IP_LAYOUT_ANYRES,   /* LLaVA-NeXT: base view + the best-fit grid's tiles */
    MX_IP_LAYOUT_SPLIT,    /* Idefics3: M x M tiles row-major + the global view */
    MX_IP_LAYOUT_PATCHIFY, /* Qwen2-VL: [grid_t*grid_h*grid_w, 3*temporal*patch*patch] */
} mx_ip_layout;

typedef enum {
    MX_IP_PROMPT_REPEAT, /* placeholder -> image_token x n */
    MX_IP_PROMPT_WRAP,   /* placeholder -> pre + image_token x n + post (Gemma 3) */
    MX_IP_PROMPT_GRID,   /* Idefics3's <row_r_col_c> tiles + global image */
    MX_IP_PROMPT_PREFIX, /* PaliGemma: image_token x n x images + BOS + text + "\n" */
} mx_ip_prompt;

#define MX_IP_MAX_PINPOINTS 64
#define MX_IP_MAX_VIEWS 256         /* views (tiles) of one image */
#define MX_IP_MAX_TOKENS (1 << 20)  /* placeholder tokens of one image */
#define MX_IP_MAX_VALUES (1 << 26)  /* floats of one image's pixel values (256 MB) */

typedef struct mx_image_processor {
    const struct mx_improc_family *family;
    mx_ip_resize resize;
    mx_ip_layout layout;
    mx_ip_prompt prompt;
    /* image */
    bool do_resize, do_center_crop, do_rescale, do_normalize, do_split;
    bool alpha_white;             /* composite alpha over white (Idefics3) instead of dropping it */
    int resample;                 /* Pillow filter number */
    double rescale_factor;
    float mean[3], std[3];
    int size_h, size_w;           /* EXACT target; SHORTEST_EDGE: size_w; LONGEST_EDGE: size_w */
    int crop_h, crop_w;
    int tile;                     /* SPLIT: max_image_size.longest_edge */
    int min_tiles, max_tiles;     /* GOT-OCR2's crop_to_patches grid bounds */
    bool thumbnail;               /* GOT-OCR2: the whole image as a last view when tiled */
    int64_t min_pixels, max_pixels; /* SMART */
    int smart_frames;             /* SMART: GLM-4V counts an image as this many frames against the pixel
                                     bounds and scales up a side below patch * merge (0: Qwen2-VL's rule) */
    int patch, merge, temporal;   /* SMART / PATCHIFY */
    int pinpoints[MX_IP_MAX_PINPOINTS][2], n_pinpoints; /* ANYRES, (height, width) */
    /* prompt */
    char image_token[64];         /* the repeated token (and the placeholder unless set) */
    char placeholder[64];         /* what marks an image in the prompt */
    char pre[96], post[96];       /* WRAP */
    char fake_token[64], global_token[64]; /* GRID */
    int tokens_per_view;          /* fixed count per view (Gemma 3, PaliGemma, Idefics3's image_seq_len) */
    int feature_patch;            /* LLaVA: tokens = (h/feature_patch)*(w/feature_patch) + extra */
    int extra_tokens;             /* LLaVA: num_additional_image_tokens - (strategy == "default") */
} mx_image_processor;

/* One image after preprocessing. */
typedef struct {
    float *pixels;          /* SINGLE/ANYRES/SPLIT: n_views x [3, h, w]; PATCHIFY: [n_patches, 3*t*p*p] */
    int n_views, h, w;
    size_t n_values;
    int grid_t, grid_h, grid_w; /* PATCHIFY, in patches */
    int rows, cols;         /* SPLIT tiles / ANYRES grid of views (0 x 0: no split) */
    int orig_h, orig_w;     /* the decoded image's size (image_sizes) */
    int n_tokens;           /* placeholder tokens this image expands to */
    mx_image resized;       /* the uint8 image right after the main resize (tests, debugging) */
    mx_image resized_base;  /* ANYRES: the base view's resize; GOT-OCR2: the thumbnail's */
} mx_image_input;

typedef struct mx_improc_family {
    const char *name;              /* image_processor_type */
    const char *const *aliases;
    /* Reads the family's parameters; pre = preprocessor_config.json,
     * proc = processor_config.json (root may be NULL), model = config.json
     * (root may be NULL; sub = its vision_config). The shared fields hold
     * HF's common defaults (CLIP mean/std, BICUBIC): the family sets its own,
     * then calls mx_improc_common to read the shared keys over them. */
    int (*configure)(mx_image_processor *p, const mx_cfg *pre, const mx_cfg *proc, const mx_cfg *model);
    /* A processor whose views or expansion are its own (Pixtral's native
     * resolution, GOT-OCR2's tiles, Aya Vision's tile markers) gives them
     * here, in its own file; NULL: the shared layout / prompt steps. */
    int (*preprocess)(const mx_image_processor *p, const mx_image *img, mx_image_input *out);
    int (*expand)(const mx_image_processor *p, const mx_image_input *im, mx_buf *b);
    struct mx_improc_family *next;
} mx_improc_family;

void mx_improc_register(mx_improc_family *f);
#define MX_IMAGE_PROCESSOR(id, ...)                                                       \
    static mx_improc_family mx_improc_##id = {__VA_ARGS__};                               \
    __attribute__((constructor)) static void mx_improc_register_##id(void) { mx_improc_register(&mx_improc_##id); }

/* Reads DIR/preprocessor_config.json (required), processor_config.json and
 * config.json (optional) and configures the family's processor. */
int mx_image_processor_load(const char *dir, mx_image_processor *p);
/* Decoded image -> the model's inputs and the placeholder count. */
int mx_image_preprocess(const mx_image_processor *p, const mx_image *img, mx_image_input *out);
void mx_image_input_free(mx_image_input *in);
/* Decodes as the family's processor converts to RGB (alpha dropped, or
 * composited over white). */
int mx_image_processor_decode(const mx_image_processor *p, const void *data, size_t len, int64_t max_pixels,
                              const char *what, mx_image *out);
/* Writes the prompt the HF processor tokenizes: each placeholder in text
 * replaced by its image's expansion, in order (PaliGemma: the image tokens
 * and bos_text before the text). The counts of placeholders and images must
 * match. *add_bos is false where the processor tokenizes without the
 * tokenizer's own BOS (PaliGemma writes it itself). */
int mx_image_expand_prompt(const mx_image_processor *p, const char *text, const mx_image_input *imgs, int n_images,
                           const char *bos_text, char **out, bool *add_bos);
/* The same over len bytes, appended to out. With out_markup (a rendered
 * chat's markup ranges in markup, size_t pairs as mx_tok_opts reads them)
 * only placeholders wholly in markup are images' (one in message content
 * stays text), none of them puts the images first, and out_markup gets the
 * output's ranges: the text's, carried over, and everything the processor
 * wrote (the image tokens are specials the template did not write). */
int mx_image_expand_marked(const mx_image_processor *p, const char *text, size_t len, const size_t *markup, size_t n_markup,
                           const mx_image_input *imgs, int n_images, const char *bos_text, mx_buf *out, mx_buf *out_markup,
                           bool *add_bos);

/* Shared steps for a family's own preprocess: n views of h x w allocated in
 * out (bounded), and one uint8 image rescaled and normalized into dst
 * channel-first as HF does. */
int mx_improc_alloc_views(mx_image_input *out, int n, int h, int w);
void mx_improc_to_chw(const mx_image_processor *p, const mx_image *im, float *dst);

/* Shared readers for family descriptions. Each names the file and key in
 * its error and checks the range; absent keys keep the default.
 * mx_improc_common reads do_resize / do_rescale / do_normalize /
 * do_center_crop, rescale_factor, resample, image_mean, image_std. */
int mx_improc_common(mx_image_processor *p, const mx_cfg *pre);
int mx_improc_size(const mx_cfg *c, const char *obj, const char *key, int def, int lo, int hi, int *out);
int mx_improc_str(const mx_cfg *c, const char *key, const char *def, char *out, size_t cap);
/* CLIP-style size / crop_size: "size": {"shortest_edge": S} or an int ->
 * SHORTEST_EDGE, {"height", "width"} -> EXACT; crop_size an object or an int. */
int mx_improc_clip_sizes(mx_image_processor *p, const mx_cfg *pre, int def);
/* LLaVA's token count: feature_patch and extra_tokens from processor_config
 * (patch_size, num_additional_image_tokens, vision_feature_select_strategy),
 * else from config.json. */
int mx_improc_llava_tokens(mx_image_processor *p, const mx_cfg *proc, const mx_cfg *model);
#endif
