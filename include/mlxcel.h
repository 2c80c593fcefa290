/* mlxcel.h: the public C API of libmlxcel.
 *
 * The one header a program needs to run a model through the shared library
 * (build/libmlxcel.so, `cc prog.c -Iinclude -Lbuild -lmlxcel`). Every symbol
 * the library exports is declared here and starts with mlxcel_; everything
 * else in the library is hidden.
 *
 * Conventions:
 * - Handles are opaque (mlxcel_model). A handle is used by one thread at a
 *   time; different handles may be used on different threads at once.
 * - Every function that can fail returns an mlxcel_status: MLXCEL_OK (0) or a
 *   negative code; mlxcel_last_error() then gives a one-line message (per
 *   thread, valid until that thread's next call). The library never exits
 *   and never prints.
 * - Arrays and strings the library returns are allocated by it and freed
 *   with mlxcel_free(). Token ids are int32_t.
 * - Parameter structs are filled with their _default() function first, then
 *   changed field by field: later versions only append fields, and the
 *   defaults keep old programs' behaviour.
 * - The kernel environment variables of the CLI (MLXCEL_INT8, MLXCEL_BF16_DOT,
 *   MLXCEL_CPU) are read once, at the first mlxcel_model_load.
 */
#ifndef MLXCEL_H
#define MLXCEL_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MLXCEL_API __attribute__((visibility("default")))
#else
#define MLXCEL_API
#endif

/* Bumped when a declaration here changes incompatibly. */
#define MLXCEL_API_VERSION 1

typedef enum {
    MLXCEL_OK = 0,
    MLXCEL_ERR_ARG = -1,         /* an argument is invalid (NULL, out of range) */
    MLXCEL_ERR_LOAD = -2,        /* the model folder could not be opened (missing file, bad config, unknown family) */
    MLXCEL_ERR_UNSUPPORTED = -3, /* this model cannot do that (no tokenizer, no chat template, not a generator/embedder) */
    MLXCEL_ERR_CONTEXT = -4,     /* the prompt (plus max_tokens) does not fit the context */
    MLXCEL_ERR_RUNTIME = -5,     /* tokenizing, rendering or a forward pass failed (including out of memory) */
} mlxcel_status;

/* The library's release ("0.1.0") and MLXCEL_API_VERSION as it was built. */
MLXCEL_API const char *mlxcel_version(void);
MLXCEL_API int mlxcel_api_version(void);
/* The message of this thread's last failed call ("unknown error" before any). */
MLXCEL_API const char *mlxcel_last_error(void);
/* A status code's name ("MLXCEL_ERR_LOAD"). */
MLXCEL_API const char *mlxcel_status_name(int status);
/* Frees what the library returned (ids, text, logits, vectors); NULL is fine. */
MLXCEL_API void mlxcel_free(void *p);

/* ---- models ---- */

typedef struct mlxcel_model mlxcel_model;

typedef enum {
    MLXCEL_KIND_AUTO = 0,     /* from config.json's architectures: …ForCausalLM generates, other tasks embed */
    MLXCEL_KIND_GENERATE = 1, /* a text generator: generate, logits, chat template */
    MLXCEL_KIND_EMBED = 2,    /* an embedder (an encoder, or a decoder used as one): embed */
} mlxcel_kind;

typedef struct {
    int threads; /* worker threads including the caller; 0: the physical cores */
    int context; /* positions a generation holds (prompt + generated); 0: 4096 */
    int kind;    /* an mlxcel_kind */
} mlxcel_model_options;

MLXCEL_API mlxcel_model_options mlxcel_model_options_default(void);
/* Opens a model folder (config.json, *.safetensors, tokenizer, chat template,
 * as on the Hugging Face hub or as `mlxcel convert` writes it). opts may be
 * NULL (defaults). On success *out is the handle; on failure *out is NULL. */
MLXCEL_API int mlxcel_model_load(const char *dir, const mlxcel_model_options *opts, mlxcel_model **out);
MLXCEL_API void mlxcel_model_free(mlxcel_model *m);

/* The kind it was opened as (MLXCEL_KIND_GENERATE or MLXCEL_KIND_EMBED). */
MLXCEL_API int mlxcel_model_kind(const mlxcel_model *m);
/* Hugging Face model_type ("llama"). */
MLXCEL_API const char *mlxcel_model_type(const mlxcel_model *m);
/* Rows of the logits (the output vocabulary). */
MLXCEL_API int mlxcel_model_vocab_size(const mlxcel_model *m);
/* The context a generation may fill (opts.context). */
MLXCEL_API int mlxcel_model_context(const mlxcel_model *m);
/* Length of one embedding vector (embedders; 0 for generators). */
MLXCEL_API int mlxcel_model_embedding_size(const mlxcel_model *m);
/* Whether a generated token ends the reply (the config's EOS ids). */
MLXCEL_API int mlxcel_token_is_eos(const mlxcel_model *m, int32_t token);

/* ---- text ---- */

/* Encodes text (len bytes, UTF-8); add_special: the BOS/EOS the tokenizer's
 * post-processor adds. *ids (n_ids entries) is freed with mlxcel_free. */
MLXCEL_API int mlxcel_tokenize(const mlxcel_model *m, const char *text, size_t len, int add_special, int32_t **ids,
                               size_t *n_ids);
/* Decodes ids to UTF-8 text (*text NUL-terminated, *len bytes without the
 * NUL; len may be NULL); skip_special leaves out special tokens. */
MLXCEL_API int mlxcel_detokenize(const mlxcel_model *m, const int32_t *ids, size_t n_ids, int skip_special, char **text,
                                 size_t *len);

typedef struct {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content; /* UTF-8 text */
} mlxcel_message;

/* Renders a conversation with the model's chat template (the folder's, or a
 * role-prefixed plain format when it has none, as the CLI does);
 * add_generation_prompt opens the assistant's turn. */
MLXCEL_API int mlxcel_chat_apply(const mlxcel_model *m, const mlxcel_message *msgs, size_t n_msgs,
                                 int add_generation_prompt, char **text, size_t *len);
/* The same, encoded as the server encodes a chat (and `mlxcel generate -p`
 * when the model has a chat template): the ids a generation starts from. */
MLXCEL_API int mlxcel_chat_tokenize(const mlxcel_model *m, const mlxcel_message *msgs, size_t n_msgs,
                                    int add_generation_prompt, int32_t **ids, size_t *n_ids);

/* ---- generation ---- */

/* Sampling in Hugging Face's order (penalties, temperature, top-k, top-p,
 * min-p), then a draw from a generator seeded with `seed`; temperature 0 is
 * greedy. The ranges are the CLI's and the server's (out of range:
 * MLXCEL_ERR_ARG naming the field). */
typedef struct {
    float temperature;        /* [0, 100]; 0: greedy */
    int top_k;                /* [0, 2^24]; 0: off */
    float top_p;              /* [0, 1]; 1: off */
    float min_p;              /* [0, 1]; 0: off */
    float repetition_penalty; /* [0.01, 100]; 1: off */
    float presence_penalty;   /* [-2, 2]; 0: off */
    float frequency_penalty;  /* [-2, 2]; 0: off */
    int penalty_last_n;       /* tokens the penalties look back at; -1: all */
    uint64_t seed;            /* [0, 2^63-1]; same seed, same output */
    int max_tokens;           /* tokens to generate at most (>= 1) */
    int ignore_eos;           /* keep going past the end token */
} mlxcel_gen_params;

MLXCEL_API mlxcel_gen_params mlxcel_gen_params_default(void);

/* Called once per generated token (the end token too, with an empty piece):
 * piece is the text this token completes (UTF-8, possibly empty while a
 * character is still incomplete; not NUL-terminated), special tokens left
 * out. Return 0 to go on, non-zero to stop after this token. */
typedef int (*mlxcel_token_fn)(void *user, int32_t token, const char *piece, size_t piece_len);

/* Generates after prompt (n_prompt ids) until the end token, max_tokens, or
 * the callback stops it; each call starts from an empty cache. cb may be
 * NULL. n_generated (may be NULL) gets the number of tokens produced, also
 * when an error cut the generation short. */
MLXCEL_API int mlxcel_generate(mlxcel_model *m, const int32_t *prompt, size_t n_prompt, const mlxcel_gen_params *p,
                               mlxcel_token_fn cb, void *user, size_t *n_generated);

/* The logits of a prompt, from an empty cache: all_rows 0 gives the last
 * position's row ([vocab]), else one row per position ([n_prompt, vocab]).
 * *logits is freed with mlxcel_free. */
MLXCEL_API int mlxcel_logits(mlxcel_model *m, const int32_t *prompt, size_t n_prompt, int all_rows, float **logits);

/* ---- embeddings ---- */

/* n_inputs token sequences (ids[i], lens[i] ids each, as mlxcel_tokenize
 * gives them with add_special) -> *vectors [n_inputs, embedding_size], the
 * model's own pooling and normalisation (sentence-transformers config).
 * Inputs longer than the model's maximum length are cut to it. */
MLXCEL_API int mlxcel_embed(mlxcel_model *m, const int32_t *const *ids, const size_t *lens, size_t n_inputs,
                            float **vectors);

#ifdef __cplusplus
}
#endif
#endif
