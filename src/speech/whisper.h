/* whisper: speech-to-text decoding as transformers' WhisperForConditionalGeneration
 * .generate() does it (generation_whisper.py, logits_process.py), over any
 * encoder-decoder behind mx_s2t_model:
 *
 *   init tokens   <|startoftranscript|> [<|lang|>] [<|task|>] [<|notimestamps|>]:
 *                 the language given, or detected on the first window (argmax
 *                 of the decoder's first logits over the language tokens);
 *   rules         WhisperNoSpeechDetection, SuppressTokensAtBegin (at the first
 *                 generated token), SuppressTokens, WhisperTimeStampLogits
 *                 (timestamps in pairs, never decreasing, the first one
 *                 <= max_initial_timestamp_index, timestamps forced when their
 *                 total probability beats every text token), in that order;
 *                 then greedy, or sampling at a temperature with top-k;
 *   long form     audio over 30 s: sequential windows of 3000 frames from the
 *                 features of the whole recording; a window's tokens split into
 *                 segments at timestamp pairs, and the next window starts at the
 *                 last complete segment's end (or after the window when it
 *                 closes with a single timestamp), so no words repeat at edges;
 *   fallback      optional: a window whose compression ratio (zlib over token
 *                 bytes) or average log-probability crosses its threshold is
 *                 decoded again at the next temperature; one whose no-speech
 *                 probability is high and log-probability low is skipped.
 *
 * The generation config (generation_config.json) names the special tokens and
 * token lists; a folder without those keys gets them from the tokenizer
 * (<|en|>, <|transcribe|>, <|notimestamps|>, ...), as openai-whisper does. */
#ifndef MX_WHISPER_H
#define MX_WHISPER_H
#include "../base/base.h"
#include "../format/json.h"
#include "../tokenizer/tokenizer.h"

#define MX_WHISPER_MAX_LANGS 128

/* The decoder side of an encoder-decoder speech model. */
typedef struct {
    void *self;
    int vocab;
    int n_mels, n_frames;  /* one window of features: [n_mels][n_frames] (80 or 128, 3000) */
    int max_target;        /* decoder positions (max_target_positions) */
    /* Runs the encoder over one window; the decoder then attends to it. */
    int (*encode)(void *self, const float *mel);
    /* Empties the decoder's self-attention cache. */
    void (*restart)(void *self);
    /* Appends n tokens to the decoder; the last one's logits go to out[vocab]. */
    int (*feed)(void *self, const int32_t *tok, int n, float *out);
} mx_s2t_model;

typedef struct {
    int32_t sot, eot, transcribe, translate, notimestamps, prev_sot, nospeech; /* -1: none */
    int32_t timestamp_begin;   /* notimestamps + 1; >= vocab: the model has no timestamps */
    int32_t *suppress, *begin_suppress;
    int n_suppress, n_begin_suppress;
    int32_t lang_id[MX_WHISPER_MAX_LANGS];
    char lang_code[MX_WHISPER_MAX_LANGS][12];
    int n_lang;                /* 0: English-only (no language tokens) */
    int32_t forced[4];         /* forced_decoder_ids after the start token (-1: free) */
    int n_forced;
    int max_initial_ts;        /* -1: no limit */
    int max_length;            /* generation max_length (transformers' default 20) */
    int top_k;                 /* for sampling (default 50) */
    int vocab, max_target;
} mx_whisper_cfg;

/* From config.json, generation_config.json (may be NULL) and the tokenizer. */
int mx_whisper_cfg_load(mx_whisper_cfg *g, const mx_cfg *config, json_t *gen_config, const mx_tokenizer *tok);
void mx_whisper_cfg_free(mx_whisper_cfg *g);

/* Language code ("en") from a code or an English name ("english", "French"); NULL when unknown. */
const char *mx_whisper_lang_code(const char *name_or_code);
const char *mx_whisper_lang_name(const char *code); /* "english"; NULL when unknown */

typedef struct {
    const char *language;   /* code or name; NULL: detect (multilingual models) */
    bool translate;
    bool timestamps;        /* forced on for audio over 30 s, as transformers does */
    const float *temperatures; /* fallback ladder; NULL: {0} */
    int n_temperatures;
    float compression_ratio_threshold, logprob_threshold, no_speech_threshold; /* NAN: off */
    bool condition_on_prev; /* previous window's tokens as <|startofprev|> context */
    const int32_t *prompt;  /* initial prompt ids (<|startofprev|> first), first window only */
    int n_prompt;
    uint64_t seed;
} mx_whisper_opts;
void mx_whisper_opts_defaults(mx_whisper_opts *o);

typedef struct {
    double start, end;
    int seek;               /* window start, in mel frames */
    int32_t *tokens;        /* text and timestamp tokens */
    int n_tokens;
    char *text;
    float temperature, avg_logprob, compression_ratio, no_speech_prob;
} mx_whisper_seg;

typedef struct {
    mx_whisper_seg *seg;
    int n_seg;
    char language[12];      /* code of the language token used ("" when none) */
    char *text;             /* all segments' text */
    double duration;        /* seconds of audio */
    int32_t *tokens;        /* every generated token of every window, in order */
    int n_tokens;
    /* work done: windows encoded, decoder tokens run (fallback runs too) and their seconds */
    int n_windows, n_decoded;
    double t_encode, t_decode;
} mx_whisper_result;
void mx_whisper_result_free(mx_whisper_result *r);

/* Decodes features [n_mels][frames] (frames = samples / 160; exactly
 * m->n_frames for audio up to 30 s, longer for the long form) of `seconds`
 * of audio. */
int mx_whisper_transcribe(const mx_s2t_model *m, const mx_whisper_cfg *g, const mx_tokenizer *tok, const float *mel, int frames,
                          double seconds, const mx_whisper_opts *o, mx_whisper_result *r);

/* ---- pieces, exposed for tests ---- */
/* The logits rules for the next token given the decoder's tokens so far
 * (seq[0..n), the first generated one at begin): begin-suppress, suppress,
 * timestamps (when timestamps is true). In place. */
void mx_whisper_rules(const mx_whisper_cfg *g, bool timestamps, const int32_t *seq, int n, int begin, float *logits);
/* transformers' _retrieve_compression_ratio: raw / zlib-compressed token bytes. */
double mx_whisper_compression_ratio(const int32_t *tok, int n, int vocab);

/* ---- output formats ---- */
typedef enum { MX_WOUT_TEXT, MX_WOUT_JSON, MX_WOUT_VERBOSE_JSON, MX_WOUT_SRT, MX_WOUT_VTT } mx_wout_fmt;
int mx_wout_parse(const char *name, mx_wout_fmt *f); /* "text", "json", "verbose_json", "srt", "vtt" */
/* Appends r in format f (task: "transcribe" / "translate" for verbose_json). */
int mx_wout_write(const mx_whisper_result *r, mx_wout_fmt f, const char *task, mx_buf *out);
#endif
