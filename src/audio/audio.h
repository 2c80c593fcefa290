/* audio: untrusted audio files in, mono float samples at one rate out.
 *
 * Containers: WAV (RIFF / RIFX / RF64 / WAVE_FORMAT_EXTENSIBLE; PCM 8-32 bit,
 * float, A-law, mu-law, IMA/MS ADPCM), AIFF and FLAC decoded by libsndfile,
 * MP3 by libmpg123, Ogg Vorbis by libvorbisfile and Ogg Opus by libopusfile;
 * the container is recognised from its magic bytes first, so libsndfile's
 * many other readers stay unreachable. Channels are averaged to
 * mono; other rates are resampled with libsoxr (HQ). Integer PCM is scaled as
 * libsndfile normalises it (16-bit: x / 32768), which is exactly what
 * Whisper's feature extractor is fed.
 *
 * Bounds: at most max_seconds of output (and of input at the source rate),
 * decoded in fixed chunks, so a header that claims billions of samples costs
 * nothing; rates outside [1 kHz, 768 kHz], more than 64 channels, no samples,
 * non-finite samples or a decoder error give one "NAME: what" error. */
#ifndef MX_AUDIO_H
#define MX_AUDIO_H
#include "../base/base.h"

#define MX_AUDIO_MAX_SECONDS (4.0 * 3600) /* default cap */

typedef struct {
    int rate;           /* output rate in Hz (e.g. 16000) */
    double max_seconds; /* 0: MX_AUDIO_MAX_SECONDS */
} mx_audio_opts;

/* What was decoded (for messages and --verbose). */
typedef struct {
    const char *format; /* "WAV", "FLAC", "Ogg", "MP3", "AIFF" */
    int src_rate, channels;
    double seconds; /* of output */
} mx_audio_info;

/* Decodes a file (read as it goes, never whole) or bytes in memory (name is
 * used in messages). *pcm is malloc'ed (caller frees), *n samples at
 * opts->rate. info may be NULL. */
int mx_audio_load_file(const char *path, const mx_audio_opts *opts, float **pcm, size_t *n, mx_audio_info *info);
int mx_audio_load_mem(const void *data, size_t len, const char *name, const mx_audio_opts *opts, float **pcm, size_t *n,
                      mx_audio_info *info);
#endif
