/* mel: Whisper's log-mel spectrogram, as transformers' WhisperFeatureExtractor
 * computes it (_torch_extract_fbank_features):
 *
 *   pad the samples with zeros (or cut them) to the requested length;
 *   STFT: reflect-pad n_fft/2 each side (edge sample not repeated), periodic
 *   Hann window, hop, one-sided |X|^2 (1 + n_fft/2 bins); the last frame is
 *   dropped, so frames = samples / hop;
 *   mel = filters^T @ power with the Slaney-scale, Slaney-normalised triangular
 *   bank (transformers' mel_filter_bank, float64, then rounded to float32 as
 *   the extractor does);
 *   L = log10(max(mel, 1e-10)); L = max(L, max(L over everything) - 8);
 *   features = (L + 4) / 4, laid out [n_mels][frames].
 *
 * The FFT is a mixed-radix Cooley-Tukey one in double precision (n_fft = 400
 * = 4*4*5*5 for Whisper; any size works, prime factors > 5 cost O(n*p)). */
#ifndef MX_MEL_H
#define MX_MEL_H
#include "../base/base.h"
#include "../base/threadpool.h"

typedef struct mx_mel mx_mel;

/* n_fft in [16, 8192], hop in [1, n_fft], n_mels in [1, 512], 0 <= fmin < fmax <= rate / 2. */
mx_mel *mx_mel_new(int rate, int n_fft, int hop, int n_mels, double f_lo, double f_hi);
void mx_mel_free(mx_mel *m);
int mx_mel_bins(const mx_mel *m); /* 1 + n_fft / 2 */
const float *mx_mel_filters(const mx_mel *m); /* [bins][n_mels] */

/* The windowed one-sided power spectrum |FFT(window * frame)|^2 of n_fft
 * samples into pw[bins]; work holds 3 * n_fft complex doubles (6 * n_fft). */
void mx_mel_power(const mx_mel *m, const float *frame, double *work, double *pw);

/* Features of n samples padded with zeros or cut to `samples` (> 0): *out
 * (malloc'ed, [n_mels][*frames], frames = samples / hop). pool may be NULL. */
int mx_mel_features(const mx_mel *m, const float *pcm, size_t n, size_t samples, mx_pool *pool, float **out, size_t *frames);
#endif
