/* scheduler: continuous batching of many generation requests over one model.
 * A single engine thread owns the model: every step it admits queued
 * requests into free slots (reusing the longest cached prompt prefix), and
 * runs ONE forward pass holding a decode token for every generating slot plus
 * a bounded chunk of pending prompt tokens, so long prefills never stall the
 * others. Requests join and leave between steps. Consumers (HTTP handlers)
 * read token events from their request and may cancel it at any time. */
#ifndef MX_SCHEDULER_H
#define MX_SCHEDULER_H
#include "constrain.h"
#include "engine.h"
#include "sampler.h"

typedef struct mx_sched mx_sched;
typedef struct mx_req mx_req;

#define MX_MAX_TOP_LOGPROBS 20
typedef struct {
    const int32_t *prompt;
    int n_prompt;
    int max_tokens;
    mx_sampling samp;
    bool ignore_eos;
    int top_logprobs;       /* -1: no logprobs; 0..20 */
    const int32_t *bias_ids; /* logit_bias */
    const float *bias_vals;
    int n_bias;
    /* Images (vision-language models; NULL = none): the prompt's layout
     * (mx_vision_layout over these n_prompt tokens), the image rows and each
     * token's content tag (mx_vlprompt_tags): a slot's cached prefix is
     * reused only as far as tokens and tags agree. Copied at submit. */
    const mx_vision_layout *lay;
    const float *rows;
    int n_rows;
    const uint64_t *tags;
    mx_grammar *grammar;    /* constrains the output (NULL: none); the request holds a reference */
    /* Thinking budget (n_think_end 0: none). The reasoning block is open
     * from the first token (n_think_open 0: the prompt opened it) or opens
     * when the reply's first tokens are think_open; once think_budget
     * tokens have been generated inside it without its end marker
     * think_end, the marker's remaining tokens are emitted in place of
     * samples (one per step), so the reply goes on after it. */
    int think_budget;
    int n_think_open, n_think_end;
    /* Speculation (mx_sched_set_spec; llama-server's speculative.n_max /
     * n_min): the most tokens drafted per step for this request, 0 = the
     * server's --draft-max, -1 = none; drafts shorter than spec_min are not
     * offered. Requests with a grammar are never speculated. */
    int spec_max, spec_min;
#define MX_THINK_MARK_MAX 16
    int32_t think_open[MX_THINK_MARK_MAX], think_end[MX_THINK_MARK_MAX];
} mx_req_params;

typedef struct {
    int32_t token;
    float logprob;
    int n_top;
    int32_t top_ids[MX_MAX_TOP_LOGPROBS];
    float top_lp[MX_MAX_TOP_LOGPROBS];
} mx_tok_event;

typedef enum { MX_FIN_NONE, MX_FIN_STOP, MX_FIN_LENGTH, MX_FIN_CANCELLED, MX_FIN_ERROR } mx_finish;

typedef struct {
    uint64_t requests, prompt_tokens, cached_tokens, gen_tokens;
    uint64_t spec_drafted, spec_accepted; /* speculation: tokens offered, tokens the target kept */
    uint64_t borrowed_tokens; /* cached prompt tokens taken from another slot's cache (in cached_tokens too) */
    uint64_t kv_releases;     /* slot caches given back (replaced, or released to make room under --kv-memory) */
    uint64_t kv_waits;        /* requests that waited for room under --kv-memory */
    uint64_t kv_shared_bytes; /* cache memory mapped by more than one slot, counted once per extra slot (what sharing saves) */
    uint64_t kv_dedup_bytes;  /* cache bytes of a prefix two caches computed apart, found equal and kept once (mx_kv_dedupe_prefix) */
    /* the prompt cache (mx_sched_set_prompt_cache): its entries now, the tokens
     * and bytes they hold, prompt tokens taken from them (in borrowed_tokens
     * too), entries dropped for room */
    uint64_t cache_entries, cache_tokens, cache_bytes, cache_hit_tokens, cache_evictions;
    uint64_t preemptions;     /* requests stopped for room under --kv-memory and queued again (they read what they had again) */
    int active, queued;
    double ttft_sum, ttft_count, decode_tps; /* last step's aggregate decode rate */
} mx_sched_stats;

/* parallel: slots (concurrent sequences); ctx: positions per slot;
 * step_tokens: most tokens one forward holds (prefill chunk budget). */
mx_sched *mx_sched_new(mx_engine *e, int parallel, int ctx, int step_tokens, int threads);
/* Speculative decoding by prompt lookup for every request (unless it
 * asks otherwise): each step a generating slot offers up to draft_max
 * tokens that followed the last earlier match of its last ngram..1 tokens,
 * checked in the step's decode pass; greedy output is the same as without,
 * sampled output keeps the target's distribution (spec.h). Call before the
 * first submission. MX_ERR (with mx_errmsg) for a model whose cache cannot
 * be cut back (recurrent state). */
int mx_sched_set_spec(mx_sched *s, int draft_max, int ngram);
/* The same with a draft model (its tokenizer checked by the caller,
 * mx_spec_check_vocab; it must outlive s): each step it drafts up to
 * draft_max tokens for every generating slot, greedily, from a cache of its
 * own per slot. Refused for a target or draft with recurrent state. Call
 * before the first submission, instead of mx_sched_set_spec. */
int mx_sched_set_draft(mx_sched *s, mx_engine *draft, int draft_max);
/* Bytes of every slot's cache together: the address space mx_sched_new
 * reserves (pages take memory once written). */
size_t mx_sched_kv_bytes(mx_sched *s);
/* The bytes those caches and the prompt cache's entries take now (resident
 * pages; any thread). */
size_t mx_sched_kv_resident(mx_sched *s);
/* Bounds the caches' memory (--kv-memory; 0: none): a request is admitted
 * when its prompt and 64 more positions fit beside the running ones (a
 * request with images: its prompt, max_tokens and drafts), the prompt
 * cache's entries and idle slots' caches released for it, least recently
 * used first, else it waits; a generating request takes 64 more positions
 * at a time the same way, or by pre-empting the generating request admitted
 * last (its cache released; it is queued first again with what it
 * generated appended to its prompt, and goes on from there: greedy output
 * is unchanged). One that could never fit alone is refused at submission.
 * Call before the first submission (after mx_sched_set_draft). */
void mx_sched_set_kv_budget(mx_sched *s, size_t bytes);
/* Prefix reuse for models with recurrent state (hybrids, SSMs), whose cache
 * cannot be cut back: each slot keeps up to n snapshots of that state
 * (mx_kv_snapshot), one at the end of its latest prompt and the others at
 * the first multiples of `every` tokens of the prompts that started it
 * (prompt chunks end there), and a request sharing a prefix with the slot,
 * or another slot, starts from the longest snapshot within it. Nothing for
 * models without such state or in distributed runs. Call before the first
 * submission. */
int mx_sched_set_snapshots(mx_sched *s, int n, int every);
/* The prompt cache (llama-server's --cache-ram): a slot's cached tokens that
 * a new prompt would replace are kept, the slot's cache swapped for an empty
 * one (nothing copied), and any later prompt starting with them borrows them
 * as it borrows from other slots (its pages shared where the caches are in
 * one pool, else copied). Entries and their snapshots of recurrent state
 * stay within `bytes` (-1: no bound; 0: off, the default) and, with
 * --kv-memory, go before idle slots' caches, least recently used first.
 * Nothing in distributed runs. */
int mx_sched_set_prompt_cache(mx_sched *s, int64_t bytes);
/* Bytes of one snapshot (0: snapshots off). */
size_t mx_sched_snapshot_bytes(const mx_sched *s);
/* Stops the engine: running and queued requests finish as cancelled, new
 * submissions fail; consumers may still read and release their requests. */
void mx_sched_stop(mx_sched *s);
void mx_sched_free(mx_sched *s);
/* NULL with mx_errmsg() when the request can never run (prompt too long). */
mx_req *mx_sched_submit(mx_sched *s, const mx_req_params *p);
/* n samples of one prompt (OpenAI's n): out[0..n) get n requests admitted
 * together; the prompt is read once (by out[0]) and the others start from
 * a copy of its cache and its last logits. Sample i samples with seed + i
 * (a given seed: different, reproducible samples). n above the slots is
 * refused (MX_ERR with mx_errmsg()). */
int mx_sched_submit_n(mx_sched *s, const mx_req_params *p, int n, mx_req **out);
/* Waits up to timeout_ms for the next event: 1 = *ev filled, 0 = timeout,
 * -1 = finished (see mx_req_finish). */
int mx_req_next(mx_req *r, mx_tok_event *ev, int timeout_ms);
mx_finish mx_req_finish(const mx_req *r);
int mx_req_cached_tokens(const mx_req *r);
int mx_req_prompt_tokens(const mx_req *r);
/* mx_now() times of its submission, first token and finish (0: not yet). */
void mx_req_times(mx_req *r, double *submit, double *first, double *end);
/* Calls fn(arg) whenever an event or the finish of r becomes readable (at
 * once when one already is), from the engine thread and under the
 * scheduler's lock: fn must be quick and must not call back into the
 * scheduler. fn NULL stops it; mx_req_release stops it too. */
void mx_req_set_notify(mx_req *r, void (*fn)(void *), void *arg);
/* Cancel (client gone, stop string seen); the slot frees at the next step. */
void mx_req_cancel(mx_req *r);
/* Drops the consumer's reference (after the last event or a cancel). */
void mx_req_release(mx_req *r);
void mx_sched_stats_get(mx_sched *s, mx_sched_stats *out);
/* The bytes --kv-memory charges the slots' caches now: each slot's footprint
 * (an upper bound of the pages its request may write), a page several slots
 * share counted once. */
size_t mx_sched_kv_charged(mx_sched *s);
/* One slot's state now (llama-server's /slots). */
typedef struct {
    bool busy;        /* generating (or reading the prompt of) a request */
    int n_prompt;     /* that request's prompt tokens */
    int n_decoded;    /* tokens it has generated so far */
} mx_slot_info;
/* Fills out[0..min(max, parallel)) and returns the number of slots. */
int mx_sched_slots(mx_sched *s, mx_slot_info *out, int max);
#endif
