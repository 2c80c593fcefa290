/* libFuzzer target for the tokenizer.
 * Byte 0 selects the mode:
 *   even: the rest is "TOKENIZER_JSON \0\0 TEXT": load the tokenizer.json from
 *         memory (every error path of the loader), then encode TEXT, decode
 *         the ids and stream-decode them;
 *   2 mod 4: the rest is up to five "\0\0"-separated files of a slow
 *         tokenizer folder (vocab.json, merges.txt, tokenizer_config.json,
 *         special_tokens_map.json, added_tokens.json) and then TEXT: written
 *         to a scratch folder, loaded as Whisper's and GPT-2's folders are,
 *         then TEXT encoded and decoded;
 *   odd:  the rest is text encoded with the committed test tokenizers (loaded
 *         once from tests/tokenizers, run from the repo root), then decoded,
 *         stream-decoded (must equal the decode), and random ids decoded.
 * Every mode also encodes with split_special:
 * with the whole text as markup the ids must equal the default encoding. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "tokenizer/tokenizer.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

static mx_tokenizer *g_tok[8];
static int g_ntok = -1;

static void init(void) {
    /* the small ones: loading is slow under ASan */
    const char *names[] = {"tests/tokenizers/gpt2", "tests/tokenizers/llama2", "tests/tokenizers/bert-bge", "tests/tokenizers/t5-small"};
    g_ntok = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        mx_tokenizer *t = mx_tok_load(names[i]);
        if (t) g_tok[g_ntok++] = t;
    }
}

static void exercise(const mx_tokenizer *t, const char *text, size_t n, bool special) {
    int32_t *ids = NULL;
    int nid = 0;
    if (mx_tok_encode(t, text, n, special, &ids, &nid)) return;
    mx_buf d = {0}, s = {0};
    if (mx_tok_decode(t, ids, nid, false, &d) == MX_OK) {
        mx_detok *dt = mx_detok_new(t, false);
        for (int i = 0; dt && i < nid; i++) mx_detok_push(dt, ids[i], &s);
        if (dt) mx_detok_flush(dt, &s);
        mx_detok_free(dt);
        if (s.len != d.len || (s.len && memcmp(s.data, d.data, s.len))) abort(); /* stream must equal decode */
    }
    for (int i = 0; i < nid; i++) {
        size_t l;
        if (!mx_tok_token_str(t, ids[i], &l)) abort();
    }
    /* split_special with the whole text as markup reads it as the default does;
     * with parts or none of it, it must still encode */
    size_t all[2] = {0, n}, part[4] = {0, n / 3, n / 2, n};
    mx_tok_opts o = {.add_special = special, .split_special = true, .markup = all, .n_markup = 1};
    int32_t *ids2 = NULL;
    int nid2 = 0;
    if (mx_tok_encode_ex(t, text, n, &o, &ids2, &nid2) || nid2 != nid || (nid && memcmp(ids, ids2, sizeof(int32_t) * (size_t)nid))) abort();
    free(ids2);
    o.markup = part;
    o.n_markup = 2;
    if (mx_tok_encode_ex(t, text, n, &o, &ids2, &nid2)) abort();
    free(ids2);
    mx_buf_free(&d);
    mx_buf_free(&s);
    free(ids);
}

static const char *SLOW_FILES[] = {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"};

/* The next "\0\0"-separated part of [*p, end): returns its length, advances *p past the separator. */
static size_t next_part(const char **p, const char *end, const char **part) {
    const char *s = *p;
    *part = s;
    for (const char *q = s; q + 1 < end; q++)
        if (!q[0] && !q[1]) { *p = q + 2; return (size_t)(q - s); }
    *p = end;
    return (size_t)(end - s);
}

static void slow_folder(const char *p, size_t n) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_tok_slow.XXXXXX");
        if (!mkdtemp(dir)) abort();
    }
    const char *q = p, *end = p + n, *part;
    char path[128];
    for (size_t f = 0; f < sizeof SLOW_FILES / sizeof SLOW_FILES[0]; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, SLOW_FILES[f]);
        unlink(path);
        if (q >= end) continue;
        size_t l = next_part(&q, end, &part);
        FILE *fp = fopen(path, "wb");
        if (!fp) abort();
        if (l && fwrite(part, 1, l, fp) != l) abort();
        fclose(fp);
    }
    mx_tokenizer *t = mx_tok_load(dir);
    if (!t) {
        if (!mx_errmsg()[0]) abort(); /* every failure must say why */
        return;
    }
    const char *text = q < end ? q : "Hello world! <|endoftext|> h\xC3\xA9llo";
    size_t tl = q < end ? (size_t)(end - q) : strlen(text);
    exercise(t, text, tl, true);
    exercise(t, text, tl, false);
    mx_tok_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (g_ntok < 0) init();
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        if (!g_ntok) return 0;
        const mx_tokenizer *t = g_tok[(data[0] >> 1) % g_ntok];
        exercise(t, p, n, (data[0] >> 4) & 1);
        /* decode arbitrary ids (in and out of range) */
        int32_t ids[64];
        int k = 0;
        for (size_t i = 0; i + 4 <= n && k < 64; i += 4) {
            uint32_t v;
            memcpy(&v, p + i, 4);
            ids[k++] = (int32_t)(v % (uint32_t)(mx_tok_vocab_size(t) + 16)) - 8;
        }
        mx_buf d = {0};
        mx_tok_decode(t, ids, k, (data[0] >> 5) & 1, &d);
        mx_buf_free(&d);
        return 0;
    }
    if ((data[0] & 3) == 2) {
        slow_folder(p, n);
        return 0;
    }
    const char *sep = NULL;
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == 0 && p[i + 1] == 0) { sep = p + i; break; }
    size_t jl = sep ? (size_t)(sep - p) : n;
    mx_tokenizer *t = mx_tok_load_json(p, jl, NULL, 0, "fuzz.json");
    if (!t) {
        if (!mx_errmsg()[0]) abort(); /* every failure must say why */
        return 0;
    }
    const char *text = sep ? sep + 2 : "Hello world! 123 <s> héllo \xF0\x9F\x98\x80";
    size_t tl = sep ? n - jl - 2 : strlen(text);
    exercise(t, text, tl, true);
    exercise(t, text, tl, false);
    mx_tok_free(t);
    return 0;
}
