/* Image preprocessing of the vision fixtures against Hugging Face's
 * processors (tests/fixtures/<name>/reference.safetensors): the uint8 resize
 * bit-exact (resized_image, LLaVA-NeXT's resized_base_image), pixel_values
 * within 1e-5, the grid / tile / size metadata, the number of image tokens
 * the placeholder expands to, and the expanded prompt's image tokens where
 * the reference input_ids hold them. Then absurd processor configs: one
 * clear error each. */
#define _GNU_SOURCE
#include "test.h"
#include "fixtures.h"
#include "image/processor.h"
#include "vision/mrope.h"
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define FX "tests/fixtures/"

static int image_token_id(const char *dir) {
    char *p = mx_path_join(dir, "config.json");
    json_t *c = mx_json_load_file(p, 1 << 20);
    free(p);
    int id = -1;
    const char *keys[] = {"image_token_id", "image_token_index"};
    for (int i = 0; c && i < 2 && id < 0; i++) {
        json_t *v = json_object_get(c, keys[i]);
        if (json_is_integer(v)) id = (int)json_integer_value(v);
    }
    json_decref(c);
    return id;
}

static void check_u8(const char *label, const mx_image *im, const mx_st_file *ref, const char *name) {
    const mx_tensor *t = mx_st_find(ref, name);
    if (!t) return;
    char n[128];
    snprintf(n, sizeof n, "%s: %s bit-exact", label, name);
    if (!im->px || t->shape[0] != im->h || t->shape[1] != im->w) {
        CHECK(n, 0, "size %dx%d, reference %lldx%lld", im->w, im->h, (long long)t->shape[1], (long long)t->shape[0]);
        return;
    }
    int bad = -1;
    for (size_t i = 0; i < t->nbytes && bad < 0; i++)
        if (im->px[i] != t->data[i]) bad = (int)i;
    CHECK(n, bad < 0, "byte %d: %d, reference %d", bad, bad >= 0 ? im->px[bad] : 0, bad >= 0 ? t->data[bad] : 0);
}

/* M-RoPE positions (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V) from the reference input_ids and our grid. */
static void check_mrope(const char *name, const char *dir, const mx_st_file *ref, const mx_image_input *in) {
    int32_t *ids, *want;
    int T, n3;
    if (fx_read_i64(ref, "input_ids", &ids, &T)) return;
    if (fx_read_i64(ref, "position_ids", &want, &n3)) {
        free(ids);
        return;
    }
    char *p = mx_path_join(dir, "config.json");
    json_t *c = mx_json_load_file(p, 1 << 20);
    free(p);
    int32_t tok = (int32_t)json_integer_value(json_object_get(c, "image_token_id"));
    json_t *st = json_object_get(c, "vision_start_token_id");
    int32_t start = (int32_t)json_integer_value(st ? st : json_object_get(c, "image_start_token_id"));
    json_t *m = json_object_get(json_object_get(c, "vision_config"), "spatial_merge_size");
    int merge = m ? (int)json_integer_value(m) : 2;
    json_decref(c);
    int32_t *pos = malloc(sizeof(int32_t) * 3 * (size_t)T), delta = 0;
    mx_grid_thw g = {in->grid_t, in->grid_h, in->grid_w};
    int r = mx_mrope_positions(ids, T, tok, start, &g, 1, merge, pos, &delta);
    int bad = -1;
    for (int i = 0; !r && i < 3 * T && bad < 0; i++)
        if (pos[i] != want[i]) bad = i;
    char label[160];
    snprintf(label, sizeof label, "%s: M-RoPE position_ids", name);
    CHECK(label, !r && n3 == 3 * T && bad < 0, "%s; first difference at %d", r ? mx_errmsg() : "", bad);
    free(pos);
    free(ids);
    free(want);
}

static void one(const char *name) {
    char dir[256], label[160];
    snprintf(dir, sizeof dir, FX "%s", name);
    mx_image_processor p;
    mx_st_file ref;
    char *rp = mx_path_join(dir, "reference.safetensors");
    int r = mx_st_open(rp, &ref);
    free(rp);
    if (r) {
        CHECK(name, 0, "%s", mx_errmsg());
        return;
    }
    snprintf(label, sizeof label, "%s: processor loads", name);
    if (mx_image_processor_load(dir, &p)) {
        CHECK(label, 0, "%s", mx_errmsg());
        mx_st_close(&ref);
        return;
    }
    char *ip = mx_path_join(dir, "inputs/image.png"), *data;
    size_t len;
    mx_image img = {0};
    mx_image_input in = {0};
    r = mx_read_file(ip, 1 << 24, &data, &len);
    if (!r) {
        r = mx_image_processor_decode(&p, data, len, 0, ip, &img);
        free(data);
    }
    if (!r) r = mx_image_preprocess(&p, &img, &in);
    free(ip);
    snprintf(label, sizeof label, "%s: preprocess", name);
    CHECK(label, !r, "%s", mx_errmsg());
    if (r) goto done;
    check_u8(name, &in.resized, &ref, "resized_image");
    check_u8(name, &in.resized_base, &ref, "resized_base_image");
    check_u8(name, &in.resized_base, &ref, "resized_thumbnail"); /* GOT-OCR2's whole-image view */

    size_t n;
    float *pv = fx_read_f32(&ref, "pixel_values", &n);
    snprintf(label, sizeof label, "%s: pixel_values within 1e-5", name);
    if (!pv || n != in.n_values) CHECK(label, 0, "%zu values, reference %zu", in.n_values, pv ? n : 0);
    else CHECK(label, t_maxdiff(in.pixels, pv, n) <= 1e-5f, "max diff %g", t_maxdiff(in.pixels, pv, n));
    free(pv);

    int32_t *v;
    int nv;
    if (!fx_read_i64(&ref, "image_grid_thw", &v, &nv)) {
        snprintf(label, sizeof label, "%s: image_grid_thw", name);
        CHECK(label, nv == 3 && v[0] == in.grid_t && v[1] == in.grid_h && v[2] == in.grid_w, "%d %d %d", in.grid_t, in.grid_h, in.grid_w);
        free(v);
        check_mrope(name, dir, &ref, &in);
    }
    if (!fx_read_i64(&ref, "image_sizes", &v, &nv)) { /* Pixtral's are the resized image's */
        bool resized = !strcmp(name, "mistral3");
        int h = resized ? in.h : in.orig_h, w = resized ? in.w : in.orig_w;
        snprintf(label, sizeof label, "%s: image_sizes", name);
        CHECK(label, nv == 2 && v[0] == h && v[1] == w, "%d %d", h, w);
        free(v);
    }
    if (!fx_read_i64(&ref, "pixel_attention_mask", &v, &nv)) { /* all ones: every view is whole */
        snprintf(label, sizeof label, "%s: views", name);
        CHECK(label, nv == in.n_views * in.h * in.w, "%d views of %dx%d, mask %d", in.n_views, in.w, in.h, nv);
        free(v);
    }

    /* the placeholder expands to as many image tokens as the reference holds */
    int tok = image_token_id(dir), count = 0;
    if (!fx_read_i64(&ref, "input_ids", &v, &nv)) {
        for (int i = 0; i < nv; i++) count += v[i] == tok;
        free(v);
    }
    snprintf(label, sizeof label, "%s: image tokens", name);
    CHECK(label, tok >= 0 && count == in.n_tokens, "processor %d, reference input_ids %d (id %d)", in.n_tokens, count, tok);

    /* the expanded prompt holds exactly those image tokens in its text */
    char *rj = mx_path_join(dir, "reference.json");
    json_t *meta = mx_json_load_file(rj, 1 << 20);
    free(rj);
    const char *prompt = meta ? json_string_value(json_object_get(meta, "prompt_text")) : NULL;
    char *text = NULL;
    bool add_bos;
    snprintf(label, sizeof label, "%s: prompt expansion", name);
    if (!prompt || mx_image_expand_prompt(&p, prompt, &in, 1, "<bos>", &text, &add_bos)) {
        CHECK(label, 0, "%s", prompt ? mx_errmsg() : "no prompt_text");
    } else {
        int k = 0;
        for (const char *s = strstr(text, p.image_token); s; s = strstr(s + strlen(p.image_token), p.image_token)) k++;
        CHECK(label, k == count, "%d image tokens in the text, reference %d", k, count);
    }
    free(text);
    json_decref(meta);
done:
    mx_image_input_free(&in);
    mx_image_free(&img);
    mx_st_close(&ref);
}

/* Each case: the fixture's preprocessor_config.json with one value replaced. */
static void bad_config(const char *fixture, const char *key, const char *value, const char *expect) {
    char tmpl[] = "/tmp/mx_vision_XXXXXX", cmd[1024], label[200];
    if (!mkdtemp(tmpl)) return;
    snprintf(cmd, sizeof cmd,
             "cp " FX "%s/*.json %s/ && python3 -c \"import json,sys; p='%s/preprocessor_config.json'; c=json.load(open(p)); "
             "c['%s']=json.loads(sys.argv[1]); json.dump(c,open(p,'w'))\" '%s'",
             fixture, tmpl, tmpl, key, value);
    mx_image_processor p;
    int r = system(cmd) == 0 ? mx_image_processor_load(tmpl, &p) : 0;
    snprintf(label, sizeof label, "bad config: %s %s=%s refused", fixture, key, value);
    CHECK(label, r && strstr(mx_errmsg(), expect) && !strchr(mx_errmsg(), '\n'), "%s", r ? mx_errmsg() : "accepted");
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    if (system(cmd)) {}
}

int main(void) {
    const char *names[] = {"qwen2_vl", "llava", "llava_next", "paligemma", "idefics3", "gemma3", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "glm4v",
                           "smolvlm", "mistral3", "internvl", "aya_vision"};
    for (size_t i = 0; i < MX_ARRAY_LEN(names); i++) one(names[i]);

    bad_config("llava", "size", "{\"shortest_edge\": 100000000}", "shortest_edge");
    bad_config("llava", "crop_size", "-3", "crop_size");
    bad_config("llava", "image_std", "[0.5, 0, 0.5]", "image_std");
    bad_config("llava", "image_mean", "\"x\"", "image_mean");
    bad_config("llava", "resample", "0", "NEAREST");
    bad_config("llava", "image_processor_type", "\"MadeUpImageProcessor\"", "not supported");
    bad_config("qwen2_vl", "max_pixels", "1e30", "max_pixels");
    bad_config("qwen2_vl", "merge_size", "0", "merge_size");
    bad_config("qwen2_vl", "min_pixels", "2000000", "above max_pixels");
    bad_config("llava_next", "image_grid_pinpoints", "[[1, 2, 3]]", "image_grid_pinpoints");
    bad_config("llava_next", "image_grid_pinpoints", "[[100000, 10]]", "image_grid_pinpoints");
    bad_config("idefics3", "max_image_size", "{\"longest_edge\": 1000000}", "max_image_size");
    bad_config("gemma3", "do_pan_and_scan", "true", "pan-and-scan");
    bad_config("mistral3", "size", "{\"longest_edge\": 100000}", "longest_edge");
    bad_config("mistral3", "patch_size", "{\"height\": 0}", "patch_size");
    bad_config("internvl", "max_patches", "100000", "max_patches");
    bad_config("internvl", "min_patches", "9", "above max_patches");
    bad_config("aya_vision", "size", "{\"height\": 0, \"width\": 56}", "height");

    /* an image the smart resize refuses, and a count mismatch in the prompt */
    mx_image_processor p;
    if (!mx_image_processor_load(FX "qwen2_vl", &p)) {
        uint8_t px[10 * 300 * 3] = {0};
        mx_image tiny = {300, 10, px};
        mx_image_input in;
        int r = mx_image_preprocess(&p, &tiny, &in);
        CHECK("qwen2_vl: a 300x10 image is refused (sides below 28)", r && strstr(mx_errmsg(), "at least 28"), "%s", mx_errmsg());
        mx_image_input fake = {.n_tokens = 4};
        char *out;
        bool bos;
        r = mx_image_expand_prompt(&p, "no placeholder here", &fake, 1, NULL, &out, &bos);
        CHECK("prompt without a placeholder for its image: error", r && strstr(mx_errmsg(), "0 image placeholders"), "%s", mx_errmsg());
    }
    /* GLM-4V's smart resize (values from upstream's smart_resize in Python):
     * a small side is scaled up instead of refused, and the image counts as
     * temporal_patch_size frames against size.longest_edge */
    if (!mx_image_processor_load(FX "glm4v", &p)) {
        const int cases[][4] = {{300, 10, 840, 28}, {1000, 800, 196, 140}, {20, 30, 28, 56}, {151, 109, 140, 112}};
        for (size_t i = 0; i < MX_ARRAY_LEN(cases); i++) {
            int w = cases[i][0], h = cases[i][1];
            uint8_t *px = calloc((size_t)w * h * 3, 1);
            mx_image im = {w, h, px};
            mx_image_input in = {0};
            int r = px ? mx_image_preprocess(&p, &im, &in) : MX_ERR;
            char label[128];
            snprintf(label, sizeof label, "glm4v: smart resize %dx%d -> %dx%d", w, h, cases[i][2], cases[i][3]);
            CHECK(label, !r && in.resized.w == cases[i][2] && in.resized.h == cases[i][3] && in.grid_w == cases[i][2] / 14 &&
                             in.n_tokens == cases[i][2] * cases[i][3] / (28 * 28),
                  "%s: %dx%d, %d tokens", r ? mx_errmsg() : "", in.resized.w, in.resized.h, in.n_tokens);
            mx_image_input_free(&in);
            free(px);
        }
    }
    TEST_END();
}
