/* The EXIF Orientation tag (0x0112) of a JPEG, PNG or WebP file, read as
 * Pillow 9.4 reads it for ImageOps.exif_transpose (which transformers'
 * load_image applies to every image):
 *  - JPEG: the first APP1 segment starting "Exif\0\0" before the first SOS
 *    (JpegImagePlugin keeps the first one);
 *  - PNG: the first eXIf chunk before IEND, its bytes as they are;
 *  - WebP: the EXIF chunk of an extended (VP8X) file, a leading "Exif\0\0"
 *    skipped (Image.Exif.load strips it).
 * The block is a TIFF header (II or MM; Pillow's four accepted prefixes) and
 * IFD0. Pillow reads the IFD entry by entry and stops at the first short read,
 * keeping the entries it read; an entry whose value does not fit in the data
 * is skipped; a later duplicate replaces an earlier one. The orientation is
 * used when its entry holds one number equal to 2..8 (Pillow looks the value
 * up in a dict, so 6.0 and 12/2 select a method too; BYTE and UNDEFINED give
 * bytes and several values a tuple, which select none).
 * Everything is bounds-checked against the file: a malformed block yields 1
 * (nothing to do), never an error. */
#include "image_internal.h"
#include <string.h>

static uint32_t rd(const uint8_t *p, int n, bool be) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint32_t)p[be ? i : n - 1 - i] << (8 * (n - 1 - i));
    return v;
}

static int tiff_orientation(const uint8_t *t, size_t n) {
    if (n < 8) return 1;
    bool be;
    if (!memcmp(t, "MM\x00\x2a", 4) || !memcmp(t, "MM\x2a\x00", 4)) be = true;
    else if (!memcmp(t, "II\x2a\x00", 4) || !memcmp(t, "II\x00\x2a", 4)) be = false;
    else return 1;
    uint64_t off = rd(t + 4, 4, be);
    if (off + 2 > n) return 1;
    uint32_t count = rd(t + off, 2, be);
    int orient = 1;
    off += 2;
    for (uint32_t i = 0; i < count && off + 12 <= n; i++, off += 12) {
        const uint8_t *e = t + off;
        uint32_t tag = rd(e, 2, be), typ = rd(e + 2, 2, be), cnt = rd(e + 4, 4, be);
        if (tag != 0x0112) continue;
        /* Pillow 9.4's types and sizes; an unknown type is skipped */
        static const uint8_t units[14] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4};
        if (typ == 0 || typ >= 14) continue;
        uint64_t size = (uint64_t)cnt * units[typ];
        const uint8_t *v = e + 8;
        if (size > 4) {
            uint64_t at = rd(e + 8, 4, be);
            if (at + size > n) continue; /* Pillow: the value is skipped, an earlier one stays */
            v = t + at;
        }
        if (size == 0) continue;         /* Pillow: an empty value is skipped */
        /* BYTE, UNDEFINED (bytes), ASCII (str) and several values (a tuple) match no method */
        orient = 0;
        if (cnt != 1 || typ == 1 || typ == 2 || typ == 7) continue;
        double val;
        switch (typ) {
        case 3: val = rd(v, 2, be); break;
        case 4: case 13: val = rd(v, 4, be); break;
        case 6: val = (int8_t)v[0]; break;
        case 8: val = (int16_t)rd(v, 2, be); break;
        case 9: val = (int32_t)rd(v, 4, be); break;
        case 5: case 10: { /* IFDRational compares equal to the integer it reduces to */
            uint32_t num = rd(v, 4, be), den = rd(v + 4, 4, be);
            if (!den) continue;
            val = typ == 5 ? (double)num / den : (double)(int32_t)num / (int32_t)den;
            break;
        }
        case 11: {
            uint32_t b = rd(v, 4, be);
            float f;
            memcpy(&f, &b, 4);
            val = f;
            break;
        }
        default: { /* 12: DOUBLE */
            uint64_t b = (uint64_t)rd(v, 4, be) << 32 | rd(v + 4, 4, be);
            if (!be) b = (uint64_t)rd(v + 4, 4, be) << 32 | rd(v, 4, be);
            memcpy(&val, &b, 8);
        }
        }
        if (val >= 1 && val <= 8 && val == (int)val) orient = (int)val;
    }
    return orient >= 1 ? orient : 1;
}

static int jpeg_orientation(const uint8_t *p, size_t n) {
    size_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xff) return 1;
        uint8_t m = p[i + 1];
        if (m == 0xff) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0xd8 || (m >= 0xd0 && m <= 0xd7) || m == 0x01) {
            i += 2;
            continue;
        }
        if (m == 0xda || m == 0xd9) return 1; /* image data or the end: no EXIF before it */
        size_t seg = (size_t)p[i + 2] << 8 | p[i + 3];
        if (seg < 2 || i + 2 + seg > n) return 1;
        const uint8_t *s = p + i + 4;
        size_t sn = seg - 2;
        if (m == 0xe1 && sn >= 6 && !memcmp(s, "Exif\0\0", 6)) return tiff_orientation(s + 6, sn - 6);
        i += 2 + seg;
    }
    return 1;
}

static int png_orientation(const uint8_t *p, size_t n) {
    size_t i = 8;
    while (i + 12 <= n) {
        size_t len = (size_t)p[i] << 24 | (size_t)p[i + 1] << 16 | (size_t)p[i + 2] << 8 | p[i + 3];
        const uint8_t *type = p + i + 4;
        if (len > n - i - 12) return 1;
        if (!memcmp(type, "eXIf", 4)) return tiff_orientation(p + i + 8, len);
        if (!memcmp(type, "IEND", 4)) return 1;
        i += 12 + len;
    }
    return 1;
}

static int webp_orientation(const uint8_t *p, size_t n) {
    if (n < 20 || memcmp(p + 12, "VP8X", 4)) return 1; /* a simple file carries no metadata */
    size_t i = 12;
    while (i + 8 <= n) {
        size_t len = (size_t)p[i + 4] | (size_t)p[i + 5] << 8 | (size_t)p[i + 6] << 16 | (size_t)p[i + 7] << 24;
        if (len > n - i - 8) return 1;
        if (!memcmp(p + i, "EXIF", 4)) {
            const uint8_t *s = p + i + 8;
            if (len >= 6 && !memcmp(s, "Exif\0\0", 6)) s += 6, len -= 6;
            return tiff_orientation(s, len);
        }
        i += 8 + len + (len & 1);
    }
    return 1;
}

int mx_img_exif_orientation(const uint8_t *data, size_t len) {
    if (len >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) return png_orientation(data, len);
    if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return jpeg_orientation(data, len);
    if (len >= 12 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4)) return webp_orientation(data, len);
    return 1;
}
