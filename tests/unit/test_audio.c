/* Audio input: decoding every accepted container (written here with
 * libsndfile from the whisper fixture's speech), mono mixing, resampling,
 * hostile files (absurd headers, truncation, garbage, empty, non-finite
 * samples, over-long audio), the Slaney mel bank and the log-mel features
 * against the whisper fixture (tests/fixtures/whisper; run from the repo
 * root), the FFT against a direct DFT. */
#define _GNU_SOURCE
#include "test.h"
#include "audio/audio.h"
#include "audio/mel.h"
#include "fixtures.h"
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *FX = "tests/fixtures/whisper";
static char g_tmp[64];

static char *tmp_path(const char *name) { return mx_path_join(g_tmp, name); }

/* Writes x (n mono samples at rate; stereo when ch == 2: L = x, R = -x/2) in format fmt. */
static int write_sf(const char *path, int fmt, int rate, int ch, const float *x, size_t n) {
    SF_INFO si = {.samplerate = rate, .channels = ch, .format = fmt};
    SNDFILE *f = sf_open(path, SFM_WRITE, &si);
    if (!f) return -1;
    float *b = malloc(sizeof(float) * n * (size_t)ch);
    for (size_t i = 0; i < n; i++) {
        b[i * (size_t)ch] = x[i];
        if (ch == 2) b[i * 2 + 1] = -0.5f * x[i];
    }
    sf_count_t w;
    int sub = fmt & SF_FORMAT_SUBMASK;
    if (sub == SF_FORMAT_PCM_16 || sub == SF_FORMAT_PCM_24 || sub == SF_FORMAT_PCM_32) {
        /* integers, so that x = int16 / 32768 is written exactly (libsndfile scales floats by 32767) */
        int *iv = malloc(sizeof(int) * n * (size_t)ch);
        for (size_t i = 0; i < n * (size_t)ch; i++) iv[i] = (int)lrintf(b[i] * 32768.0f) * 65536;
        w = sf_writef_int(f, iv, (sf_count_t)n);
        free(iv);
    } else w = sf_writef_float(f, b, (sf_count_t)n);
    free(b);
    sf_close(f);
    return w == (sf_count_t)n ? 0 : -1;
}

/* signal-to-noise ratio in dB of y against x, best lag in [-maxlag, maxlag] */
static double snr_db(const float *x, size_t nx, const float *y, size_t ny, int maxlag) {
    double best = -1e9;
    for (int lag = -maxlag; lag <= maxlag; lag++) {
        double s = 0, e = 0;
        for (size_t i = 0; i < nx; i++) {
            long j = (long)i + lag;
            double yv = j >= 0 && (size_t)j < ny ? y[j] : 0;
            s += (double)x[i] * x[i];
            e += (x[i] - yv) * (x[i] - yv);
        }
        double r = 10 * log10(s / (e + 1e-30));
        if (r > best) best = r;
    }
    return best;
}

static void test_formats(const float *ref, size_t n) {
    mx_audio_opts o = {16000, 0};
    struct { const char *name, *file; int fmt; bool exact; double min_snr; } F[] = {
        {"wav pcm16", "a.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, true, 0},
        {"wav pcm24", "b.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_24, true, 0},
        {"wav pcm32", "c.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_32, true, 0},
        {"wav float", "d.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, true, 0},
        {"wav extensible", "e.wav", SF_FORMAT_WAVEX | SF_FORMAT_PCM_16, true, 0},
        {"rf64", "f.wav", SF_FORMAT_RF64 | SF_FORMAT_PCM_16, true, 0},
        {"aiff", "g.aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_16, true, 0},
        {"flac", "h.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, true, 0},
        {"ogg vorbis", "i.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, false, 8},
        {"ogg opus", "j.opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, false, 8},
        {"mp3", "k.mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, false, 8},
    };
    for (size_t k = 0; k < sizeof F / sizeof *F; k++) {
        char name[96];
        snprintf(name, sizeof name, "audio/format %s", F[k].name);
        char *p = tmp_path(F[k].file);
        if (write_sf(p, F[k].fmt, 16000, 1, ref, n)) { CHECK(name, 0, "libsndfile cannot write it: %s", sf_strerror(NULL)); free(p); continue; }
        float *x = NULL;
        size_t m = 0;
        mx_audio_info inf;
        if (mx_audio_load_file(p, &o, &x, &m, &inf)) { CHECK(name, 0, "%s", mx_errmsg()); free(p); continue; }
        if (F[k].exact) {
            CHECK(name, m == n && t_maxdiff(x, ref, n) == 0, "%zu samples (want %zu), max diff %g", m, n, m == n ? t_maxdiff(x, ref, n) : -1.0);
        } else {
            double r = snr_db(ref, n, x, m, 1200);
            CHECK(name, r >= F[k].min_snr && m + 2000 >= n && m <= n + 4000, "SNR %.1f dB, %zu samples (source %zu)", r, m, n);
        }
        /* the same bytes from memory */
        char *data;
        size_t len;
        mx_read_file(p, 1 << 26, &data, &len);
        float *y = NULL;
        size_t my = 0;
        snprintf(name, sizeof name, "audio/memory %s", F[k].name);
        int rc = mx_audio_load_mem(data, len, "upload", &o, &y, &my, NULL);
        CHECK(name, !rc && my == m && !memcmp(x, y, m * sizeof(float)), "%s", rc ? mx_errmsg() : "differs from the file decode");
        free(data);
        free(x);
        free(y);
        unlink(p);
        free(p);
    }
}

static void test_mix_resample(const float *ref, size_t n) {
    mx_audio_opts o = {16000, 0};
    char *p = tmp_path("st.wav");
    float *x = NULL;
    size_t m = 0;
    write_sf(p, SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000, 2, ref, n);
    int rc = mx_audio_load_file(p, &o, &x, &m, NULL);
    float worst = 0;
    for (size_t i = 0; !rc && i < n && m == n; i++) worst = fmaxf(worst, fabsf(x[i] - 0.25f * ref[i]));
    CHECK("audio/stereo to mono = mean", !rc && m == n && worst < 1e-7f, "%s, diff %g", rc ? mx_errmsg() : "", worst);
    free(x);
    /* a 44.1 kHz stereo 440 Hz tone resampled to 16 kHz */
    size_t ns = 44100;
    float *tone = malloc(sizeof(float) * ns);
    for (size_t i = 0; i < ns; i++) tone[i] = 0.5f * (float)sin(2 * 3.14159265358979 * 440 * i / 44100.0);
    write_sf(p, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 44100, 2, tone, ns);
    rc = mx_audio_load_file(p, &o, &x, &m, NULL);
    double e = 0, s = 0;
    for (size_t i = 400; !rc && i + 400 < m; i++) {
        double want = 0.125 * sin(2 * 3.14159265358979 * 440 * i / 16000.0); /* (L + R) / 2 = x / 4 */
        e += (x[i] - want) * (x[i] - want);
        s += want * want;
    }
    CHECK("audio/resample 44.1k -> 16k", !rc && m >= 15999 && m <= 16001 && 10 * log10(s / e) > 60, "%s %zu samples, SNR %.1f dB",
          rc ? mx_errmsg() : "", m, rc ? 0 : 10 * log10(s / e));
    free(x);
    free(tone);
    unlink(p);
    free(p);
}

/* a canonical 44-byte WAV header */
static size_t wav_header(uint8_t *h, int ch, int rate, int bits, uint32_t data_bytes) {
    uint32_t v;
    uint16_t w;
    memcpy(h, "RIFF", 4);
    v = 36 + data_bytes; memcpy(h + 4, &v, 4);
    memcpy(h + 8, "WAVEfmt ", 8);
    v = 16; memcpy(h + 16, &v, 4);
    w = bits == 32 ? 3 : 1; memcpy(h + 20, &w, 2);
    w = (uint16_t)ch; memcpy(h + 22, &w, 2);
    v = (uint32_t)rate; memcpy(h + 24, &v, 4);
    v = (uint32_t)((int64_t)rate * ch * bits / 8); memcpy(h + 28, &v, 4); /* wraps for absurd rates, as a hostile file may */
    w = (uint16_t)(ch * bits / 8); memcpy(h + 32, &w, 2);
    w = (uint16_t)bits; memcpy(h + 34, &w, 2);
    memcpy(h + 36, "data", 4);
    memcpy(h + 40, &data_bytes, 4);
    return 44;
}

static void expect_fail(const char *name, const void *data, size_t len, double max_s, const char *want) {
    mx_audio_opts o = {16000, max_s};
    float *x = NULL;
    size_t n = 0;
    int rc = mx_audio_load_mem(data, len, "up.wav", &o, &x, &n, NULL);
    CHECK(name, rc && strstr(mx_errmsg(), want) && !x, "rc %d, %s", rc, rc ? mx_errmsg() : "accepted");
    free(x);
}

static void test_hostile(const float *ref, size_t n) {
    uint8_t *b = calloc(1, 44 + 8000 * 4);
    size_t h;
    /* a header that claims ~4 billion bytes of data over 800 real ones: what is there is read */
    h = wav_header(b, 1, 16000, 16, 0xFFFFFFF0u);
    for (int i = 0; i < 400; i++) { int16_t s = (int16_t)(ref[20000 + i] * 32768); memcpy(b + h + 2 * i, &s, 2); }
    mx_audio_opts o = {16000, 0};
    float *x = NULL;
    size_t m = 0;
    int rc = mx_audio_load_mem(b, h + 800, "huge.wav", &o, &x, &m, NULL);
    CHECK("audio/hostile absurd data size", !rc && m == 400, "%s %zu", rc ? mx_errmsg() : "", m);
    free(x);
    h = wav_header(b, 1, 16000, 16, 0);
    expect_fail("audio/hostile zero samples", b, h, 0, "up.wav: no audio samples");
    h = wav_header(b, 1000, 16000, 16, 8000);
    expect_fail("audio/hostile 1000 channels", b, h + 8000, 0, "up.wav");
    h = wav_header(b, 1, 0, 16, 800);
    expect_fail("audio/hostile rate 0", b, h + 800, 0, "up.wav");
    h = wav_header(b, 1, 2000000000, 16, 800);
    expect_fail("audio/hostile rate 2e9", b, h + 800, 0, "up.wav");
    h = wav_header(b, 1, 16000, 16, 8000);
    expect_fail("audio/hostile truncated header", b, 30, 0, "up.wav: cannot decode WAV");
    expect_fail("audio/hostile empty", b, 0, 0, "up.wav: empty file");
    expect_fail("audio/hostile garbage", "hello, world, this is not audio", 31, 0, "not a WAV, FLAC, Ogg, MP3 or AIFF file");
    /* non-finite float samples */
    h = wav_header(b, 1, 16000, 32, 16);
    float bad[4] = {0.1f, NAN, 0.2f, INFINITY};
    memcpy(b + h, bad, 16);
    expect_fail("audio/hostile NaN samples", b, h + 16, 0, "not a finite number");
    /* longer than the limit: stops early, bounded */
    h = wav_header(b, 1, 16000, 16, 16000);
    expect_fail("audio/hostile over the duration limit", b, h + 16000, 0.25, "longer than the limit of 0 s");
    h = wav_header(b, 1, 48000, 16, 8000 * 4);
    expect_fail("audio/hostile over the limit after resampling", b, h + 8000 * 4, 0.01, "longer than the limit");
    /* a FLAC magic with garbage behind it, a corrupt FLAC stream, a truncated Ogg */
    expect_fail("audio/hostile fake flac", "fLaC\0\0\0\x22garbagegarbagegarbagegarbagegarbage", 40, 0, "up.wav");
    char *p = tmp_path("t.flac");
    write_sf(p, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, ref, n);
    char *data;
    size_t len;
    mx_read_file(p, 1 << 26, &data, &len);
    for (size_t i = len / 3; i < len / 3 + 4000 && i < len; i++) data[i] ^= 0x5A;
    rc = mx_audio_load_mem(data, len, "c.flac", &o, &x, &m, NULL);
    CHECK("audio/hostile corrupt flac: an error or fewer samples, no crash", rc || m <= n + 4096, "%zu samples", m);
    if (!rc) free(x);
    free(data);
    unlink(p);
    free(p);
    p = tmp_path("t.ogg");
    write_sf(p, SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 1, ref, n);
    mx_read_file(p, 1 << 26, &data, &len);
    rc = mx_audio_load_mem(data, len / 2, "t.ogg", &o, &x, &m, NULL);
    CHECK("audio/hostile truncated ogg: no crash", rc || m < n, "%zu samples", m);
    if (!rc) free(x);
    for (size_t cut = 1; cut < 200 && cut < len; cut += 7) { /* every early cut is one error or some samples */
        rc = mx_audio_load_mem(data, cut, "t.ogg", &o, &x, &m, NULL);
        if (!rc) free(x);
    }
    printf("ok audio/hostile ogg cut anywhere in its headers\n");
    free(data);
    unlink(p);
    free(p);
    free(b);
}

static void test_fft_and_bank(void) {
    mx_mel *m = mx_mel_new(16000, 400, 160, 80, 0, 8000);
    CHECK("mel/new", m != NULL, "%s", mx_errmsg());
    if (!m) return;
    mx_st_file f;
    char *rp = mx_path_join(FX, "reference.safetensors");
    if (mx_st_open(rp, &f)) { CHECK("mel/reference", 0, "%s", mx_errmsg()); free(rp); mx_mel_free(m); return; }
    size_t nf = 0;
    float *ref = fx_read_f32(&f, "mel_filters", &nf);
    CHECK("mel/filters shape", ref && nf == 201 * 80, "%zu", nf);
    if (ref && nf == 201 * 80) {
        float d = t_maxdiff(mx_mel_filters(m), ref, nf), mx = fx_maxabs(ref, nf);
        CHECK("mel/filters = reference mel_filters", d <= 1e-6f * mx, "max diff %g (max %g)", d, mx);
    }
    free(ref);
    mx_st_close(&f);
    free(rp);
    mx_mel_free(m);
    /* bad parameters */
    CHECK("mel/bad params", !mx_mel_new(16000, 400, 160, 80, 0, 9000) && strstr(mx_errmsg(), "unsupported parameters"), "%s", mx_errmsg());
    /* the FFT of mixed-radix sizes (and a prime) against a direct DFT in long double */
    int sizes[] = {400, 512, 480, 441, 97, 16};
    for (int s = 0; s < 6; s++) {
        int N = sizes[s], B = N / 2 + 1;
        mx_mel *q = mx_mel_new(16000, N, N, 1, 0, 8000);
        float *x = malloc(sizeof(float) * (size_t)N);
        double *work = malloc(sizeof(double) * 6 * (size_t)N), *pw = malloc(sizeof(double) * (size_t)B);
        unsigned seed = 7u + (unsigned)s;
        for (int i = 0; i < N; i++) x[i] = t_randf(&seed);
        mx_mel_power(q, x, work, pw);
        double worst = 0, scale = 0;
        for (int k = 0; k < B; k++) {
            long double re = 0, im = 0;
            for (int i = 0; i < N; i++) {
                long double w = 0.5L - 0.5L * cosl(2 * 3.14159265358979323846L * i / N), a = -2 * 3.14159265358979323846L * (long double)k * i / N;
                re += w * x[i] * cosl(a);
                im += w * x[i] * sinl(a);
            }
            double want = (double)(re * re + im * im);
            worst = fmax(worst, fabs(pw[k] - want));
            scale = fmax(scale, want);
        }
        char name[64];
        snprintf(name, sizeof name, "mel/fft %d = DFT", N);
        CHECK(name, worst <= 1e-12 * scale, "max diff %g (scale %g)", worst, scale);
        free(x);
        free(work);
        free(pw);
        mx_mel_free(q);
    }
}

static void test_features(float *pcm, size_t n) {
    mx_st_file f;
    char *rp = mx_path_join(FX, "reference.safetensors");
    if (mx_st_open(rp, &f)) { CHECK("mel/features reference", 0, "%s", mx_errmsg()); free(rp); return; }
    size_t nr = 0;
    float *ref = fx_read_f32(&f, "input_features", &nr);
    mx_mel *m = mx_mel_new(16000, 400, 160, 80, 0, 8000);
    mx_pool *pool = mx_pool_new(2);
    float *feat = NULL;
    size_t frames = 0;
    double t0 = mx_now();
    int rc = mx_mel_features(m, pcm, n, 480000, pool, &feat, &frames);
    double t1 = mx_now();
    CHECK("mel/features shape", !rc && frames == 3000 && nr == 80 * 3000, "%s frames %zu", rc ? mx_errmsg() : "", frames);
    if (!rc && nr == 80 * 3000) {
        float d = t_maxdiff(feat, ref, nr);
        CHECK("mel/features = reference input_features (<= 1e-4)", d <= 1e-4f, "max diff %g", d);
        printf("# features max |diff| %.3g\n", d);
        printf("# features of 30 s: %.1f ms (2 threads)\n", (t1 - t0) * 1e3);
        /* the same one thread and in memory order: identical */
        float *f2 = NULL;
        size_t fr2;
        mx_mel_features(m, pcm, n, 480000, NULL, &f2, &fr2);
        CHECK("mel/features threads = one thread", f2 && !memcmp(f2, feat, nr * sizeof(float)), "differ");
        free(f2);
    }
    /* cut: samples shorter than the audio */
    float *f3 = NULL;
    size_t fr3;
    rc = mx_mel_features(m, pcm, n, 16000, NULL, &f3, &fr3);
    CHECK("mel/features cut to 1 s", !rc && fr3 == 100, "%s", rc ? mx_errmsg() : "");
    free(f3);
    CHECK("mel/features no samples", mx_mel_features(m, pcm, n, 0, NULL, &f3, &fr3) && strstr(mx_errmsg(), "no frames"), "%s", mx_errmsg());
    free(feat);
    free(ref);
    mx_mel_free(m);
    mx_pool_free(pool);
    mx_st_close(&f);
    free(rp);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mxaudioXXXXXX");
    if (!mkdtemp(g_tmp)) { printf("FAIL audio: mkdtemp\n"); return 1; }
    char *wav = mx_path_join(FX, "inputs/speech.wav");
    mx_audio_opts o = {16000, 0};
    float *pcm = NULL;
    size_t n = 0;
    mx_audio_info inf;
    int rc = mx_audio_load_file(wav, &o, &pcm, &n, &inf);
    CHECK("audio/fixture wav", !rc && n == 58520 && inf.src_rate == 16000 && inf.channels == 1 && !strcmp(inf.format, "WAV"), "%s %zu",
          rc ? mx_errmsg() : "", n);
    if (!rc) {
        test_fft_and_bank();
        test_features(pcm, n);
        test_formats(pcm, n);
        test_mix_resample(pcm, n);
        test_hostile(pcm, n);
    }
    float *none = NULL;
    size_t nn = 0;
    CHECK("audio/missing file", mx_audio_load_file("/nonexistent.wav", &o, &none, &nn, NULL) && strstr(mx_errmsg(), "/nonexistent.wav") && !none, "%s", mx_errmsg());
    free(pcm);
    free(wav);
    rmdir(g_tmp);
    TEST_END();
}
