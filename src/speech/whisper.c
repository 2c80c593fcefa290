/* whisper: the generation config, the logits rules, window decoding with
 * temperature fallback and the sequential long form. See whisper.h. */
#include "whisper.h"
#include "../runtime/sampler.h" /* mx_argmax */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define TIME_PER_FRAME 0.01 /* seconds per mel frame (hop 160 at 16 kHz) */
#define INPUT_STRIDE 2      /* mel frames per encoder position (conv2 stride) */
#define TIME_PRECISION 0.02 /* seconds per timestamp token */

/* ---- languages (openai-whisper's LANGUAGES; the token is <|code|>) ---- */
static const char *const LANGS[][2] = {
    {"en", "english"}, {"zh", "chinese"}, {"de", "german"}, {"es", "spanish"}, {"ru", "russian"}, {"ko", "korean"},
    {"fr", "french"}, {"ja", "japanese"}, {"pt", "portuguese"}, {"tr", "turkish"}, {"pl", "polish"}, {"ca", "catalan"},
    {"nl", "dutch"}, {"ar", "arabic"}, {"sv", "swedish"}, {"it", "italian"}, {"id", "indonesian"}, {"hi", "hindi"},
    {"fi", "finnish"}, {"vi", "vietnamese"}, {"he", "hebrew"}, {"uk", "ukrainian"}, {"el", "greek"}, {"ms", "malay"},
    {"cs", "czech"}, {"ro", "romanian"}, {"da", "danish"}, {"hu", "hungarian"}, {"ta", "tamil"}, {"no", "norwegian"},
    {"th", "thai"}, {"ur", "urdu"}, {"hr", "croatian"}, {"bg", "bulgarian"}, {"lt", "lithuanian"}, {"la", "latin"},
    {"mi", "maori"}, {"ml", "malayalam"}, {"cy", "welsh"}, {"sk", "slovak"}, {"te", "telugu"}, {"fa", "persian"},
    {"lv", "latvian"}, {"bn", "bengali"}, {"sr", "serbian"}, {"az", "azerbaijani"}, {"sl", "slovenian"}, {"kn", "kannada"},
    {"et", "estonian"}, {"mk", "macedonian"}, {"br", "breton"}, {"eu", "basque"}, {"is", "icelandic"}, {"hy", "armenian"},
    {"ne", "nepali"}, {"mn", "mongolian"}, {"bs", "bosnian"}, {"kk", "kazakh"}, {"sq", "albanian"}, {"sw", "swahili"},
    {"gl", "galician"}, {"mr", "marathi"}, {"pa", "punjabi"}, {"si", "sinhala"}, {"km", "khmer"}, {"sn", "shona"},
    {"yo", "yoruba"}, {"so", "somali"}, {"af", "afrikaans"}, {"oc", "occitan"}, {"ka", "georgian"}, {"be", "belarusian"},
    {"tg", "tajik"}, {"sd", "sindhi"}, {"gu", "gujarati"}, {"am", "amharic"}, {"yi", "yiddish"}, {"lo", "lao"},
    {"uz", "uzbek"}, {"fo", "faroese"}, {"ht", "haitian creole"}, {"ps", "pashto"}, {"tk", "turkmen"}, {"nn", "nynorsk"},
    {"mt", "maltese"}, {"sa", "sanskrit"}, {"lb", "luxembourgish"}, {"my", "myanmar"}, {"bo", "tibetan"}, {"tl", "tagalog"},
    {"mg", "malagasy"}, {"as", "assamese"}, {"tt", "tatar"}, {"haw", "hawaiian"}, {"ln", "lingala"}, {"ha", "hausa"},
    {"ba", "bashkir"}, {"jw", "javanese"}, {"su", "sundanese"}, {"yue", "cantonese"},
    /* aliases (TO_LANGUAGE_CODE) */
    {"my", "burmese"}, {"ca", "valencian"}, {"nl", "flemish"}, {"ht", "haitian"}, {"lb", "letzeburgesch"}, {"ps", "pushto"},
    {"pa", "panjabi"}, {"ro", "moldavian"}, {"ro", "moldovan"}, {"si", "sinhalese"}, {"es", "castilian"}, {"zh", "mandarin"},
};
#define N_LANGS 100

static bool ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a, y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
        if (x != y) return false;
    }
    return !*a && !*b;
}

const char *mx_whisper_lang_code(const char *s) {
    if (!s) return NULL;
    for (size_t i = 0; i < MX_ARRAY_LEN(LANGS); i++)
        if (ieq(s, LANGS[i][0]) || ieq(s, LANGS[i][1])) return LANGS[i][0];
    return NULL;
}

const char *mx_whisper_lang_name(const char *code) {
    for (int i = 0; i < N_LANGS; i++)
        if (!strcmp(code, LANGS[i][0])) return LANGS[i][1];
    return NULL;
}

/* ---- generation config ---- */
static int32_t tok_id(const mx_tokenizer *tok, const char *s) { return tok ? mx_tok_token_id(tok, s, strlen(s)) : -1; }

static int gid(json_t *gc, const char *key, int vocab, int32_t def, int32_t *out) {
    json_t *v = gc ? json_object_get(gc, key) : NULL;
    *out = def;
    if (!v || json_is_null(v)) return MX_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= vocab)
        return mx_set_err("generation_config.json: %s: expected a token id below %d", key, vocab);
    *out = (int32_t)json_integer_value(v);
    return MX_OK;
}

static int id_list(json_t *gc, const char *key, int vocab, int32_t **out, int *n) {
    json_t *v = gc ? json_object_get(gc, key) : NULL;
    *out = NULL;
    *n = 0;
    if (!v || json_is_null(v)) return MX_OK;
    if (!json_is_array(v) || json_array_size(v) > (size_t)vocab) return mx_set_err("generation_config.json: %s: expected a list of token ids", key);
    *out = mx_malloc(sizeof(int32_t) * (json_array_size(v) + 1));
    if (!*out) return MX_ERR;
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= vocab) {
            free(*out);
            *out = NULL;
            return mx_set_err("generation_config.json: %s[%zu]: expected a token id below %d", key, i, vocab);
        }
        (*out)[(*n)++] = (int32_t)json_integer_value(x);
    }
    return MX_OK;
}

int mx_whisper_cfg_load(mx_whisper_cfg *g, const mx_cfg *config, json_t *gc, const mx_tokenizer *tok) {
    memset(g, 0, sizeof *g);
    int V, T, dst;
    if (mx_cfg_i32(config, "vocab_size", 51865, 8, 1 << 20, &V) || mx_cfg_i32(config, "max_target_positions", 448, 4, 1 << 16, &T) ||
        mx_cfg_i32(config, "decoder_start_token_id", tok_id(tok, "<|startoftranscript|>") >= 0 ? tok_id(tok, "<|startoftranscript|>") : 50258, 0,
                   V - 1, &dst))
        return MX_ERR;
    g->vocab = V;
    g->max_target = T;
    int rc = gid(gc, "decoder_start_token_id", V, dst, &g->sot);
    int ceos;
    if (!rc) rc = mx_cfg_i32(config, "eos_token_id", tok_id(tok, "<|endoftext|>") >= 0 ? tok_id(tok, "<|endoftext|>") : 50257, 0, V - 1, &ceos);
    if (!rc) rc = gid(gc, "eos_token_id", V, ceos, &g->eot);
    if (!rc) rc = gid(gc, "no_timestamps_token_id", V, tok_id(tok, "<|notimestamps|>"), &g->notimestamps);
    if (!rc) rc = gid(gc, "prev_sot_token_id", V, tok_id(tok, "<|startofprev|>"), &g->prev_sot);
    if (rc) return rc;
    g->transcribe = tok_id(tok, "<|transcribe|>");
    g->translate = tok_id(tok, "<|translate|>");
    json_t *tt = gc ? json_object_get(gc, "task_to_id") : NULL;
    if (json_is_object(tt)) {
        if (gid(tt, "transcribe", V, g->transcribe, &g->transcribe) || gid(tt, "translate", V, g->translate, &g->translate))
            return mx_err_prefix("task_to_id");
    }
    g->nospeech = g->notimestamps > 0 ? g->notimestamps - 1 : -1;
    g->timestamp_begin = g->notimestamps >= 0 ? g->notimestamps + 1 : V + 1;
    if (id_list(gc, "suppress_tokens", V, &g->suppress, &g->n_suppress) ||
        id_list(gc, "begin_suppress_tokens", V, &g->begin_suppress, &g->n_begin_suppress))
        return MX_ERR;
    /* languages: lang_to_id, else the tokenizer's <|code|> tokens */
    json_t *l2i = gc ? json_object_get(gc, "lang_to_id") : NULL;
    json_t *ml = gc ? json_object_get(gc, "is_multilingual") : NULL;
    if (json_is_object(l2i)) {
        const char *k;
        json_t *v;
        json_object_foreach(l2i, k, v) {
            size_t kl = strlen(k);
            if (g->n_lang == MX_WHISPER_MAX_LANGS) break;
            if (kl < 5 || kl > 10 || strncmp(k, "<|", 2) || strcmp(k + kl - 2, "|>") || !json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= V)
                return mx_set_err("generation_config.json: lang_to_id: expected \"<|code|>\": token id");
            memcpy(g->lang_code[g->n_lang], k + 2, kl - 4);
            g->lang_code[g->n_lang][kl - 4] = 0;
            g->lang_id[g->n_lang++] = (int32_t)json_integer_value(v);
        }
    } else if (!json_is_false(ml))
        for (int i = 0; i < N_LANGS && g->n_lang < MX_WHISPER_MAX_LANGS; i++) {
            char t[16];
            snprintf(t, sizeof t, "<|%s|>", LANGS[i][0]);
            int32_t id = tok_id(tok, t);
            if (id < 0 || id >= V) continue;
            snprintf(g->lang_code[g->n_lang], sizeof g->lang_code[0], "%s", LANGS[i][0]);
            g->lang_id[g->n_lang++] = id;
        }
    /* forced_decoder_ids [[1, lang|null], [2, task], ...] (older checkpoints) */
    json_t *fd = gc ? json_object_get(gc, "forced_decoder_ids") : NULL;
    if (!fd || json_is_null(fd)) fd = mx_cfg_get(config, "forced_decoder_ids");
    if (fd && json_is_array(fd)) {
        for (size_t i = 0; i < json_array_size(fd) && g->n_forced < 4; i++) {
            json_t *p = json_array_get(fd, i), *v = json_array_get(p, 1);
            if (!json_is_array(p) || json_integer_value(json_array_get(p, 0)) != (json_int_t)i + 1) break;
            g->forced[g->n_forced++] = json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < V ? (int32_t)json_integer_value(v) : -1;
        }
    }
    json_t *mi = gc ? json_object_get(gc, "max_initial_timestamp_index") : NULL;
    g->max_initial_ts = json_is_integer(mi) && json_integer_value(mi) >= 0 && json_integer_value(mi) < 1 << 20 ? (int)json_integer_value(mi) : -1;
    json_t *mx = gc ? json_object_get(gc, "max_length") : NULL;
    g->max_length = json_is_integer(mx) && json_integer_value(mx) > 0 && json_integer_value(mx) < 1 << 20 ? (int)json_integer_value(mx) : 20;
    json_t *tk = gc ? json_object_get(gc, "top_k") : NULL;
    g->top_k = json_is_integer(tk) && json_integer_value(tk) >= 0 && json_integer_value(tk) <= V ? (int)json_integer_value(tk) : 50;
    if (g->sot < 0 || g->eot < 0) return mx_set_err("whisper: the start and end tokens are unknown");
    return MX_OK;
}

void mx_whisper_cfg_free(mx_whisper_cfg *g) {
    free(g->suppress);
    free(g->begin_suppress);
    g->suppress = g->begin_suppress = NULL;
}

void mx_whisper_opts_defaults(mx_whisper_opts *o) {
    memset(o, 0, sizeof *o);
    o->compression_ratio_threshold = o->logprob_threshold = o->no_speech_threshold = NAN;
}

/* ---- logits rules ---- */
void mx_whisper_rules(const mx_whisper_cfg *g, bool timestamps, const int32_t *seq, int n, int begin, float *x) {
    int V = g->vocab;
    if (n == begin)
        for (int i = 0; i < g->n_begin_suppress; i++) x[g->begin_suppress[i]] = -INFINITY;
    for (int i = 0; i < g->n_suppress; i++) x[g->suppress[i]] = -INFINITY;
    if (!timestamps || g->timestamp_begin >= V) return;
    int tb = g->timestamp_begin;
    x[g->notimestamps] = -INFINITY;
    const int32_t *s = seq + begin;
    int k = n - begin;
    bool last_ts = k >= 1 && s[k - 1] >= tb, penult_ts = k < 2 || s[k - 2] >= tb;
    if (last_ts) {
        if (penult_ts) for (int i = tb; i < V; i++) x[i] = -INFINITY; /* after a pair: text */
        else for (int i = 0; i < g->eot && i < V; i++) x[i] = -INFINITY; /* close the pair (or end) */
    }
    int32_t last = -1;
    for (int i = k; i-- > 0;) if (s[i] >= tb) { last = s[i]; break; }
    if (last >= 0) { /* timestamps never decrease (nor repeat, except to close a pair) */
        int32_t lim = last_ts && !penult_ts ? last : last + 1;
        for (int i = tb; i < lim && i < V; i++) x[i] = -INFINITY;
    }
    if (n == begin) {
        for (int i = 0; i < tb; i++) x[i] = -INFINITY;
        if (g->max_initial_ts >= 0)
            for (int i = tb + g->max_initial_ts + 1; i < V; i++) x[i] = -INFINITY;
    }
    /* timestamps win when their total probability beats every single text token */
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) if (x[i] > mx) mx = x[i];
    if (mx == -INFINITY) return;
    double se = 0, st = 0;
    float mt = -INFINITY;
    for (int i = 0; i < V; i++) {
        double e = exp((double)x[i] - mx);
        se += e;
        if (i >= tb) st += e;
        else if (x[i] > mt) mt = x[i];
    }
    double lse = log(se), lp_ts = log(st) - lse, lp_text = (double)mt - mx - lse;
    if (st > 0 && lp_ts > lp_text)
        for (int i = 0; i < tb; i++) x[i] = -INFINITY;
}

double mx_whisper_compression_ratio(const int32_t *tok, int n, int vocab) {
    int len = (int)(log2((double)vocab) / 8) + 1;
    if (n <= 0) return 0;
    size_t raw = (size_t)n * (size_t)len;
    uint8_t *b = malloc(raw), *z = malloc(compressBound(raw));
    double r = 0;
    if (b && z) {
        for (int i = 0; i < n; i++)
            for (int k = 0; k < len; k++) b[(size_t)i * len + k] = (uint8_t)((uint32_t)tok[i] >> (8 * k));
        uLongf zl = compressBound(raw);
        if (compress2(z, &zl, b, raw, Z_DEFAULT_COMPRESSION) == Z_OK && zl) r = (double)raw / (double)zl;
    }
    free(b);
    free(z);
    return r;
}

/* ---- one window ---- */
typedef struct {
    int32_t *seq;  /* decoder input then generated tokens */
    int n, cap;
    float *logits, *tmp;
    double sum_lp;
    int n_lp;
    float no_speech_prob;
    uint64_t rng;
} win_t;

static int push(win_t *w, int32_t t) {
    if (w->n == w->cap) return mx_set_err("whisper: decoder sequence too long");
    w->seq[w->n++] = t;
    return MX_OK;
}

/* log-softmax of x at i */
static double logprob_at(const float *x, int V, int i) {
    float mx = -INFINITY;
    for (int k = 0; k < V; k++) if (x[k] > mx) mx = x[k];
    double s = 0;
    for (int k = 0; k < V; k++) s += exp((double)x[k] - mx);
    return (double)x[i] - mx - log(s);
}

static double rng_unit(uint64_t *s) { /* xorshift64*, [0, 1) */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}

/* the k-th largest of x[0..n) (quickselect on a scratch copy) */
static float kth_largest(const float *x, int n, int k, float *tmp) {
    memcpy(tmp, x, sizeof(float) * (size_t)n);
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float p = tmp[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (tmp[i] > p) i++;
            while (tmp[j] < p) j--;
            if (i <= j) { float t = tmp[i]; tmp[i] = tmp[j]; tmp[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return tmp[want];
}

/* transformers' sampling after the rules: TemperatureLogitsWarper, then
 * TopKLogitsWarper (scores below the k-th are dropped, ties stay), then a
 * draw. x becomes the scores it keeps. */
static int32_t sample(float *x, int V, float t, int top_k, float *tmp, uint64_t *rng) {
    for (int i = 0; i < V; i++) x[i] /= t;
    if (top_k > 0 && top_k < V) {
        float kth = kth_largest(x, V, top_k, tmp);
        for (int i = 0; i < V; i++) if (x[i] < kth) x[i] = -INFINITY;
    }
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)x[i] - mx);
    double u = rng_unit(rng) * sum, acc = 0;
    int32_t last = -1;
    for (int i = 0; i < V; i++) {
        if (x[i] == -INFINITY) continue;
        last = i;
        acc += exp((double)x[i] - mx);
        if (acc > u) return i;
    }
    return last;
}

/* Decodes one window. w->seq[0..w->n) is the decoder input (context, then
 * the init tokens); sot_at is the index of <|startoftranscript|>, whose
 * logits give the no-speech probability (WhisperNoSpeechDetection). */
static int run_window(const mx_s2t_model *m, const mx_whisper_cfg *g, bool timestamps, float temp, int sot_at, int max_total, win_t *w) {
    int V = m->vocab, begin = w->n;
    m->restart(m->self);
    w->sum_lp = 0;
    w->n_lp = 0;
    if (m->feed(m->self, w->seq, sot_at + 1, w->logits)) return MX_ERR;
    w->no_speech_prob = g->nospeech >= 0 && g->nospeech < V ? (float)exp(logprob_at(w->logits, V, g->nospeech)) : 0;
    if (begin > sot_at + 1 && m->feed(m->self, w->seq + sot_at + 1, begin - sot_at - 1, w->logits)) return MX_ERR;
    while (w->n < max_total) {
        mx_whisper_rules(g, timestamps, w->seq, w->n, begin, w->logits);
        int32_t t = temp > 0 ? sample(w->logits, V, temp, g->top_k, w->tmp, &w->rng) : mx_argmax(w->logits, V);
        if (t < 0 || t >= V || w->logits[t] == -INFINITY) return mx_set_err("whisper: every token was ruled out");
        if (t != g->eot) { /* _retrieve_avg_logprobs: log_softmax(scores * temperature) of the tokens but EOS */
            if (temp > 0) for (int i = 0; i < V; i++) w->logits[i] *= temp;
            w->sum_lp += logprob_at(w->logits, V, t);
            w->n_lp++;
        }
        if (push(w, t)) return MX_ERR;
        if (t == g->eot || w->n >= max_total) break;
        if (m->feed(m->self, &t, 1, w->logits)) return MX_ERR;
    }
    return MX_OK;
}

/* ---- results ---- */
static int add_seg(mx_whisper_result *r, int *cap, double start, double end, int seek, const int32_t *tok, int n, const mx_tokenizer *tk,
                   const mx_whisper_cfg *g, float temp, float lp, float cr, float nsp) {
    if (r->n_seg == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        mx_whisper_seg *p = mx_realloc(r->seg, sizeof *p * (size_t)nc);
        if (!p) return MX_ERR;
        r->seg = p;
        *cap = nc;
    }
    mx_whisper_seg *s = &r->seg[r->n_seg];
    memset(s, 0, sizeof *s);
    s->start = start;
    s->end = end;
    s->seek = seek;
    s->temperature = temp;
    s->avg_logprob = lp;
    s->compression_ratio = cr;
    s->no_speech_prob = nsp;
    s->tokens = mx_malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!s->tokens) return MX_ERR;
    memcpy(s->tokens, tok, sizeof(int32_t) * (size_t)n);
    s->n_tokens = n;
    r->n_seg++;
    /* the text: no timestamps, no special tokens */
    int32_t *txt = mx_malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    int k = 0;
    if (!txt) return MX_ERR;
    for (int i = 0; i < n; i++) if (tok[i] < g->timestamp_begin && tok[i] != g->eot) txt[k++] = tok[i];
    mx_buf b = {0};
    int rc = tk ? mx_tok_decode(tk, txt, k, true, &b) : mx_buf_append(&b, "", 0);
    free(txt);
    if (rc) { mx_buf_free(&b); return MX_ERR; }
    s->text = b.data ? b.data : mx_strdup("");
    return s->text ? MX_OK : MX_ERR;
}

void mx_whisper_result_free(mx_whisper_result *r) {
    for (int i = 0; i < r->n_seg; i++) { free(r->seg[i].tokens); free(r->seg[i].text); }
    free(r->seg);
    free(r->text);
    free(r->tokens);
    memset(r, 0, sizeof *r);
}

static int append_tokens(mx_whisper_result *r, int *cap, const int32_t *t, int n) {
    if (r->n_tokens + n > *cap) {
        int nc = MX_MAX(*cap * 2, r->n_tokens + n + 64);
        int32_t *p = mx_realloc(r->tokens, sizeof(int32_t) * (size_t)nc);
        if (!p) return MX_ERR;
        r->tokens = p;
        *cap = nc;
    }
    memcpy(r->tokens + r->n_tokens, t, sizeof(int32_t) * (size_t)n);
    r->n_tokens += n;
    return MX_OK;
}

/* ---- segments ---- */
typedef struct {
    mx_whisper_result *r;
    int seg_cap, tok_cap;
    const mx_whisper_cfg *g;
    const mx_tokenizer *tok;
    float temp, lp, cr, nsp;
    int seek;
} segctx;

static int seg(segctx *c, double start, double end, const int32_t *t, int n) {
    return add_seg(c->r, &c->seg_cap, start, end, c->seek, t, n, c->tok, c->g, c->temp, c->lp, c->cr, c->nsp);
}

/* Long form (_retrieve_segment): segments end at timestamp pairs; returns the
 * frames to advance. */
static int segments_long(segctx *c, const int32_t *gen, int n, double toff, int nf, int *advance) {
    int tb = c->g->timestamp_begin;
    bool single_end = n >= 2 && gen[n - 2] < tb && gen[n - 1] >= tb;
    int npairs = 0;
    for (int i = 1; i < n; i++) npairs += gen[i - 1] >= tb && gen[i] >= tb;
    *advance = nf;
    if (npairs) {
        int last = 0, k = 0;
        for (int i = 1; i <= n; i++) {
            bool cut = i < n && gen[i - 1] >= tb && gen[i] >= tb;
            int cur = -1;
            if (cut) cur = ++k == npairs && !single_end ? i + 1 : i; /* the last pair keeps its second timestamp */
            else if (i == n && single_end) cur = n;
            if (cur < 0) continue;
            if (cur > last)
                if (seg(c, toff + (gen[last] - tb) * TIME_PRECISION, toff + (gen[cur - 1] - tb) * TIME_PRECISION, gen + last, cur - last)) return MX_ERR;
            last = cur;
            if (k == npairs && !single_end) break;
        }
        if (!single_end) *advance = (gen[last - 1] - tb) * INPUT_STRIDE;
        return MX_OK;
    }
    double end = toff + nf * TIME_PER_FRAME;
    for (int i = n; i-- > 0;) if (gen[i] >= tb) { if (gen[i] != tb) end = toff + (gen[i] - tb) * TIME_PRECISION; break; }
    return n ? seg(c, toff, end, gen, n) : MX_OK;
}

/* Short form: every token counts (the tokenizer's _compute_offsets): a
 * segment from each timestamp to the next pair or the last timestamp. */
static int segments_short(segctx *c, const int32_t *gen, int n, double dur, bool ts) {
    int tb = c->g->timestamp_begin, first = -1, lastts = -1;
    for (int i = 0; i < n; i++) if (gen[i] >= tb) { if (first < 0) first = i; lastts = i; }
    if (!ts || first < 0) return n ? seg(c, 0, dur, gen, n) : MX_OK;
    int last = first;
    for (int i = first + 1; i <= lastts + 1; i++) {
        bool cut = (i <= lastts && gen[i - 1] >= tb && gen[i] >= tb) || i == lastts + 1;
        if (!cut) continue;
        if (i - last > 1 && seg(c, (gen[last] - tb) * TIME_PRECISION, (gen[i - 1] - tb) * TIME_PRECISION, gen + last, i - last)) return MX_ERR;
        last = i;
    }
    return MX_OK;
}

/* ---- the whole recording ---- */
int mx_whisper_transcribe(const mx_s2t_model *m, const mx_whisper_cfg *g, const mx_tokenizer *tok, const float *mel, int frames,
                          double seconds, const mx_whisper_opts *o, mx_whisper_result *r) {
    memset(r, 0, sizeof *r);
    r->duration = seconds;
    int V = m->vocab, NF = m->n_frames, nm = m->n_mels;
    if (V != g->vocab) return mx_set_err("whisper: the model's vocabulary (%d) differs from config.json (%d)", V, g->vocab);
    if (frames < NF) return mx_set_err("whisper: %d feature frames, the encoder needs %d", frames, NF);
    bool shortform = frames <= NF;
    bool ts = o->timestamps || !shortform;
    if (ts && g->timestamp_begin >= V)
        return mx_set_err(shortform ? "this model has no timestamp tokens (<|notimestamps|> is its last token): timestamps are not available"
                                    : "audio over 30 s is transcribed window by window with timestamps, and this model has no timestamp tokens");
    /* language and task (_retrieve_init_tokens) */
    int32_t lang = -1, task = -1;
    for (int i = 0; i < g->n_forced; i++) {
        if (g->forced[i] >= 0 && (g->forced[i] == g->transcribe || g->forced[i] == g->translate)) task = g->forced[i];
        else if (i == 0) lang = g->forced[i];
    }
    if (o->language) {
        const char *code = mx_whisper_lang_code(o->language);
        if (!code) return mx_set_err("unsupported language \"%s\": give a code (en, de, ...) or an English name (german)", o->language);
        if (!g->n_lang) {
            if (strcmp(code, "en")) return mx_set_err("this model is English-only: it cannot take language \"%s\"", code);
        } else {
            int k = 0;
            for (; k < g->n_lang && strcmp(g->lang_code[k], code); k++) {}
            if (k == g->n_lang) return mx_set_err("language \"%s\" is not one of this model's languages", code);
            lang = g->lang_id[k];
        }
    }
    if (o->translate) {
        if (g->translate < 0 || !g->n_lang) return mx_set_err("this model cannot translate (it has no <|translate|> task or is English-only)");
        task = g->translate;
    } else if (g->n_lang && g->transcribe >= 0) task = g->transcribe; /* an explicit task, as the CLI and the API always give */
    float *win = mx_malloc(sizeof(float) * (size_t)nm * (size_t)NF);
    win_t w = {0};
    w.cap = m->max_target;
    w.rng = o->seed ? o->seed : 0x9E3779B97F4A7C15ULL;
    w.seq = mx_malloc(sizeof(int32_t) * (size_t)w.cap);
    w.logits = mx_malloc(sizeof(float) * (size_t)V);
    w.tmp = mx_malloc(sizeof(float) * (size_t)V);
    int32_t *prev = mx_malloc(sizeof(int32_t) * (size_t)w.cap);
    int n_prev = 0, rc = MX_ERR;
    segctx sc = {.r = r, .g = g, .tok = tok};
    mx_buf text = {0};
    if (!win || !w.seq || !w.logits || !w.tmp || !prev) goto done;
    static const float zero_t = 0;
    const float *temps = o->temperatures && o->n_temperatures ? o->temperatures : &zero_t;
    int n_temps = o->temperatures && o->n_temperatures ? o->n_temperatures : 1;
    bool lang_pending = lang < 0 && g->n_lang > 0;
    for (int seek = 0; seek < frames;) {
        int nf = MX_MIN(frames - seek, NF);
        for (int b = 0; b < nm; b++) { /* the window, zero-padded to NF frames (_get_input_segment) */
            memcpy(win + (size_t)b * NF, mel + (size_t)b * frames + seek, sizeof(float) * (size_t)nf);
            memset(win + (size_t)b * NF + nf, 0, sizeof(float) * (size_t)(NF - nf));
        }
        double t0 = mx_now();
        if (m->encode(m->self, win)) goto done;
        r->t_encode += mx_now() - t0;
        r->n_windows++;
        t0 = mx_now();
        if (lang_pending) { /* detect_language on the first window: the logits after <|startoftranscript|> */
            m->restart(m->self);
            if (m->feed(m->self, &g->sot, 1, w.logits)) goto done;
            int best = 0;
            for (int k = 1; k < g->n_lang; k++) if (w.logits[g->lang_id[k]] > w.logits[g->lang_id[best]]) best = k;
            lang = g->lang_id[best];
            lang_pending = false;
        }
        /* decoder input: the prompt (first window) or the previous window's tokens, then the init tokens */
        w.n = 0;
        if (seek == 0 && o->n_prompt) {
            int keep = MX_MIN(o->n_prompt - 1, m->max_target / 2 - 1); /* its last tokens after <|startofprev|> */
            if (push(&w, o->prompt[0])) goto done;
            for (int i = o->n_prompt - keep; i < o->n_prompt; i++) if (push(&w, o->prompt[i])) goto done;
        } else if (o->condition_on_prev && n_prev && g->prev_sot >= 0) {
            int keep = MX_MIN(n_prev, m->max_target / 2 - 1);
            if (push(&w, g->prev_sot)) goto done;
            for (int i = n_prev - keep; i < n_prev; i++) if (push(&w, prev[i])) goto done;
        }
        int sot_at = w.n;
        if (push(&w, g->sot) || (lang >= 0 && push(&w, lang)) || (task >= 0 && push(&w, task)) ||
            (!ts && g->notimestamps >= 0 && push(&w, g->notimestamps)))
            goto done;
        int begin = w.n;
        int max_total = MX_MIN(g->max_length + MX_MIN(m->max_target / 2 - 1, begin - 1), m->max_target);
        if (max_total <= begin) { mx_set_err("whisper: the decoder prompt (%d tokens) leaves no room to generate", begin); goto done; }
        /* decode, falling back to the next temperature */
        bool skip = false;
        int32_t *gen = NULL;
        int gen_n = 0;
        for (int ti = 0; ti < n_temps; ti++) {
            w.n = begin;
            if (run_window(m, g, ts, temps[ti], sot_at, max_total, &w)) goto done;
            r->n_decoded += w.n;
            gen = w.seq + begin;
            gen_n = w.n - begin;
            if (seek + NF < frames && gen_n && gen[gen_n - 1] == g->eot) gen_n--; /* an EOS before the last window is dropped */
            sc.temp = temps[ti];
            sc.lp = (float)(w.sum_lp / (w.n_lp + 1));
            sc.cr = (float)mx_whisper_compression_ratio(gen, gen_n, V);
            sc.nsp = w.no_speech_prob;
            bool fallback = (!isnan(o->compression_ratio_threshold) && sc.cr > o->compression_ratio_threshold) ||
                            (!isnan(o->logprob_threshold) && sc.lp < o->logprob_threshold);
            skip = !isnan(o->no_speech_threshold) && !isnan(o->logprob_threshold) && sc.lp < o->logprob_threshold &&
                   sc.nsp > o->no_speech_threshold;
            if (skip || !fallback) break;
        }
        r->t_decode += mx_now() - t0;
        if (skip) { seek += nf; n_prev = 0; continue; }
        if (append_tokens(r, &sc.tok_cap, gen, gen_n)) goto done;
        int nseg0 = r->n_seg, advance = nf;
        sc.seek = seek;
        if (shortform ? segments_short(&sc, gen, gen_n, seconds, ts) : segments_long(&sc, gen, gen_n, seek * TIME_PER_FRAME, nf, &advance)) goto done;
        if (advance <= 0) advance = nf; /* a window that would end where it started never finishes */
        n_prev = 0; /* condition_on_prev_tokens: this window's tokens, when decoded at a low temperature */
        if (o->condition_on_prev && sc.temp < 0.5f)
            for (int k = nseg0; k < r->n_seg; k++)
                for (int i = 0; i < r->seg[k].n_tokens && n_prev < w.cap; i++) prev[n_prev++] = r->seg[k].tokens[i];
        seek += shortform ? nf : advance;
    }
    if (shortform) { /* every generated text token (the segments leave out text after the last timestamp) */
        int32_t *tt = mx_malloc(sizeof(int32_t) * (size_t)(r->n_tokens + 1));
        int k = 0;
        if (!tt) goto done;
        for (int i = 0; i < r->n_tokens; i++) if (r->tokens[i] < g->timestamp_begin && r->tokens[i] != g->eot) tt[k++] = r->tokens[i];
        int e = tok ? mx_tok_decode(tok, tt, k, true, &text) : MX_OK;
        free(tt);
        if (e) goto done;
    } else
        for (int k = 0; k < r->n_seg; k++) if (mx_buf_puts(&text, r->seg[k].text)) goto done;
    r->text = text.data ? text.data : mx_strdup("");
    text.data = NULL;
    if (!r->text) goto done;
    for (int k = 0; lang >= 0 && k < g->n_lang; k++) if (g->lang_id[k] == lang) snprintf(r->language, sizeof r->language, "%s", g->lang_code[k]);
    rc = MX_OK;
done:
    if (rc) mx_whisper_result_free(r);
    mx_buf_free(&text);
    free(win);
    free(w.seq);
    free(w.logits);
    free(w.tmp);
    free(prev);
    return rc;
}
