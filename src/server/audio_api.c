/* audio_api: OpenAI's POST /v1/audio/transcriptions and /v1/audio/translations
 * on a multipart/form-data body, independent of the HTTP transport.
 *
 * Fields: file (required, the audio), model (accepted: the server runs one),
 * language (transcriptions), prompt, response_format (json | text | srt |
 * verbose_json | vtt), temperature (0, the default: transformers' fallback
 * ladder with its thresholds, as OpenAI's whisper-1 does; > 0: that
 * temperature), timestamp_granularities[] (segment; word is refused: no
 * cross-attention alignment here), stream (false only). Any other field, a
 * repeated one or a malformed body is a 400 naming it. */
#define _GNU_SOURCE /* memmem */
#include "audio_api.h"
#include <ctype.h>
#include <strings.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 32

typedef struct {
    const char *name, *filename, *data;
    size_t nlen, flen, len;
} part;

static const char *find(const char *h, size_t hn, const char *n, size_t nn) { return nn <= hn ? memmem(h, hn, n, nn) : NULL; }

/* value of param `key` in a header line ("form-data; name=\"file\""), quoted or not */
static bool hparam(const char *line, size_t n, const char *key, const char **v, size_t *vl) {
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 1 <= n; i++) {
        if ((i == 0 || line[i - 1] == ';' || line[i - 1] == ' ') && !strncasecmp(line + i, key, kl) && line[i + kl] == '=') {
            size_t s = i + kl + 1;
            if (s < n && line[s] == '"') {
                const char *q = memchr(line + s + 1, '"', n - s - 1);
                if (!q) return false;
                *v = line + s + 1;
                *vl = (size_t)(q - *v);
            } else {
                size_t e = s;
                while (e < n && line[e] != ';' && line[e] != ' ') e++;
                *v = line + s;
                *vl = e - s;
            }
            return true;
        }
    }
    return false;
}

static int parse_multipart(const char *ctype, const char *body, size_t len, part *parts, int *np, char *err, size_t errn) {
    *np = 0;
    const char *bv;
    size_t bl;
    if (!ctype || strncasecmp(ctype, "multipart/form-data", 19)) {
        snprintf(err, errn, "the body must be multipart/form-data (got %s)", ctype ? ctype : "no Content-Type");
        return MX_ERR;
    }
    if (!hparam(ctype, strlen(ctype), "boundary", &bv, &bl) || !bl || bl > 200) {
        snprintf(err, errn, "multipart/form-data without a boundary");
        return MX_ERR;
    }
    char delim[208];
    int dl = snprintf(delim, sizeof delim, "\r\n--%.*s", (int)bl, bv);
    /* the first delimiter may start the body (no preamble, so no CRLF before it) */
    const char *p;
    if (len >= (size_t)dl - 2 && !memcmp(body, delim + 2, (size_t)dl - 2)) p = body + dl - 2;
    else {
        p = find(body, len, delim, (size_t)dl);
        if (!p) { snprintf(err, errn, "multipart body without its boundary"); return MX_ERR; }
        p += dl;
    }
    const char *end = body + len;
    for (;;) {
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') return MX_OK; /* closing delimiter */
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n') break;
        p += 2;
        const char *he = find(p, (size_t)(end - p), "\r\n\r\n", 4);
        if (!he) break;
        part pt = {0};
        for (const char *l = p; l < he;) { /* header lines */
            const char *le = find(l, (size_t)(he - l), "\r\n", 2);
            if (!le) le = he;
            size_t ln = (size_t)(le - l);
            if (ln > 20 && !strncasecmp(l, "Content-Disposition:", 20)) {
                if (!hparam(l + 20, ln - 20, "name", &pt.name, &pt.nlen)) {
                    snprintf(err, errn, "a multipart part has no name");
                    return MX_ERR;
                }
                hparam(l + 20, ln - 20, "filename", &pt.filename, &pt.flen);
            }
            l = le + 2;
        }
        const char *data = he + 4, *de = find(data, (size_t)(end - data), delim, (size_t)dl);
        if (!de) break;
        if (!pt.name) { snprintf(err, errn, "a multipart part has no Content-Disposition name"); return MX_ERR; }
        if (*np == MAX_PARTS) { snprintf(err, errn, "more than %d form fields", MAX_PARTS); return MX_ERR; }
        pt.data = data;
        pt.len = (size_t)(de - data);
        parts[(*np)++] = pt;
        p = de + dl;
    }
    snprintf(err, errn, "truncated multipart body");
    return MX_ERR;
}

static bool is(const part *p, const char *name) { return p->nlen == strlen(name) && !memcmp(p->name, name, p->nlen); }

static char *field_str(const part *p) { return mx_strndup(p->data, p->len); }

static const float LADDER[] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};

int mx_audio_api(mx_speech *sp, bool translate, const char *ctype, const char *body, size_t len, mx_audio_reply *rep) {
    memset(rep, 0, sizeof *rep);
    rep->code = 400;
    part parts[MAX_PARTS];
    int np = 0;
    if (parse_multipart(ctype, body, len, parts, &np, rep->err, sizeof rep->err)) return MX_OK;
    const part *file = NULL;
    char *lang = NULL, *prompt = NULL, *fmt_s = NULL;
    float temp = 0;
    bool have_temp = false;
    static const char *const known[] = {"file", "model", "language", "prompt", "response_format", "temperature", "timestamp_granularities[]",
                                        "timestamp_granularities", "stream"};
    for (int i = 0; i < np; i++) {
        const part *p = &parts[i];
        bool ok = false;
        for (size_t k = 0; k < MX_ARRAY_LEN(known); k++) ok |= is(p, known[k]);
        if (!ok || (translate && is(p, "language"))) {
            snprintf(rep->err, sizeof rep->err, "unsupported field '%.*s'", (int)MX_MIN(p->nlen, 64u), p->name);
            goto out;
        }
        bool repeatable = is(p, "timestamp_granularities[]") || is(p, "timestamp_granularities");
        for (int k = 0; k < i && !repeatable; k++)
            if (parts[k].nlen == p->nlen && !memcmp(parts[k].name, p->name, p->nlen)) {
                snprintf(rep->err, sizeof rep->err, "field '%.*s' given twice", (int)MX_MIN(p->nlen, 64u), p->name);
                goto out;
            }
        if (is(p, "file")) file = p;
        else if (is(p, "language")) lang = field_str(p);
        else if (is(p, "prompt")) prompt = field_str(p);
        else if (is(p, "response_format")) fmt_s = field_str(p);
        else if (is(p, "temperature")) {
            char *s = field_str(p), *e = NULL;
            temp = s ? strtof(s, &e) : NAN;
            bool bad = !s || e == s || *e || !(temp >= 0 && temp <= 1);
            free(s);
            if (bad) { snprintf(rep->err, sizeof rep->err, "temperature must be a number between 0 and 1"); goto out; }
            have_temp = true;
        } else if (is(p, "stream")) {
            if (!(p->len == 5 && !memcmp(p->data, "false", 5))) { snprintf(rep->err, sizeof rep->err, "stream: streaming transcription is not supported"); goto out; }
        } else if (repeatable) {
            if (p->len == 7 && !memcmp(p->data, "segment", 7)) continue;
            snprintf(rep->err, sizeof rep->err, "timestamp_granularities: '%.*s' is not supported (only segment)", (int)MX_MIN(p->len, 32u), p->data);
            goto out;
        }
    }
    if (!file) { snprintf(rep->err, sizeof rep->err, "the 'file' field (the audio) is missing"); goto out; }
    mx_wout_fmt fmt = MX_WOUT_JSON;
    if (fmt_s && mx_wout_parse(fmt_s, &fmt)) { snprintf(rep->err, sizeof rep->err, "response_format: %s", mx_errmsg()); goto out; }
    char fname[128];
    snprintf(fname, sizeof fname, "%.*s", (int)MX_MIN(file->flen ? file->flen : 4, 100u), file->flen ? file->filename : "file");
    float *pcm = NULL;
    size_t n = 0;
    mx_audio_opts ao = {mx_speech_rate(sp), 0};
    if (mx_audio_load_mem(file->data, file->len, fname, &ao, &pcm, &n, NULL)) {
        snprintf(rep->err, sizeof rep->err, "%s", mx_errmsg());
        goto out;
    }
    mx_whisper_opts o;
    mx_whisper_opts_defaults(&o);
    o.language = lang && *lang ? lang : NULL;
    o.translate = translate;
    const mx_whisper_cfg *g = mx_speech_cfg(sp);
    o.timestamps = fmt >= MX_WOUT_VERBOSE_JSON && g->timestamp_begin < g->vocab; /* segments with times when the model can */
    if (!have_temp || temp == 0) {
        o.temperatures = LADDER;
        o.n_temperatures = (int)MX_ARRAY_LEN(LADDER);
        o.compression_ratio_threshold = 1.35f;
        o.logprob_threshold = -1.0f;
        o.no_speech_threshold = 0.6f;
    } else {
        o.temperatures = &temp;
        o.n_temperatures = 1;
    }
    int32_t *pids = NULL;
    int npids = 0;
    if (prompt && *prompt && mx_speech_prompt_ids(sp, prompt, &pids, &npids)) {
        snprintf(rep->err, sizeof rep->err, "prompt: %s", mx_errmsg());
        free(pcm);
        goto out;
    }
    o.prompt = pids;
    o.n_prompt = npids;
    mx_whisper_result r;
    int rc = mx_speech_transcribe(sp, pcm, n, &o, &r);
    free(pcm);
    free(pids);
    if (rc) { snprintf(rep->err, sizeof rep->err, "%s", mx_errmsg()); goto out; }
    rc = mx_wout_write(&r, fmt, translate ? "translate" : "transcribe", &rep->body);
    mx_whisper_result_free(&r);
    if (rc) { rep->code = 500; snprintf(rep->err, sizeof rep->err, "%s", mx_errmsg()); goto out; }
    rep->code = 200;
    rep->content_type = fmt == MX_WOUT_JSON || fmt == MX_WOUT_VERBOSE_JSON ? "application/json" : "text/plain; charset=utf-8";
out:
    free(lang);
    free(prompt);
    free(fmt_s);
    return MX_OK;
}
