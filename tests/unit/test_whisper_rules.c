/* Whisper decoding rules (src/speech) on a scripted model: the logits
 * rules one by one, language detection, init tokens, the prompt, short-form
 * segments, the sequential long form over several windows (segments cut at
 * timestamp pairs, the next window starting at the last complete one, no
 * repeated words), temperature fallback, no-speech skips, the output formats,
 * and the compression ratio against transformers' zlib formula. */
#define _GNU_SOURCE
#include "test.h"
#include "speech/whisper.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* vocabulary: 0..39 text " A".." Z" ..., 40 eot, 41 sot, 42 en, 43 de, 44 translate, 45 transcribe,
 * 46 startoflm, 47 startofprev, 48 nospeech, 49 notimestamps, 50..63 timestamps 0.00..0.26 */
enum { V = 64, EOT = 40, SOT = 41, EN = 42, DE = 43, TRL = 44, TRS = 45, PREV = 47, NOSP = 48, NOTS = 49, TB = 50, NF = 20 };

typedef struct {
    int seek;              /* window being decoded (from the features) */
    int32_t fed[256];
    int n_fed;
    const int32_t *script[8]; /* per window (seek / 4 indexes a slot the test fills), tokens after the init ones */
    int script_seek[8], n_script;
    int init_len;          /* decoder input length before the first generated token */
    int runs[8];           /* decoder restarts per window */
    const int32_t *retry_script[8]; /* a window's second run (fallback) */
    float lang_bias_de;    /* detection: logit of <|de|> minus <|en|> */
    float nospeech_logit;
    int encodes;
} fake;

static int slot(fake *f, int seek) {
    for (int i = 0; i < f->n_script; i++) if (f->script_seek[i] == seek) return i;
    return -1;
}

static int f_encode(void *u, const float *mel) {
    fake *f = u;
    f->seek = (int)lrintf(mel[0]); /* the test's features hold the frame index */
    f->encodes++;
    return 0;
}
static void f_restart(void *u) {
    fake *f = u;
    f->n_fed = 0;
    int s = slot(f, f->seek);
    if (s >= 0) f->runs[s]++;
}
static int f_feed(void *u, const int32_t *t, int n, float *out) {
    fake *f = u;
    for (int i = 0; i < n && f->n_fed < 256; i++) f->fed[f->n_fed++] = t[i];
    for (int i = 0; i < V; i++) out[i] = 0;
    if (f->n_fed == 1 && f->fed[0] == SOT) { /* language detection / no-speech read these */
        out[EN] = 5;
        out[DE] = 5 + f->lang_bias_de;
        out[NOSP] = f->nospeech_logit;
    }
    int s = slot(f, f->seek);
    int k = f->n_fed - f->init_len;
    if (s >= 0 && k >= 0) {
        const int32_t *sc = f->runs[s] > 1 && f->retry_script[s] ? f->retry_script[s] : f->script[s];
        int len = 0;
        while (sc[len] >= 0) len++;
        out[k < len ? sc[k] : EOT] = 20;
    }
    return 0;
}

static mx_tokenizer *tiny_tok(void) {
    mx_buf j = {0};
    mx_buf_puts(&j, "{\"model\":{\"type\":\"WordLevel\",\"unk_token\":\" A\",\"vocab\":{");
    for (int i = 0; i < 40; i++) mx_buf_printf(&j, "%s\" %c%s\":%d", i ? "," : "", 'A' + i % 26, i >= 26 ? "2" : "", i);
    mx_buf_puts(&j, "}},\"decoder\":{\"type\":\"Fuse\"},\"added_tokens\":[");
    const char *sp[] = {"<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
                        "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"};
    for (int i = 0; i < 10; i++) mx_buf_printf(&j, "%s{\"id\":%d,\"content\":\"%s\",\"special\":true}", i ? "," : "", 40 + i, sp[i]);
    for (int i = 0; i < 14; i++) mx_buf_printf(&j, ",{\"id\":%d,\"content\":\"<|%d.%02d|>\",\"special\":false}", 50 + i, i * 2 / 100, i * 2 % 100);
    mx_buf_puts(&j, "]}");
    mx_tokenizer *t = mx_tok_load_json(j.data, j.len, NULL, 0, "tiny");
    mx_buf_free(&j);
    return t;
}

static void cfg_init(mx_whisper_cfg *g, bool with_langs) {
    memset(g, 0, sizeof *g);
    g->sot = SOT; g->eot = EOT; g->transcribe = TRS; g->translate = TRL; g->notimestamps = NOTS; g->prev_sot = PREV; g->nospeech = NOSP;
    g->timestamp_begin = TB;
    static int32_t sup[] = {39}, bsup[] = {0, EOT};
    g->suppress = sup; g->n_suppress = 1;
    g->begin_suppress = bsup; g->n_begin_suppress = 2;
    if (with_langs) {
        g->n_lang = 2;
        g->lang_id[0] = EN; strcpy(g->lang_code[0], "en");
        g->lang_id[1] = DE; strcpy(g->lang_code[1], "de");
    }
    g->max_initial_ts = 5;
    g->max_length = 40;
    g->top_k = 50;
    g->vocab = V;
    g->max_target = 64;
}

static bool only_allowed(const float *x, const char *allowed /* V chars: '1' allowed */) {
    for (int i = 0; i < V; i++) if ((x[i] != -INFINITY) != (allowed[i] == '1')) return false;
    return true;
}

static void fill(char *a, int lo, int hi, char c) { for (int i = lo; i < hi; i++) a[i] = c; }
static const char *dump(const float *x) {
    static char b[V + 1];
    for (int i = 0; i < V; i++) b[i] = x[i] == -INFINITY ? '0' : '1';
    b[V] = 0;
    return b;
}

static void test_rules(void) {
    mx_whisper_cfg g;
    cfg_init(&g, true);
    float x[V];
    char a[V + 1];
    a[V] = 0;
    int32_t seq[16] = {SOT, EN, TRS};
    /* no timestamps: begin-suppress at the first token, suppress always */
    for (int i = 0; i < V; i++) x[i] = 0;
    mx_whisper_rules(&g, false, seq, 3, 3, x);
    fill(a, 0, V, '1'); a[0] = a[EOT] = a[39] = '0';
    CHECK("rules/begin suppress + suppress", only_allowed(x, a), "%s", dump(x));
    for (int i = 0; i < V; i++) x[i] = 0;
    seq[3] = 5;
    mx_whisper_rules(&g, false, seq, 4, 3, x);
    fill(a, 0, V, '1'); a[39] = '0';
    CHECK("rules/suppress after the first token", only_allowed(x, a), "%s", dump(x));
    /* timestamps: the first token is a timestamp <= max_initial (5) */
    for (int i = 0; i < V; i++) x[i] = 0;
    mx_whisper_rules(&g, true, seq, 3, 3, x);
    fill(a, 0, V, '0'); fill(a, TB, TB + 6, '1');
    CHECK("rules/initial timestamp", only_allowed(x, a), "%s", dump(x));
    /* after a single timestamp: text cannot follow... (a timestamp >= it or eot, and since text would lose to the
     * timestamps' mass, a text-heavy row shows the pairing rule alone) */
    for (int i = 0; i < V; i++) x[i] = 0;
    x[EOT] = 30; /* the end strongly preferred, so that the timestamps' mass does not decide */
    int32_t s2[] = {SOT, EN, TRS, TB + 2, 7, TB + 4};
    mx_whisper_rules(&g, true, s2, 6, 3, x);
    fill(a, 0, V, '0'); fill(a, EOT, TB, '1'); fill(a, TB + 4, V, '1'); a[NOTS] = '0'; /* text below <|endoftext|> only is ruled out */
    CHECK("rules/after one timestamp: close the pair or end, not earlier ones", only_allowed(x, a), "%s", dump(x));
    /* after a pair: text only (and no timestamp before the last) */
    for (int i = 0; i < V; i++) x[i] = 0;
    x[7] = 30;
    int32_t s3[] = {SOT, EN, TRS, TB + 2, 7, TB + 4, TB + 4};
    mx_whisper_rules(&g, true, s3, 7, 3, x);
    fill(a, 0, V, '0'); fill(a, 0, TB, '1'); a[39] = a[NOTS] = '0';
    CHECK("rules/after a pair: no timestamp", only_allowed(x, a), "%s", dump(x));
    /* text then: timestamps must not go back (>= last + 1) */
    for (int i = 0; i < V; i++) x[i] = 0;
    x[7] = 30;
    int32_t s4[] = {SOT, EN, TRS, TB + 2, 7, TB + 4, TB + 4, 8};
    mx_whisper_rules(&g, true, s4, 8, 3, x);
    fill(a, 0, V, '1'); a[39] = a[NOTS] = '0'; fill(a, TB, TB + 5, '0');
    CHECK("rules/timestamps do not decrease", only_allowed(x, a), "%s", dump(x));
    /* timestamps' total probability above every text token: text is ruled out */
    for (int i = 0; i < V; i++) x[i] = 0;
    for (int i = TB; i < V; i++) x[i] = 2; /* 14 timestamps at e^2 vs text at e^0 */
    mx_whisper_rules(&g, true, s4, 8, 3, x);
    fill(a, 0, V, '0'); fill(a, TB + 5, V, '1');
    CHECK("rules/timestamp mass wins", only_allowed(x, a), "%s", dump(x));
}

static void test_compression(void) {
    int32_t a[] = {50, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 52}, b[40];
    for (int i = 0; i < 40; i++) b[i] = 7;
    int32_t c[] = {220, 50364, 1000, 50257};
    /* values from Python: len(b) / len(zlib.compress(b)) over the little-endian token bytes */
    CHECK("compression ratio 1", fabs(mx_whisper_compression_ratio(a, 13, 64) - 0.6190476190476191) < 1e-12, "%.16g", mx_whisper_compression_ratio(a, 13, 64));
    CHECK("compression ratio 2", fabs(mx_whisper_compression_ratio(b, 40, 64) - 3.3333333333333335) < 1e-12, "%.16g", mx_whisper_compression_ratio(b, 40, 64));
    CHECK("compression ratio 3", fabs(mx_whisper_compression_ratio(c, 4, 51865) - 0.5) < 1e-12, "%.16g", mx_whisper_compression_ratio(c, 4, 51865));
}

static float *features(int frames) {
    float *m = malloc(sizeof(float) * 2 * (size_t)frames);
    for (int b = 0; b < 2; b++) for (int f = 0; f < frames; f++) m[b * frames + f] = (float)f;
    return m;
}

static mx_s2t_model model_of(fake *f) { return (mx_s2t_model){f, V, 2, NF, 64, f_encode, f_restart, f_feed}; }

static void test_short(mx_tokenizer *tk) {
    mx_whisper_cfg g;
    cfg_init(&g, true);
    fake f = {0};
    f.lang_bias_de = 1; /* detection picks <|de|> */
    static const int32_t sc[] = {1, 2, 3, -1};
    f.script[0] = sc; f.script_seek[0] = 0; f.n_script = 1;
    f.init_len = 4; /* sot de transcribe notimestamps */
    mx_s2t_model m = model_of(&f);
    mx_whisper_opts o;
    mx_whisper_opts_defaults(&o);
    float *mel = features(NF);
    mx_whisper_result r;
    int rc = mx_whisper_transcribe(&m, &g, tk, mel, NF, 0.2, &o, &r);
    CHECK("short/runs", !rc, "%s", mx_errmsg());
    if (!rc) {
        CHECK("short/language detected", !strcmp(r.language, "de"), "%s", r.language);
        CHECK("short/init tokens", f.fed[0] == SOT && f.fed[1] == DE && f.fed[2] == TRS && f.fed[3] == NOTS, "%d %d %d %d", f.fed[0], f.fed[1], f.fed[2], f.fed[3]);
        CHECK("short/text", r.text && !strcmp(r.text, " B C D"), "\"%s\"", r.text);
        CHECK("short/one segment", r.n_seg == 1 && r.seg[0].start == 0 && fabs(r.seg[0].end - 0.2) < 1e-9, "%d", r.n_seg);
        mx_whisper_result_free(&r);
    }
    /* --language en --task translate, and a prompt */
    memset(f.fed, 0, sizeof f.fed);
    f.runs[0] = 0;
    o.language = "English";
    o.translate = true;
    int32_t prompt[] = {PREV, 9, 10};
    o.prompt = prompt;
    o.n_prompt = 3;
    f.init_len = 7;
    rc = mx_whisper_transcribe(&m, &g, tk, mel, NF, 0.2, &o, &r);
    CHECK("short/prompt + language + translate", !rc && f.fed[0] == PREV && f.fed[1] == 9 && f.fed[2] == 10 && f.fed[3] == SOT && f.fed[4] == EN &&
          f.fed[5] == TRL && f.fed[6] == NOTS && r.text && !strcmp(r.text, " B C D"), "%s %d %d %d %d", rc ? mx_errmsg() : r.text, f.fed[3], f.fed[4], f.fed[5], f.fed[6]);
    if (!rc) mx_whisper_result_free(&r);
    o.prompt = NULL;
    o.n_prompt = 0;
    /* errors */
    o.language = "klingon";
    CHECK("short/unknown language", mx_whisper_transcribe(&m, &g, tk, mel, NF, 0.2, &o, &r) && strstr(mx_errmsg(), "unsupported language \"klingon\""), "%s", mx_errmsg());
    o.language = "fr";
    CHECK("short/language not in the model", mx_whisper_transcribe(&m, &g, tk, mel, NF, 0.2, &o, &r) && strstr(mx_errmsg(), "not one of this model's languages"), "%s", mx_errmsg());
    mx_whisper_cfg ge;
    cfg_init(&ge, false);
    o.language = NULL;
    CHECK("short/English-only cannot translate", mx_whisper_transcribe(&m, &ge, tk, mel, NF, 0.2, &o, &r) && strstr(mx_errmsg(), "cannot translate"), "%s", mx_errmsg());
    /* timestamps in the short form: segments from the timestamps, text after the last one kept in the text */
    o.translate = false;
    o.timestamps = true;
    static const int32_t st[] = {TB + 0, 1, 2, TB + 3, TB + 3, 3, TB + 7, TB + 7, 4, -1};
    f.script[0] = st; f.runs[0] = 0;
    f.init_len = 3; /* sot de transcribe */
    rc = mx_whisper_transcribe(&m, &g, tk, mel, NF, 0.2, &o, &r);
    CHECK("short/timestamps", !rc && r.n_seg == 2 && fabs(r.seg[0].end - 0.06) < 1e-9 && fabs(r.seg[1].start - 0.06) < 1e-9 &&
          fabs(r.seg[1].end - 0.14) < 1e-9 && !strcmp(r.seg[0].text, " B C") && !strcmp(r.seg[1].text, " D") && !strcmp(r.text, " B C D E"),
          "%s n=%d", rc ? mx_errmsg() : r.text, rc ? 0 : r.n_seg);
    if (!rc) {
        mx_buf b = {0};
        mx_wout_write(&r, MX_WOUT_SRT, "transcribe", &b);
        CHECK("out/srt", !strcmp(b.data, "1\n00:00:00,000 --> 00:00:00,060\nB C\n\n2\n00:00:00,060 --> 00:00:00,140\nD\n\n"), "%s", b.data);
        b.len = 0;
        mx_wout_write(&r, MX_WOUT_VTT, "transcribe", &b);
        CHECK("out/vtt", !strcmp(b.data, "WEBVTT\n\n00:00:00.000 --> 00:00:00.060\nB C\n\n00:00:00.060 --> 00:00:00.140\nD\n\n"), "%s", b.data);
        b.len = 0;
        mx_wout_write(&r, MX_WOUT_JSON, "transcribe", &b);
        CHECK("out/json", !strcmp(b.data, "{\"text\": \" B C D E\"}\n"), "%s", b.data);
        b.len = 0;
        mx_wout_write(&r, MX_WOUT_VERBOSE_JSON, "transcribe", &b);
        CHECK("out/verbose_json", strstr(b.data, "\"language\": \"german\"") && strstr(b.data, "\"segments\": [{") && strstr(b.data, "\"tokens\": [50, 1, 2, 53]"), "%s", b.data);
        b.len = 0;
        mx_wout_write(&r, MX_WOUT_TEXT, "transcribe", &b);
        CHECK("out/text", !strcmp(b.data, " B C D E\n"), "%s", b.data);
        mx_buf_free(&b);
        mx_whisper_result_free(&r);
    }
    free(mel);
}

static void test_long(mx_tokenizer *tk) {
    mx_whisper_cfg g;
    cfg_init(&g, true);
    fake f = {0};
    /* 50 frames, windows of 20: seek 0 -> cut at the last pair (0.16 s = 16 frames) -> seek 16 -> single timestamp end: whole
     * window -> seek 36 -> last window */
    static const int32_t w0[] = {TB + 0, 0, 1, TB + 4, TB + 4, 2, TB + 8, TB + 8, 3, EOT, -1};
    static const int32_t w1[] = {TB + 0, 3, 4, TB + 6, EOT, -1};
    static const int32_t w2[] = {TB + 0, 5, TB + 3, EOT, -1};
    f.script[0] = w0; f.script_seek[0] = 0;
    f.script[1] = w1; f.script_seek[1] = 16;
    f.script[2] = w2; f.script_seek[2] = 36;
    f.n_script = 3;
    f.init_len = 3; /* sot en transcribe (timestamps: no <|notimestamps|>) */
    mx_s2t_model m = model_of(&f);
    mx_whisper_opts o;
    mx_whisper_opts_defaults(&o);
    o.language = "en";
    float *mel = features(50);
    mx_whisper_result r;
    int rc = mx_whisper_transcribe(&m, &g, tk, mel, 50, 0.5, &o, &r);
    CHECK("long/runs", !rc, "%s", mx_errmsg());
    if (!rc) {
        CHECK("long/three windows", f.encodes == 3 && f.runs[0] == 1 && f.runs[1] == 1 && f.runs[2] == 1, "encodes %d", f.encodes);
        CHECK("long/segments", r.n_seg == 4, "%d", r.n_seg);
        if (r.n_seg == 4) {
            CHECK("long/seg times", fabs(r.seg[0].start) < 1e-9 && fabs(r.seg[0].end - 0.08) < 1e-9 && fabs(r.seg[1].start - 0.08) < 1e-9 &&
                  fabs(r.seg[1].end - 0.16) < 1e-9 && fabs(r.seg[2].start - 0.16) < 1e-9 && fabs(r.seg[2].end - 0.28) < 1e-9 &&
                  fabs(r.seg[3].start - 0.36) < 1e-9 && fabs(r.seg[3].end - 0.42) < 1e-9,
                  "%g-%g %g-%g %g-%g %g-%g", r.seg[0].start, r.seg[0].end, r.seg[1].start, r.seg[1].end, r.seg[2].start, r.seg[2].end, r.seg[3].start, r.seg[3].end);
            CHECK("long/seek of each segment", r.seg[0].seek == 0 && r.seg[2].seek == 16 && r.seg[3].seek == 36, "%d %d %d", r.seg[0].seek, r.seg[2].seek, r.seg[3].seek);
        }
        /* " D" (token 3) was cut from window 0 (after its last pair) and decoded once, in window 1 */
        CHECK("long/text, no word twice", !strcmp(r.text, " A B C D E F"), "\"%s\"", r.text);
        mx_whisper_result_free(&r);
    }
    /* temperature fallback: window 0 repeats itself at temperature 0 (compression ratio 3.3 > 2.4), not on the retry */
    memset(&f, 0, sizeof f);
    static int32_t rep[48];
    for (int i = 0; i < 40; i++) rep[i] = 7;
    rep[0] = TB; rep[40] = TB + 9; rep[41] = -1;
    static const int32_t ok0[] = {TB + 0, 1, 2, TB + 9, -1};
    f.script[0] = rep; f.retry_script[0] = ok0; f.script_seek[0] = 0; f.n_script = 1;
    f.init_len = 3;
    g.max_length = 60;
    g.max_target = 64;
    m = model_of(&f);
    float temps[] = {0, 0.2f, 0.4f};
    o.temperatures = temps;
    o.n_temperatures = 3;
    o.compression_ratio_threshold = 2.4f;
    o.timestamps = true;
    rc = mx_whisper_transcribe(&m, &g, tk, mel, NF, 0.2, &o, &r);
    CHECK("fallback/second temperature", !rc && f.runs[0] == 2 && r.n_seg == 1 && fabs(r.seg[0].temperature - 0.2f) < 1e-6 && !strcmp(r.text, " B C"),
          "%s runs %d", rc ? mx_errmsg() : r.text, f.runs[0]);
    if (!rc) mx_whisper_result_free(&r);
    /* no speech: a likely <|nospeech|> and a low log-probability skip the window */
    memset(&f, 0, sizeof f);
    f.script[0] = ok0; f.script_seek[0] = 0; f.n_script = 1; f.init_len = 3;
    f.nospeech_logit = 30;
    m = model_of(&f);
    o.temperatures = NULL; o.n_temperatures = 0;
    o.compression_ratio_threshold = NAN;
    o.logprob_threshold = 0.5f; /* every window is "low" */
    o.no_speech_threshold = 0.6f;
    rc = mx_whisper_transcribe(&m, &g, tk, mel, NF, 0.2, &o, &r);
    CHECK("nospeech/skipped", !rc && r.n_seg == 0 && !strcmp(r.text, ""), "%s n=%d", rc ? mx_errmsg() : r.text, rc ? -1 : r.n_seg);
    if (!rc) mx_whisper_result_free(&r);
    /* a model without timestamp tokens cannot do the long form */
    g.timestamp_begin = V + 1;
    o.logprob_threshold = o.no_speech_threshold = NAN;
    CHECK("long/needs timestamps", mx_whisper_transcribe(&m, &g, tk, mel, 50, 0.5, &o, &r) && strstr(mx_errmsg(), "no timestamp tokens"), "%s", mx_errmsg());
    free(mel);
}

int main(void) {
    mx_tokenizer *tk = tiny_tok();
    CHECK("tokenizer", tk != NULL, "%s", mx_errmsg());
    if (!tk) return 1;
    test_rules();
    test_compression();
    test_short(tk);
    test_long(tk);
    CHECK("lang/name", !strcmp(mx_whisper_lang_code("German"), "de") && !strcmp(mx_whisper_lang_code("yue"), "yue") &&
          !strcmp(mx_whisper_lang_name("de"), "german") && !mx_whisper_lang_code("xx"), "%s", "lookups");
    mx_tok_free(tk);
    TEST_END();
}
