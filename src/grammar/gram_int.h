/* Internals of the grammar engine, shared by the compiler (gbnf.c), the
 * vocabulary trie (vocab.c) and the matcher (match.c).
 *
 * A compiled grammar is a flat array of elements: each alternative of each
 * rule is a run of BYTES (one byte from a set) and RULE (a reference)
 * elements closed by END. Character classes over code points are compiled
 * to byte sequences (UTF-8), so matching is byte by byte and a token that
 * splits a character is handled like any other. A parser state is a set of
 * stacks; a stack is the position of the next BYTES element to match plus
 * a continuation ("ctx"): an interned linked list of return positions. */
#ifndef MX_GRAM_INT_H
#define MX_GRAM_INT_H
#include "grammar.h"
#include <pthread.h>
#include <stdatomic.h>

enum { GE_END = 0, GE_BYTES = 1, GE_RULE = 2 };
typedef struct {
    int32_t kind;
    int32_t arg; /* BYTES: byte-set index; RULE: rule index */
} g_elem;

typedef struct { uint64_t w[4]; } g_bset;
static inline bool g_bset_has(const g_bset *s, unsigned b) { return (s->w[b >> 6] >> (b & 63)) & 1; }

/* Fixed element positions: ACCEPT is a BYTES element with the empty set (a
 * stack there matches nothing more: the text may end); START is the
 * alternative "root END" every parse begins with. */
enum { G_ACCEPT = 0, G_START = 1 };
/* Continuation ids: ROOT is the empty stack. When a position's tokens are
 * precomputed the bottom of the stack is unknown: a continuation whose
 * return position is G_BASE_OF(X) (and parent BASE) stands for "the
 * unknown callers of rule X". Popping it continues at X's return site when
 * X has only one, else the token escapes (depends on the context). */
enum { G_CTX_ROOT = 0, G_CTX_BASE = 1 };
#define G_BASE_OF(x) (-3 - (x)) /* rule <-> its base marker (an involution) */
#define G_KEY(pos, ctx) (((uint64_t)(uint32_t)(ctx) << 32) | (uint32_t)(pos))
#define G_POS(k) ((int32_t)(uint32_t)(k))
#define G_CTX(k) ((int32_t)((k) >> 32))
/* A state with more stacks than this is refused (a grammar this ambiguous
 * would make every step slow). */
#define G_MAX_STACKS 4096
/* The parser work (stacks expanded, copied and interned) one token mask, or
 * one accepted token, may take; past it the request ends with an error
 * rather than running for minutes. The hungriest grammars in the tests (JSON
 * schemas over Llama 3's 128k vocabulary, the first mask of a grammar walking
 * the whole vocabulary trie) stay well under it. */
#define G_MAX_WORK (1ull << 23)

typedef struct { uint64_t *v; int n, cap; } g_vec;

/* Continuations, memoized closures, interned states and their byte
 * transitions, of one matcher (or of a grammar's precomputation). */
typedef struct {
    int32_t *ret, *parent; /* continuation id -> (return position, parent) */
    int n, cap;
    uint64_t *hkey; /* (ret, parent) -> id */
    int32_t *hval;
    uint32_t hcap, hn;
    uint64_t *mkey; /* (pos, ctx) -> closure span in pool */
    uint32_t *moff, *mlen;
    uint8_t *mesc;
    uint32_t mcap, mn;
    g_vec pool;
    uint32_t *soff, *slen; /* state id -> its sorted stacks in spool */
    int ns, scap;
    int32_t *sh; /* state hash -> id */
    uint32_t shcap;
    g_vec spool;
    uint64_t *tkey; /* (state << 8 | byte) -> target */
    int32_t *tval;  /* target id + 1 (0: no stack survives), bit 31: escaped */
    uint32_t tcap, tn;
    bool dense;     /* transitions in a 256-entry row per state (few states, many steps) */
    int32_t **row;  /* per state: 0 unknown, 1 dead, else id + 2; bit 31: escaped */
    int nrow;
    g_vec work, seen, tmp, adv; /* closure / step scratch */
    uint64_t spent;             /* parser work since mx_g_budget_reset (G_MAX_WORK) */
    uint64_t *skey;
    uint32_t scap2;
} g_ctab;
int mx_g_ctab_init(g_ctab *t);
static inline void mx_g_budget_reset(g_ctab *t) { t->spent = 0; }
void mx_g_ctab_free(g_ctab *t);

enum { G_DEAD = -1, G_FAIL = -2 };
/* The state of the given sorted, unique stacks (n >= 1); G_FAIL on error. */
int32_t mx_g_state(g_ctab *t, const uint64_t *keys, int n);
static inline const uint64_t *g_keys(const g_ctab *t, int32_t s, int *n) {
    *n = (int)t->slen[s];
    return t->spool.v + t->soff[s];
}
/* The state after byte b: an id, G_DEAD when no stack accepts b, G_FAIL on
 * error; *esc set when a stack popped past G_CTX_BASE. */
int32_t mx_g_step(const struct mx_grammar *g, g_ctab *t, int32_t s, uint8_t b, bool *esc);

/* For a parser state reduced to its stacks' positions and the return
 * positions of the frames above them (pairs): the tokens accepted whatever
 * lies deeper in the stacks (acc), and those that depend on it (unc,
 * checked against the real stacks each step). */
typedef struct {
    uint64_t *pairs;
    int n_pairs;
    uint32_t *acc_bits; /* bitmap form, or NULL */
    int32_t *acc;       /* list form */
    int n_acc;
    int32_t *unc;
    int n_unc;
} g_pcache;

struct mx_grammar {
    atomic_int refs;
    g_elem *el;
    int n_el;
    g_bset *bs;
    int n_bs;
    int32_t *alt_start; /* first element of each alternative */
    int32_t *rule_alt;  /* rule r's alternatives: [rule_alt[r], rule_alt[r + 1]) (rule 0: root) */
    int32_t *rule_of;   /* element -> its rule (-1 for the START alternative) */
    int32_t *ret_site;  /* rule -> the one position its end returns to, or -2 when several */
    int n_rules;
    const mx_gvocab *vocab;
    pthread_mutex_t mu; /* guards the cache and `pre` */
    uint32_t *pckey;    /* hash of a state's pairs -> cache, filled lazily */
    g_pcache **pcval;
    uint32_t pccap, pcn;
    g_ctab pre;
    uint64_t pre_spent_max; /* the most work one precomputation took (tests) */
};

/* Vocabulary trie, nodes in depth-first order (node 0 is the root): the
 * children of n are n + 1 .. end[n] - 1, each child c followed by its
 * subtree up to end[c]. Tokens are sorted by their bytes (`order`); node n's
 * subtree holds the tokens [lo[n], lo[end[n]]) and those ending at n come
 * first: [lo[n], lo[n] + own[n]). lo has a sentinel at n_nodes. */
struct mx_gvocab {
    int n_vocab, n_words;
    char *bytes;
    uint32_t *off, *len; /* per token id; len 0: never allowed */
    int32_t *order;
    int n_order;
    uint8_t *byte;
    int32_t *end, *lo, *own;
    int n_nodes;
    int32_t *eos;
    int n_eos;
    int max_len;
};

void mx_g_grammar_free(mx_grammar *g);
#endif
