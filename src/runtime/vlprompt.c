/* See vlprompt.h. */
#include "vlprompt.h"
#include "../base/base.h"
#include "../hub/sha.h"
#include <stdlib.h>
#include <string.h>

int mx_vlprompt_add(mx_vlprompt *p, const mx_engine *e, const void *data, size_t len, int64_t max_pixels, const char *what) {
    if (!e->vision) return mx_set_err("%s does not take images (no vision side for model_type '%s')", e->model.ck.dir, e->model_type);
    if (p->n >= MX_VLPROMPT_MAX_IMAGES) return mx_set_err("at most %d images per prompt", MX_VLPROMPT_MAX_IMAGES);
    mx_image_input *in = mx_realloc(p->in, sizeof *in * (size_t)(p->n + 1));
    if (!in) return MX_ERR;
    p->in = in;
    char (*key)[65] = mx_realloc(p->key, sizeof *key * (size_t)(p->n + 1));
    if (!key) return MX_ERR;
    p->key = key;
    mx_sha *sh = mx_sha256_new();
    if (!sh) return MX_ERR;
    mx_sha_update(sh, data, len);
    mx_sha_hex_free(sh, p->key[p->n]);
    const mx_image_processor *proc = mx_vision_processor(e->vision);
    mx_image img;
    if (mx_image_processor_decode(proc, data, len, max_pixels, what, &img)) return MX_ERR;
    int r = mx_image_preprocess(proc, &img, &p->in[p->n]);
    mx_image_free(&img);
    if (r) return mx_err_prefix("%s", what);
    p->n++;
    return MX_OK;
}

int mx_vlprompt_tokenize(const mx_vlprompt *p, const mx_textmodel *tm, const char *text, bool chat, int32_t **ids, int *n) {
    const mx_engine *e = &tm->e;
    if (!tm->tok) return mx_set_err("%s has no tokenizer: give the prompt as ids (--prompt-ids)", e->model.ck.dir);
    if (!e->vision) return mx_set_err("%s does not take images", e->model.ck.dir);
    const mx_image_processor *proc = mx_vision_processor(e->vision);
    char *with = NULL, *expanded = NULL;
    bool add_bos;
    if (p->n && proc->prompt != MX_IP_PROMPT_PREFIX && !strstr(text, proc->placeholder)) {
        mx_buf b = {0}; /* no placeholder in the text: the images go first */
        for (int i = 0; i < p->n; i++) mx_buf_puts(&b, proc->placeholder);
        if (mx_buf_puts(&b, text)) {
            mx_buf_free(&b);
            return MX_ERR;
        }
        text = with = b.data;
    }
    const char *bos = tm->tok ? mx_tok_special_str(tm->tok, "bos_token") : NULL;
    int r = mx_image_expand_prompt(proc, text, p->in, p->n, bos, &expanded, &add_bos);
    if (!r) r = chat ? mx_textmodel_encode_chat(tm, expanded, strlen(expanded), ids, n)
                     : mx_textmodel_encode(tm, expanded, strlen(expanded), add_bos, ids, n);
    free(with);
    free(expanded);
    return r;
}

int mx_vlprompt_chat_ids(const mx_vlprompt *p, const mx_textmodel *tm, json_t *ctx, const mx_chat_opts *o, mx_buf *text, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    if (!tm->tok) return mx_set_err("%s has no tokenizer", tm->e.model.ck.dir);
    if (!tm->e.vision) return mx_set_err("%s does not take images", tm->e.model.ck.dir);
    mx_buf marks = {0}, exp = {0}, exp_marks = {0};
    bool add_bos;
    int r = mx_textmodel_chat_render(tm, ctx, o, text, &marks);
    if (!r && !o->content_as_text) r = mx_vlprompt_tokenize(p, tm, text->data ? text->data : "", true, ids, n); /* all of it is trusted */
    else if (!r) {
        const char *bos = mx_tok_special_str(tm->tok, "bos_token");
        r = mx_image_expand_marked(mx_vision_processor(tm->e.vision), text->data ? text->data : "", text->len, (const size_t *)(void *)marks.data,
                                   marks.len / (2 * sizeof(size_t)), p->in, p->n, bos, &exp, &exp_marks, &add_bos);
        if (!r) r = mx_textmodel_chat_encode(tm, exp.data, exp.len, o, &exp_marks, ids, n);
    }
    mx_buf_free(&marks);
    mx_buf_free(&exp);
    mx_buf_free(&exp_marks);
    return r;
}

int mx_vlprompt_prepare(mx_vlprompt *p, mx_engine *e, const int32_t *ids, int n, mx_pool *pool) {
    if (!e->vision) return mx_set_err("%s does not take images", e->model.ck.dir);
    int H = mx_vision_row_floats(e->vision), total = 0;
    for (int i = 0; i < p->n; i++) total += p->in[i].n_tokens;
    mx_vision_layout_free(&p->lay);
    if (mx_vision_layout_make(e->vision, ids, n, p->in, p->n, &p->lay)) return MX_ERR;
    free(p->rows);
    p->rows = mx_malloc(sizeof(float) * (size_t)(total ? total : 1) * H);
    if (!p->rows) return MX_ERR;
    p->n_rows = 0;
    for (int i = 0; i < p->n; i++) {
        if (mx_vision_encode_cached(e->vision, p->key[i], &p->in[i], pool, p->rows + (size_t)p->n_rows * H))
            return mx_err_prefix("image %d", i + 1);
        p->n_rows += p->in[i].n_tokens;
    }
    return MX_OK;
}

void mx_vlprompt_tags(const mx_vlprompt *p, uint64_t *tags) {
    for (int i = 0; i < p->lay.n; i++) {
        int r = p->lay.embed_row[i], k = 0, first = 0;
        if (r < 0) {
            tags[i] = 0;
            continue;
        }
        while (k + 1 < p->n && r >= first + p->in[k].n_tokens) first += p->in[k++].n_tokens;
        uint64_t h = 0;
        for (int j = 0; j < 16; j++) {
            char c = p->key[k][j];
            h = h << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        tags[i] = (h ^ (uint64_t)(r - first) * 0x9e3779b97f4a7c15ull) | 1;
    }
}

int mx_vlprompt_reuse(const mx_vlprompt *p, mx_session *s, const int32_t *ids, int n) {
    int keep = 0;
    while (keep < n - 1 && keep < s->n_history && s->history[keep] == ids[keep]) keep++;
    const mx_vision_layout *l = &p->lay;
    if (l->span_lo && keep < l->n && l->span_hi[keep] > l->span_lo[keep]) keep = MX_MIN(keep, l->span_lo[keep]);
    mx_session_truncate(s, keep); /* a cut before the last image goes back to the first one */
    return s->n_history;
}

int mx_vlprompt_feed(const mx_vlprompt *p, mx_session *s, const int32_t *ids, int n, int from, float *all_logits, float *last) {
    const mx_vision_layout *l = &p->lay;
    if (l->n != n || from < 0 || from >= n || s->n_history != from) return mx_set_err("image prompt segment [%d, %d) does not follow the cache", from, n);
    int m = n - from, r = MX_ERR;
    mx_vision_layout seg = {.n = m, .embed_row = l->embed_row + from, .rope_shift = l->rope_shift - s->rope_shift, .n_deep = l->n_deep};
    int *lo = NULL, *hi = NULL, *mpos = NULL;
    if (l->span_lo) {
        lo = mx_malloc(sizeof(int) * (size_t)m);
        hi = mx_malloc(sizeof(int) * (size_t)m);
        if (!lo || !hi) goto done;
        for (int i = 0; i < m; i++) {
            bool has = l->span_hi[from + i] > l->span_lo[from + i];
            if (has && l->span_lo[from + i] < from) {
                mx_set_err("image prompt segment starts inside a bidirectional span");
                goto done;
            }
            lo[i] = has ? l->span_lo[from + i] - from : 0;
            hi[i] = has ? l->span_hi[from + i] - from : 0;
        }
        seg.span_lo = lo;
        seg.span_hi = hi;
    }
    if (l->mpos) { /* relative to what the session adds: its cache length and shift */
        if (!(mpos = mx_malloc(sizeof(int) * 3 * (size_t)m))) goto done;
        for (int a = 0; a < 3; a++)
            for (int i = 0; i < m; i++) mpos[(size_t)a * m + i] = l->mpos[(size_t)a * n + from + i] - from - s->rope_shift;
        seg.mpos = mpos;
    }
    r = mx_session_feed_images(s, ids + from, m, &seg, p->rows, mx_vision_spec(s->e->vision)->rows_scaled, all_logits, last);
done:
    free(lo);
    free(hi);
    free(mpos);
    return r;
}

void mx_vlprompt_free(mx_vlprompt *p) {
    for (int i = 0; i < p->n; i++) mx_image_input_free(&p->in[i]);
    free(p->in);
    free(p->key);
    free(p->rows);
    mx_vision_layout_free(&p->lay);
    memset(p, 0, sizeof *p);
}
