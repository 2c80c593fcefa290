/* vlprompt: a prompt with images, for the front ends (generate, chat, the
 * server). The images are decoded and preprocessed as the model's Hugging
 * Face processor does; text prompts get their image placeholders expanded
 * (the processor's rule) before tokenizing; then the layout (which tokens
 * take image rows, bidirectional spans, M-RoPE positions) and the rows the
 * session feeds with mx_session_feed_images. */
#ifndef MX_VLPROMPT_H
#define MX_VLPROMPT_H
#include "textmodel.h"
#include "generate.h"

#define MX_VLPROMPT_MAX_IMAGES 64

typedef struct {
    int n;                   /* images, in prompt order */
    mx_image_input *in;      /* [n] preprocessed */
    char (*key)[65];         /* [n] SHA-256 of each file (hex): the rows cache key */
    float *rows;             /* every image's rows, prompt order ([n_rows, mx_vision_row_floats]) */
    int n_rows;
    mx_vision_layout lay;
} mx_vlprompt;

/* Adds one image (file bytes; what names it in errors). The model must have
 * a vision side. max_pixels <= 0: the decoder's default bound. */
int mx_vlprompt_add(mx_vlprompt *p, const mx_engine *e, const void *data, size_t len, int64_t max_pixels, const char *what);
/* Text -> ids: each placeholder of the processor expanded for its image (a
 * text without any gets them in front, one per image), then tokenized
 * (chat: the text is a rendered template, whose specials are its own). */
int mx_vlprompt_tokenize(const mx_vlprompt *p, const mx_textmodel *tm, const char *text, bool chat, int32_t **ids, int *n);
/* A chat (mx_textmodel_chat_ids) with images: rendered, the placeholders
 * the template wrote expanded (none: the images go first), tokenized. With
 * o->content_as_text the expansions are markup and message text stays
 * text, a placeholder or special token typed in it included. text gets
 * the rendered chat (before the expansion). */
int mx_vlprompt_chat_ids(const mx_vlprompt *p, const mx_textmodel *tm, json_t *ctx, const mx_chat_opts *o, mx_buf *text, int32_t **ids, int *n);
/* The layout over the prompt's ids and the image rows (tower + projector;
 * rows of an image encoded before come from the engine's cache). */
int mx_vlprompt_prepare(mx_vlprompt *p, mx_engine *e, const int32_t *ids, int n, mx_pool *pool);
/* Per prompt token: 0 for text, for an image token a 64-bit tag of its
 * image's content and row (so a cached prefix is reused only with the same
 * images). tags: [n]. */
void mx_vlprompt_tags(const mx_vlprompt *p, uint64_t *tags);
/* Feeds ids[from, n) of a prepared prompt to a session whose cache holds
 * ids[0, from) (prompt reuse across chat turns): the segment's rows, spans
 * and M-RoPE positions. from must not fall inside a bidirectional span
 * (mx_vlprompt_reuse gives a valid one). */
int mx_vlprompt_feed(const mx_vlprompt *p, mx_session *s, const int32_t *ids, int n, int from, float *all_logits, float *last);
/* The longest prefix of ids a session's cache can keep: equal tokens, not
 * inside a bidirectional span; the session is cut back to it. */
int mx_vlprompt_reuse(const mx_vlprompt *p, mx_session *s, const int32_t *ids, int n);
void mx_vlprompt_free(mx_vlprompt *p);
#endif
