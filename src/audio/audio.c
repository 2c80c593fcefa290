/* audio: decoding (libsndfile, or libvorbisfile / libopusfile for Ogg,
 * each through callbacks over a file or memory), mixing to mono and
 * resampling (libsoxr). See audio.h.
 *
 * Ogg and MP3 do not go through libsndfile: its Vorbis reader leaks the
 * vorbis_info of a stream whose headers fail to parse, and its MP3 reader
 * lets libmpg123 print a line to stderr for every bad frame (both found by
 * fuzz/fuzz_audio), which a server fed hostile uploads cannot afford;
 * libmpg123 is driven directly, quiet. */
#define _GNU_SOURCE /* pread */
#include "audio.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <mpg123.h>
#include <opusfile.h>
#include <sndfile.h>
#include <soxr.h>
#include <vorbis/vorbisfile.h>
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

static sf_count_t tmpl_v_len(void *u) { return ((src_t *)u)->len; }
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

/* An ID3v2 tag (10-byte header, syncsafe size) followed by "fLaC". */
static bool tag_hides_flac(src_t *src, const uint8_t *head, size_t hn) {
    (void)hn;
    sf_count_t size = ((sf_count_t)(head[6] & 0x7F) << 21) | ((head[7] & 0x7F) << 14) | ((head[8] & 0x7F) << 7) | (head[9] & 0x7F);
    uint8_t m[4];
    sf_count_t at = 10 + size + ((head[5] & 0x10) ? 10 : 0), save = src->pos;
    src->pos = at;
    bool flac = v_read(m, 4, src) == 4 && !memcmp(m, "fLaC", 4);
    src->pos = save;
    return flac;
}

static bool major_ok(const char *kind, int fmt) {
    int major = fmt & SF_FORMAT_TYPEMASK;
    if (!strcmp(kind, "WAV")) return major == SF_FORMAT_WAV || major == SF_FORMAT_WAVEX || major == SF_FORMAT_RF64;
    if (!strcmp(kind, "AIFF")) return major == SF_FORMAT_AIFF;
    if (!strcmp(kind, "FLAC")) return major == SF_FORMAT_FLAC;
    if (!strcmp(kind, "Ogg")) return major == SF_FORMAT_OGG;
    return major == SF_FORMAT_FLAC; /* "MP3" that reached libsndfile: an ID3 tag in front of FLAC */
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

/* ---- readers: interleaved float frames from one decoder ---- */
typedef struct reader {
    int channels, rate;
    /* frames read into buf (cap frames); 0 at the end; < 0 on error (message set) */
    long (*read)(struct reader *r, float *buf, long cap);
    void (*close)(struct reader *r);
    const char *name, *kind;
    SNDFILE *sf;
    OggVorbis_File vf;
    OggOpusFile *of;
    mpg123_handle *mh;
} reader;

static long sf_rd(reader *r, float *buf, long cap) {
    sf_count_t got = sf_readf_float(r->sf, buf, cap);
    if (got > 0) return (long)got;
    int err = sf_error(r->sf);
    if (err) return mx_set_err("%s: %s decoding failed: %s", r->name, r->kind, sf_error_number(err));
    return 0;
}
static void sf_cl(reader *r) { sf_close(r->sf); }

static size_t ov_rd_cb(void *ptr, size_t size, size_t nmemb, void *u) {
    if (!size) return 0;
    return (size_t)v_read(ptr, (sf_count_t)(size * nmemb), u) / size;
}
static int ov_seek_cb(void *u, ogg_int64_t off, int whence) { return v_seek(off, whence, u) < 0 ? -1 : 0; }
static long ov_tell_cb(void *u) { return (long)v_tell(u); }
static long ov_rd(reader *r, float *buf, long cap) {
    for (;;) {
        float **pcm;
        int bs;
        long got = ov_read_float(&r->vf, &pcm, (int)MX_MIN(cap, 4096), &bs);
        if (got == OV_HOLE) continue; /* a gap in the data: skipped, as decoders do */
        if (got < 0) return mx_set_err("%s: Ogg Vorbis decoding failed (error %ld)", r->name, got);
        vorbis_info *vi = ov_info(&r->vf, bs);
        if (got && (!vi || vi->channels != r->channels || vi->rate != r->rate))
            return mx_set_err("%s: the Ogg stream changes its channels or rate", r->name);
        for (long i = 0; i < got; i++)
            for (int c = 0; c < r->channels; c++) buf[i * r->channels + c] = pcm[c][i];
        return got;
    }
}
static void ov_cl(reader *r) { ov_clear(&r->vf); }

static int op_rd_cb(void *u, unsigned char *ptr, int n) { return (int)v_read(ptr, n, u); }
static int op_seek_cb(void *u, opus_int64 off, int whence) { return v_seek(off, whence, u) < 0 ? -1 : 0; }
static opus_int64 op_tell_cb(void *u) { return v_tell(u); }
static long op_rd(reader *r, float *buf, long cap) {
    for (;;) {
        int li;
        int got = op_read_float(r->of, buf, (int)MX_MIN(cap * r->channels, 1 << 20), &li);
        if (got == OP_HOLE) continue;
        if (got < 0) return mx_set_err("%s: Ogg Opus decoding failed (error %d)", r->name, got);
        if (got && op_channel_count(r->of, li) != r->channels) return mx_set_err("%s: the Ogg stream changes its channels", r->name);
        return got;
    }
}
static void op_cl(reader *r) { op_free(r->of); }

static mpg123_ssize_t mp_rd_cb(void *u, void *buf, size_t n) { return (mpg123_ssize_t)v_read(buf, (sf_count_t)n, u); }
static off_t mp_seek_cb(void *u, off_t off, int whence) { return (off_t)v_seek(off, whence, u); }
static long mp_rd(reader *r, float *buf, long cap) {
    for (;;) {
        size_t done = 0;
        int e = mpg123_read(r->mh, buf, (size_t)cap * (size_t)r->channels * sizeof(float), &done);
        if (e == MPG123_NEW_FORMAT) {
            long rate;
            int ch, enc;
            if (mpg123_getformat(r->mh, &rate, &ch, &enc) || rate != r->rate || ch != r->channels || enc != MPG123_ENC_FLOAT_32)
                return mx_set_err("%s: the MP3 stream changes its channels or rate", r->name);
            if (!done) continue;
        }
        if (e != MPG123_OK && e != MPG123_DONE && e != MPG123_NEW_FORMAT)
            return mx_set_err("%s: MP3 decoding failed: %s", r->name, mpg123_plain_strerror(e));
        if (done % ((size_t)r->channels * sizeof(float))) return mx_set_err("%s: MP3 decoding gave a partial frame", r->name);
        if (done || e == MPG123_DONE) return (long)(done / ((size_t)r->channels * sizeof(float)));
    }
}
static void mp_cl(reader *r) { mpg123_delete(r->mh); }

static int open_mp3(reader *r, src_t *src) {
    int err = 0;
    r->mh = mpg123_new(NULL, &err);
    if (!r->mh) return mx_set_err("%s: MP3 decoder: %s", r->name, mpg123_plain_strerror(err));
    long rate;
    int ch, enc;
    if (mpg123_param(r->mh, MPG123_ADD_FLAGS, MPG123_QUIET | MPG123_FORCE_FLOAT, 0) ||
        mpg123_replace_reader_handle(r->mh, mp_rd_cb, mp_seek_cb, NULL) || mpg123_open_handle(r->mh, src) ||
        mpg123_getformat(r->mh, &rate, &ch, &enc)) {
        mx_set_err("%s: cannot decode MP3: %s", r->name, mpg123_strerror(r->mh));
        mpg123_delete(r->mh);
        return MX_ERR;
    }
    if (enc != MPG123_ENC_FLOAT_32 || rate > INT32_MAX) {
        mpg123_delete(r->mh);
        return mx_set_err("%s: MP3 decoder gave no float output", r->name);
    }
    mpg123_format_none(r->mh); /* fix the format found: a change later is an error, not a new stream */
    mpg123_format(r->mh, rate, ch == 1 ? MPG123_MONO : MPG123_STEREO, MPG123_ENC_FLOAT_32);
    r->channels = ch;
    r->rate = (int)rate;
    r->read = mp_rd;
    r->close = mp_cl;
    return MX_OK;
}

static int open_reader(reader *r, src_t *src, const uint8_t *head, size_t hn) {
    if (!strcmp(r->kind, "MP3") && !(hn > 10 && !memcmp(head, "ID3", 3) && tag_hides_flac(src, head, hn))) return open_mp3(r, src);
    if (!strcmp(r->kind, "Ogg")) {
        /* the first packet (after the 27-byte page header and its segment table) says which codec */
        size_t at = hn > 26 ? 27 + (size_t)head[26] : hn;
        bool opus = at + 8 <= hn && !memcmp(head + at, "OpusHead", 8);
        bool vorbis = at + 7 <= hn && !memcmp(head + at, "\x01vorbis", 7);
        if (opus) {
            OpusFileCallbacks cb = {op_rd_cb, op_seek_cb, op_tell_cb, NULL};
            int err = 0;
            r->of = op_open_callbacks(src, &cb, NULL, 0, &err);
            if (!r->of) return mx_set_err("%s: cannot decode Ogg Opus (error %d)", r->name, err);
            r->channels = op_channel_count(r->of, -1);
            r->rate = 48000;
            r->read = op_rd;
            r->close = op_cl;
            return MX_OK;
        }
        if (!vorbis) return mx_set_err("%s: an Ogg file that is neither Vorbis nor Opus", r->name);
        ov_callbacks cb = {ov_rd_cb, ov_seek_cb, NULL, ov_tell_cb};
        int err = ov_open_callbacks(src, &r->vf, NULL, 0, cb);
        if (err) return mx_set_err("%s: cannot decode Ogg Vorbis (error %d)", r->name, err);
        vorbis_info *vi = ov_info(&r->vf, -1);
        if (!vi || vi->rate > INT32_MAX) { ov_clear(&r->vf); return mx_set_err("%s: Ogg Vorbis without stream info", r->name); }
        r->channels = vi->channels;
        r->rate = (int)vi->rate;
        r->read = ov_rd;
        r->close = ov_cl;
        return MX_OK;
    }
    SF_VIRTUAL_IO vio = {tmpl_v_len, v_seek, v_read, v_write, v_tell};
    SF_INFO si;
    memset(&si, 0, sizeof si);
    r->sf = sf_open_virtual(&vio, SFM_READ, &si, src);
    if (!r->sf) return mx_set_err("%s: cannot decode %s: %s", r->name, r->kind, sf_strerror(NULL));
    if (!major_ok(r->kind, si.format)) { sf_close(r->sf); return mx_set_err("%s: unexpected contents for a %s file", r->name, r->kind); }
    sf_command(r->sf, SFC_SET_NORM_FLOAT, NULL, SF_TRUE);
    r->channels = si.channels;
    r->rate = si.samplerate;
    r->read = sf_rd;
    r->close = sf_cl;
    return MX_OK;
}

static int decode(src_t *src, const char *name, const mx_audio_opts *o, float **pcm, size_t *n_out, mx_audio_info *info) {
    uint8_t head[300]; /* a first Ogg page header has up to 255 segments */
    size_t hn = (size_t)v_read(head, sizeof head, src);
    src->pos = 0;
    if (hn == 0) return mx_set_err("%s: empty file", name);
    const char *kind = sniff(head, hn);
    if (!kind) return mx_set_err("%s: not a WAV, FLAC, Ogg, MP3 or AIFF file", name);
    if (o->rate < MIN_RATE || o->rate > MAX_RATE) return mx_set_err("%s: output rate %d Hz is out of range", name, o->rate);
    double max_s = o->max_seconds > 0 ? o->max_seconds : MX_AUDIO_MAX_SECONDS;
    reader r = {.name = name, .kind = kind};
    if (open_reader(&r, src, head, hn)) return MX_ERR;
    sink_t k = {.name = name};
    float *buf = NULL, *mono = NULL, *tmp = NULL;
    int rc = MX_ERR;
    if (r.channels < 1 || r.channels > MAX_CHANNELS) { mx_set_err("%s: %d channels (at most %d)", name, r.channels, MAX_CHANNELS); goto done; }
    if (r.rate < MIN_RATE || r.rate > MAX_RATE) {
        mx_set_err("%s: sample rate %d Hz (expected %d to %d)", name, r.rate, MIN_RATE, MAX_RATE);
        goto done;
    }
    int ch = r.channels;
    size_t frames = CHUNK_SAMPLES / (size_t)ch;
    /* both limits: output samples and source frames read */
    k.max = (size_t)(max_s * o->rate) + 1;
    size_t max_in = (size_t)(max_s * r.rate) + 1, read_in = 0;
    size_t tmp_n = frames * ((size_t)o->rate / (size_t)r.rate + 2) + 1024;
    buf = mx_malloc(sizeof(float) * frames * (size_t)ch);
    mono = mx_malloc(sizeof(float) * frames);
    tmp = mx_malloc(sizeof(float) * tmp_n);
    if (!buf || !mono || !tmp) goto done;
    if (r.rate != o->rate) {
        soxr_error_t e = NULL;
        soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
        soxr_runtime_spec_t rt = soxr_runtime_spec(1);
        k.rs = soxr_create(r.rate, o->rate, 1, &e, &io, &q, &rt);
        if (!k.rs) { mx_set_err("%s: resampler: %s", name, e ? e : "cannot create"); goto done; }
    }
    for (;;) {
        long got = r.read(&r, buf, (long)frames);
        if (got < 0) goto done;
        if (got == 0) break;
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
    if (read_in == 0) { mx_set_err("%s: no audio samples", name); goto done; }
    if (sink_feed(&k, NULL, 0, tmp, tmp_n)) goto done;
    if (k.n == 0) { mx_set_err("%s: no audio samples", name); goto done; }
    if (info) *info = (mx_audio_info){kind, r.rate, ch, (double)k.n / o->rate};
    *pcm = k.x;
    *n_out = k.n;
    k.x = NULL;
    rc = MX_OK;
done:
    if (k.rs) soxr_delete(k.rs);
    r.close(&r);
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
