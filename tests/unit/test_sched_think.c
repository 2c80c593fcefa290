/* The scheduler's thinking budget (mx_req_params think_*), on the llama
 * fixture with greedy decoding: a reply is the unforced reply up to the
 * budget, then the end marker's tokens, whether the block is open from the
 * start or opens with the reply's first tokens; a reply that does not open
 * the block is left alone, and a marker the model writes itself ends the
 * block (nothing forced after it). */
#include "test.h"
#include "base/base.h"
#include "runtime/scheduler.h"

#define N 24

/* The greedy reply's tokens (all N: EOS ignored). */
static int run(mx_sched *s, const mx_req_params *p, int32_t *out) {
    mx_req *r = mx_sched_submit(s, p);
    if (!r) return -1;
    int n = 0;
    mx_tok_event ev;
    int rc;
    while ((rc = mx_req_next(r, &ev, 10000)) == 1)
        if (n < N) out[n++] = ev.token;
    mx_req_release(r);
    return rc < 0 ? n : -1;
}

static bool same(const int32_t *a, const int32_t *b, int n) { return !memcmp(a, b, sizeof(int32_t) * (size_t)n); }

int main(void) {
    mx_engine e;
    if (mx_engine_open("tests/fixtures/llama", &e)) { CHECK("sched_think/open", 0, "%s", mx_errmsg()); TEST_END(); }
    mx_sched *s = mx_sched_new(&e, 1, 128, 64, 1);
    if (!s) { CHECK("sched_think/new", 0, "%s", mx_errmsg()); mx_engine_close(&e); TEST_END(); }
    int32_t prompt[] = {5, 17, 42, 99, 7, 3};
    mx_req_params p = {.prompt = prompt, .n_prompt = 6, .max_tokens = N, .ignore_eos = true, .top_logprobs = -1};
    p.samp.top_p = 1;
    p.samp.repetition_penalty = 1;
    p.samp.penalty_last_n = -1;
    int32_t ref[N], out[N];
    int n = run(s, &p, ref);
    CHECK("sched_think/reference", n == N, "%d tokens", n);
    /* end marker: tokens other than the ones the reference writes where they are forced */
    int32_t m0 = 1, m1 = 1;
    while (m0 == ref[5] || m0 == ref[7]) m0++;
    while (m1 == ref[6] || m1 == ref[8]) m1++;

    /* open from the start, budget 5: ref[0..5), then the marker, then the model's own */
    mx_req_params q = p;
    q.think_budget = 5;
    q.n_think_end = 2;
    q.think_end[0] = m0;
    q.think_end[1] = m1;
    n = run(s, &q, out);
    CHECK("sched_think/budget_forces_marker", n == N && same(out, ref, 5) && out[5] == m0 && out[6] == m1, "n %d: %d %d %d", n, out[4], out[5], out[6]);

    /* the block opens with the reply's first two tokens: they do not count */
    q.n_think_open = 2;
    q.think_open[0] = ref[0];
    q.think_open[1] = ref[1];
    n = run(s, &q, out);
    CHECK("sched_think/budget_after_open_marker", n == N && same(out, ref, 7) && out[7] == m0 && out[8] == m1, "n %d: %d %d %d", n, out[6], out[7], out[8]);

    /* a reply that does not begin with the open marker: never forced */
    q.think_open[1] = (ref[1] + 1) % 256;
    n = run(s, &q, out);
    CHECK("sched_think/no_open_marker_not_forced", n == N && same(out, ref, N), "n %d", n);

    /* the model writes the marker itself within the budget: nothing forced after */
    q.n_think_open = 0;
    q.think_end[0] = ref[2];
    q.think_end[1] = ref[3];
    q.think_budget = 6;
    n = run(s, &q, out);
    CHECK("sched_think/own_marker_ends_block", n == N && same(out, ref, N), "n %d", n);

    /* a marker half written at the budget: its rest is forced */
    q.think_budget = 3; /* ref[2] (marker[0]) is the 3rd token; the 4th is forced: marker[1] */
    q.think_end[1] = (ref[3] + 1) % 256;
    n = run(s, &q, out);
    CHECK("sched_think/partial_marker_completed", n == N && same(out, ref, 3) && out[3] == q.think_end[1], "n %d: %d", n, out[3]);

    mx_sched_free(s);
    mx_engine_close(&e);
    TEST_END();
}
