/* The vocabulary as byte strings and their trie, built once per model. */
#include "gram_int.h"
#include <stdlib.h>
#include <string.h>

static const mx_gvocab *g_sort_v; /* qsort has no context argument: set under g_sort_mu */
static pthread_mutex_t g_sort_mu = PTHREAD_MUTEX_INITIALIZER;

static int cmp_tok(const void *a, const void *b) {
    const mx_gvocab *v = g_sort_v;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = v->len[x], ly = v->len[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], MX_MIN(lx, ly));
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_trie(mx_gvocab *v) {
    /* at most one node per token byte, plus the root and the sentinel */
    size_t cap = 2;
    for (int i = 0; i < v->n_order; i++) cap += v->len[v->order[i]];
    v->byte = mx_malloc(cap);
    v->end = mx_malloc(cap * sizeof *v->end);
    v->lo = mx_malloc(cap * sizeof *v->lo);
    v->own = mx_calloc(cap, sizeof *v->own);
    int32_t *path = mx_malloc((size_t)(v->max_len + 1) * sizeof *path);
    if (!v->byte || !v->end || !v->lo || !v->own || !path) { free(path); return MX_ERR; }
    int n = 0, depth = 0;
    v->byte[0] = 0;
    v->lo[0] = 0;
    path[0] = n++;
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    for (int i = 0; i < v->n_order; i++) {
        int32_t t = v->order[i];
        const uint8_t *s = (const uint8_t *)v->bytes + v->off[t];
        uint32_t len = v->len[t], l = 0;
        while (l < len && l < prev_len && s[l] == prev[l]) l++;
        /* close the nodes deeper than the common prefix */
        for (; depth > (int)l; depth--) v->end[path[depth]] = n;
        for (uint32_t d = l; d < len; d++) {
            v->byte[n] = s[d];
            v->lo[n] = i;
            path[d + 1] = n++;
            depth = (int)d + 1;
        }
        /* tokens ending at a node sort before the longer ones below it */
        v->own[path[len]]++;
        prev = s;
        prev_len = len;
    }
    for (; depth >= 0; depth--) v->end[path[depth]] = n;
    v->lo[n] = v->n_order; /* sentinel */
    v->n_nodes = n;
    free(path);
    return MX_OK;
}

mx_gvocab *mx_gvocab_new(const mx_tokenizer *t, int n_vocab, const int32_t *eos, int n_eos) {
    mx_gvocab *v = mx_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->n_vocab = n_vocab;
    v->n_words = (n_vocab + 31) / 32;
    v->off = mx_calloc((size_t)n_vocab + 1, sizeof *v->off);
    v->len = mx_calloc((size_t)n_vocab + 1, sizeof *v->len);
    v->order = mx_malloc(((size_t)n_vocab + 1) * sizeof *v->order);
    v->eos = mx_malloc(((size_t)n_eos + 1) * sizeof *v->eos);
    mx_buf all = {0}, one = {0};
    if (!v->off || !v->len || !v->order || !v->eos) goto fail;
    for (int i = 0; i < n_eos; i++)
        if (eos[i] >= 0 && eos[i] < n_vocab) v->eos[v->n_eos++] = eos[i];
    int n_tok = MX_MIN(n_vocab, mx_tok_vocab_size(t));
    for (int32_t id = 0; id < n_tok; id++) {
        if (mx_tok_is_special(t, id)) continue;
        one.len = 0;
        if (mx_tok_token_bytes(t, id, &one)) goto fail;
        /* tokens of no text would let generation run on without progress */
        if (!one.len || one.len > 0xFFFF) continue;
        v->off[id] = (uint32_t)all.len;
        v->len[id] = (uint32_t)one.len;
        if (mx_buf_append(&all, one.data, one.len)) goto fail;
        if ((int)one.len > v->max_len) v->max_len = (int)one.len;
        v->order[v->n_order++] = id;
    }
    for (int i = 0; i < v->n_eos; i++) v->len[v->eos[i]] = 0; /* never matched as text */
    int m = 0;
    for (int i = 0; i < v->n_order; i++)
        if (v->len[v->order[i]]) v->order[m++] = v->order[i];
    v->n_order = m;
    v->bytes = all.data ? all.data : mx_strdup("");
    all.data = NULL;
    if (!v->bytes) goto fail;
    pthread_mutex_lock(&g_sort_mu);
    g_sort_v = v;
    if (v->n_order > 1) qsort(v->order, (size_t)v->n_order, sizeof *v->order, cmp_tok);
    pthread_mutex_unlock(&g_sort_mu);
    if (build_trie(v)) goto fail;
    mx_buf_free(&one);
    return v;
fail:
    mx_buf_free(&all);
    mx_buf_free(&one);
    mx_gvocab_free(v);
    return NULL;
}

void mx_gvocab_free(mx_gvocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->len);
    free(v->order);
    free(v->byte);
    free(v->end);
    free(v->lo);
    free(v->own);
    free(v->eos);
    free(v);
}

int mx_gvocab_size(const mx_gvocab *v) { return v->n_vocab; }
