/* audio: decoding (libsndfile through virtual I/O over a file or memory),
 * mixing to mono and resampling (libsoxr). See audio.h. */
#define _GNU_SOURCE /* pread */
#include "audio.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CHANNELS 64
#define MIN_RATE 1000
#define MAX_RATE 768000
#define CHUNK_SAMPLES 65536 /* interleaved samples read per call */

/* ---- a byte source: memory or a file descriptor ---- */
typedef struct {
    const uint8_t *mem;
    int fd;
    sf_count_t len, pos;
} src_t;

static sf_count_t v_len(void *u) { return ((src_t *)u)->len; }
static sf_count_t v_tell(void *u) { return ((src_t *)u)->pos; }
static sf_count_t v_seek(sf_count_t off, int whence, void *u) {
    src_t *s = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? s->pos : s->len;
    if ((off > 0 && base > INT64_MAX - off) || base + off < 0) return -1;
    s->pos = base + off;
    return s->pos;
}
static sf_count_t v_read(void *ptr, sf_count_t count, void *u) {
    src_t *s = u;
    if (count <= 0 || s->pos >= s->len) return 0;
    sf_count_t n = MX_MIN(count, s->len - s->pos);
    if (s->mem) memcpy(ptr, s->mem + s->pos, (size_t)n);
    else {
        sf_count_t got = 0;
        while (got < n) {
            ssize_t r = pread(s->fd, (char *)ptr + got, (size_t)(n - got), (off_t)(s->pos + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += r;
        }
        n = got;
    }
    s->pos += n;
    return n;
}
static sf_count_t v_write(const void *p, sf_count_t n, void *u) { (void)p; (void)n; (void)u; return 0; }

/* The container from its first bytes (NULL: not one we read). */
static const char *sniff(const uint8_t *b, size_t n) {
    if (n >= 12 && (!memcmp(b, "RIFF", 4) || !memcmp(b, "RIFX", 4) || !memcmp(b, "RF64", 4)) && !memcmp(b + 8, "WAVE", 4)) return "WAV";
    if (n >= 12 && !memcmp(b, "FORM", 4) && (!memcmp(b + 8, "AIFF", 4) || !memcmp(b + 8, "AIFC", 4))) return "AIFF";
    if (n >= 4 && !memcmp(b, "fLaC", 4)) return "FLAC";
    if (n >= 4 && !memcmp(b, "OggS", 4)) return "Ogg";
    if (n >= 3 && !memcmp(b, "ID3", 3)) return "MP3"; /* an ID3v2 tag: MP3 (or, rarely, FLAC) behind it */
    if (n >= 2 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0 && (b[1] & 0x06)) return "MP3"; /* MPEG frame sync, layer != 0 */
    return NULL;
}

static bool major_ok(const char *kind, int fmt) {
    int major = fmt & SF_FORMAT_TYPEMASK;
    if (!strcmp(kind, "WAV")) return major == SF_FORMAT_WAV || major == SF_FORMAT_WAVEX || major == SF_FORMAT_RF64;
    if (!strcmp(kind, "AIFF")) return major == SF_FORMAT_AIFF;
    if (!strcmp(kind, "FLAC")) return major == SF_FORMAT_FLAC;
    if (!strcmp(kind, "Ogg")) return major == SF_FORMAT_OGG;
    return major == SF_FORMAT_MPEG || major == SF_FORMAT_FLAC; /* "MP3": an ID3 tag may front either */
}

/* ---- output: growing mono buffer, resampled on the way ---- */
typedef struct {
    float *x;
    size_t n, cap, max;
    soxr_t rs;
    const char *name;
} sink_t;

static int sink_put(sink_t *k, const float *p, size_t n) {
    if (n > k->max - k->n) return mx_set_err("%s: audio longer than the limit of %zu samples", k->name, k->max);
    if (k->n + n > k->cap) {
        size_t nc = MX_MAX(k->cap * 2, k->n + n + 4096);
        if (nc > k->max) nc = k->max;
        float *q = mx_realloc(k->x, nc * sizeof(float));
        if (!q) return MX_ERR;
        k->x = q;
        k->cap = nc;
    }
    memcpy(k->x + k->n, p, n * sizeof(float));
    k->n += n;
    return MX_OK;
}

/* Feeds mono samples (NULL, 0 = end of input) through the resampler. */
static int sink_feed(sink_t *k, const float *in, size_t n, float *tmp, size_t tmp_n) {
    if (!k->rs) return n ? sink_put(k, in, n) : MX_OK;
    for (;;) {
        size_t idone = 0, odone = 0;
        soxr_error_t e = soxr_process(k->rs, in, n, &idone, tmp, tmp_n, &odone);
        if (e) return mx_set_err("%s: resampling: %s", k->name, e);
        if (odone && sink_put(k, tmp, odone)) return MX_ERR;
        if (in) { in += idone; n -= idone; }
        if (in ? n == 0 && odone < tmp_n : odone == 0) return MX_OK;
    }
}

static int decode(src_t *src, const char *name, const mx_audio_opts *o, float **pcm, size_t *n_out, mx_audio_info *info) {
    uint8_t head[16];
    size_t hn = (size_t)v_read(head, sizeof head, src);
    src->pos = 0;
    if (hn == 0) return mx_set_err("%s: empty file", name);
    const char *kind = sniff(head, hn);
    if (!kind) return mx_set_err("%s: not a WAV, FLAC, Ogg, MP3 or AIFF file", name);
    if (o->rate < MIN_RATE || o->rate > MAX_RATE) return mx_set_err("%s: output rate %d Hz is out of range", name, o->rate);
    double max_s = o->max_seconds > 0 ? o->max_seconds : MX_AUDIO_MAX_SECONDS;
    SF_VIRTUAL_IO vio = {v_len, v_seek, v_read, v_write, v_tell};
    SF_INFO si;
    memset(&si, 0, sizeof si);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &si, src);
    if (!sf) return mx_set_err("%s: cannot decode %s: %s", name, kind, sf_strerror(NULL));
    sink_t k = {.name = name};
    float *buf = NULL, *mono = NULL, *tmp = NULL;
    int rc = MX_ERR;
    if (!major_ok(kind, si.format)) { mx_set_err("%s: unexpected contents for a %s file", name, kind); goto done; }
    if (si.channels < 1 || si.channels > MAX_CHANNELS) { mx_set_err("%s: %d channels (at most %d)", name, si.channels, MAX_CHANNELS); goto done; }
    if (si.samplerate < MIN_RATE || si.samplerate > MAX_RATE) {
        mx_set_err("%s: sample rate %d Hz (expected %d to %d)", name, si.samplerate, MIN_RATE, MAX_RATE);
        goto done;
    }
    sf_command(sf, SFC_SET_NORM_FLOAT, NULL, SF_TRUE);
    int ch = si.channels;
    size_t frames = CHUNK_SAMPLES / (size_t)ch;
    /* both limits: output samples and source frames read */
    k.max = (size_t)(max_s * o->rate) + 1;
    size_t max_in = (size_t)(max_s * si.samplerate) + 1, read_in = 0;
    size_t tmp_n = frames * ((size_t)o->rate / (size_t)si.samplerate + 2) + 1024;
    buf = mx_malloc(sizeof(float) * frames * (size_t)ch);
    mono = mx_malloc(sizeof(float) * frames);
    tmp = mx_malloc(sizeof(float) * tmp_n);
    if (!buf || !mono || !tmp) goto done;
    if (si.samplerate != o->rate) {
        soxr_error_t e = NULL;
        soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
        soxr_runtime_spec_t rt = soxr_runtime_spec(1);
        k.rs = soxr_create(si.samplerate, o->rate, 1, &e, &io, &q, &rt);
        if (!k.rs) { mx_set_err("%s: resampler: %s", name, e ? e : "cannot create"); goto done; }
    }
    for (;;) {
        sf_count_t got = sf_readf_float(sf, buf, (sf_count_t)frames);
        if (got <= 0) break;
        size_t g = (size_t)got;
        if (g > max_in - read_in) { mx_set_err("%s: audio longer than the limit of %.0f s", name, max_s); goto done; }
        read_in += g;
        for (size_t i = 0; i < g; i++) {
            float s = 0;
            for (int c = 0; c < ch; c++) s += buf[i * (size_t)ch + (size_t)c];
            s = ch == 1 ? s : s / (float)ch;
            if (!isfinite(s)) { mx_set_err("%s: a sample is not a finite number", name); goto done; }
            mono[i] = s;
        }
        if (sink_feed(&k, mono, g, tmp, tmp_n)) {
            if (strstr(mx_errmsg(), "longer than the limit")) mx_set_err("%s: audio longer than the limit of %.0f s", name, max_s);
            goto done;
        }
    }
    int err = sf_error(sf);
    if (err) { mx_set_err("%s: %s decoding failed: %s", name, kind, sf_error_number(err)); goto done; }
    if (read_in == 0) { mx_set_err("%s: no audio samples", name); goto done; }
    if (sink_feed(&k, NULL, 0, tmp, tmp_n)) goto done;
    if (k.n == 0) { mx_set_err("%s: no audio samples", name); goto done; }
    if (info) *info = (mx_audio_info){kind, si.samplerate, ch, (double)k.n / o->rate};
    *pcm = k.x;
    *n_out = k.n;
    k.x = NULL;
    rc = MX_OK;
done:
    if (k.rs) soxr_delete(k.rs);
    sf_close(sf);
    free(k.x);
    free(buf);
    free(mono);
    free(tmp);
    return rc;
}

int mx_audio_load_mem(const void *data, size_t len, const char *name, const mx_audio_opts *opts, float **pcm, size_t *n,
                      mx_audio_info *info) {
    *pcm = NULL;
    *n = 0;
    src_t s = {.mem = data, .fd = -1, .len = (sf_count_t)len};
    return decode(&s, name ? name : "audio", opts, pcm, n, info);
}

int mx_audio_load_file(const char *path, const mx_audio_opts *opts, float **pcm, size_t *n, mx_audio_info *info) {
    *pcm = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mx_set_err("%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return mx_set_err("%s: not a regular file", path);
    }
    src_t s = {.fd = fd, .len = st.st_size};
    int rc = decode(&s, path, opts, pcm, n, info);
    close(fd);
    return rc;
}
