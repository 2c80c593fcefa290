/* tokenizer: Hugging Face tokenizers (tokenizer.json + tokenizer_config.json),
 * byte-exact with the Rust library, or a SentencePiece tokenizer.model alone.
 *
 * Models BPE (byte-level and SentencePiece-style with byte fallback),
 * WordPiece, Unigram, WordLevel; the normalizers, pre-tokenizers,
 * post-processors and decoders of tokenizer.json; added tokens with their
 * special/normalized/lstrip/rstrip/single_word flags.
 *
 * A loaded tokenizer is immutable apart from an internal, locked word cache,
 * so one tokenizer may be used from several threads at once. */
#ifndef MX_TOKENIZER_H
#define MX_TOKENIZER_H
#include "../base/base.h"

typedef struct mx_tokenizer mx_tokenizer;

/* Loads DIR/tokenizer.json (+ tokenizer_config.json when present), or
 * DIR/tokenizer.model when there is no tokenizer.json. NULL + mx_errmsg()
 * "FILE: what is wrong" on bad input. */
mx_tokenizer *mx_tok_load(const char *dir);
void mx_tok_free(mx_tokenizer *t);

/* Encodes len bytes of text (invalid UTF-8 is read as U+FFFD). With
 * add_special the post-processor adds BOS/EOS/CLS... as HF does. *ids is
 * malloc'ed (caller frees; may be NULL when *n == 0). */
int mx_tok_encode(const mx_tokenizer *t, const char *text, size_t len, bool add_special, int32_t **ids, int *n);
/* Encoding options. split_special (HF's split_special_tokens) reads the
 * text of special tokens as plain text, except inside the `markup` ranges
 * (size_t pairs [start, end) of byte offsets into the text, sorted): a
 * rendered chat passes its template's markup there, so the special tokens
 * the template wrote are read as such and those in message content are not.
 * Non-special added tokens are matched everywhere, as HF does. */
typedef struct {
    bool add_special;       /* BOS/EOS/CLS... by the post-processor */
    bool split_special;
    const size_t *markup;
    size_t n_markup;
    double deadline;        /* mx_now() time past which encoding fails (0: none) */
} mx_tok_opts;
int mx_tok_encode_ex(const mx_tokenizer *t, const char *text, size_t len, const mx_tok_opts *o, int32_t **ids, int *n);
/* Bytes of the longest token string (vocabulary and added tokens). */
size_t mx_tok_max_token_bytes(const mx_tokenizer *t);
/* Decodes ids (decoder + clean_up_tokenization_spaces) and appends to out. */
int mx_tok_decode(const mx_tokenizer *t, const int32_t *ids, int n, bool skip_special, mx_buf *out);

/* The vocabulary string of an id (convert_ids_to_tokens); NULL when out of range. */
const char *mx_tok_token_str(const mx_tokenizer *t, int32_t id, size_t *len);
int32_t mx_tok_token_id(const mx_tokenizer *t, const char *s, size_t len); /* -1 when absent */
int mx_tok_vocab_size(const mx_tokenizer *t);
int32_t mx_tok_bos(const mx_tokenizer *t); /* -1 when none */
int32_t mx_tok_eos(const mx_tokenizer *t);
int32_t mx_tok_pad(const mx_tokenizer *t);
/* "bos_token", "eos_token", "unk_token", "pad_token", ... from
 * tokenizer_config.json; NULL when absent. */
const char *mx_tok_special_str(const mx_tokenizer *t, const char *which);
/* chat_template by name (NULL = "default" or the only one); NULL when none. */
const char *mx_tok_chat_template(const mx_tokenizer *t, const char *name);
bool mx_tok_is_special(const mx_tokenizer *t, int32_t id);
int64_t mx_tok_model_max_length(const mx_tokenizer *t); /* 0 when unknown */

/* Streaming detokenization: push ids one at a time; only complete UTF-8 text
 * is appended to out. After the last id, mx_detok_flush appends what was held
 * back; all appended pieces together equal mx_tok_decode of the ids. */
typedef struct mx_detok mx_detok;
mx_detok *mx_detok_new(const mx_tokenizer *t, bool skip_special);
int mx_detok_push(mx_detok *d, int32_t id, mx_buf *out_append);
int mx_detok_flush(mx_detok *d, mx_buf *out_append);
void mx_detok_free(mx_detok *d);

/* The bytes token id adds in the middle of a text: the decoders' output
 * without first-token rules (Metaspace prepend, Strip, WordPiece) or the
 * replacement of incomplete UTF-8, and without cleanup. Constrained
 * decoding matches these against its grammar. */
int mx_tok_token_bytes(const mx_tokenizer *t, int32_t id, mx_buf *out);

/* Loads a tokenizer from tokenizer.json text in memory (config may be NULL);
 * `name` is used in error messages. For tests and fuzzing. */
mx_tokenizer *mx_tok_load_json(const char *json, size_t len, const char *config, size_t config_len, const char *name);
#endif
