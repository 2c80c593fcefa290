/* Image decoding and resampling against Pillow 9.4 (tests/fixtures/images,
 * made by tools/gen_image_goldens.py): every PNG colour type and depth, JPEG
 * gray/RGB/CMYK/progressive, WebP lossy/lossless/alpha/animated decode to
 * exactly Pillow's convert("RGB"), and composited over white exactly as
 * Pillow's alpha_composite of convert("RGBA"); every convolution filter resizes to
 * exactly Pillow's bytes, up and down. Then hostile inputs: truncations,
 * bit flips, huge declared sizes, garbage: one error line, never a crash. */
#define _GNU_SOURCE
#include "test.h"
#include "base/base.h"
#include "format/safetensors.h"
#include "image/image.h"
#include <stdbool.h>
#include <stdint.h>

#define DIR "tests/fixtures/images/"

static mx_st_file g_gold;

static int first_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (int)i;
    return -1;
}

static void check_decode(const mx_tensor *t, mx_alpha_mode mode) {
    const char *file = strchr(t->name, '/') + 1; /* "rgb/" or "white/" */
    char *path = mx_asprintf(DIR "%s", file), name[160];
    char *data;
    size_t len;
    mx_image im = {0};
    int r = mx_read_file(path, 1 << 20, &data, &len);
    if (!r) {
        r = mx_image_decode_alpha(data, len, 0, path, mode, &im);
        free(data);
    }
    snprintf(name, sizeof name, "decode %s%s", file, mode == MX_ALPHA_WHITE ? " over white" : "");
    if (r) {
        CHECK(name, 0, "%s", mx_errmsg());
    } else if (im.h != t->shape[0] || im.w != t->shape[1]) {
        CHECK(name, 0, "size %dx%d, Pillow %lldx%lld", im.w, im.h, (long long)t->shape[1], (long long)t->shape[0]);
    } else {
        int d = first_diff(im.px, t->data, t->nbytes);
        CHECK(name, d < 0, "byte %d (pixel %d,%d ch %d): %d, Pillow %d", d, d / 3 % im.w, d / 3 / im.w, d % 3, im.px[d],
              t->data[d]);
    }
    mx_image_free(&im);
    free(path);
}

static void check_resizes(void) {
    static const struct { const char *name; int id; } filters[] = {
        {"lanczos", MX_RESAMPLE_LANCZOS}, {"bilinear", MX_RESAMPLE_BILINEAR}, {"bicubic", MX_RESAMPLE_BICUBIC},
        {"box", MX_RESAMPLE_BOX}, {"hamming", MX_RESAMPLE_HAMMING}};
    int n = 0, bad = 0;
    char first_bad[200] = "";
    for (int i = 0; i < g_gold.n_tensors; i++) {
        const mx_tensor *t = &g_gold.tensors[i];
        char src_name[64], fname[32];
        int w, h;
        if (sscanf(t->name, "resize/%63[^/]/%31[^/]/%dx%d", src_name, fname, &w, &h) != 4) continue;
        char key[80];
        snprintf(key, sizeof key, "src/%s", src_name);
        const mx_tensor *s = mx_st_find(&g_gold, key);
        int fid = -1;
        for (size_t k = 0; k < MX_ARRAY_LEN(filters); k++)
            if (!strcmp(filters[k].name, fname)) fid = filters[k].id;
        mx_image src = {(int)s->shape[1], (int)s->shape[0], (uint8_t *)s->data}, out;
        n++;
        if (mx_image_resize(&src, w, h, fid, &out) || out.w != w || out.h != h) {
            if (!bad++) snprintf(first_bad, sizeof first_bad, "%s: %s", t->name, mx_errmsg());
            continue;
        }
        int d = first_diff(out.px, t->data, t->nbytes);
        if (d >= 0 && !bad++)
            snprintf(first_bad, sizeof first_bad, "%s: byte %d is %d, Pillow %d", t->name, d, out.px[d], t->data[d]);
        mx_image_free(&out);
    }
    CHECK("resize: every filter and size equals Pillow", n >= 80 && !bad, "%d of %d differ; first %s", bad, n, first_bad);
    mx_image src = {2, 2, (uint8_t[12]){0}}, out;
    CHECK("resize: NEAREST refused", mx_image_resize(&src, 3, 3, MX_RESAMPLE_NEAREST, &out) && strstr(mx_errmsg(), "NEAREST"),
          "%s", mx_errmsg());
    CHECK("resize: absurd size refused", mx_image_resize(&src, 1 << 20, 1 << 20, MX_RESAMPLE_BICUBIC, &out), "accepted");
}

static void check_crop(void) {
    uint8_t px[2 * 2 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    mx_image in = {2, 2, px}, out;
    int r = mx_image_crop(&in, -1, 1, 3, 2, &out);
    uint8_t want[18] = {0, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK("crop: outside the image reads 0 (Pillow's crop / pad)", !r && !memcmp(out.px, want, 18), "wrong pixels");
    mx_image_free(&out);
}

/* Every prefix of the file and single-bit flips at many offsets: decode must
 * either succeed or leave a one-line error; ASan/UBSan watch the rest. */
static void check_hostile_file(const char *file) {
    char *path = mx_asprintf(DIR "%s", file), name[160];
    char *data;
    size_t len;
    if (mx_read_file(path, 1 << 20, &data, &len)) {
        CHECK("hostile read", 0, "%s", mx_errmsg());
        free(path);
        return;
    }
    int ok_trunc = 1, crashes = 0;
    for (size_t cut = 0; cut < len; cut += 1 + cut / 16) {
        mx_image im;
        if (!mx_image_decode(data, cut, 0, file, &im)) {
            /* a prefix may decode only when what is cut is after the image data */
            mx_image_free(&im);
            if (cut < len / 2) ok_trunc = 0;
        } else if (strchr(mx_errmsg(), '\n') || !strstr(mx_errmsg(), file)) {
            ok_trunc = 0;
        }
    }
    snprintf(name, sizeof name, "hostile %s: truncations are errors", file);
    CHECK(name, ok_trunc, "a prefix shorter than half the file decoded, or an error without the file name: %s", mx_errmsg());
    uint8_t *copy = malloc(len);
    for (size_t off = 0; off < len; off += 1 + len / 97)
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(copy, data, len);
            copy[off] ^= (uint8_t)(1 << bit);
            mx_image im;
            if (!mx_image_decode(copy, len, 0, file, &im)) {
                if (!im.px || im.w <= 0 || im.h <= 0) crashes++;
                mx_image_free(&im);
            } else if (strchr(mx_errmsg(), '\n')) {
                crashes++;
            }
        }
    snprintf(name, sizeof name, "hostile %s: bit flips decode or fail cleanly", file);
    CHECK(name, !crashes, "%d bad results", crashes);
    free(copy);
    free(data);
    free(path);
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return ~c;
}

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Declared sizes far past the bound are refused from the header alone. */
static void check_bombs(void) {
    /* signature, IHDR, then an empty IDAT: libpng reads the header up to the data */
    uint8_t png[8 + 25 + 12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    put32(png + 16, 60000);
    put32(png + 20, 60000);
    png[24] = 8;
    png[25] = 2;
    put32(png + 29, crc32_of(png + 12, 17));
    memcpy(png + 37, "IDAT", 4);
    put32(png + 41, crc32_of(png + 37, 4));
    mx_image im;
    int r = mx_image_decode(png, sizeof png, 0, "bomb.png", &im);
    CHECK("bomb: PNG 60000x60000 refused before decoding", r && strstr(mx_errmsg(), "limit"), "%s", r ? mx_errmsg() : "decoded");
    r = mx_image_decode(png, sizeof png, 1000, "bomb.png", &im);
    CHECK("bomb: the caller's pixel bound applies", r && strstr(mx_errmsg(), "1000 pixels"), "%s", mx_errmsg());
    /* JPEG SOF0 declaring 65000x65000 */
    uint8_t jpg[] = {0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0xfd, 0xe8, 0xfd, 0xe8, 1, 1, 0x11, 0, 0xff, 0xd9};
    r = mx_image_decode(jpg, sizeof jpg, 0, "bomb.jpg", &im);
    CHECK("bomb: JPEG 65000x65000 refused", r && !strchr(mx_errmsg(), '\n'), "%s", r ? mx_errmsg() : "decoded");
    /* a small image under a tight bound */
    r = mx_image_load(DIR "webp_lossy.webp", 100, &im);
    CHECK("bomb: WebP over the bound refused", r && strstr(mx_errmsg(), "limit"), "%s", r ? mx_errmsg() : "decoded");
    r = mx_image_decode("GIF89a....", 10, 0, "x.gif", &im);
    CHECK("unknown format: one clear error", r && strstr(mx_errmsg(), "not a PNG, JPEG or WebP"), "%s", mx_errmsg());
    r = mx_image_decode("", 0, 0, "empty", &im);
    CHECK("empty input: error", r, "decoded");
}

static char *b64(const uint8_t *p, size_t n) {
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 8), *q = o;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = al[v >> 18];
        *q++ = al[v >> 12 & 63];
        *q++ = i + 1 < n ? al[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? al[v & 63] : '=';
    }
    *q = 0;
    return o;
}

/* Request image sources: data URLs, local files only under the allowed
 * folder (symlinks and ".." resolved first), remote URLs refused. */
static void check_sources(void) {
    char *png, *got;
    size_t n, gl;
    if (mx_read_file(DIR "png_rgb8.png", 1 << 20, &png, &n)) return;
    char *enc = b64((const uint8_t *)png, n), *url = mx_asprintf("data:image/png;base64,%s", enc);
    int r = mx_image_source_read(url, NULL, &got, &gl);
    CHECK("source: data URL decodes to the file's bytes", !r && gl == n && !memcmp(got, png, n), "%s", r ? mx_errmsg() : "bytes differ");
    if (!r) free(got);
    free(url);
    url = mx_asprintf("data:image/png,%s", enc);
    CHECK("source: a data URL without base64 is refused", mx_image_source_read(url, NULL, &got, &gl), "accepted");
    free(url);
    CHECK("source: bad base64 refused", mx_image_source_read("data:image/png;base64,ab$cd", NULL, &got, &gl), "accepted");
    CHECK("source: remote URLs refused", mx_image_source_read("https://example.com/a.png", NULL, &got, &gl) && strstr(mx_errmsg(), "not fetched"),
          "%s", mx_errmsg());
    char dir[] = "/tmp/mx_imgsrc_XXXXXX";
    if (mkdtemp(dir)) {
        char *allowed = mx_asprintf("%s/allowed", dir), *inside = mx_asprintf("%s/a.png", allowed), *outside = mx_asprintf("%s/b.png", dir),
             *link = mx_asprintf("%s/link.png", allowed), *dotdot = mx_asprintf("file://%s/../b.png", allowed), cmd[512];
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cp " DIR "png_rgb8.png %s && cp " DIR "png_rgb8.png %s && ln -s %s %s", allowed, inside,
                 outside, outside, link);
        if (!system(cmd)) {
            CHECK("source: local file without an allowed folder refused", mx_image_source_read(inside, NULL, &got, &gl), "accepted");
            r = mx_image_source_read(inside, allowed, &got, &gl);
            CHECK("source: local file under the allowed folder reads", !r && gl == n, "%s", mx_errmsg());
            if (!r) free(got);
            CHECK("source: '..' out of the allowed folder refused", mx_image_source_read(dotdot, allowed, &got, &gl), "accepted");
            CHECK("source: a symlink out of the allowed folder refused", mx_image_source_read(link, allowed, &got, &gl) &&
                  strstr(mx_errmsg(), "outside"), "%s", mx_errmsg());
        }
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) {}
        free(allowed), free(inside), free(outside), free(link), free(dotdot);
    }
    free(enc);
    free(png);
}

int main(void) {
    if (mx_st_open(DIR "golden.safetensors", &g_gold)) {
        CHECK("open goldens", 0, "%s", mx_errmsg());
        TEST_END();
    }
    int nd = 0;
    for (int i = 0; i < g_gold.n_tensors; i++) {
        const mx_tensor *t = &g_gold.tensors[i];
        bool rgb = !strncmp(t->name, "rgb/", 4), white = !strncmp(t->name, "white/", 6);
        if (rgb || white) check_decode(t, white ? MX_ALPHA_WHITE : MX_ALPHA_DROP);
        nd += rgb;
    }
    CHECK("decode goldens present", nd >= 30, "%d", nd);
    check_resizes();
    check_crop();
    static const char *hostile[] = {"png_rgb8.png", "png_palette4.png", "png_gray16_interlaced.png", "jpeg_rgb420.jpg",
                                    "jpeg_progressive.jpg", "jpeg_cmyk.jpg", "webp_lossy.webp", "webp_lossless_alpha.webp",
                                    "webp_animated.webp"};
    for (size_t i = 0; i < MX_ARRAY_LEN(hostile); i++) check_hostile_file(hostile[i]);
    check_bombs();
    check_sources();
    mx_st_close(&g_gold);
    TEST_END();
}
