/* speech: a speech-to-text model folder (Whisper) ready to transcribe: the
 * encoder-decoder, its tokenizer, the feature extractor of
 * preprocessor_config.json (mel bins, n_fft, hop, rate, chunk length) and
 * the generation config. Audio files go through audio/ (decoding,
 * resampling), features through audio/mel, decoding through speech/whisper.
 * One transcription runs at a time per mx_speech (a mutex), so a server can
 * share one. */
#ifndef MX_SPEECH_H
#define MX_SPEECH_H
#include "../speech/whisper.h"
#include "../audio/audio.h"
#include "../base/threadpool.h"

typedef struct mx_speech mx_speech;

/* True when DIR's config.json names a speech-to-text model (model_type whisper). */
bool mx_speech_folder(const char *dir);
int mx_speech_open(const char *dir, int threads, mx_speech **out);
void mx_speech_close(mx_speech *s);

const mx_tokenizer *mx_speech_tokenizer(const mx_speech *s);
const mx_whisper_cfg *mx_speech_cfg(const mx_speech *s);
const char *mx_speech_name(const mx_speech *s); /* the folder's base name (API model id) */
int mx_speech_rate(const mx_speech *s);         /* sampling rate the features expect */

/* Features of n samples: *frames = the window's frames for up to one chunk
 * (30 s, zero-padded), samples / hop beyond. *mel is malloc'ed [n_mels][frames]. */
int mx_speech_features(mx_speech *s, const float *pcm, size_t n, float **mel, int *frames);

/* A whole recording (samples at mx_speech_rate). */
int mx_speech_transcribe(mx_speech *s, const float *pcm, size_t n, const mx_whisper_opts *o, mx_whisper_result *r);

/* The raw encoder-decoder (for the parity contract of `generate --audio`):
 * encode one window of features, then feed decoder tokens; with all, out
 * gets one row of logits per token. Callers hold no lock: not for servers. */
int mx_speech_encode(mx_speech *s, const float *mel);
const float *mx_speech_encoder_out(const mx_speech *s); /* [positions, d_model] of the last encode */
void mx_speech_restart(mx_speech *s);
int mx_speech_feed(mx_speech *s, const int32_t *tok, int n, float *out, bool all);
int mx_speech_vocab(const mx_speech *s);
int mx_speech_max_target(const mx_speech *s);

/* The initial-prompt ids of a text: <|startofprev|> + encode(" " + text.strip()), as
 * WhisperTokenizer.get_prompt_ids. */
int mx_speech_prompt_ids(const mx_speech *s, const char *text, int32_t **ids, int *n);
#endif
