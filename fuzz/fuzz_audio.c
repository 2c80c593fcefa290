/* libFuzzer target: the audio path on untrusted bytes. Byte 0 picks the
 * output rate (16 kHz, or 8 / 22.05 / 44.1 kHz to drive the resampler) and a
 * duration limit of 1-64 s; the rest is the file, decoded from memory
 * (container sniffing, libsndfile's WAV / AIFF / FLAC / Ogg / MP3 readers,
 * mono mix, libsoxr). A rejected file must leave a one-line error; an accepted
 * one must hold 1..limit finite samples, and its first second goes through the
 * log-mel features (which must be finite). */
#include "audio/audio.h"
#include "audio/mel.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static mx_mel *g_mel;

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 1) return 0;
    static const int rates[4] = {16000, 8000, 22050, 44100};
    mx_audio_opts o = {rates[d[0] & 3], 1 + (d[0] >> 2)};
    float *x = NULL;
    size_t m = 0;
    if (mx_audio_load_mem(d + 1, n - 1, "fuzz.wav", &o, &x, &m, NULL)) {
        const char *e = mx_errmsg();
        if (!e || !*e || strchr(e, '\n') || x) abort();
        return 0;
    }
    if (m == 0 || m > (size_t)(o.max_seconds * o.rate) + 1) abort();
    for (size_t i = 0; i < m; i++) if (!isfinite(x[i])) abort();
    if (!g_mel && !(g_mel = mx_mel_new(16000, 400, 160, 80, 0, 8000))) abort();
    float *f = NULL;
    size_t fr = 0;
    if (mx_mel_features(g_mel, x, m, 16000, NULL, &f, &fr) || fr != 100) abort();
    for (size_t i = 0; i < 80 * fr; i++) if (!isfinite(f[i])) abort();
    free(f);
    free(x);
    return 0;
}
