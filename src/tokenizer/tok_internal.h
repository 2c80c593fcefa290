/* Internal pieces of the tokenizer shared between its source files. */
#ifndef MX_TOK_INTERNAL_H
#define MX_TOK_INTERNAL_H
#include "tokenizer.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>

/* Hard limits on untrusted input. */
#define TK_MAX_FILE (512u << 20)     /* tokenizer.json / tokenizer.model */
#define TK_MAX_VOCAB (16 << 20)      /* ids */
#define TK_MAX_TOKEN_LEN (1u << 16)  /* bytes of one vocabulary string */
#define TK_MAX_DEPTH 64              /* nesting of Sequence and JSON */

/* ---- small fast JSON reader (jansson is too slow for 33 MB files) ---- */
enum { TJ_NULL, TJ_FALSE, TJ_TRUE, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ, TJ_LAZY };
typedef struct tj {
    uint8_t type;
    uint8_t lazy_type; /* TJ_LAZY: TJ_ARR or TJ_OBJ */
    uint32_t n;    /* bytes of a string; members of an array or object (lazy too) */
    uint32_t klen; /* key length (object members only) */
    uint32_t span; /* TJ_LAZY: bytes of its text, at v.str */
    const char *key;
    union {
        double num;
        const char *str; /* NUL-terminated copy; may contain NULs (use n) */
        struct tj *kids;
    } v;
} tj;
typedef struct tj_doc tj_doc;
/* Parses; errors read "NAME: line L: what". Strings are checked UTF-8. */
tj *tk_json_parse(const char *s, size_t n, const char *name, tj_doc **doc);
/* Same, parsing in place: takes ownership of buf (malloc'ed, len + 1 bytes). */
tj *tk_json_parse_owned(char *buf, size_t len, const char *name, tj_doc **doc);
/* Same, but the arrays and objects at root.OUTER.INNER (INNER: NULL-ended
 * list of keys) are checked without being built: they come as TJ_LAZY, to be
 * read with tj_iter. Errors are those of tk_json_parse_owned. */
tj *tk_json_parse_lazy(char *buf, size_t len, const char *name, const char *outer, const char *const *inner, tj_doc **doc);
void tk_json_free(tj_doc *doc);
const tj *tk_json_get(const tj *obj, const char *key); /* NULL when absent (a JSON null is returned) */
static inline bool tj_is_null(const tj *v) { return !v || v->type == TJ_NULL; }
/* TJ_ARR / TJ_OBJ also for a lazy container; else its type */
static inline int tj_type(const tj *v) { return v->type == TJ_LAZY ? v->lazy_type : v->type; }
/* Members of an array or object, built or lazy. Containers inside a lazy one
 * come lazy. A lazy container can be read once (strings are unescaped in
 * place as they are read). next: 1 and *out set, 0 at the end, or MX_ERR. */
typedef struct { tj_doc *d; const tj *v; uint32_t i; const char *p; } tj_iter;
int tk_json_iter_init(tj_iter *it, tj_doc *d, const tj *v);
int tk_json_iter_next(tj_iter *it, tj *out);

/* ---- big allocations (huge pages where offered); free with free() ---- */
void *tk_alloc_big(size_t n, bool zero);
/* Appends id to the growing array *ids (n used, cap allocated). */
int tk_push_id(int32_t **ids, int *n, int *cap, int32_t id);

/* ---- arena ---- */
typedef struct tk_blk tk_blk;
typedef struct { tk_blk *head; } tk_arena;
void *tk_arena_alloc(tk_arena *a, size_t n);
char *tk_arena_dup(tk_arena *a, const char *s, size_t n); /* NUL-terminated */
void tk_arena_free(tk_arena *a);

/* ---- hash maps ---- */
typedef struct { const char *s; uint32_t len; } tk_str;
uint64_t tk_hash(const void *p, size_t n);
/* string -> id map; keys live in a caller-owned tk_str array indexed by id. */
typedef struct { int32_t id; uint32_t hash; } tk_sslot;
typedef struct { tk_sslot *slot; uint32_t mask; uint32_t count; } tk_smap;
int tk_smap_init(tk_smap *m, size_t expect);
void tk_smap_free(tk_smap *m);
int32_t tk_smap_get(const tk_smap *m, const tk_str *keys, const char *s, size_t n);
int tk_smap_put(tk_smap *m, const tk_str *keys, int32_t id); /* replaces an equal key */
/* ids[i] = tk_smap_get of q[i], for a batch (faster on big maps: prefetched) */
#define TK_BATCH 64
void tk_smap_get_batch(const tk_smap *m, const tk_str *keys, const tk_str *q, int n, int32_t *ids);
void tk_smap_prefetch(const tk_smap *m, const char *s, size_t n); /* before a put of that key */
/* u64 -> (u32, i32) map */
typedef struct { uint64_t key; uint32_t a; int32_t b; } tk_uslot;
typedef struct { tk_uslot *slot; uint32_t mask; uint32_t count; } tk_umap;
int tk_umap_init(tk_umap *m, size_t expect);
void tk_umap_free(tk_umap *m);
bool tk_umap_get(const tk_umap *m, uint64_t k, uint32_t *a, int32_t *b);
int tk_umap_put(tk_umap *m, uint64_t k, uint32_t a, int32_t b); /* grows */
void tk_umap_prefetch(const tk_umap *m, uint64_t k);

/* ---- UTF-8 and Unicode ---- */
/* Decodes one code point; returns its length (>= 1) and sets *cp, or
 * returns the length of an invalid sequence's maximal subpart with *cp = -1. */
int tk_u8dec(const uint8_t *s, size_t n, int32_t *cp);
int tk_u8enc(int32_t cp, char *out);
/* Copies text into out replacing each invalid sequence with U+FFFD (as
 * Rust's from_utf8_lossy). Returns true when the input was already valid. */
bool tk_u8_valid(const char *s, size_t n);
int tk_u8_lossy(const char *s, size_t n, mx_buf *out);
bool tk_is_ws(int32_t c);          /* Unicode White_Space (Rust char::is_whitespace) */
bool tk_is_punct(int32_t c);       /* ASCII punctuation or P* */
bool tk_is_word(int32_t c);        /* \w: L* M* N* Pc */
bool tk_is_numeric(int32_t c);     /* N* */
bool tk_is_other(int32_t c);       /* C* incl. Cn */
bool tk_is_mark(int32_t c);        /* M* */
bool tk_is_mn(int32_t c);          /* Mn */
bool tk_is_cjk(int32_t c);

/* ---- list of byte strings (pieces of text, or tokens when decoding) ---- */
typedef struct { mx_buf text; uint32_t *off, *len; uint8_t *flag; int n, cap; } tk_pieces;
int tk_pieces_add(tk_pieces *p, const char *s, size_t n, uint8_t flag);
int tk_pieces_append_last(tk_pieces *p, const char *s, size_t n); /* extends the last piece */
void tk_pieces_clear(tk_pieces *p);
void tk_pieces_free(tk_pieces *p);
static inline const char *tk_piece(const tk_pieces *p, int i) { return p->text.data + p->off[i]; }

/* ---- patterns: literal string or PCRE2 regex ---- */
typedef struct { char *str; size_t len; pcre2_code *re; } tk_pat;
/* Scratch for one encode/decode call. */
typedef struct {
    bool mid; /* decoding tokens in the middle of a text: raw bytes, no first-token rules */
    pcre2_match_data *md;
    pcre2_match_context *mc;
    mx_buf b[4];
    double deadline;  /* mx_now() time past which encoding fails (0: none) */
    unsigned tick;
    bool keep_lead; /* slow Llama: a chunk that starts with a space keeps one (see tok_slow.c) */
} tk_ctx;
/* MX_ERR once c's deadline has passed (checked every 64th call). */
int tk_over_budget(tk_ctx *c);
int tk_ctx_init(tk_ctx *c);
void tk_ctx_free(tk_ctx *c);
/* Parses {"String": s} or {"Regex": r} (or a plain string); `what` names the
 * place in errors. */
int tk_pat_parse(tk_pat *p, const tj *v, const char *file, const char *what);
int tk_pat_compile_regex(tk_pat *p, const char *re, size_t len, const char *file, const char *what);
void tk_pat_free(tk_pat *p);
/* Next match at or after `from`: 1 found, 0 none, MX_ERR on a regex error. */
int tk_pat_find(const tk_pat *p, tk_ctx *c, const char *s, size_t n, size_t from, size_t *ms, size_t *me);
/* Replaces every match with rep. */
int tk_pat_replace(const tk_pat *p, tk_ctx *c, const char *s, size_t n, const char *rep, size_t rlen, mx_buf *out);

/* ---- normalizers ---- */
enum { N_SEQ, N_NFC, N_NFD, N_NFKC, N_NFKD, N_LOWER, N_STRIP, N_STRIPACC, N_REPLACE, N_PREPEND, N_BERT, N_PRECOMP,
       N_NMT, N_BYTELEVEL, N_SPWS };
typedef struct tk_norm {
    int type;
    struct tk_norm **sub;
    int nsub;
    bool left, right;                       /* Strip; SpWs: strip */
    bool clean_text, chinese, lowercase, strip_accents; /* Bert */
    tk_pat pat;                             /* Replace */
    char *content;                          /* Replace / Prepend */
    size_t clen;
    const uint32_t *trie;                   /* Precompiled */
    size_t trie_n;
    const char *pool;
    size_t pool_n;
    bool sp_longest;                        /* sentencepiece (longest match) instead of HF semantics */
    char *blob;                             /* owned charsmap bytes */
} tk_norm;
tk_norm *tk_norm_parse(const tj *v, const char *file, int depth);
void tk_norm_free(tk_norm *n);
int tk_norm_apply(const tk_norm *n, tk_ctx *c, const char *in, size_t len, mx_buf *out);
int tk_precompiled_init(tk_norm *n, const uint8_t *blob, size_t len, const char *file);

/* ---- pre-tokenizers ---- */
enum { P_SEQ, P_BYTELEVEL, P_SPLIT, P_META, P_WS, P_WSSPLIT, P_BERT, P_PUNCT, P_DIGITS, P_CHARDELIM };
enum { B_REMOVED, B_ISOLATED, B_PREV, B_NEXT, B_CONTIG };
typedef struct tk_pre {
    int type;
    struct tk_pre **sub;
    int nsub;
    bool add_prefix_space, use_regex, invert, split, individual;
    tk_pat pat;
    int behavior;
    char repl[8];
    int repl_len;
    int prepend; /* 0 always, 1 first, 2 never */
} tk_pre;
tk_pre *tk_pre_parse(const tj *v, const char *file, int depth);
void tk_pre_free(tk_pre *p);
int tk_pre_apply(const tk_pre *p, tk_ctx *c, tk_pieces *in, tk_pieces *out);
extern const int32_t tk_byte2cp[256];
int tk_cp2byte(int32_t cp); /* -1 when not a byte-level char */

/* ---- decoders ---- */
enum { D_SEQ, D_BYTELEVEL, D_META, D_WORDPIECE, D_BYTEFB, D_FUSE, D_STRIP, D_REPLACE, D_BPE, D_CTC };
typedef struct tk_dec {
    int type;
    struct tk_dec **sub;
    int nsub;
    char repl[8];
    int repl_len;
    bool prepend;          /* Metaspace: prepend_scheme != never */
    char *prefix;          /* WordPiece prefix, BPE suffix, CTC pad */
    size_t prefix_len;
    char *delim;           /* CTC word delimiter */
    size_t delim_len;
    bool cleanup;
    int32_t strip_cp;
    int start, stop;
    tk_pat pat;
    char *content;
    size_t clen;
} tk_dec;
tk_dec *tk_dec_parse(const tj *v, const char *file, int depth);
void tk_dec_free(tk_dec *d);
int tk_dec_apply(const tk_dec *d, tk_ctx *c, tk_pieces *in, tk_pieces *out);

/* ---- models ---- */
enum { M_BPE, M_WORDPIECE, M_UNIGRAM, M_WORDLEVEL };
typedef struct {
    int type;
    int32_t n;            /* vocabulary size of the model */
    tk_str *vocab;        /* id -> string (strings in the tokenizer arena) */
    tk_smap map;
    int32_t unk_id;       /* -1 none */
    bool byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_id[256]; /* <0xXX> ids or -1 */
    bool all_bytes;
    /* BPE */
    tk_umap merges;       /* (a<<32|b) -> (rank, new id) */
    char *csp, *eow;      /* continuing_subword_prefix, end_of_word_suffix */
    size_t csp_len, eow_len;
    /* WordPiece */
    int max_chars;
    size_t max_len;       /* longest vocabulary string */
    /* Unigram */
    double *score;
    double min_score;
    tk_umap trie;         /* (node<<8|byte) -> (child, id) */
    int32_t *trie_val;    /* node -> id or -1 */
} tk_model;
void tk_model_free(tk_model *m);
int tk_model_tokenize(const mx_tokenizer *t, tk_ctx *c, const char *s, size_t n, int32_t **ids, int *nids, int *cap);
int tk_model_finish(tk_model *m, const char *file); /* byte ids, max_len, ... */
/* Adds the merges pair[2k] + pair[2k + 1] (strings) of ranks rank0 + k, k < n,
 * failing at the first that is not made of vocabulary strings. */
int tk_bpe_add_merges(tk_model *m, const tk_str *pair, int n, uint32_t rank0, const char *file);

/* ---- added tokens and the tokenizer ---- */
typedef struct {
    int32_t id;
    char *s;
    size_t len;
    bool special, normalized, lstrip, rstrip, single_word;
    bool brk; /* slow decode: decoded on its own, between separately decoded runs */
} tk_added;
typedef struct { tk_umap edge; int32_t *val; int nnodes, cap; } tk_trie; /* val: added index or -1 */

#define TK_CACHE_SIZE 16384
typedef struct { uint64_t h; char *key; uint32_t klen; int32_t *ids; int n; } tk_cache_ent;

struct mx_tokenizer {
    tk_arena arena;
    tk_model model;
    tk_added *added;
    int nadded;
    int32_t vocab_size;
    tk_str *id2str;   /* size vocab_size; {NULL,0} for holes */
    int32_t *id2added; /* -1 or index into added */
    tk_trie raw_trie, norm_trie;
    tk_norm *norm;
    tk_pre *pre;
    tk_dec *dec;
    int32_t *post_pre, *post_post;
    int npost_pre, npost_post;
    bool cleanup;
    char **spec_name, **spec_val;
    int nspec;
    char **tmpl_name, **tmpl_text;
    int ntmpl;
    int64_t model_max_length;
    size_t max_token_bytes; /* longest string of the vocabulary and added tokens */
    int32_t bos, eos, pad;
    char *name;
    /* rules of transformers' slow (Python) tokenizers, set by tok_slow.c;
     * all off for tokenizer.json */
    struct {
        bool llama;        /* LlamaTokenizer legacy=false: "▁" read as " ", chunks starting with a space keep one */
        bool meta_prefix;  /* llama: "▁" before the text (add_prefix_space) */
        bool space_prefix; /* byte-level add_prefix_space: " " before the text */
        bool split_decode; /* decode runs between brk added tokens apart */
        bool space_join;   /* ... joined with " " (spaces_between_special_tokens) */
        int32_t meta_id;   /* llama: id of the piece "▁" or -1 */
    } slow;
    pthread_mutex_t cache_mu;
    tk_cache_ent *cache;
};

/* SentencePiece model; no_dummy drops the dummy-prefix "▁" (slow Llama);
 * strip_first: the decoder strips one leading space (-1: when the model adds
 * a dummy prefix). */
int tk_load_spm(mx_tokenizer *t, const char *data, size_t len, const char *file, bool no_dummy, int strip_first);
/* Shared by the tokenizer.json and the slow loaders (tokenizer.c). */
mx_tokenizer *tk_new(const char *name);
int tk_finish(mx_tokenizer *t, const char *file);
int tk_load_vocab_dict(mx_tokenizer *t, tj_doc *doc, const tj *v, const char *file);
int tk_add_ids(int32_t **arr, int *n, const int32_t *ids, int k);
/* tokenizer_config.json (cfg may be NULL): specials, templates, add_bos/eos */
int tk_common_tail(mx_tokenizer *t, const tj *cfg, const char *cfgname, bool spm, bool spm_bos, bool spm_eos);
/* The folder has no tokenizer.json: vocab.json + merges.txt or tokenizer.model (tok_slow.c). */
mx_tokenizer *tk_load_slow(const char *dir);
int tk_trie_add(tk_trie *tr, const char *s, size_t n, int32_t val);
void tk_trie_free(tk_trie *tr);
#endif
