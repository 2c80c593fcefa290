/* Whisper parity against the Hugging Face fixture (tests/fixtures/whisper),
 * stage by stage: features from the WAV, encoder_last_hidden_state from the
 * reference features, the forced decoder prompt's logits (whole prompt and
 * one token at a time), 16 greedy steps (logits and ids), then a whole
 * transcription of the WAV through the decoding rules; and bad folders. */
#define _GNU_SOURCE
#include "test.h"
#include "fixtures.h"
#include "runtime/speech.h"
#include "runtime/sampler.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *FX = "tests/fixtures/whisper";

static float rule(const float *ref, size_t n) { float m = fx_maxabs(ref, n); return 1e-4f * (m > 1 ? m : 1); }

static void decode_check(mx_speech *sp, const int32_t *prompt, int T, const float *logits_ref, const int32_t *gids, const float *glog, int N,
                         int chunk, const char *label) {
    int V = mx_speech_vocab(sp);
    float *lg = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
    char name[96];
    mx_speech_restart(sp);
    int rc = 0;
    for (int i = 0; i < T && !rc; i += chunk) rc = mx_speech_feed(sp, prompt + i, MX_MIN(chunk, T - i), lg + (size_t)i * V, true);
    snprintf(name, sizeof name, "whisper/%s prompt logits", label);
    float d = rc ? INFINITY : t_maxdiff(lg, logits_ref, (size_t)T * V), tol = rule(logits_ref, (size_t)T * V);
    CHECK(name, !rc && d <= tol, "%s max diff %g (tol %g)", rc ? mx_errmsg() : "", d, tol);
    memcpy(last, lg + (size_t)(T - 1) * V, sizeof(float) * V);
    float worst = 0;
    int bad = -1;
    for (int s = 0; s < N && !rc; s++) {
        float ds = t_maxdiff(last, glog + (size_t)s * V, V);
        if (ds > worst) worst = ds;
        int32_t tok = mx_argmax(last, V);
        if (tok != gids[s] && bad < 0) bad = s;
        rc = mx_speech_feed(sp, &gids[s], 1, last, false);
    }
    tol = rule(glog, (size_t)N * V);
    snprintf(name, sizeof name, "whisper/%s greedy logits and ids", label);
    CHECK(name, !rc && worst <= tol && bad < 0, "%s max diff %g (tol %g), first wrong id at step %d", rc ? mx_errmsg() : "", worst, tol, bad);
    free(lg);
    free(last);
}

int main(void) {
    mx_speech *sp;
    if (mx_speech_open(FX, 2, &sp)) { printf("FAIL whisper/open: %s\n", mx_errmsg()); return 1; }
    printf("ok whisper/open\n");
    char *rp = mx_path_join(FX, "reference.safetensors");
    mx_st_file f;
    if (mx_st_open(rp, &f)) { printf("FAIL whisper/reference: %s\n", mx_errmsg()); return 1; }
    size_t nfeat, nenc, nlog, nglog;
    float *feat = fx_read_f32(&f, "input_features", &nfeat), *enc = fx_read_f32(&f, "encoder_last_hidden_state", &nenc);
    float *logits = fx_read_f32(&f, "logits", &nlog), *glog = fx_read_f32(&f, "greedy_logits", &nglog);
    int32_t *prompt, *gids;
    int T, N;
    fx_read_i64(&f, "decoder_input_ids", &prompt, &T);
    fx_read_i64(&f, "greedy_ids", &gids, &N);
    /* features from the WAV */
    char *wav = mx_path_join(FX, "inputs/speech.wav");
    mx_audio_opts ao = {mx_speech_rate(sp), 0};
    float *pcm = NULL, *mel = NULL;
    size_t n = 0;
    int frames = 0;
    int rc = mx_audio_load_file(wav, &ao, &pcm, &n, NULL) || mx_speech_features(sp, pcm, n, &mel, &frames);
    CHECK("whisper/features from the wav", !rc && (size_t)frames * 80 == nfeat && t_maxdiff(mel, feat, nfeat) <= 1e-4f, "%s frames %d diff %g",
          rc ? mx_errmsg() : "", frames, rc ? 0.0 : t_maxdiff(mel, feat, nfeat));
    /* encoder from the reference features */
    rc = mx_speech_encode(sp, feat);
    const float *eo = rc ? NULL : mx_speech_encoder_out(sp);
    float de = eo ? t_maxdiff(eo, enc, nenc) : INFINITY, te = rule(enc, nenc);
    CHECK("whisper/encoder_last_hidden_state", eo && de <= te, "%s max diff %g (tol %g)", rc ? mx_errmsg() : "", de, te);
    printf("# encoder max |diff| %.3g (tol %.3g)\n", de, te);
    decode_check(sp, prompt, T, logits, gids, glog, N, T, "whole prompt");
    decode_check(sp, prompt, T, logits, gids, glog, N, 1, "prefill chunk 1");
    /* the same from our own features: the greedy ids agree */
    if (!rc && mel) {
        mx_speech_encode(sp, mel);
        int V = mx_speech_vocab(sp);
        float *last = malloc(sizeof(float) * V);
        mx_speech_restart(sp);
        int ok = !mx_speech_feed(sp, prompt, T, last, false), same = 1;
        for (int s = 0; ok && s < N; s++) {
            same &= mx_argmax(last, V) == gids[s];
            ok = !mx_speech_feed(sp, &gids[s], 1, last, false);
        }
        CHECK("whisper/greedy ids from the wav's features", ok && same, "%s", ok ? "ids differ" : mx_errmsg());
        free(last);
    }
    /* the decoding rules end to end (no timestamps: this vocabulary has none) */
    mx_whisper_opts o;
    mx_whisper_opts_defaults(&o);
    o.language = "en";
    mx_whisper_result r;
    rc = mx_speech_transcribe(sp, pcm, n, &o, &r);
    CHECK("whisper/transcribe", !rc && r.n_seg == 1 && r.text && !strcmp(r.language, "en"), "%s", rc ? mx_errmsg() : r.text);
    if (!rc) mx_whisper_result_free(&r);
    o.timestamps = true;
    CHECK("whisper/no timestamp tokens", mx_speech_transcribe(sp, pcm, n, &o, &r) && strstr(mx_errmsg(), "no timestamp tokens"), "%s", mx_errmsg());
    free(pcm); free(mel); free(wav);
    free(feat); free(enc); free(logits); free(glog); free(prompt); free(gids);
    mx_st_close(&f);
    free(rp);
    mx_speech_close(sp);
    TEST_END();
}
