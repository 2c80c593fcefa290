/* speech: opening a Whisper folder and running a transcription. See speech.h. */
#include "speech.h"
#include "engine.h"
#include "generate.h"
#include "textmodel.h"
#include "../audio/mel.h"
#include "../nn/encoder.h"
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct mx_speech {
    mx_engine e;             /* the decoder, with its encoder in e.model.encoder */
    mx_enc *enc;
    mx_session dec;
    float *mem;              /* the encoder's output [mem_len][hidden] */
    bool opened;
    mx_pool *pool;
    mx_tokenizer *tok;
    mx_whisper_cfg g;
    mx_mel *mel;
    int rate, hop, n_mels, n_samples, frames;
    mx_s2t_model m;
    pthread_mutex_t mu;
    char name[256];
};

bool mx_speech_folder(const char *dir) {
    mx_ckpt ck;
    if (mx_ckpt_open(dir, false, &ck)) return false;
    int err = 0;
    const char *mt = mx_cfg_str(&ck.cfg, "model_type", "", &err);
    const mx_family *f = !err && mt ? mx_family_find(mt) : NULL;
    bool yes = f && f->task && !strcmp(f->task, "speech-to-text");
    mx_ckpt_close(&ck);
    return yes;
}

static int s2t_encode(void *u, const float *mel) { return mx_speech_encode(u, mel); }
static void s2t_restart(void *u) { mx_speech_restart(u); }
static int s2t_feed(void *u, const int32_t *t, int n, float *out) { return mx_speech_feed(u, t, n, out, false); }

/* preprocessor_config.json: the WhisperFeatureExtractor's parameters */
static int read_extractor(mx_speech *s, const char *dir, const mx_stem_spec *st) {
    char *p = mx_path_join(dir, "preprocessor_config.json");
    if (!p) return MX_ERR;
    json_t *j = mx_file_exists(p) ? mx_json_load_file(p, 1 << 20) : NULL;
    if (!j && mx_file_exists(p)) { free(p); return MX_ERR; }
    mx_cfg c = {j, NULL, p};
    int n_fft, chunk, rc;
    rc = mx_cfg_i32(&c, "feature_size", st->n_in, 1, 512, &s->n_mels) || mx_cfg_i32(&c, "sampling_rate", 16000, 1000, 192000, &s->rate) ||
         mx_cfg_i32(&c, "hop_length", 160, 1, 8192, &s->hop) || mx_cfg_i32(&c, "n_fft", 400, 16, 8192, &n_fft) ||
         mx_cfg_i32(&c, "chunk_length", 30, 1, 3600, &chunk);
    if (!rc && mx_cfg_i32(&c, "n_samples", chunk * s->rate, 1, 1 << 30, &s->n_samples)) rc = MX_ERR;
    if (!rc && s->n_mels != st->n_in) rc = mx_set_err("%s: feature_size %d differs from the model's num_mel_bins %d", p, s->n_mels, st->n_in);
    if (!rc && s->n_samples / s->hop != st->frames)
        rc = mx_set_err("%s: %d samples per chunk give %d frames; the encoder takes exactly %d (2 x max_source_positions)", p, s->n_samples,
                        s->n_samples / s->hop, st->frames);
    if (!rc && !(s->mel = mx_mel_new(s->rate, n_fft, s->hop, s->n_mels, 0, 8000))) rc = mx_err_prefix("%s", p);
    s->frames = st->frames;
    json_decref(j);
    free(p);
    return rc;
}

int mx_speech_open(const char *dir, int threads, mx_speech **out) {
    *out = NULL;
    mx_speech *s = mx_calloc(1, sizeof *s);
    if (!s) return MX_ERR;
    pthread_mutex_init(&s->mu, NULL);
    if (mx_engine_open(dir, &s->e)) goto fail;
    s->opened = true;
    const mx_model *dm = &s->e.model, *em = dm->encoder;
    if (!em || !em->arch.stem.n_conv) {
        mx_set_err("%s: model_type '%s' is not a speech-to-text model", dir, s->e.model_type);
        goto fail;
    }
    int rows = mx_stem_rows(&em->arch.stem);
    if (rows != dm->arch.mem_len) { mx_set_err("%s: the encoder gives %d rows, the decoder reads %d", dir, rows, dm->arch.mem_len); goto fail; }
    if (read_extractor(s, dir, &em->arch.stem)) goto fail;
    if (!(s->pool = mx_pool_new(threads)) || !(s->enc = mx_enc_new(em, rows, s->pool)) ||
        mx_session_init(&s->dec, &s->e, dm->arch.max_pos, dm->arch.max_pos, s->pool) ||
        !(s->mem = mx_malloc(sizeof(float) * (size_t)rows * dm->arch.hidden)))
        goto fail;
    if (!(s->tok = mx_tok_load(dir))) { mx_err_prefix("%s: the tokenizer", dir); goto fail; }
    mx_ckpt ck;
    if (mx_ckpt_open(dir, false, &ck)) goto fail;
    int rc = mx_whisper_cfg_load(&s->g, &ck.cfg, ck.gen_config, s->tok);
    mx_ckpt_close(&ck);
    if (rc) goto fail;
    s->m = (mx_s2t_model){s, dm->arch.vocab, em->arch.stem.n_in, em->arch.stem.frames, dm->arch.max_pos, s2t_encode, s2t_restart, s2t_feed};
    mx_model_dir_name(dir, s->name, sizeof s->name);
    *out = s;
    return MX_OK;
fail:
    mx_speech_close(s);
    return MX_ERR;
}

void mx_speech_close(mx_speech *s) {
    if (!s) return;
    mx_session_free(&s->dec);
    mx_enc_free(s->enc);
    free(s->mem);
    if (s->opened) mx_engine_close(&s->e);
    mx_pool_free(s->pool);
    mx_tok_free(s->tok);
    mx_whisper_cfg_free(&s->g);
    mx_mel_free(s->mel);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const mx_tokenizer *mx_speech_tokenizer(const mx_speech *s) { return s->tok; }
const mx_whisper_cfg *mx_speech_cfg(const mx_speech *s) { return &s->g; }
const char *mx_speech_name(const mx_speech *s) { return s->name; }
int mx_speech_rate(const mx_speech *s) { return s->rate; }
int mx_speech_vocab(const mx_speech *s) { return s->m.vocab; }
int mx_speech_max_target(const mx_speech *s) { return s->m.max_target; }

int mx_speech_features(mx_speech *s, const float *pcm, size_t n, float **mel, int *frames) {
    size_t samples = n <= (size_t)s->n_samples ? (size_t)s->n_samples : n;
    size_t fr;
    if (samples / (size_t)s->hop > (size_t)INT32_MAX / (size_t)s->n_mels) return mx_set_err("audio too long");
    if (mx_mel_features(s->mel, pcm, n, samples, s->pool, mel, &fr)) return MX_ERR;
    *frames = (int)fr;
    return MX_OK;
}

int mx_speech_transcribe(mx_speech *s, const float *pcm, size_t n, const mx_whisper_opts *o, mx_whisper_result *r) {
    float *mel = NULL;
    int frames = 0;
    memset(r, 0, sizeof *r);
    pthread_mutex_lock(&s->mu);
    int rc = mx_speech_features(s, pcm, n, &mel, &frames);
    if (!rc) rc = mx_whisper_transcribe(&s->m, &s->g, s->tok, mel, frames, (double)n / s->rate, o, r);
    pthread_mutex_unlock(&s->mu);
    free(mel);
    return rc;
}

int mx_speech_encode(mx_speech *s, const float *mel) {
    const mx_model *dm = &s->e.model;
    if (mx_encode_features(s->enc, mel, s->mem) || mx_xattn_remember(dm, s->dec.kv, s->mem, dm->arch.mem_len, s->pool)) return MX_ERR;
    mx_session_truncate(&s->dec, 0);
    return MX_OK;
}
const float *mx_speech_encoder_out(const mx_speech *s) { return s->mem; }
void mx_speech_restart(mx_speech *s) { mx_session_truncate(&s->dec, 0); }
int mx_speech_feed(mx_speech *s, const int32_t *tok, int n, float *out, bool all) {
    return mx_session_feed(&s->dec, tok, n, all ? out : NULL, all ? NULL : out);
}

int mx_speech_prompt_ids(const mx_speech *s, const char *text, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    if (s->g.prev_sot < 0) return mx_set_err("this model has no <|startofprev|> token for a prompt");
    while (isspace((unsigned char)*text)) text++;
    size_t len = strlen(text);
    while (len && isspace((unsigned char)text[len - 1])) len--;
    char *t = mx_malloc(len + 2);
    if (!t) return MX_ERR;
    t[0] = ' ';
    memcpy(t + 1, text, len);
    t[len + 1] = 0;
    int32_t *body = NULL;
    int nb = 0, rc = mx_tok_encode(s->tok, t, len + 1, false, &body, &nb);
    free(t);
    if (rc) return MX_ERR;
    *ids = mx_malloc(sizeof(int32_t) * (size_t)(nb + 1));
    if (!*ids) { free(body); return MX_ERR; }
    (*ids)[0] = s->g.prev_sot;
    memcpy(*ids + 1, body, sizeof(int32_t) * (size_t)nb);
    *n = nb + 1;
    free(body);
    return MX_OK;
}
