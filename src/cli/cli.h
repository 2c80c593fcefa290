/* cli: one mx_cmd per subcommand, each in its own cmd_*.c file with its
 * option table (opts.h); main.c dispatches, `mlxcel help` prints them. */
#ifndef MX_CLI_H
#define MX_CLI_H
#include "opts.h"
#include "../runtime/sampler.h"
#include "../runtime/spec.h"
#include "../nn/model.h"
#include <stddef.h>

extern const mx_cmd mx_cmd_generate, mx_cmd_chat, mx_cmd_serve, mx_cmd_bench, mx_cmd_tokenize, mx_cmd_template,
    mx_cmd_convert, mx_cmd_embed, mx_cmd_rerank, mx_cmd_arch, mx_cmd_download, mx_cmd_list, mx_cmd_rm, mx_cmd_inspect,
    mx_cmd_detect, mx_cmd_transcribe, mx_cmd_split_mtp;

/* The model folder -m names: a directory as is; a hub id (org/name, with
 * :revision) from the Hugging Face cache, downloaded when missing (unless
 * HF_HUB_OFFLINE=1). Returns a string to free, or NULL after printing one
 * line ("mlxcel CMD: ..."): no such directory, a GGUF file, not cached. */
char *cli_model_dir(const char *cmd, const char *spec);

/* generate --audio (cmd_transcribe.c): the raw encoder-decoder of a speech
 * model on one window of audio and a decoder prompt. format: text or json. */
int cli_generate_audio(const char *model_dir, const char *audio, const char *prompt_ids, int n_new, int chunk, int threads,
                       const mx_sampling *samp, bool ignore_eos, const char *logits_out, const char *format);

/* Progress bars on a terminal, plain lines otherwise (tasks shorter than
 * min_seconds print nothing). */
void cli_progress_init(double min_seconds);
bool cli_progress_tty(void);
void cli_progress_force_bar(void); /* --progress: a bar even when stderr is not a terminal */
void cli_fmt_bytes(double b, char *out, size_t n);
void cli_fmt_count(double n, char *out, size_t cap); /* 1.23 B, 4.5 M, 6.7 K */

/* Common option table entries (T: the command's options struct). */
#define OPT_MODEL(T, f)                                                                                                      \
    {"-m", "--model", NULL, OPT_STR, "MODEL", 0, 0, offsetof(T, f),                                                          \
     "model folder, or a hub id ORG/NAME[:REVISION] (taken from the Hugging Face cache; downloaded when missing)", NULL, 0}
#define OPT_THREADS(T, f)                                                                                                    \
    {"-t", "--threads", NULL, OPT_INT, "N", 1, 1024, offsetof(T, f), "threads (default: the physical cores)", NULL, OPT_NODEF}
#define OPT_TEMPLATES(T, name, file)                                                                                         \
    {NULL, "--chat-template", NULL, OPT_STR, "NAME", 0, 0, offsetof(T, name),                                                \
     "use a built-in chat template: plain, chatml, llama3, llama2, mistral, gemma, phi3, zephyr", NULL, 0},                  \
    {NULL, "--chat-template-file", NULL, OPT_STR, "FILE", 0, 0, offsetof(T, file), "use the Jinja chat template in FILE", NULL, 0}

/* Speculative decoding's options (runtime/spec.h), shared by the commands
 * that decode: --draft-model, --draft-max, --lookup-ngram. */
typedef struct {
    const char *draft_model;
    int draft_max, lookup_ngram;
} cli_spec_opts;
#define CLI_SPEC_DEFAULT_MAX 4
#define OPT_SPEC(T, f)                                                                                                       \
    {NULL, "--draft-model", NULL, OPT_STR, "DIR", 0, 0, offsetof(T, f.draft_model),                                          \
     "speculative decoding with this draft model (the target's tokenizer; or a next-n module split-mtp wrote)", NULL, 0},   \
    {NULL, "--draft-max", NULL, OPT_INT, "N", 1, 64, offsetof(T, f.draft_max), "tokens drafted per verification pass", NULL, 0}, \
    {NULL, "--lookup-ngram", NULL, OPT_INT, "N", 0, 64, offsetof(T, f.lookup_ngram),                                         \
     "speculative decoding by prompt lookup: draft what followed the last earlier match of the last N..1 tokens", NULL, 0}
/* KV cache types (kernels/kvcache.h), shared by generate, chat, bench and
 * serve: --cache-type-k, --cache-type-v (llama.cpp's names), --kv-bits
 * (mlx-lm's: both q8_0 or both q4_0). One value for the process, set in
 * the default kernel policy before the model loads. */
typedef struct {
    const char *k, *v;
    int bits, max_kv;
} cli_kv_opts;
#define OPT_KV(T, f)                                                                                                         \
    {NULL, "--cache-type-k", NULL, OPT_CHOICE, NULL, 0, 0, offsetof(T, f.k),                                                 \
     "the type attention caches store keys as: f32 (exact, default), f16, bf16, q8_0 / q4_0 (32-value blocks with an f16 scale)", \
     MX_KV_TYPE_CHOICES, 0},                                                                                                 \
    {NULL, "--cache-type-v", NULL, OPT_CHOICE, NULL, 0, 0, offsetof(T, f.v), "the type attention caches store values as (as --cache-type-k)", \
     MX_KV_TYPE_CHOICES, 0},                                                                                                 \
    {NULL, "--kv-bits", NULL, OPT_INT, "N", 4, 8, offsetof(T, f.bits), "8: q8_0 keys and values, 4: q4_0 (mlx-lm's option)", NULL, 0}, \
    {NULL, "--max-kv-size", NULL, OPT_INT, "N", 16, 1 << 24, offsetof(T, f.max_kv),                                        \
     "attention reads the first 4 and the last N - 4 keys, from a ring of rows (mlx-lm's rotating cache; changes the output past N tokens)", NULL, 0}
/* --fast (kernels/policy.h `fast`): on every command that runs a model's
 * products; into the default policy before the model loads. */
#define OPT_FAST(T, f)                                                                                                       \
    {NULL, "--fast", NULL, OPT_FLAG, NULL, 0, 0, offsetof(T, f),                                                             \
     "faster, less exact products: BF16 weights take x rounded to bf16, the MLP's gate/up/down 8-bit activation codes (or MLXCEL_FAST=1)", \
     NULL, 0}
void cli_fast_apply(bool on);
/* Sets the default policy's cache types from the options. Returns 0, or 2
 * after printing one line "mlxcel CMD: ..." (a --kv-bits other than 4 or 8,
 * or given with --cache-type-k/-v). */
int cli_kv_apply(const char *cmd, const cli_kv_opts *o);
/* After the model loads: one line on stderr when cache types were asked for
 * and no layer of m keeps attention K/V rows (they are ignored). */
void cli_kv_note(const char *cmd, const mx_model *m);
/* "KV cache 12.6 MB (12582912 bytes) for 4096 positions (f16 keys, f16 values)" (--verbose, bench). */
void cli_kv_describe(const mx_kv *kv, char *out, size_t n);

/* Fills cfg from the options (cfg->kind 0: no speculation asked for); a
 * draft model is opened into *draft and checked against target's tokenizer.
 * Returns 0, or 1 after printing one line "mlxcel CMD: ...". */
int cli_spec_open(const char *cmd, const cli_spec_opts *o, const mx_textmodel *target, mx_textmodel *draft, mx_spec_cfg *cfg);
#endif
