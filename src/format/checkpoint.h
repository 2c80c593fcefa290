/* checkpoint: a Hugging Face / MLX model folder opened for loading.
 * config.json (with a nested text_config taking precedence), optional
 * generation_config.json, and the safetensors files: model.safetensors, the
 * shards named by model.safetensors.index.json, or every *.safetensors.
 * Tensors are looked up by name across shards; loaders "take" the ones they
 * use so that mx_ckpt_check_unused() can refuse stray tensors by name. */
#ifndef MX_CHECKPOINT_H
#define MX_CHECKPOINT_H
#include "json.h"
#include "safetensors.h"

typedef struct {
    char *dir;
    char *config_path;
    json_t *config;
    mx_cfg cfg;           /* file = config_path */
    json_t *gen_config;   /* NULL when absent */
    mx_st_file *files;
    int n_files;
    mx_tensor **index;    /* open-addressing hash over all tensors */
    size_t index_cap;
    int n_tensors;
    /* A vision-language checkpoint (config.json has vision_config) holds the
     * text model under a prefix: "model.X" and "lm_head.X" are found as
     * text_prefix + X and head_prefix + X when not present as named (plain
     * layouts keep "model." / "lm_head."). The text model and the vision
     * side each bind from their own mx_ckpt of the folder, and each leaves
     * the other's tensors alone: scope TEXT skips what lies outside the text
     * namespaces when checking for stray tensors, VISION what lies inside. */
    const char *text_prefix, *head_prefix;
    enum { MX_CKPT_ALL, MX_CKPT_TEXT, MX_CKPT_VISION } scope;
} mx_ckpt;

/* load_weights=false opens only the configs (tokenizer-only folders). */
int mx_ckpt_open(const char *dir, bool load_weights, mx_ckpt *ck);
void mx_ckpt_close(mx_ckpt *ck);
mx_tensor *mx_ckpt_find(const mx_ckpt *ck, const char *name); /* packaged names resolved, see above */
/* Finds and marks used; NULL without error when absent. */
mx_tensor *mx_ckpt_take(mx_ckpt *ck, const char *name);
/* Like take, but a missing tensor is an error naming it. */
mx_tensor *mx_ckpt_require(mx_ckpt *ck, const char *name);
/* Every tensor not taken must match one of the glob patterns ('*' matches any
 * run of characters); otherwise an "unexpected tensor" error names it. */
int mx_ckpt_check_unused(const mx_ckpt *ck, const char *const *ignore, int n_ignore);
bool mx_glob_match(const char *pat, const char *s);

/* A tensor-name rewrite for checkpoints whose modules group several of the
 * engine's layers (LongCat's two attention sublayers per layer): a name that
 * starts with `from` (one "%d", the layer i, and optionally a second, the
 * sublayer j; digits only) gets that prefix replaced by `to` with "%d" =
 * i * mult + j (j = 0 without a second "%d"). */
typedef struct { const char *from, *to; int mult; } mx_rename;
/* Applies the first matching rule to every tensor name and rebuilds the
 * index; errors then name tensors as renamed. */
int mx_ckpt_rename(mx_ckpt *ck, const mx_rename *rules, int n);
#endif
