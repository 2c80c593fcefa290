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

/* EXIF orientation, as transformers' load_image (ImageOps.exif_transpose):
 * an APP1 "Exif" segment (or PNG eXIf / WebP EXIF chunk) built around the
 * 23x17 fixtures. Expected: the plain decode transposed (5..8) and then
 * mirrored as Pillow's 8 methods, written here as (transpose, flip x, flip y)
 * and checked pixel for pixel. Malformed blocks are ignored as Pillow ignores them. */
typedef struct { uint16_t tag, type; uint32_t count, value; } exif_entry;

static void put_u(uint8_t *p, uint32_t v, int n, bool be) {
    for (int i = 0; i < n; i++) p[be ? n - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

/* a TIFF block: header, IFD0 at `ifd` with `declared` entries of which `n` are
 * written; a value of a SHORT/SSHORT count-1 entry is left-justified as TIFF says */
static size_t make_tiff(uint8_t *t, bool be, uint32_t ifd, uint16_t declared, const exif_entry *e, int n) {
    memcpy(t, be ? "MM\x00\x2a" : "II\x2a\x00", 4);
    put_u(t + 4, ifd, 4, be);
    if (ifd > 64) return 8;
    put_u(t + ifd, declared, 2, be);
    uint8_t *q = t + ifd + 2;
    for (int i = 0; i < n; i++, q += 12) {
        put_u(q, e[i].tag, 2, be);
        put_u(q + 2, e[i].type, 2, be);
        put_u(q + 4, e[i].count, 4, be);
        memset(q + 8, 0, 4);
        if ((e[i].type == 3 || e[i].type == 8) && e[i].count == 1) put_u(q + 8, e[i].value, 2, be);
        else put_u(q + 8, e[i].value, 4, be);
    }
    return (size_t)(q - t);
}

/* the JPEG fixture with an APP1 segment (prefix + TIFF block) right after SOI */
static uint8_t *jpeg_with_app1(const char *jpg, size_t jl, const char *prefix, const uint8_t *tiff, size_t tl, size_t *out_len) {
    size_t pl = strlen(prefix) + 2, seg = 2 + pl + tl; /* "Exif\0\0": the prefix and two NULs */
    uint8_t *o = malloc(jl + 2 + seg);
    memcpy(o, jpg, 2);
    o[2] = 0xff, o[3] = 0xe1, o[4] = (uint8_t)(seg >> 8), o[5] = (uint8_t)seg;
    memcpy(o + 6, prefix, pl - 2);
    o[6 + pl - 2] = o[6 + pl - 1] = 0;
    memcpy(o + 6 + pl, tiff, tl);
    memcpy(o + 4 + seg, jpg + 2, jl - 2);
    *out_len = jl + 2 + seg;
    return o;
}

/* does `got` equal `ref` under orientation o (1..8)? */
static bool oriented_as(const mx_image *got, const mx_image *ref, int o) {
    static const bool tr[9] = {0, 0, 0, 0, 0, 1, 1, 1, 1}, fx[9] = {0, 0, 1, 1, 0, 0, 1, 1, 0},
                      fy[9] = {0, 0, 0, 1, 1, 0, 0, 1, 1};
    int w = tr[o] ? ref->h : ref->w, h = tr[o] ? ref->w : ref->h;
    if (got->w != w || got->h != h) return false;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int tx = fx[o] ? w - 1 - x : x, ty = fy[o] ? h - 1 - y : y; /* in the transposed image */
            int sx = tr[o] ? ty : tx, sy = tr[o] ? tx : ty;
            if (memcmp(got->px + 3 * ((size_t)y * w + x), ref->px + 3 * ((size_t)sy * ref->w + sx), 3)) return false;
        }
    return true;
}

static void check_exif_case(const char *name, const char *jpg, size_t jl, const mx_image *ref, const char *prefix,
                            const uint8_t *tiff, size_t tl, int want) {
    size_t n;
    uint8_t *f = jpeg_with_app1(jpg, jl, prefix, tiff, tl, &n);
    mx_image im = {0};
    int r = mx_image_decode(f, n, 0, name, &im);
    CHECK(name, !r && oriented_as(&im, ref, want), "%s", r ? mx_errmsg() : "wrong pixel layout");
    mx_image_free(&im);
    free(f);
}

static void check_exif(void) {
    char *jpg;
    size_t jl;
    mx_image ref = {0};
    if (mx_read_file(DIR "jpeg_rgb420.jpg", 1 << 20, &jpg, &jl) || mx_image_decode(jpg, jl, 0, "ref", &ref)) {
        CHECK("exif: fixture", 0, "%s", mx_errmsg());
        return;
    }
    uint8_t t[256];
    char name[128];
    for (int o = 1; o <= 8; o++)
        for (int be = 0; be < 2; be++) {
            exif_entry e[] = {{0x010f, 2, 4, 0x00414141}, {0x0112, 3, 1, (uint32_t)o}, {0x8769, 4, 1, 0}};
            size_t tl = make_tiff(t, be, 8, 3, e, 3);
            snprintf(name, sizeof name, "exif: orientation %d (%s) decodes upright", o, be ? "MM" : "II");
            check_exif_case(name, jpg, jl, &ref, "Exif", t, tl, o);
        }
    /* a LONG holding 6 selects a method as in Pillow; out-of-range values none */
    exif_entry lng = {0x0112, 4, 1, 6}, nine = {0x0112, 3, 1, 9}, zero = {0x0112, 3, 1, 0};
    check_exif_case("exif: orientation as a LONG", jpg, jl, &ref, "Exif", t, make_tiff(t, false, 8, 1, &lng, 1), 6);
    check_exif_case("exif: orientation 9 ignored", jpg, jl, &ref, "Exif", t, make_tiff(t, true, 8, 1, &nine, 1), 1);
    check_exif_case("exif: orientation 0 ignored", jpg, jl, &ref, "Exif", t, make_tiff(t, true, 8, 1, &zero, 1), 1);
    /* two values (a tuple in Pillow) and BYTE (bytes in Pillow) select nothing */
    exif_entry two = {0x0112, 3, 2, 0x00060006}, byte = {0x0112, 1, 1, 0x06000000};
    check_exif_case("exif: two SHORT values ignored", jpg, jl, &ref, "Exif", t, make_tiff(t, true, 8, 1, &two, 1), 1);
    check_exif_case("exif: BYTE orientation ignored", jpg, jl, &ref, "Exif", t, make_tiff(t, true, 8, 1, &byte, 1), 1);
    /* a later duplicate replaces an earlier one */
    exif_entry dup[] = {{0x0112, 3, 1, 3}, {0x0112, 3, 1, 8}};
    check_exif_case("exif: a later duplicate wins", jpg, jl, &ref, "Exif", t, make_tiff(t, false, 8, 2, dup, 2), 8);
    /* malformed: nothing to do, no error */
    exif_entry six = {0x0112, 3, 1, 6};
    check_exif_case("exif: IFD offset past the end ignored", jpg, jl, &ref, "Exif", t, make_tiff(t, false, 0xfffffff0u, 1, &six, 1), 1);
    check_exif_case("exif: IFD offset 2^32-1 ignored", jpg, jl, &ref, "Exif", t, make_tiff(t, true, 0xffffffffu, 1, &six, 1), 1);
    exif_entry huge[] = {{0x0112, 3, 0x40000000u, 0xfffffff0u}}, huge_then[] = {{0x0112, 3, 1, 6}, {0x0112, 3, 0xffffffffu, 0xfffffffau}};
    check_exif_case("exif: huge count past the end ignored", jpg, jl, &ref, "Exif", t, make_tiff(t, true, 8, 1, huge, 1), 1);
    check_exif_case("exif: a skipped entry keeps the earlier value (Pillow)", jpg, jl, &ref, "Exif", t,
                    make_tiff(t, false, 8, 2, huge_then, 2), 6);
    /* IFD declares 200 entries, holds 1: Pillow keeps what it read before the short read */
    size_t tl = make_tiff(t, false, 8, 200, &six, 1);
    check_exif_case("exif: IFD cut short keeps the entries read", jpg, jl, &ref, "Exif", t, tl, 6);
    check_exif_case("exif: entry cut in the middle ignored", jpg, jl, &ref, "Exif", t, tl - 5, 1);
    check_exif_case("exif: only the TIFF header ignored", jpg, jl, &ref, "Exif", t, 8, 1);
    check_exif_case("exif: 5-byte block ignored", jpg, jl, &ref, "Exif", t, 5, 1);
    tl = make_tiff(t, false, 8, 1, &six, 1);
    t[2] = 0x2b;
    check_exif_case("exif: not a TIFF header ignored", jpg, jl, &ref, "Exif", t, tl, 1);
    tl = make_tiff(t, false, 8, 1, &six, 1);
    check_exif_case("exif: APP1 without the Exif prefix ignored", jpg, jl, &ref, "Exix", t, tl, 1);
    /* only the first Exif APP1 counts (JpegImagePlugin) */
    size_t n1, n2;
    uint8_t *f1 = jpeg_with_app1(jpg, jl, "Exif", t, tl, &n1);
    exif_entry three = {0x0112, 3, 1, 3};
    size_t tl3 = make_tiff(t, false, 8, 1, &three, 1);
    uint8_t *f2 = jpeg_with_app1((const char *)f1, n1, "Exif", t, tl3, &n2);
    mx_image im = {0};
    int r = mx_image_decode(f2, n2, 0, "two app1", &im);
    CHECK("exif: the first Exif APP1 counts", !r && oriented_as(&im, &ref, 3), "%s", r ? mx_errmsg() : "wrong layout");
    mx_image_free(&im);
    free(f1);
    free(f2);

    /* PNG eXIf after IHDR */
    char *png = NULL;
    size_t pl;
    mx_image pref = {0};
    if (!mx_read_file(DIR "png_rgb8.png", 1 << 20, &png, &pl) && !mx_image_decode(png, pl, 0, "ref", &pref)) {
        tl = make_tiff(t, true, 8, 1, &six, 1);
        size_t at = 8 + 25, n = pl + 12 + tl;
        uint8_t *f = malloc(n);
        memcpy(f, png, at);
        put32(f + at, (uint32_t)tl);
        memcpy(f + at + 4, "eXIf", 4);
        memcpy(f + at + 8, t, tl);
        put32(f + at + 8 + tl, crc32_of(f + at + 4, 4 + tl));
        memcpy(f + at + 12 + tl, png + at, pl - at);
        r = mx_image_decode(f, n, 0, "exif.png", &im);
        CHECK("exif: PNG eXIf orientation 6", !r && oriented_as(&im, &pref, 6), "%s", r ? mx_errmsg() : "wrong layout");
        mx_image_free(&im);
        free(f);
    }
    mx_image_free(&pref);
    free(png);

    /* WebP: the lossy fixture in an extended file with an EXIF chunk */
    char *wb = NULL;
    size_t wl;
    mx_image wref = {0};
    if (!mx_read_file(DIR "webp_lossy.webp", 1 << 20, &wb, &wl) && !mx_image_decode(wb, wl, 0, "ref", &wref)) {
        tl = make_tiff(t, false, 8, 1, &(exif_entry){0x0112, 3, 1, 8}, 1);
        size_t body = wl - 12, el = 6 + tl, n = 12 + 18 + body + 8 + el + (el & 1);
        uint8_t *f = calloc(1, n), *q = f;
        memcpy(q, "RIFF", 4), put_u(q + 4, (uint32_t)(n - 8), 4, false), memcpy(q + 8, "WEBP", 4), q += 12;
        memcpy(q, "VP8X", 4), put_u(q + 4, 10, 4, false), q[8] = 0x08;
        put_u(q + 12, (uint32_t)wref.w - 1, 3, false), put_u(q + 15, (uint32_t)wref.h - 1, 3, false), q += 18;
        memcpy(q, wb + 12, body), q += body;
        memcpy(q, "EXIF", 4), put_u(q + 4, (uint32_t)el, 4, false), memcpy(q + 8, "Exif\0\0", 6), memcpy(q + 14, t, tl);
        r = mx_image_decode(f, n, 0, "exif.webp", &im);
        CHECK("exif: WebP EXIF orientation 8", !r && oriented_as(&im, &wref, 8), "%s", r ? mx_errmsg() : "wrong layout");
        mx_image_free(&im);
        free(f);
    }
    mx_image_free(&wref);
    free(wb);
    mx_image_free(&ref);
    free(jpg);
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
    check_exif();
    check_sources();
    mx_st_close(&g_gold);
    TEST_END();
}
