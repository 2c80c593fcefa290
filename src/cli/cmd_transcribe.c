/* mlxcel transcribe: speech to text with a Whisper folder (option table
 * below). FILE: WAV, FLAC, Ogg (Vorbis, Opus), MP3 or AIFF, any rate and
 * channel count; audio over 30 s is transcribed window by window.
 * --temperature-fallback: transformers' ladder 0.0, 0.2, ... 1.0 with its
 * thresholds (compression ratio 1.35 over token bytes, average log-probability
 * -1.0, no-speech 0.6). -v: timings and the real-time factor on stderr. Also
 * `mlxcel generate -m DIR --audio FILE --prompt-ids ...`: the raw
 * encoder-decoder (cli_generate_audio, called by generate). */
#include "cli.h"
#include "args.h"
#include "opts.h"
#include "../base/base.h"
#include "../runtime/speech.h"
#include "../runtime/sampler.h"
#include "../format/safetensors.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float FALLBACK_T[] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};

typedef struct {
    const char *model, *language, *task, *format, *prompt;
    mx_strlist files;
    float temp, max_s;
    bool timestamps, fallback, cond_prev, verbose, fast;
    int threads, seed;
} tr_opts;

static void tr_init(void *p) {
    tr_opts *o = p;
    o->task = "transcribe";
    o->format = "text";
    o->threads = mx_default_threads();
}

static const mx_opt tr_tab[] = {
    OPT_MODEL(tr_opts, model),
    {"-l", "--language", NULL, OPT_STR, "LANG", 0, 0, offsetof(tr_opts, language),
     "the spoken language, a code (en, de) or an English name (german); default: detected from the first 30 s", NULL, 0},
    {NULL, "--task", NULL, OPT_CHOICE, NULL, 0, 0, offsetof(tr_opts, task), "translate: into English", "transcribe|translate", 0},
    {NULL, "--timestamps", NULL, OPT_FLAG, NULL, 0, 0, offsetof(tr_opts, timestamps),
     "predict timestamp tokens (segments with start and end); always on for audio over 30 s", NULL, 0},
    {"-f", "--output-format", NULL, OPT_CHOICE, NULL, 0, 0, offsetof(tr_opts, format), "OpenAI's response formats",
     "text|json|verbose_json|srt|vtt", 0},
    {NULL, "--prompt", NULL, OPT_STR, "TEXT", 0, 0, offsetof(tr_opts, prompt), "condition the first window on TEXT (spelling, names, style)", NULL, 0},
    {NULL, "--temperature", "--temp", OPT_FLOAT, "T", 0, 2, offsetof(tr_opts, temp), "sample at T instead of greedy decoding", NULL, 0},
    {NULL, "--temperature-fallback", NULL, OPT_FLAG, NULL, 0, 0, offsetof(tr_opts, fallback),
     "decode a window again at 0.2, 0.4, ... 1.0 when its compression ratio (1.35) or average log-probability (-1.0) says it failed; "
     "skip silence (no-speech probability 0.6)", NULL, 0},
    {NULL, "--condition-on-prev", NULL, OPT_FLAG, NULL, 0, 0, offsetof(tr_opts, cond_prev), "give each window the previous window's text", NULL, 0},
    {NULL, "--max-seconds", NULL, OPT_FLOAT, "S", 1, 24 * 3600, offsetof(tr_opts, max_s), "refuse audio longer than S seconds (default 4 h)", NULL, 0},
    {"-s", "--seed", NULL, OPT_INT, "N", 0, 2147483647, offsetof(tr_opts, seed), "random seed for sampling", NULL, 0},
    OPT_THREADS(tr_opts, threads),
    OPT_FAST(tr_opts, fast),
    {"-v", "--verbose", NULL, OPT_FLAG, NULL, 0, 0, offsetof(tr_opts, verbose), "print the timings and the real-time factor", NULL, 0},
    {0},
};

static int tr_main(const tr_opts *o, const char *dir);

static int tr_run(void *p) {
    const tr_opts *o = p;
    if (!o->model) { fprintf(stderr, "mlxcel transcribe: -m MODEL is required\n"); return 2; }
    if (o->files.n != 1) { fprintf(stderr, "mlxcel transcribe: give one audio FILE (got %d)\n", o->files.n); return 2; }
    if (o->fallback && o->temp > 0) { fprintf(stderr, "mlxcel transcribe: give --temperature or --temperature-fallback, not both\n"); return 2; }
    char *dir = cli_model_dir("transcribe", o->model);
    if (!dir) return 1;
    int rc = tr_main(o, dir);
    free(dir);
    return rc;
}

const mx_cmd mx_cmd_transcribe = {
    .name = "transcribe",
    .summary = "speech to text with a Whisper model (text, json, verbose_json, srt, vtt)",
    .usage = "-m MODEL FILE [--language LANG] [--task transcribe|translate] [--timestamps] [-f FORMAT] [options]",
    .details = "FILE: WAV, FLAC, Ogg (Vorbis, Opus), MP3 or AIFF, any rate and channel count. Audio over 30 s is transcribed "
               "window by window with the sequential long-form algorithm (timestamps on). The text (or the chosen format) goes "
               "to standard output. `mlxcel generate -m MODEL --audio FILE --prompt-ids IDS` runs the raw encoder-decoder.",
    .opts = tr_tab,
    .size = sizeof(tr_opts),
    .init = tr_init,
    .samp_off = OPT_NO_SAMPLING,
    .pos_meta = "FILE",
    .pos_off = offsetof(tr_opts, files),
    .run = tr_run,
    .loads_model = true,
};

static int tr_main(const tr_opts *op, const char *dir) {
    mx_whisper_opts o;
    mx_whisper_opts_defaults(&o);
    o.language = op->language;
    o.translate = !strcmp(op->task, "translate");
    o.timestamps = op->timestamps;
    o.condition_on_prev = op->cond_prev;
    o.seed = (uint64_t)op->seed;
    float temp = op->temp;
    mx_wout_fmt fmt;
    if (mx_wout_parse(op->format, &fmt)) { fprintf(stderr, "mlxcel transcribe: %s\n", mx_errmsg()); return 2; }
    mx_speech *sp;
    cli_fast_apply(op->fast);
    if (mx_speech_open(dir, op->threads, &sp)) { fprintf(stderr, "mlxcel transcribe: %s\n", mx_errmsg()); return 1; }
    int rc = 1;
    float *pcm = NULL;
    size_t n = 0;
    int32_t *pids = NULL;
    int np = 0;
    mx_whisper_result r = {0};
    mx_buf out = {0};
    mx_audio_opts ao = {mx_speech_rate(sp), op->max_s};
    mx_audio_info inf;
    const char *file = op->files.v[0];
    double t0 = mx_now();
    if (mx_audio_load_file(file, &ao, &pcm, &n, &inf)) { fprintf(stderr, "mlxcel transcribe: %s\n", mx_errmsg()); goto done; }
    double t_audio = mx_now() - t0;
    if (op->prompt && mx_speech_prompt_ids(sp, op->prompt, &pids, &np)) { fprintf(stderr, "mlxcel transcribe: --prompt: %s\n", mx_errmsg()); goto done; }
    o.prompt = pids;
    o.n_prompt = np;
    if (op->fallback) {
        o.temperatures = FALLBACK_T;
        o.n_temperatures = (int)MX_ARRAY_LEN(FALLBACK_T);
        o.compression_ratio_threshold = 1.35f;
        o.logprob_threshold = -1.0f;
        o.no_speech_threshold = 0.6f;
    } else if (temp > 0) {
        o.temperatures = &temp;
        o.n_temperatures = 1;
    }
    double t1 = mx_now();
    if (mx_speech_transcribe(sp, pcm, n, &o, &r)) { fprintf(stderr, "mlxcel transcribe: %s\n", mx_errmsg()); goto done; }
    double t_run = mx_now() - t1;
    if (op->verbose)
        fprintf(stderr, "audio: %s %d Hz %d ch, %.2f s (decoded in %.0f ms) | %d windows: encoder %.0f ms, decoder %d tokens in %.0f ms "
                        "(%.1f ms/token) | features and rest %.0f ms | total %.2f s, real-time factor %.3f\n",
                inf.format, inf.src_rate, inf.channels, inf.seconds, t_audio * 1e3, r.n_windows, r.t_encode * 1e3, r.n_decoded,
                r.t_decode * 1e3, r.n_decoded ? r.t_decode * 1e3 / r.n_decoded : 0.0, (t_run - r.t_encode - r.t_decode) * 1e3,
                t_audio + t_run, (t_audio + t_run) / inf.seconds);
    if (mx_wout_write(&r, fmt, op->task, &out)) { fprintf(stderr, "mlxcel transcribe: %s\n", mx_errmsg()); goto done; }
    fwrite(out.data, 1, out.len, stdout);
    rc = 0;
done:
    mx_buf_free(&out);
    mx_whisper_result_free(&r);
    free(pids);
    free(pcm);
    mx_speech_close(sp);
    return rc;
}

/* ---- generate --audio: the raw encoder-decoder on a decoder prompt ---- */
static void print_ids(const int32_t *ids, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
    putchar(']');
}

int cli_generate_audio(const char *model, const char *audio, const char *ids_s, int n_new, int chunk, int threads,
                       const mx_sampling *samp_in, bool ignore_eos, const char *logits_out, const char *format) {
    mx_sampling samp = *samp_in;
    int32_t *ids = NULL;
    int T = 0;
    if (!ids_s) { fprintf(stderr, "mlxcel generate: --audio needs the decoder prompt as --prompt-ids IDS (or use mlxcel transcribe)\n"); return 2; }
    if (!mx_parse_ids("generate", "--prompt-ids", ids_s, &ids, &T)) return 2;
    if (T == 0) { fprintf(stderr, "mlxcel generate: the prompt is empty\n"); free(ids); return 2; }
    double t0 = mx_now();
    mx_speech *sp;
    if (mx_speech_open(model, threads, &sp)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); free(ids); return 1; }
    int V = mx_speech_vocab(sp), rc = 1, ng = 0, frames = 0;
    double t_load = mx_now() - t0, t_prefill = 0, t_decode = 0;
    float *pcm = NULL, *mel = NULL, *plog = NULL, *slog = NULL, *last = malloc(sizeof(float) * V);
    int32_t *gen = malloc(sizeof(int32_t) * (size_t)(n_new ? n_new : 1)), *hist = malloc(sizeof(int32_t) * (size_t)(T + n_new + 1));
    size_t n = 0;
    mx_sampler *smp = mx_sampler_new(&samp, V);
    mx_buf text = {0};
    mx_audio_opts ao = {mx_speech_rate(sp), 0};
    if (!last || !gen || !hist || !smp) { fprintf(stderr, "mlxcel generate: out of memory\n"); goto done; }
    if (T + n_new > mx_speech_max_target(sp)) {
        fprintf(stderr, "mlxcel generate: %d prompt + %d new tokens exceed the decoder's %d positions\n", T, n_new, mx_speech_max_target(sp));
        goto done;
    }
    if (mx_audio_load_file(audio, &ao, &pcm, &n, NULL) || mx_speech_features(sp, pcm, n, &mel, &frames)) {
        fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg());
        goto done;
    }
    if ((double)n / mx_speech_rate(sp) > 30.0 + 1e-9 && frames != 3000) {
        fprintf(stderr, "mlxcel generate: --audio takes one window (up to 30 s) of audio; use mlxcel transcribe for longer recordings\n");
        goto done;
    }
    if (logits_out && (!(plog = malloc(sizeof(float) * (size_t)T * V)) || !(slog = malloc(sizeof(float) * (size_t)(n_new ? n_new : 1) * V)))) {
        fprintf(stderr, "mlxcel generate: out of memory\n");
        goto done;
    }
    double t1 = mx_now();
    /* the first window only: the raw model takes one window of features */
    if (mx_speech_encode(sp, mel)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto done; }
    mx_speech_restart(sp);
    for (int i = 0; i < T; i += chunk) {
        int k = MX_MIN(chunk, T - i);
        float *dst = plog ? plog + (size_t)i * V : NULL;
        if (mx_speech_feed(sp, ids + i, k, dst ? dst : last, dst != NULL)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto done; }
    }
    if (plog) memcpy(last, plog + (size_t)(T - 1) * V, sizeof(float) * V);
    t_prefill = mx_now() - t1;
    memcpy(hist, ids, sizeof(int32_t) * (size_t)T);
    const mx_whisper_cfg *g = mx_speech_cfg(sp);
    double t2 = mx_now();
    while (ng < n_new) {
        if (slog) memcpy(slog + (size_t)ng * V, last, sizeof(float) * V);
        int32_t tok = mx_sampler_sample(smp, last, hist, T + ng);
        gen[ng] = tok;
        hist[T + ng++] = tok;
        if ((!ignore_eos && tok == g->eot) || ng == n_new) break;
        if (mx_speech_feed(sp, &tok, 1, last, false)) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto done; }
    }
    t_decode = mx_now() - t2;
    if (logits_out) {
        mx_st_out ts[2] = {{"logits", MX_DT_F32, 2, {T, V}, plog, (size_t)T * V * 4}, {"step_logits", MX_DT_F32, 2, {ng, V}, slog, (size_t)ng * V * 4}};
        if (mx_st_write(logits_out, ts, 2, "{\"format\":\"pt\"}")) { fprintf(stderr, "mlxcel generate: %s\n", mx_errmsg()); goto done; }
    }
    mx_tok_decode(mx_speech_tokenizer(sp), gen, ng, true, &text);
    if (!strcmp(format, "json")) {
        printf("{\"prompt_ids\":");
        print_ids(ids, T);
        printf(",\"generated_ids\":");
        print_ids(gen, ng);
        json_t *jt = json_stringn(text.data ? text.data : "", text.len);
        char *ts = json_dumps(jt, JSON_ENCODE_ANY);
        printf(",\"text\":%s,\"timings\":{\"load_ms\":%.3f,\"prefill_ms\":%.3f,\"decode_ms\":%.3f}}\n", ts ? ts : "\"\"", t_load * 1e3,
               t_prefill * 1e3, t_decode * 1e3);
        free(ts);
        json_decref(jt);
    } else printf("%s\n", text.data ? text.data : "");
    rc = 0;
done:
    mx_buf_free(&text);
    mx_sampler_free(smp);
    free(pcm); free(mel); free(plog); free(slog); free(last); free(gen); free(hist); free(ids);
    mx_speech_close(sp);
    return rc;
}
