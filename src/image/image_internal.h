/* Shared by the decoders in src/image/: each one checks the declared size
 * with mx_img_check_size before it allocates, and returns RGB in *out plus, when
 * the image carries transparency, the alpha plane Pillow's convert("RGBA")
 * would give (NULL for opaque images). */
#ifndef MX_IMAGE_INTERNAL_H
#define MX_IMAGE_INTERNAL_H
#include "image.h"
#include <stdbool.h>

int mx_img_check_size(const char *what, const char *fmt, int64_t w, int64_t h, int64_t max_pixels);
int mx_img_decode_png(const uint8_t *data, size_t len, int64_t max_pixels, const char *what, mx_image *out, uint8_t **alpha);
int mx_img_decode_jpeg(const uint8_t *data, size_t len, int64_t max_pixels, const char *what, mx_image *out, uint8_t **alpha);
int mx_img_decode_webp(const uint8_t *data, size_t len, int64_t max_pixels, const char *what, mx_image *out, uint8_t **alpha);
/* The EXIF Orientation (1..8) of a PNG, JPEG or WebP file as Pillow reads it
 * (exif.c); 1 when there is none or the block is malformed. */
int mx_img_exif_orientation(const uint8_t *data, size_t len);

/* Pillow's CMYK -> RGB (Convert.c cmyk2rgb): each channel nk - c*nk/255 with
 * nk = 255 - k, the product rounded as its MULDIV255. */
static inline uint8_t img_cmyk_channel(int c, int k) {
    int nk = 255 - k, t = c * nk + 128;
    int v = nk - (((t >> 8) + t) >> 8);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}
#endif
