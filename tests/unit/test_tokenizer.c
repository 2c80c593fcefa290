/* Unit tests of the tokenizer pieces on small in-memory tokenizer.json files:
 * models (BPE, WordPiece, Unigram, WordLevel), normalizers, pre-tokenizer
 * split behaviors, decoders, UTF-8 edge cases, streaming, and the error
 * messages for malformed input; the slow formats (vocab.json + merges.txt,
 * tokenizer.model with added tokens) on small folders and on
 * tests/tokenizers/slow (run from the repo root). */
#define _GNU_SOURCE
#include "test.h"
#include "tokenizer/tok_internal.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mx_tokenizer *load(const char *json) { return mx_tok_load_json(json, strlen(json), NULL, 0, "t.json"); }

/* Encodes text and returns the ids as "1 2 3" (or "ERR: msg"). */
static const char *enc(const mx_tokenizer *t, const char *text, bool special) {
    static char out[4096];
    int32_t *ids = NULL;
    int n = 0;
    if (!t) { snprintf(out, sizeof out, "ERR: load: %s", mx_errmsg()); return out; }
    if (mx_tok_encode(t, text, strlen(text), special, &ids, &n)) { snprintf(out, sizeof out, "ERR: %s", mx_errmsg()); return out; }
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k < sizeof out - 16; i++) k += (size_t)snprintf(out + k, sizeof out - k, "%s%d", i ? " " : "", ids[i]);
    free(ids);
    return out;
}

static const char *dec(const mx_tokenizer *t, const int32_t *ids, int n, bool skip) {
    static char out[4096];
    mx_buf b = {0};
    if (mx_tok_decode(t, ids, n, skip, &b)) snprintf(out, sizeof out, "ERR: %s", mx_errmsg());
    else snprintf(out, sizeof out, "%s", b.data ? b.data : "");
    mx_buf_free(&b);
    return out;
}

#define EQ(name, got, want) do { const char *g_ = (got); CHECK(name, !strcmp(g_, want), "got \"%s\" want \"%s\"", g_, want); } while (0)

static void test_bpe(void) {
    mx_tokenizer *t = load("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"bc\":4,\"abc\":5,\"<unk>\":6},"
                           "\"merges\":[\"b c\",\"a b\",\"a bc\"],\"unk_token\":\"<unk>\"}}");
    EQ("bpe/rank order", enc(t, "abc", false), "5");  /* b c first, then a bc */
    EQ("bpe/pairs", enc(t, "abab", false), "3 3");
    EQ("bpe/unk", enc(t, "axb", false), "0 6 1");
    mx_tok_free(t);
    t = load("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"<unk>\":3},\"merges\":[[\"a\",\"b\"]],"
             "\"unk_token\":\"<unk>\",\"fuse_unk\":true}}");
    EQ("bpe/array merges", enc(t, "ab", false), "2");
    EQ("bpe/fuse_unk", enc(t, "axyzb", false), "0 3 1");
    mx_tok_free(t);
    /* byte fallback: unknown characters become <0xXX> pieces */
    mx_buf j = {0};
    mx_buf_puts(&j, "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":0,\"a\":1");
    for (int b = 0; b < 256; b++) mx_buf_printf(&j, ",\"<0x%02X>\":%d", b, 2 + b);
    mx_buf_puts(&j, "},\"merges\":[]},\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]}}");
    t = load(j.data);
    EQ("bpe/byte_fallback", enc(t, "a\xC3\xA9", false), "1 197 171");
    int32_t ids[] = {1, 197, 171, 1, 197, 1};
    EQ("bytefallback/decode", dec(t, ids, 3, false), "a\xC3\xA9");
    EQ("bytefallback/invalid run", dec(t, ids + 3, 3, false), "a\xEF\xBF\xBD" "a");
    mx_tok_free(t);
    mx_buf_free(&j);
    /* ignore_merges takes a whole word found in the vocabulary */
    t = load("{\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"abc\":4},\"merges\":[\"a b\"]}}");
    EQ("bpe/ignore_merges", enc(t, "abc", false), "4");
    mx_tok_free(t);
    /* continuing_subword_prefix / end_of_word_suffix */
    t = load("{\"model\":{\"type\":\"BPE\",\"continuing_subword_prefix\":\"##\",\"end_of_word_suffix\":\"</w>\",\"vocab\":{\"a\":0,\"##b\":1,\"##c</w>\":2,\"a##b\":3,\"ab\":4},\"merges\":[\"a ##b\"]}}");
    EQ("bpe/prefix+suffix", enc(t, "abc", false), "4 2");
    mx_tok_free(t);
}

static void test_wordpiece(void) {
    mx_tokenizer *t = load("{\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
                           "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"max_input_chars_per_word\":5,"
                           "\"vocab\":{\"[UNK]\":0,\"un\":1,\"##aff\":2,\"##able\":3,\"!\":4,\"e\":5}},"
                           "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true}}");
    EQ("wordpiece/greedy", enc(t, "Unaff!", false), "1 2 4");
    EQ("wordpiece/too long", enc(t, "unaffable", false), "0");
    EQ("wordpiece/unk", enc(t, "xyz", false), "0");
    EQ("bert/accents", enc(t, "\xC3\x89", false), "5"); /* É -> e */
    int32_t ids[] = {1, 2, 4};
    EQ("wordpiece/decode", dec(t, ids, 3, false), "unaff!");
    mx_tok_free(t);
}

static void test_unigram(void) {
    mx_tokenizer *t = load("{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0],[\"a\",-1],[\"b\",-1],[\"ab\",-1.5],[\"abc\",-5],[\"c\",-1]]}}");
    EQ("unigram/viterbi", enc(t, "ab", false), "3");
    EQ("unigram/viterbi2", enc(t, "abc", false), "3 5");
    EQ("unigram/fused unk", enc(t, "axyb", false), "1 0 2");
    mx_tok_free(t);
}

static void test_wordlevel(void) {
    mx_tokenizer *t = load("{\"pre_tokenizer\":{\"type\":\"Whitespace\"},\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"?\",\"vocab\":{\"?\":0,\"hi\":1,\"there\":2,\"!!\":3}}}");
    EQ("wordlevel", enc(t, "hi there!! x", false), "1 2 3 0");
    mx_tok_free(t);
}

static const char *norm(const char *spec, const char *in) {
    static char out[1024];
    tj_doc *doc = NULL;
    const tj *v = tk_json_parse(spec, strlen(spec), "n", &doc);
    tk_norm *n = v ? tk_norm_parse(v, "n", 0) : NULL;
    tk_ctx c;
    mx_buf b = {0};
    tk_ctx_init(&c);
    if (!n || tk_norm_apply(n, &c, in, strlen(in), &b)) snprintf(out, sizeof out, "ERR: %s", mx_errmsg());
    else snprintf(out, sizeof out, "%s", b.data ? b.data : "");
    mx_buf_free(&b);
    tk_ctx_free(&c);
    tk_norm_free(n);
    tk_json_free(doc);
    return out;
}

static void test_normalizers(void) {
    EQ("norm/NFC", norm("{\"type\":\"NFC\"}", "e\xCC\x81"), "\xC3\xA9");
    EQ("norm/NFD", norm("{\"type\":\"NFD\"}", "\xC3\xA9"), "e\xCC\x81");
    EQ("norm/NFKC", norm("{\"type\":\"NFKC\"}", "\xEF\xAC\x81"), "fi");
    EQ("norm/NFKD", norm("{\"type\":\"NFKD\"}", "\xC2\xBD"), "1\xE2\x81\x84" "2");
    EQ("norm/Lowercase", norm("{\"type\":\"Lowercase\"}", "AB\xC4\xB0\xCE\xA3"), "abi\xCC\x87\xCF\x83");
    EQ("norm/Strip", norm("{\"type\":\"Strip\",\"strip_left\":true,\"strip_right\":false}", " \xE3\x80\x80x "), "x ");
    EQ("norm/StripAccents", norm("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"StripAccents\"}]}", "\xC3\xA9t\xC3\xA9"), "ete");
    EQ("norm/Replace string", norm("{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"_\"}", "a b  c"), "a_b__c");
    EQ("norm/Replace regex", norm("{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"content\":\" \"}", "a \t\n b"), "a b");
    EQ("norm/Prepend", norm("{\"type\":\"Prepend\",\"prepend\":\"_\"}", "ab"), "_ab");
    EQ("norm/Prepend empty", norm("{\"type\":\"Prepend\",\"prepend\":\"_\"}", ""), "");
    EQ("norm/Bert clean", norm("{\"type\":\"BertNormalizer\",\"lowercase\":false}", "a\x01" "b\tc\xE4\xB8\xAD" "d"), "ab c \xE4\xB8\xAD d");
    EQ("norm/Nmt", norm("{\"type\":\"Nmt\"}", "a\x01\x0c" "b"), "a b");
    EQ("norm/unsupported", norm("{\"type\":\"Nope\"}", "x"), "ERR: n: normalizer.type: unsupported \"Nope\"");
}

static const char *pre(const char *spec, const char *in) {
    static char out[1024];
    tj_doc *doc = NULL;
    const tj *v = tk_json_parse(spec, strlen(spec), "p", &doc);
    tk_pre *p = v ? tk_pre_parse(v, "p", 0) : NULL;
    tk_ctx c;
    tk_pieces a = {0}, b = {0};
    tk_ctx_init(&c);
    tk_pieces_add(&a, in, strlen(in), 1);
    if (!p || tk_pre_apply(p, &c, &a, &b)) snprintf(out, sizeof out, "ERR: %s", mx_errmsg());
    else {
        size_t k = 0;
        out[0] = 0;
        for (int i = 0; i < b.n; i++) k += (size_t)snprintf(out + k, sizeof out - k, "%s%.*s", i ? "|" : "", (int)b.len[i], tk_piece(&b, i));
    }
    tk_pieces_free(&a);
    tk_pieces_free(&b);
    tk_ctx_free(&c);
    tk_pre_free(p);
    tk_json_free(doc);
    return out;
}

static void test_pretokenizers(void) {
    const char *s = "a--b-c";
    EQ("split/removed", pre("{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Removed\"}", s), "a|b|c");
    EQ("split/isolated", pre("{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Isolated\"}", s), "a|-|-|b|-|c");
    EQ("split/prev", pre("{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"MergedWithPrevious\"}", s), "a-|-|b-|c");
    EQ("split/next", pre("{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"MergedWithNext\"}", s), "a|-|-b|-c");
    EQ("split/contiguous", pre("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"-\"},\"behavior\":\"Contiguous\"}", s), "a|--|b|-|c");
    EQ("split/invert", pre("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[a-z]\"},\"behavior\":\"Removed\",\"invert\":true}", s), "a|b|c");
    EQ("whitespace", pre("{\"type\":\"Whitespace\"}", "Hi, you!"), "Hi|,|you|!");
    EQ("whitespacesplit NEL", pre("{\"type\":\"WhitespaceSplit\"}", "a\xC2\x85" "b c"), "a|b|c");
    EQ("bert pretok", pre("{\"type\":\"BertPreTokenizer\"}", "a,b c"), "a|,|b|c");
    EQ("punctuation", pre("{\"type\":\"Punctuation\"}", "a.b"), "a|.|b");
    EQ("digits", pre("{\"type\":\"Digits\",\"individual_digits\":true}", "a12"), "a|1|2");
    EQ("digits contiguous", pre("{\"type\":\"Digits\",\"individual_digits\":false}", "a12b"), "a|12|b");
    EQ("metaspace", pre("{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"always\",\"split\":true}", "a b"), "_a|_b");
    EQ("metaspace first", pre("{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"first\",\"split\":false}", "a b"), "_a_b");
    EQ("bytelevel", pre("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}", "a b\n"), "\xC4\xA0" "a|\xC4\xA0" "b|\xC4\x8A");
    EQ("split bad regex", pre("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Removed\"}", s),
       "ERR: p: pre_tokenizer Split.pattern: bad regex: missing closing parenthesis");
}

static void test_utf8(void) {
    struct { const char *in; size_t n; const char *want; } cs[] = {
        {"\xE2\x82" "a", 3, "\xEF\xBF\xBD" "a"},
        {"\xF0\x9F\x98", 3, "\xEF\xBF\xBD"},
        {"\xC0\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"ok\xF4\x90\x80\x80", 6, "ok\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(cs); i++) {
        mx_buf b = {0};
        tk_u8_lossy(cs[i].in, cs[i].n, &b);
        char name[32];
        snprintf(name, sizeof name, "utf8/lossy %zu", i);
        CHECK(name, b.len == strlen(cs[i].want) && !memcmp(b.data, cs[i].want, b.len), "got %zu bytes", b.len);
        mx_buf_free(&b);
    }
    /* encoding invalid UTF-8 reads it as U+FFFD */
    mx_tokenizer *t = load("{\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"?\",\"vocab\":{\"?\":0,\"\xEF\xBF\xBD\":1}}}");
    EQ("utf8/encode invalid", enc(t, "\xFF", false), "1");
    mx_tok_free(t);
}

static void test_added_and_post(void) {
    mx_tokenizer *t = load("{\"added_tokens\":[{\"id\":10,\"content\":\"<s>\",\"special\":true},"
                           "{\"id\":11,\"content\":\"<x>\",\"special\":false,\"lstrip\":true,\"rstrip\":true},"
                           "{\"id\":12,\"content\":\"yes\",\"special\":false,\"single_word\":true,\"normalized\":false}],"
                           "\"pre_tokenizer\":{\"type\":\"WhitespaceSplit\"},"
                           "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},{\"Sequence\":{\"id\":\"A\"}},{\"SpecialToken\":{\"id\":\"<s>\"}}],"
                           "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[10],\"tokens\":[\"<s>\"]}}},"
                           "\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"?\",\"vocab\":{\"?\":0,\"a\":1,\"b\":2,\"yesno\":3}}}");
    EQ("added/split", enc(t, "a<s>b", false), "1 10 2");
    EQ("added/lstrip rstrip", enc(t, "a  <x>  b", false), "1 11 2");
    EQ("added/single_word", enc(t, "yes yesno", false), "12 3");
    EQ("post/template", enc(t, "a", true), "10 1 10");
    int32_t ids[] = {10, 1, 11, 2};
    EQ("decode/skip special", dec(t, ids, 4, true), "a <x> b");
    EQ("decode/keep special", dec(t, ids, 4, false), "<s> a <x> b");
    CHECK("is_special", mx_tok_is_special(t, 10) && !mx_tok_is_special(t, 11) && !mx_tok_is_special(t, 1), "flags");
    CHECK("vocab_size", mx_tok_vocab_size(t) == 13, "%d", mx_tok_vocab_size(t));
    mx_tok_free(t);
    t = load("{\"post_processor\":{\"type\":\"RobertaProcessing\",\"sep\":[\"</s>\",2],\"cls\":[\"<s>\",0]},"
             "\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"?\",\"vocab\":{\"<s>\":0,\"?\":1,\"</s>\":2}}}");
    EQ("post/roberta", enc(t, "zz", true), "0 1 2");
    mx_tok_free(t);
}

static void test_config(void) {
    const char *js = "{\"model\":{\"type\":\"WordLevel\",\"unk_token\":\"?\",\"vocab\":{\"?\":0,\"<s>\":1,\"</s>\":2}},"
                     "\"added_tokens\":[{\"id\":1,\"content\":\"<s>\",\"special\":true},{\"id\":2,\"content\":\"</s>\",\"special\":true}]}";
    const char *cfg = "{\"bos_token\":{\"content\":\"<s>\",\"lstrip\":false},\"eos_token\":\"</s>\",\"add_bos_token\":true,\"add_eos_token\":true,"
                      "\"tokenizer_class\":\"LlamaTokenizer\",\"model_max_length\":1e30,"
                      "\"chat_template\":[{\"name\":\"default\",\"template\":\"D\"},{\"name\":\"tool_use\",\"template\":\"T\"}]}";
    mx_tokenizer *t = mx_tok_load_json(js, strlen(js), cfg, strlen(cfg), "c.json");
    CHECK("config/load", t != NULL, "%s", mx_errmsg());
    if (!t) return;
    CHECK("config/bos eos", mx_tok_bos(t) == 1 && mx_tok_eos(t) == 2, "%d %d", mx_tok_bos(t), mx_tok_eos(t));
    EQ("config/add_bos+eos", enc(t, "x", true), "1 0 2");
    EQ("config/special str", mx_tok_special_str(t, "bos_token") ? mx_tok_special_str(t, "bos_token") : "(null)", "<s>");
    EQ("config/template default", mx_tok_chat_template(t, NULL) ? mx_tok_chat_template(t, NULL) : "(null)", "D");
    EQ("config/template named", mx_tok_chat_template(t, "tool_use") ? mx_tok_chat_template(t, "tool_use") : "(null)", "T");
    CHECK("config/model_max_length", mx_tok_model_max_length(t) == INT64_MAX, "%lld", (long long)mx_tok_model_max_length(t));
    mx_tok_free(t);
}

static void expect_err(const char *name, const char *json, const char *want) {
    mx_tokenizer *t = load(json);
    CHECK(name, !t && strstr(mx_errmsg(), want) && strncmp(mx_errmsg(), "t.json", 6) == 0, "got %s", t ? "a tokenizer" : mx_errmsg());
    mx_tok_free(t);
}

static void test_errors(void) {
    expect_err("err/not json", "{\"model\": ", "t.json: line 1: invalid JSON");
    expect_err("err/trailing comma", "{\"model\":{},}", "trailing comma");
    expect_err("err/bad escape", "{\"model\":\"\\q\"}", "bad escape");
    expect_err("err/lone surrogate", "{\"model\":\"\\ud800\"}", "lone surrogate");
    expect_err("err/no model", "{}", "model: expected an object");
    expect_err("err/bad vocab id", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", "model.vocab: expected an id");
    expect_err("err/huge vocab id", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":4000000000},\"merges\":[]}}", "model.vocab: expected an id");
    expect_err("err/merge oov", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b\"]}}", "model.merges[0]: \"b\" is not in the vocabulary");
    expect_err("err/merge result oov", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}", "model.merges[0]: \"a\" + \"b\" is not in the vocabulary");
    expect_err("err/merge format", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"ab\"]}}", "model.merges[0]: expected");
    expect_err("err/unigram vocab", "{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\"]]}}", "model.vocab[0]: expected [piece, score]");
    expect_err("err/unigram unk", "{\"model\":{\"type\":\"Unigram\",\"unk_id\":5,\"vocab\":[[\"a\",0]]}}", "model.unk_id");
    expect_err("err/model type", "{\"model\":{\"type\":\"Magic\",\"vocab\":{}}}", "model.type: unsupported \"Magic\"");
    expect_err("err/added id", "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}},\"added_tokens\":[{\"id\":-3,\"content\":\"x\"}]}", "added_tokens[].id");
    expect_err("err/added content", "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}},\"added_tokens\":[{\"id\":3}]}", "added_tokens[0].content");
    expect_err("err/post ids", "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"X\"}}],\"special_tokens\":{}}}",
               "post_processor.special_tokens: \"X\" has no ids");
    expect_err("err/decoder type", "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}},\"decoder\":{\"type\":\"Nope\"}}", "decoder.type: unsupported");
    expect_err("err/metaspace char", "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"ab\"}}",
               "Metaspace.replacement: expected exactly one character");
    expect_err("err/deep nesting", "{\"model\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
               "nesting too deep");
    expect_err("err/bad charsmap", "{\"model\":{\"type\":\"WordLevel\",\"vocab\":{}},\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"AAAA/w==\"}}",
               "precompiled_charsmap: bad trie size");
    /* a directory with neither file, and a truncated tokenizer.model */
    char tmpl[] = "/tmp/mxtoktestXXXXXX";
    char *dir = mkdtemp(tmpl);
    mx_tokenizer *t = mx_tok_load(dir);
    CHECK("err/empty dir", !t && strstr(mx_errmsg(), "no tokenizer.json, vocab.json + merges.txt or tokenizer.model"), "%s", mx_errmsg());
    char *mp = mx_path_join(dir, "tokenizer.model");
    FILE *f = fopen(mp, "wb");
    fwrite("\x0a\x10\x0a\x03", 1, 4, f);
    fclose(f);
    t = mx_tok_load(dir);
    CHECK("err/truncated model", !t && strstr(mx_errmsg(), "tokenizer.model: truncated or malformed protobuf"), "%s", mx_errmsg());
    unlink(mp);
    rmdir(dir);
    free(mp);
}

static void test_stream(void) {
    /* a byte-level vocabulary: the emoji's 4 bytes are 4 tokens */
    mx_buf j = {0};
    mx_buf_puts(&j, "{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},\"decoder\":{\"type\":\"ByteLevel\"},"
                    "\"model\":{\"type\":\"BPE\",\"merges\":[],\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        char u[4];
        int l = tk_u8enc(tk_byte2cp[b], u);
        mx_buf_puts(&j, b ? ",\"" : "\"");
        if (u[0] == '"' || u[0] == '\\') mx_buf_puts(&j, "\\");
        mx_buf_append(&j, u, (size_t)l);
        mx_buf_printf(&j, "\":%d", b);
    }
    mx_buf_puts(&j, "}}}");
    mx_tokenizer *t = load(j.data);
    mx_buf_free(&j);
    CHECK("stream/load", t != NULL, "%s", mx_errmsg());
    if (!t) return;
    EQ("stream/encode", enc(t, "a\xF0\x9F\x98\x80" "b", false), "97 240 159 152 128 98");
    mx_detok *d = mx_detok_new(t, false);
    int32_t ids[] = {97, 240, 159, 152, 128, 98};
    size_t lens[6];
    mx_buf out = {0};
    for (int i = 0; i < 6; i++) { mx_detok_push(d, ids[i], &out); lens[i] = out.len; }
    mx_detok_flush(d, &out);
    mx_detok_free(d);
    CHECK("stream/holds partial utf8", lens[0] == 1 && lens[1] == 1 && lens[3] == 1 && lens[4] == 5 && lens[5] == 6, "%zu %zu %zu %zu %zu",
          lens[0], lens[1], lens[3], lens[4], lens[5]);
    CHECK("stream/joined", out.len == 6 && !memcmp(out.data, "a\xF0\x9F\x98\x80" "b", 6), "%zu", out.len);
    mx_buf_free(&out);
    /* an incomplete sequence at the end comes out at flush, as the decode has it */
    d = mx_detok_new(t, false);
    mx_detok_push(d, 240, &out);
    size_t before = out.len;
    mx_detok_flush(d, &out);
    mx_detok_free(d);
    CHECK("stream/flush", before == 0 && out.len == 3 && !memcmp(out.data, "\xEF\xBF\xBD", 3), "%zu %zu", before, out.len);
    mx_buf_free(&out);
    mx_tok_free(t);
}

static void put_file(const char *dir, const char *name, const char *text) {
    char *p = mx_path_join(dir, name);
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
    free(p);
}

static void test_slow(void) {
    char tmpl[] = "/tmp/mxslowtestXXXXXX";
    char *dir = mkdtemp(tmpl);
    /* byte-level BPE: GPT-2's split regex, merges.txt read as text.split("\n")[1:-1] */
    put_file(dir, "vocab.json", "{\"a\":0,\"b\":1,\"\\u0120\":2,\"ab\":3,\"\\u0120ab\":4,\"!\":5,\"<|endoftext|>\":6}");
    put_file(dir, "merges.txt", "#version: 0.2\na b\n\xC4\xA0 ab");
    put_file(dir, "tokenizer_config.json", "{\"tokenizer_class\":\"GPT2Tokenizer\",\"add_prefix_space\":true,\"bos_token\":\"<|endoftext|>\","
                                           "\"added_tokens_decoder\":{\"7\":{\"content\":\"<x>\",\"special\":false}}}");
    mx_tokenizer *t = mx_tok_load(dir);
    EQ("slow/bpe prefix space, last line dropped", enc(t, "ab ab!", false), "2 3 2 3 5");
    EQ("slow/bpe added token", enc(t, "ab<x>ab", false), "2 3 7 3");
    int32_t ids[] = {3, 7, 3, 6};
    EQ("slow/bpe decode spaces legacy added tokens", dec(t, ids, 4, false), "ab <x> ab<|endoftext|>");
    EQ("slow/bpe decode skip special", dec(t, ids, 4, true), "ab <x> ab");
    mx_tok_free(t);
    put_file(dir, "merges.txt", "#version: 0.2\na b\n\xC4\xA0 ab\n");
    put_file(dir, "tokenizer_config.json", "{\"tokenizer_class\":\"Qwen2Tokenizer\"}");
    t = mx_tok_load(dir);
    EQ("slow/qwen2 merges, no prefix space", enc(t, "ab ab", false), "3 4");
    mx_tok_free(t);
    /* errors name the file */
    put_file(dir, "merges.txt", "#version: 0.2\na b c\n");
    t = mx_tok_load(dir);
    CHECK("slow/err merges", !t && strstr(mx_errmsg(), "merges.txt: line 2: expected two tokens"), "%s", mx_errmsg());
    put_file(dir, "merges.txt", "#version: 0.2\na q\n");
    t = mx_tok_load(dir);
    CHECK("slow/err merge not in vocab", !t && strstr(mx_errmsg(), "merges.txt"), "%s", mx_errmsg());
    put_file(dir, "merges.txt", "#version: 0.2\n");
    put_file(dir, "tokenizer_config.json", "{\"tokenizer_class\":\"RobertaTokenizer\"}");
    t = mx_tok_load(dir);
    CHECK("slow/err class", !t && strstr(mx_errmsg(), "tokenizer_class \"RobertaTokenizer\" with vocab.json + merges.txt"), "%s", mx_errmsg());
    put_file(dir, "tokenizer_config.json", "{\"added_tokens_decoder\":{\"x\":{\"content\":\"<y>\"}}}");
    t = mx_tok_load(dir);
    CHECK("slow/err added id", !t && strstr(mx_errmsg(), "tokenizer_config.json: added_tokens_decoder: key \"x\""), "%s", mx_errmsg());
    put_file(dir, "tokenizer_config.json", "{\"added_tokens_decoder\":{\"9\":{\"content\":\"\"}}}");
    t = mx_tok_load(dir);
    CHECK("slow/err added content", !t && strstr(mx_errmsg(), "added_tokens_decoder[\"9\"].content"), "%s", mx_errmsg());
    put_file(dir, "tokenizer_config.json", "{}");
    put_file(dir, "vocab.json", "[1]");
    t = mx_tok_load(dir);
    CHECK("slow/err vocab", !t && strstr(mx_errmsg(), "vocab.json: expected an object"), "%s", mx_errmsg());
    put_file(dir, "vocab.json", "{\"a\":0}");
    put_file(dir, "added_tokens.json", "{\"<z>\":-1}");
    t = mx_tok_load(dir);
    CHECK("slow/err added_tokens.json", !t && strstr(mx_errmsg(), "added_tokens.json: \"<z>\": expected an id"), "%s", mx_errmsg());
    put_file(dir, "added_tokens.json", "{\"<z>\":5}");
    t = mx_tok_load(dir);
    EQ("slow/added_tokens.json", enc(t, "a<z>a", false), "0 5 0");
    mx_tok_free(t);
    const char *names[] = {"vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json"};
    for (int i = 0; i < 4; i++) { char *p = mx_path_join(dir, names[i]); unlink(p); free(p); }
    rmdir(dir);

    /* the fixtures' tokenizers: Whisper's prefix tokens, slow Llama and Gemma */
    t = mx_tok_load("tests/tokenizers/slow/whisper");
    EQ("slow/whisper special", enc(t, "<|en|>", true), "317 326 318 316");
    int32_t w[] = {317, 318, 322, 326, 76, 316};
    EQ("slow/whisper decode", dec(t, w, 6, false), "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>L<|endoftext|>");
    EQ("slow/whisper decode skip", dec(t, w, 6, true), "L");
    mx_tok_free(t);
    t = mx_tok_load("tests/tokenizers/slow/llava");
    /* "▁" + text; "▁" in the text reads as " "; a chunk after an added token keeps one leading space, no dummy prefix */
    CHECK("slow/llama eq", !strcmp(enc(t, "\xE2\x96\x81is<image>  is", false), enc(t, " is<image> is", false)), "%s", enc(t, " is<image> is", false));
    EQ("slow/llama chunks", enc(t, "is<image>is<image> is", false), "368 302 420 302 420 368 302");
    EQ("slow/llama bos", enc(t, "<s>is", true), "1 1 302");
    int32_t l[] = {1, 368, 302, 420, 368, 302};
    EQ("slow/llama decode", dec(t, l, 6, true), "is is");
    mx_tok_free(t);
    t = mx_tok_load("tests/tokenizers/slow/paligemma");
    EQ("slow/gemma dummy prefix per chunk", enc(t, "en<image>en", false), "288 354 400 288 354");
    int32_t g[] = {288, 354, 400, 288, 354};
    EQ("slow/gemma decode", dec(t, g, 5, false), "en<image>en");
    mx_tok_free(t);
}

int main(void) {
    test_bpe();
    test_wordpiece();
    test_unigram();
    test_wordlevel();
    test_normalizers();
    test_pretokenizers();
    test_utf8();
    test_added_and_post();
    test_config();
    test_errors();
    test_stream();
    test_slow();
    TEST_END();
}
