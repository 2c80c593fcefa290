/* spec: speculative decoding over a session. Each round a drafter proposes
 * up to draft_max tokens (a draft model with the same tokenizer, prompt-lookup
 * n-grams, or a given continuation for benchmarks); the target checks them in
 * ONE batched forward pass and its cache is cut back past the first rejected
 * token. Greedy output equals plain decoding's; sampled output keeps the
 * target's distribution (accept a drafted d with min(1, p(d)/q(d)), else draw
 * from max(0, p - q) normalized). All buffers are allocated at init.
 *
 * Targets with recurrent state (SSM, DeltaNet, conv, ...) cannot cut their
 * cache back to a prefix (mx_model_recurrent): each round snapshots their
 * state before the pass (mx_kv_snapshot) and, when a draft is rejected,
 * restores it and feeds pending and the accepted drafts again (one more pass
 * of at most draft_max tokens). A draft model
 * with fewer logits than the target stops drafting once the sequence holds
 * an id past them (padding ids of random or broken models). */
#ifndef MX_SPEC_H
#define MX_SPEC_H
#include "generate.h"
#include "textmodel.h"

/* MX_DRAFT_MTP: the draft is a next-n module split out of the target's
 * checkpoint (arch.mtp, `mlxcel split-mtp`): its position i reads token
 * i + 1 with the target's final hidden state at position i, so it is kept
 * up to the committed sequence from the hidden states the target's passes
 * leave (mx_session_keep_hidden); a second and later draft reads the
 * module's own hidden state at the position before (as SGLang chains it). */
typedef enum { MX_DRAFT_MODEL = 1, MX_DRAFT_NGRAM, MX_DRAFT_ORACLE, MX_DRAFT_MTP } mx_draft_kind;

typedef struct {
    mx_draft_kind kind;
    int draft_max;          /* tokens drafted per round (>= 1) */
    int ngram;              /* MX_DRAFT_NGRAM: the longest n-gram looked up */
    mx_engine *draft;       /* MX_DRAFT_MODEL, MX_DRAFT_MTP: opened by the caller (mx_spec_check_vocab) */
    const int32_t *oracle;  /* MX_DRAFT_ORACLE: a whole sequence (prompt + continuation) */
    int n_oracle;           /*   whose next tokens are offered */
} mx_spec_cfg;

typedef struct {
    mx_spec_cfg cfg;
    mx_session *s;          /* the target's */
    mx_sampler *smp;        /* the target's (the caller's) */
    mx_session ds;          /* the draft model's */
    mx_sampler *dsmp;
    bool greedy;
    int V, Vd;
    float *rows;            /* [draft_max + 1, V]: the target's logits of the last round, as computed */
    float *work;            /* [V] */
    float *p;               /* [V] */
    float *dq;              /* [draft_max, Vd]: the draft model's distributions (sampling) */
    float *dlog;            /* [Vd] */
    float *snap;            /* a target with recurrent state: its state before a round's pass */
    int32_t *tok;           /* [draft_max + 1]: pending token + drafts */
    long rounds, drafted, accepted;
    int mtp_valid;          /* MX_DRAFT_MTP: the draft's positions below this read the target's hidden states */
    int32_t mtp_first;      /*   and the first token of the sequence they continue */
} mx_spec;

/* The draft's tokenizer must be the target's (same size, same string for
 * every id; without tokenizers, the same vocabulary size) and its logits no
 * wider than the target's. Sets the error and returns MX_ERR otherwise. */
int mx_spec_check_vocab(const mx_textmodel *target, const mx_textmodel *draft);
/* s: the target's session, opened with batch >= draft_max + 1 (for
 * MX_DRAFT_MTP its hidden states are kept from here on: a cache filled
 * before is not drafted for until cut back to 0); smp: its
 * sampler; samp: the sampling settings (the draft model samples with them). */
int mx_spec_init(mx_spec *sp, mx_session *s, mx_sampler *smp, const mx_sampling *samp, const mx_spec_cfg *cfg);
void mx_spec_free(mx_spec *sp);
/* One round. pending: the last chosen token, not yet in the cache (chosen
 * from the logits of the position before). Writes m tokens to out
 * (1 <= m <= min(limit, draft_max + 1)); sp->rows row i holds the target's
 * logits that chose out[i]. The cache then holds pending and out[0..m-1);
 * out[m-1] is the next pending token. Returns m, or -1 with the error set. */
int mx_spec_step(mx_spec *sp, int32_t pending, int limit, int32_t *out);
/* Prompt lookup: the most recent earlier occurrence in seq[0..len) of its
 * last g tokens (g from n down to 1), and up to k tokens that followed it,
 * written to out. Returns how many (0: no match). */
int mx_spec_draft_ngram(const int32_t *seq, int len, int n, int k, int32_t *out);
/* The acceptance rule for a drafted token d drawn from q: p is the target's
 * distribution [V], q the draft's [Vq] (Vq <= V; NULL: the draft was certain
 * of d). Accepted (returned as is) when u1 * q(d) < p(d); otherwise a draw
 * with u2 from max(0, p - q) normalized. u1, u2 uniform in [0, 1). */
int32_t mx_spec_accept(const float *p, int V, const float *q, int Vq, int32_t d, double u1, double u2, bool *accepted);
#endif
