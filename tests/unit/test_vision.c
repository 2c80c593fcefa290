/* Vision-language parity against Hugging Face (tests/fixtures/<vlm>): from
 * the PNG through our decoder and processor, the tower + projector rows
 * (image_embeds), then the text model fed those rows at the image tokens of
 * the reference input_ids: prompt logits [T, V] and 16 greedy steps
 * (greedy_ids exact, greedy_logits), once with the whole prompt in one pass
 * and once one token at a time (a bidirectional image block or PaliGemma's
 * prefix still in one pass, as the mask requires). Tolerance
 * 1e-4 * max(1, max|ref|) everywhere. Also: the text model alone runs on
 * every fixture, and an image given to a model without a vision side or a
 * prompt whose image tokens do not match the image are one clear error; a
 * chat with an image keeps special-token text typed in a message as text
 * while its image tokens are the processor's (prompt integrity). */
#include "test.h"
#include "fixtures.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/vlprompt.h"

static float tol_of(const float *ref, size_t n) { return 1e-4f * fmaxf(1, fx_maxabs(ref, n)); }

static void run_mode(const char *name, mx_engine *e, int chunk, const int32_t *ids, int T, const mx_vision_layout *lay,
                     const float *rows, const float *ref_logits, const int32_t *gids, int N, const float *ref_gl) {
    char label[256];
    int V = e->model.arch.vocab;
    mx_session s;
    if (mx_session_init(&s, e, T + N + 1, chunk, NULL)) {
        CHECK(name, 0, "session: %s", mx_errmsg());
        return;
    }
    float *lg = malloc(sizeof(float) * (size_t)T * V), *last = malloc(sizeof(float) * V);
    snprintf(label, sizeof label, "%s/chunk%d/prompt_logits", name, chunk);
    if (mx_session_feed_images(&s, ids, T, lay, rows, mx_vision_spec(e->vision)->rows_scaled, lg, last)) {
        CHECK(label, 0, "prefill: %s", mx_errmsg());
        goto out;
    }
    float d = t_maxdiff(lg, ref_logits, (size_t)T * V), tol = tol_of(ref_logits, (size_t)T * V);
    CHECK(label, d <= tol, "max diff %g > tol %g", d, tol);
    float worst = 0;
    int bad = -1;
    for (int i = 0; i < N; i++) {
        worst = fmaxf(worst, t_maxdiff(last, ref_gl + (size_t)i * V, V));
        if (mx_argmax(last, V) != gids[i] && bad < 0) bad = i;
        if (i + 1 < N && mx_session_feed(&s, &gids[i], 1, NULL, last)) {
            CHECK(label, 0, "decode: %s", mx_errmsg());
            goto out;
        }
    }
    snprintf(label, sizeof label, "%s/chunk%d/greedy_ids", name, chunk);
    CHECK(label, bad < 0, "first mismatch at step %d", bad);
    tol = tol_of(ref_gl, (size_t)N * V);
    snprintf(label, sizeof label, "%s/chunk%d/greedy_logits", name, chunk);
    CHECK(label, worst <= tol, "max diff %g > tol %g", worst, tol);
out:
    free(lg);
    free(last);
    mx_session_free(&s);
}

static void one(const char *name) {
    char dir[256], label[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    mx_engine e;
    if (mx_engine_open(dir, &e)) {
        CHECK(name, 0, "open: %s", mx_errmsg());
        return;
    }
    snprintf(label, sizeof label, "%s/vision side opens", name);
    CHECK(label, e.vision != NULL, "no vision side");
    if (!e.vision) {
        mx_engine_close(&e);
        return;
    }
    const mx_image_processor *p = mx_vision_processor(e.vision);
    mx_st_file ref;
    char *rp = mx_path_join(dir, "reference.safetensors"), *ip = mx_path_join(dir, "inputs/image.png"), *data;
    size_t len, n = 0;
    mx_image img = {0};
    mx_image_input in = {0};
    mx_vision_layout lay = {0};
    mx_pool *pool = mx_pool_new(2);
    int32_t *ids = NULL, *gids = NULL;
    int T = 0, N = 0, H = e.model.arch.hidden;
    float *rows = NULL, *emb = NULL, *logits = NULL, *gl = NULL;
    if (mx_st_open(rp, &ref)) {
        CHECK(name, 0, "%s", mx_errmsg());
        goto done0;
    }
    snprintf(label, sizeof label, "%s/preprocess", name);
    int r = mx_read_file(ip, 1 << 24, &data, &len);
    if (!r) {
        r = mx_image_processor_decode(p, data, len, 0, ip, &img) || mx_image_preprocess(p, &img, &in);
        free(data);
    }
    if (r) {
        CHECK(label, 0, "%s", mx_errmsg());
        goto done;
    }
    int RW = mx_vision_row_floats(e.vision), nd = RW / H - 1;
    rows = malloc(sizeof(float) * (size_t)in.n_tokens * RW);
    emb = fx_read_f32(&ref, "image_embeds", &n);
    snprintf(label, sizeof label, "%s/image_embeds", name);
    if (mx_vision_encode(e.vision, &in, pool, rows)) {
        CHECK(label, 0, "%s", mx_errmsg());
        goto done;
    }
    /* each row: the merger's part, then the DeepStack parts (Qwen3-VL) */
    for (int k = 0; k <= nd; k++) {
        float *want = k ? fx_read_f32(&ref, "deepstack_image_embeds", &n) : emb, *part = malloc(sizeof(float) * (size_t)in.n_tokens * H);
        if (k) snprintf(label, sizeof label, "%s/deepstack_image_embeds[%d]", name, k - 1);
        if (k && want && n == (size_t)nd * in.n_tokens * H) {
            memmove(want, want + (size_t)(k - 1) * in.n_tokens * H, sizeof(float) * (size_t)in.n_tokens * H);
            n = (size_t)in.n_tokens * H;
        }
        for (int i = 0; i < in.n_tokens; i++) memcpy(part + (size_t)i * H, rows + (size_t)i * RW + (size_t)k * H, sizeof(float) * H);
        if (!want || n != (size_t)in.n_tokens * H) CHECK(label, 0, "%zu values, ours %d x %d", want ? n : 0, in.n_tokens, H);
        else CHECK(label, t_maxdiff(part, want, n) <= tol_of(want, n), "max diff %g > tol %g", t_maxdiff(part, want, n), tol_of(want, n));
        free(part);
        if (k) free(want);
    }

    size_t nl, ng;
    if (fx_read_i64(&ref, "input_ids", &ids, &T) || fx_read_i64(&ref, "greedy_ids", &gids, &N) ||
        !(logits = fx_read_f32(&ref, "logits", &nl)) || !(gl = fx_read_f32(&ref, "greedy_logits", &ng))) {
        CHECK(name, 0, "reference tensors missing");
        goto done;
    }
    snprintf(label, sizeof label, "%s/layout", name);
    if (mx_vision_layout_make(e.vision, ids, T, &in, 1, &lay)) {
        CHECK(label, 0, "%s", mx_errmsg());
        goto done;
    }
    run_mode(name, &e, 512, ids, T, &lay, rows, logits, gids, N, gl);
    run_mode(name, &e, 1, ids, T, &lay, rows, logits, gids, N, gl);

    /* the prompt without its image: the counts must match */
    mx_vision_layout bad;
    snprintf(label, sizeof label, "%s/image tokens without the image refused", name);
    CHECK(label, mx_vision_layout_make(e.vision, ids, T, &in, 0, &bad) && strstr(mx_errmsg(), "image tokens"), "%s", mx_errmsg());
done:
    mx_vision_layout_free(&lay);
    mx_image_input_free(&in);
    mx_image_free(&img);
    mx_st_close(&ref);
done0:
    free(rows), free(emb), free(ids), free(gids), free(logits), free(gl);
    free(rp);
    free(ip);
    mx_pool_free(pool);
    mx_engine_close(&e);
}

static int count_id(const int32_t *ids, int n, int32_t id) {
    int c = 0;
    for (int i = 0; i < n; i++) c += ids[i] == id;
    return c;
}

/* A chat request's image with the model's own markup typed in its text: the
 * template's placeholder becomes the image tokens, the typed "<start_of_image>"
 * and "<end_of_turn>" stay text (only with --allow-special-in-content would
 * they count: then the placeholders outnumber the images). */
static void chat_markup(void) {
    const char *dir = "tests/fixtures/gemma3", *user = "say <start_of_image> and <end_of_turn> ok";
    mx_textmodel tm;
    if (mx_textmodel_open(dir, &tm) || mx_textmodel_set_template(&tm, NULL, "tests/server/vision_template.jinja")) {
        CHECK("chat_markup", 0, "open: %s", mx_errmsg());
        return;
    }
    mx_vlprompt vp = {0};
    mx_pool *pool = mx_pool_new(2);
    char *data;
    size_t len;
    int32_t *ids = NULL;
    int n = 0;
    mx_buf text = {0}, dec = {0};
    int r = mx_read_file("tests/fixtures/gemma3/inputs/image.png", 1 << 24, &data, &len);
    if (!r) {
        r = mx_vlprompt_add(&vp, &tm.e, data, len, 0, "image");
        free(data);
    }
    json_t *ctx = json_pack("{s:[{s:s,s:[{s:s},{s:s,s:s}]}],s:b}", "messages", "role", "user", "content", "type", "image", "type", "text", "text",
                            user, "add_generation_prompt", 1);
    mx_chat_opts co = {.content_as_text = true};
    if (!r) r = mx_vlprompt_chat_ids(&vp, &tm, ctx, &co, &text, &ids, &n);
    CHECK("chat_markup/tokenize", !r, "%s", mx_errmsg());
    if (!r) {
        const mx_image_processor *p = mx_vision_processor(tm.e.vision);
        int32_t img = mx_tok_token_id(tm.tok, p->image_token, strlen(p->image_token)), soi = mx_tok_token_id(tm.tok, "<start_of_image>", 16),
                eot = mx_tok_token_id(tm.tok, "<end_of_turn>", 13);
        int first = -1, nimg = count_id(ids, n, img);
        for (int i = 0; i < n && first < 0; i++)
            if (ids[i] == img) first = i;
        CHECK("chat_markup/image tokens", nimg == vp.in[0].n_tokens && first > 0 && ids[first - 1] == soi && count_id(ids + first, nimg, img) == nimg,
              "%d image tokens (want %d) from %d", nimg, vp.in[0].n_tokens, first);
        CHECK("chat_markup/typed specials stay text", count_id(ids, n, soi) == 1 && count_id(ids, n, eot) == 1, "<start_of_image> x%d, <end_of_turn> x%d",
              count_id(ids, n, soi), count_id(ids, n, eot));
        mx_tok_decode(tm.tok, ids, n, false, &dec);
        CHECK("chat_markup/text round-trips", dec.data && strstr(dec.data, user), "decoded: %s", dec.data ? dec.data : "");
        CHECK("chat_markup/layout", !mx_vlprompt_prepare(&vp, &tm.e, ids, n, pool) && vp.n_rows == vp.in[0].n_tokens, "%s", mx_errmsg());
    }
    free(ids);
    ids = NULL;
    text.len = 0;
    co.content_as_text = false; /* the unsafe mode reads the typed placeholder as one */
    r = mx_vlprompt_chat_ids(&vp, &tm, ctx, &co, &text, &ids, &n);
    CHECK("chat_markup/trusted content counts its placeholder", r && strstr(mx_errmsg(), "2 image placeholders"), "%s", r ? mx_errmsg() : "accepted");
    free(ids);
    json_decref(ctx);
    mx_buf_free(&text);
    mx_buf_free(&dec);
    mx_vlprompt_free(&vp);
    mx_pool_free(pool);
    mx_textmodel_close(&tm);
}

int main(void) {
    chat_markup();
    const char *names[] = {"llava", "llava_next", "paligemma", "idefics3", "gemma3", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v", "smolvlm", "mistral3", "internvl", "aya_vision"};
    for (size_t i = 0; i < MX_ARRAY_LEN(names); i++) one(names[i]);
    TEST_END();
}
