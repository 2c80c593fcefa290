/* tokenizer: the "slow" formats transformers reads when a folder has no
 * tokenizer.json, with the rules of its Python tokenizer classes:
 *
 *   vocab.json + merges.txt   byte-level BPE: GPT2Tokenizer, CodeGenTokenizer,
 *                             WhisperTokenizer (GPT-2 split regex), Qwen2Tokenizer
 *                             (NFC, Qwen2 split regex); merges.txt read as each
 *                             class reads it
 *   tokenizer.model           SentencePiece (tok_spm.c): LlamaTokenizer (legacy=false:
 *                             "▁" + text, chunks keep a leading space as its
 *                             "<unk>"-prefix trick does, no dummy prefix),
 *                             GemmaTokenizer and the others: sentencepiece per chunk
 *
 * Added tokens come from tokenizer_config.json's added_tokens_decoder, or
 * (older folders) added_tokens.json plus the special tokens of
 * tokenizer_config.json / special_tokens_map.json; special tokens missing from
 * both are added as PreTrainedTokenizer.__init__ adds them. Slow tokenizers
 * split the raw text on every added token before anything else, so all are
 * matched unnormalized. Decoding follows their _decode: the runs between
 * "legacy" added tokens (every added token for Whisper and Gemma) are decoded
 * apart and joined with "" or " " (spaces_between_special_tokens). */
#include "tok_internal.h"
#include <stdlib.h>
#include <string.h>

enum { K_GPT2, K_WHISPER, K_QWEN2, K_SPM, K_LLAMA, K_GEMMA };

typedef struct {
    const char *dir;
    char *cfgname;
    tj_doc *cdoc, *sdoc, *adoc;
    const tj *cfg, *stm, *atok; /* tokenizer_config.json, special_tokens_map.json, added_tokens.json */
    int kind;
} slow_ctx;

/* DIR/NAME parsed, or NULL with *err = 0 when the file is absent. */
static const tj *read_json(const char *dir, const char *name, tj_doc **doc, char **path_out, int *err) {
    char *p = mx_path_join(dir, name), *data = NULL;
    size_t len = 0;
    const tj *root = NULL;
    *err = 0;
    if (!p) { *err = MX_ERR; return NULL; }
    if (mx_file_exists(p)) {
        if (mx_read_file(p, 64u << 20, &data, &len)) *err = MX_ERR;
        else if (!(root = tk_json_parse(data, len, p, doc))) *err = MX_ERR;
        else if (root->type != TJ_OBJ) { mx_set_err("%s: expected an object", p); *err = MX_ERR; root = NULL; }
    }
    free(data);
    if (path_out && !*err) *path_out = p;
    else free(p);
    return root;
}

/* A special-token value: "str" or {"content": "str", ...}. */
static const tj *tok_content(const tj *v) {
    if (v && v->type == TJ_OBJ) v = tk_json_get(v, "content");
    return v && v->type == TJ_STR ? v : NULL;
}

/* tokenizer_config.json's KEY, or special_tokens_map.json's when the config
 * does not have the key. */
static const tj *spec_val(const slow_ctx *x, const char *key) {
    const tj *v = x->cfg ? tk_json_get(x->cfg, key) : NULL;
    if (!v && x->stm) v = tk_json_get(x->stm, key);
    return v;
}

static const char *const SPEC_KEYS[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};

/* Is s one of the special tokens (all_special_tokens)? additional: only
 * additional_special_tokens. */
static bool is_spec(const slow_ctx *x, const char *s, size_t n, bool additional) {
    for (size_t k = 0; !additional && k < sizeof SPEC_KEYS / sizeof *SPEC_KEYS; k++) {
        const tj *v = tok_content(spec_val(x, SPEC_KEYS[k]));
        if (v && v->n == n && !memcmp(v->v.str, s, n)) return true;
    }
    const tj *a = spec_val(x, "additional_special_tokens");
    if (a && a->type == TJ_ARR)
        for (uint32_t i = 0; i < a->n; i++) {
            const tj *v = tok_content(&a->v.kids[i]);
            if (v && v->n == n && !memcmp(v->v.str, s, n)) return true;
        }
    return false;
}

static int32_t find_added(const mx_tokenizer *t, const char *s, size_t n) {
    for (int i = 0; i < t->nadded; i++)
        if (t->added[i].len == n && !memcmp(t->added[i].s, s, n)) return i;
    return -1;
}

/* Adds (or, for an id already added, redefines) an added token. */
static int put_added(mx_tokenizer *t, int *cap, int32_t id, const char *s, size_t n, bool special, bool lstrip, bool rstrip, bool single_word) {
    tk_added *a = NULL;
    for (int i = 0; i < t->nadded && !a; i++) if (t->added[i].id == id) a = &t->added[i];
    if (!a) {
        if (t->nadded == *cap) {
            if (*cap >= TK_MAX_VOCAB) return mx_set_err("tokenizer: too many added tokens");
            int nc = *cap ? *cap * 2 : 64;
            tk_added *p = mx_realloc(t->added, sizeof(tk_added) * (size_t)nc);
            if (!p) return MX_ERR;
            t->added = p;
            *cap = nc;
        }
        a = &t->added[t->nadded++];
        memset(a, 0, sizeof *a);
    }
    a->id = id;
    a->s = tk_arena_dup(&t->arena, s, n);
    if (!a->s) return MX_ERR;
    a->len = n;
    a->special = special;
    a->normalized = false; /* slow tokenizers split the raw text on every added token */
    a->lstrip = lstrip;
    a->rstrip = rstrip;
    a->single_word = single_word;
    return MX_OK;
}

static bool jb(const tj *o, const char *k) {
    const tj *v = tk_json_get(o, k);
    return v && v->type == TJ_TRUE;
}

static int parse_id(const char *s, size_t n, int32_t *id) {
    int64_t v = 0;
    if (!n || n > 9) return MX_ERR;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return MX_ERR;
        v = v * 10 + (s[i] - '0');
    }
    if (v >= TK_MAX_VOCAB) return MX_ERR;
    *id = (int32_t)v;
    return MX_OK;
}

/* The added and special tokens (see the header comment). */
static int load_added_tokens(mx_tokenizer *t, const slow_ctx *x, const char *atok_name) {
    int cap = t->nadded;
    const tj *dec = x->cfg ? tk_json_get(x->cfg, "added_tokens_decoder") : NULL;
    if (dec && dec->type != TJ_NULL) {
        if (dec->type != TJ_OBJ) return mx_set_err("%s: added_tokens_decoder: expected an object of \"id\": {...}", x->cfgname);
        for (uint32_t i = 0; i < dec->n; i++) {
            const tj *e = &dec->v.kids[i];
            int32_t id;
            if (parse_id(e->key, e->klen, &id))
                return mx_set_err("%s: added_tokens_decoder: key \"%.*s\" is not an id below %d", x->cfgname, (int)MX_MIN(e->klen, 32u), e->key, TK_MAX_VOCAB);
            const tj *c = e->type == TJ_OBJ ? tk_json_get(e, "content") : NULL;
            if (!c || c->type != TJ_STR || !c->n || c->n > TK_MAX_TOKEN_LEN)
                return mx_set_err("%s: added_tokens_decoder[\"%d\"].content: expected a non-empty string", x->cfgname, id);
            if (put_added(t, &cap, id, c->v.str, c->n, jb(e, "special"), jb(e, "lstrip"), jb(e, "rstrip"), jb(e, "single_word"))) return MX_ERR;
        }
    } else if (x->atok) {
        for (uint32_t i = 0; i < x->atok->n; i++) {
            const tj *e = &x->atok->v.kids[i];
            int32_t id;
            if (e->type != TJ_NUM || e->v.num < 0 || e->v.num >= TK_MAX_VOCAB || e->v.num != (double)(int32_t)e->v.num)
                return mx_set_err("%s: \"%.*s\": expected an id below %d", atok_name, (int)MX_MIN(e->klen, 32u), e->key, TK_MAX_VOCAB);
            if (!e->klen || e->klen > TK_MAX_TOKEN_LEN) return mx_set_err("%s: empty or too long token", atok_name);
            id = (int32_t)e->v.num;
            if (put_added(t, &cap, id, e->key, e->klen, is_spec(x, e->key, e->klen, false), false, false, false)) return MX_ERR;
        }
    }
    /* special tokens that are not added tokens yet become added tokens: at
     * their vocabulary id, else after the vocabulary */
    for (size_t k = 0; k <= sizeof SPEC_KEYS / sizeof *SPEC_KEYS; k++) {
        const tj *v = k < sizeof SPEC_KEYS / sizeof *SPEC_KEYS ? spec_val(x, SPEC_KEYS[k]) : spec_val(x, "additional_special_tokens");
        uint32_t m = v && v->type == TJ_ARR ? v->n : 1;
        for (uint32_t j = 0; j < m; j++) {
            const tj *c = tok_content(v && v->type == TJ_ARR ? &v->v.kids[j] : v);
            if (!c || !c->n || c->n > TK_MAX_TOKEN_LEN || find_added(t, c->v.str, c->n) >= 0) continue;
            int32_t id = tk_smap_get(&t->model.map, t->model.vocab, c->v.str, c->n);
            if (id < 0) {
                id = t->model.n;
                for (int i = 0; i < t->nadded; i++) if (t->added[i].id >= id) id = t->added[i].id + 1;
            }
            if (id >= TK_MAX_VOCAB || put_added(t, &cap, id, c->v.str, c->n, true, false, false, false)) return MX_ERR;
        }
    }
    return MX_OK;
}

/* ---- byte-level BPE: vocab.json + merges.txt ---- */

/* GPT2Tokenizer and WhisperTokenizer read merges.txt as
 * text.split("\n")[1:-1] (the first line is dropped whatever it is, and so is
 * the text after the last newline); Qwen2Tokenizer skips a "#version:" first
 * line and blank lines. Each merge is "a b" (split on whitespace). */
static int load_merges(tk_model *m, char *text, size_t len, const char *file, bool qwen) {
    size_t nl = 0;
    for (size_t i = 0; i < len; i++) nl += text[i] == '\n';
    tk_str *pairs = mx_malloc(sizeof(tk_str) * 2 * (nl + 2));
    if (!pairs) return MX_ERR;
    int n = 0, rc = MX_OK;
    size_t p = 0;
    for (size_t line = 0; p <= len && !rc; line++) {
        char *e = memchr(text + p, '\n', len - p);
        size_t q = e ? (size_t)(e - text) : len;
        char *s = text + p;
        size_t sl = q - p;
        p = q + 1;
        if (!e && !qwen) break; /* [1:-1] */
        if (line == 0 && (!qwen || (sl >= 9 && !memcmp(s, "#version:", 9)))) continue;
        /* split on ASCII whitespace (Python's str.split also splits on a few Unicode spaces, which byte-level vocabularies never contain) */
        const char *f[3];
        size_t fl[3];
        int nf = 0;
        for (size_t i = 0; i < sl;) {
            while (i < sl && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f')) i++;
            if (i == sl) break;
            size_t b = i;
            while (i < sl && !(s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f')) i++;
            if (nf < 3) { f[nf] = s + b; fl[nf] = i - b; }
            nf++;
        }
        if (nf == 0 && qwen) continue;
        if (nf != 2) { rc = mx_set_err("%s: line %zu: expected two tokens \"a b\"", file, line + 1); break; }
        pairs[2 * n] = (tk_str){f[0], (uint32_t)fl[0]};
        pairs[2 * n + 1] = (tk_str){f[1], (uint32_t)fl[1]};
        n++;
        if (!e) break;
    }
    if (!rc && tk_umap_init(&m->merges, (size_t)n)) rc = MX_ERR;
    if (!rc && n && tk_bpe_add_merges(m, pairs, n, 0, file)) rc = MX_ERR;
    free(pairs);
    return rc;
}

static void *alloc_big(size_t n) { return tk_alloc_big(n, false); }

static int load_pipeline(mx_tokenizer *t, const char *pre, const char *norm, const char *dec) {
    const char *src[3] = {pre, norm, dec};
    for (int k = 0; k < 3; k++) {
        if (!src[k]) continue;
        tj_doc *d = NULL;
        const tj *v = tk_json_parse(src[k], strlen(src[k]), "built-in pipeline", &d);
        int rc = v ? MX_OK : MX_ERR;
        if (!rc && k == 0 && !(t->pre = tk_pre_parse(v, "built-in pipeline", 0))) rc = MX_ERR;
        if (!rc && k == 1 && !(t->norm = tk_norm_parse(v, "built-in pipeline", 0))) rc = MX_ERR;
        if (!rc && k == 2 && !(t->dec = tk_dec_parse(v, "built-in pipeline", 0))) rc = MX_ERR;
        tk_json_free(d);
        if (rc) return rc;
    }
    return MX_OK;
}

static int load_bpe(mx_tokenizer *t, const slow_ctx *x, const char *vpath, const char *mpath) {
    char *data = NULL, *mdata = NULL;
    size_t len = 0, mlen = 0;
    tj_doc *doc = NULL;
    int rc = MX_ERR;
    if (mx_read_file_with(vpath, TK_MAX_FILE, alloc_big, &data, &len)) goto done;
    const tj *root = tk_json_parse_owned(data, len, vpath, &doc);
    data = NULL; /* taken */
    if (!root) goto done;
    if (root->type != TJ_OBJ) { mx_set_err("%s: expected an object of token: id", vpath); goto done; }
    if (root->n == 0) { mx_set_err("%s: empty vocabulary", vpath); goto done; }
    if (tk_load_vocab_dict(t, doc, root, vpath)) goto done;
    if (mx_read_file(mpath, TK_MAX_FILE, &mdata, &mlen)) goto done;
    if (load_merges(&t->model, mdata, mlen, mpath, x->kind == K_QWEN2)) goto done;
    const tj *unk = tok_content(spec_val(x, "unk_token"));
    if (unk) t->model.unk_id = tk_smap_get(&t->model.map, t->model.vocab, unk->v.str, unk->n);
    if (tk_model_finish(&t->model, vpath)) goto done;
    bool aps = x->cfg && jb(x->cfg, "add_prefix_space");
    if (x->kind == K_QWEN2)
        rc = load_pipeline(t,
            "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
            "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
            "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}",
            "{\"type\":\"NFC\"}", "{\"type\":\"ByteLevel\"}");
    else {
        rc = load_pipeline(t, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}", NULL, "{\"type\":\"ByteLevel\"}");
        t->slow.space_prefix = aps; /* prepare_for_tokenization: " " + text */
    }
done:
    free(data);
    free(mdata);
    tk_json_free(doc);
    return rc;
}

/* ---- the loader ---- */
static bool class_eq(const char *cls, const char *name) {
    size_t n = strlen(name);
    return !strncmp(cls, name, n) && (!cls[n] || !strcmp(cls + n, "Fast"));
}

/* WhisperTokenizer.prefix_tokens: <|startoftranscript|> [<|lang|>] [<|task|>]
 * [<|notimestamps|>], and eos after the text. */
static int whisper_post(mx_tokenizer *t, const slow_ctx *x) {
    int32_t ids[4];
    int n = 0;
    ids[n++] = mx_tok_token_id(t, "<|startoftranscript|>", 21);
    const tj *lang = x->cfg ? tk_json_get(x->cfg, "language") : NULL, *task = x->cfg ? tk_json_get(x->cfg, "task") : NULL;
    if (lang && lang->type == TJ_STR) {
        char buf[64];
        int l = snprintf(buf, sizeof buf, "<|%s|>", lang->v.str);
        ids[n] = l > 0 && l < (int)sizeof buf ? mx_tok_token_id(t, buf, (size_t)l) : -1;
        if (ids[n++] < 0) return mx_set_err("%s: language \"%s\": expected a language code of the vocabulary (\"en\")", x->cfgname, lang->v.str);
    }
    if (task && task->type == TJ_STR) {
        bool tr = !strcmp(task->v.str, "translate");
        if (!tr && strcmp(task->v.str, "transcribe")) return mx_set_err("%s: task: expected \"transcribe\" or \"translate\"", x->cfgname);
        ids[n++] = mx_tok_token_id(t, tr ? "<|translate|>" : "<|transcribe|>", tr ? 13 : 14);
    }
    if (!(x->cfg && jb(x->cfg, "predict_timestamps"))) ids[n++] = mx_tok_token_id(t, "<|notimestamps|>", 16);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0) return mx_set_err("%s: WhisperTokenizer: the vocabulary lacks its prefix tokens", x->cfgname);
    t->npost_pre = t->npost_post = 0;
    if (tk_add_ids(&t->post_pre, &t->npost_pre, ids, n)) return MX_ERR;
    return t->eos >= 0 ? tk_add_ids(&t->post_post, &t->npost_post, &t->eos, 1) : MX_OK;
}

mx_tokenizer *tk_load_slow(const char *dir) {
    slow_ctx x = {.dir = dir};
    char *vp = mx_path_join(dir, "vocab.json"), *mp = mx_path_join(dir, "merges.txt"), *sp = mx_path_join(dir, "tokenizer.model");
    char *sname = NULL, *aname = NULL, *data = NULL;
    size_t len = 0;
    mx_tokenizer *t = NULL;
    int err;
    if (!vp || !mp || !sp) goto fail;
    x.cfg = read_json(dir, "tokenizer_config.json", &x.cdoc, &x.cfgname, &err);
    if (err) goto fail;
    if (!x.cfgname && !(x.cfgname = mx_path_join(dir, "tokenizer_config.json"))) goto fail;
    x.stm = read_json(dir, "special_tokens_map.json", &x.sdoc, &sname, &err);
    if (err) goto fail;
    x.atok = read_json(dir, "added_tokens.json", &x.adoc, &aname, &err);
    if (err) goto fail;
    const tj *cl = x.cfg ? tk_json_get(x.cfg, "tokenizer_class") : NULL;
    const char *cls = cl && cl->type == TJ_STR ? cl->v.str : "";
    bool bpe_files = mx_file_exists(vp) && mx_file_exists(mp), spm_file = mx_file_exists(sp);
    if (class_eq(cls, "GPT2Tokenizer") || class_eq(cls, "CodeGenTokenizer")) x.kind = K_GPT2;
    else if (class_eq(cls, "WhisperTokenizer")) x.kind = K_WHISPER;
    else if (class_eq(cls, "Qwen2Tokenizer")) x.kind = K_QWEN2;
    else if (class_eq(cls, "LlamaTokenizer")) x.kind = K_LLAMA;
    else if (class_eq(cls, "GemmaTokenizer")) x.kind = K_GEMMA;
    else if (spm_file) x.kind = K_SPM;
    else if (bpe_files && !*cls) x.kind = K_GPT2;
    else if (bpe_files) {
        mx_set_err("%s: tokenizer_class \"%s\" with vocab.json + merges.txt and no tokenizer.json is not supported "
                   "(GPT2Tokenizer, CodeGenTokenizer, WhisperTokenizer and Qwen2Tokenizer are)", x.cfgname, cls);
        goto fail;
    } else {
        mx_set_err("%s: no tokenizer.json, vocab.json + merges.txt or tokenizer.model", dir);
        goto fail;
    }
    bool spm = x.kind >= K_SPM;
    if (spm && !spm_file) { mx_set_err("%s: %s needs tokenizer.model", dir, cls); goto fail; }
    if (!spm && !bpe_files) { mx_set_err("%s: %s needs vocab.json and merges.txt", dir, cls); goto fail; }
    t = tk_new(spm ? sp : vp);
    if (!t) goto fail;
    const tj *lg = x.cfg ? tk_json_get(x.cfg, "legacy") : NULL;
    bool llama = x.kind == K_LLAMA && lg && lg->type == TJ_FALSE; /* legacy defaults to true */
    const tj *aps = x.cfg ? tk_json_get(x.cfg, "add_prefix_space") : NULL;
    bool prefix = !aps || aps->type != TJ_FALSE; /* LlamaTokenizer: add_prefix_space defaults to true */
    if (spm) {
        if (mx_read_file_with(sp, TK_MAX_FILE, alloc_big, &data, &len)) goto fail;
        if (tk_load_spm(t, data, len, sp, llama, llama ? prefix : -1)) goto fail;
    } else if (load_bpe(t, &x, vp, mp)) goto fail;
    int32_t base_n = t->model.n;
    if (load_added_tokens(t, &x, aname ? aname : "added_tokens.json")) goto fail;
    if (tk_finish(t, spm ? sp : vp)) goto fail;
    if (tk_common_tail(t, x.cfg, x.cfgname, spm, true, false)) goto fail;
    /* specials only special_tokens_map.json names */
    int32_t *ids[3] = {&t->bos, &t->eos, &t->pad};
    const char *keys[3] = {"bos_token", "eos_token", "pad_token"};
    for (int k = 0; k < 3; k++)
        if (*ids[k] < 0) {
            const tj *c = tok_content(spec_val(&x, keys[k]));
            if (c) *ids[k] = mx_tok_token_id(t, c->v.str, c->n);
        }
    if (x.kind == K_GPT2) {
        t->npost_pre = t->npost_post = 0;
        if (x.cfg && jb(x.cfg, "add_bos_token") && t->bos >= 0 && tk_add_ids(&t->post_pre, &t->npost_pre, &t->bos, 1)) goto fail;
    } else if (x.kind == K_WHISPER) {
        if (whisper_post(t, &x)) goto fail;
    } else if (x.kind == K_QWEN2) t->npost_pre = t->npost_post = 0;
    if (llama) {
        t->slow.llama = true;
        t->slow.meta_prefix = prefix;
        t->slow.meta_id = tk_smap_get(&t->model.map, t->model.vocab, "\xE2\x96\x81", 3);
    }
    /* decode: which added tokens are decoded apart, and the joiner */
    t->slow.split_decode = true;
    const tj *sbs = x.cfg ? tk_json_get(x.cfg, "spaces_between_special_tokens") : NULL;
    bool dflt = !(x.kind == K_WHISPER || x.kind == K_QWEN2 || x.kind == K_GEMMA);
    t->slow.space_join = sbs && (sbs->type == TJ_TRUE || sbs->type == TJ_FALSE) ? sbs->type == TJ_TRUE : dflt;
    if (x.kind == K_WHISPER) t->slow.space_join = false; /* its _decode always joins with "" */
    for (int i = 0; i < t->nadded; i++) {
        tk_added *a = &t->added[i];
        a->brk = x.kind == K_WHISPER || x.kind == K_GEMMA || !is_spec(&x, a->s, a->len, false) ||
                 (a->id >= base_n && is_spec(&x, a->s, a->len, true));
    }
    goto done;
fail:
    mx_tok_free(t);
    t = NULL;
done:
    free(data);
    tk_json_free(x.cdoc);
    tk_json_free(x.sdoc);
    tk_json_free(x.adoc);
    free(x.cfgname);
    free(sname);
    free(aname);
    free(vp);
    free(mp);
    free(sp);
    return t;
}
