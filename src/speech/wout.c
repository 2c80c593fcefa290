/* wout: a transcription in OpenAI's response formats (text, json,
 * verbose_json, srt, vtt), shared by `mlxcel transcribe` and the server. */
#include "whisper.h"
#include <math.h>
#include <string.h>

int mx_wout_parse(const char *s, mx_wout_fmt *f) {
    static const char *const names[] = {"text", "json", "verbose_json", "srt", "vtt"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) { *f = (mx_wout_fmt)i; return MX_OK; }
    return mx_set_err("unknown output format \"%s\" (text, json, verbose_json, srt or vtt)", s);
}

/* HH:MM:SS,mmm (srt) or HH:MM:SS.mmm (vtt) */
static int stamp(mx_buf *o, double t, char sep) {
    long ms = t > 0 ? lround(t * 1000) : 0;
    return mx_buf_printf(o, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

/* a cue's text: trimmed, and "-->" cannot end the cue early */
static int cue_text(mx_buf *o, const char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t')) n--;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && !memcmp(s + i, "-->", 3)) { if (mx_buf_puts(o, "->")) return MX_ERR; i += 2; continue; }
        if (mx_buf_append(o, s + i, 1)) return MX_ERR;
    }
    return MX_OK;
}

static int append_json(mx_buf *out, json_t *j) {
    char *s = j ? json_dumps(j, JSON_REAL_PRECISION(8) | JSON_ENSURE_ASCII) : NULL;
    int rc = s ? mx_buf_puts(out, s) : mx_set_err("out of memory");
    free(s);
    json_decref(j);
    return rc ? rc : mx_buf_puts(out, "\n");
}

int mx_wout_write(const mx_whisper_result *r, mx_wout_fmt f, const char *task, mx_buf *out) {
    const char *text = r->text ? r->text : "";
    switch (f) {
    case MX_WOUT_TEXT: return mx_buf_printf(out, "%s\n", text);
    case MX_WOUT_JSON: return append_json(out, json_pack("{s:s}", "text", text));
    case MX_WOUT_VERBOSE_JSON: {
        const char *lname = r->language[0] ? mx_whisper_lang_name(r->language) : NULL;
        json_t *segs = json_array();
        for (int i = 0; i < r->n_seg; i++) {
            const mx_whisper_seg *s = &r->seg[i];
            json_t *toks = json_array();
            for (int k = 0; k < s->n_tokens; k++) json_array_append_new(toks, json_integer(s->tokens[k]));
            json_array_append_new(segs, json_pack("{s:i,s:i,s:f,s:f,s:s,s:o,s:f,s:f,s:f,s:f}", "id", i, "seek", s->seek, "start", s->start,
                                                  "end", s->end, "text", s->text ? s->text : "", "tokens", toks, "temperature",
                                                  (double)s->temperature, "avg_logprob", (double)s->avg_logprob, "compression_ratio",
                                                  (double)s->compression_ratio, "no_speech_prob", (double)s->no_speech_prob));
        }
        return append_json(out, json_pack("{s:s,s:s,s:f,s:s,s:o}", "task", task ? task : "transcribe", "language",
                                          lname ? lname : r->language, "duration", r->duration, "text", text, "segments", segs));
    }
    case MX_WOUT_SRT:
    case MX_WOUT_VTT: {
        bool srt = f == MX_WOUT_SRT;
        if (!srt && mx_buf_puts(out, "WEBVTT\n\n")) return MX_ERR;
        for (int i = 0; i < r->n_seg; i++) {
            const mx_whisper_seg *s = &r->seg[i];
            if ((srt && mx_buf_printf(out, "%d\n", i + 1)) || stamp(out, s->start, srt ? ',' : '.') || mx_buf_puts(out, " --> ") ||
                stamp(out, s->end, srt ? ',' : '.') || mx_buf_puts(out, "\n") || cue_text(out, s->text ? s->text : "") || mx_buf_puts(out, "\n\n"))
                return MX_ERR;
        }
        return out->data ? MX_OK : mx_buf_append(out, "", 0);
    }
    }
    return mx_set_err("bad output format");
}
