/* image: decoding PNG, JPEG and WebP to 8-bit RGB, and the uint8 geometry
 * Hugging Face image processors apply before rescaling (Pillow's resampling
 * filters, crops, padding).
 *
 * Exactness: the processors run Pillow on the uint8 image, so every step here
 * reproduces Pillow 9.4 bit for bit: decoding gives what
 * `Image.open(f).convert("RGB")` gives (alpha dropped, not composited;
 * or composited over white where a processor does that; grayscale
 * replicated; palette looked up, indices past the palette reading
 * Pillow's gray ramp; 16-bit samples cut to their high byte, except 16-bit
 * grayscale, which Pillow holds as mode "I" and clips to 255; CMYK JPEGs read
 * with Adobe's inverted convention), and mx_image_resize is Pillow's
 * separable convolution resampler (see resample.c).
 *
 * Images are untrusted input: the declared size is checked against a pixel
 * bound before anything is allocated, truncated or corrupt data is one error
 * line naming the format and the problem, and the libraries' own error paths
 * return here instead of aborting. */
#ifndef MX_IMAGE_H
#define MX_IMAGE_H
#include <stddef.h>
#include <stdint.h>

/* Pillow's default MAX_IMAGE_PIXELS warns at 89.5 Mpx; we refuse above 50 Mpx
 * (a 48 Mpx phone photo passes; its RGB copy is 150 MB). */
#define MX_IMAGE_MAX_PIXELS_DEFAULT 50000000LL
#define MX_IMAGE_MAX_SIDE 65535
#define MX_IMAGE_MAX_FILE_BYTES ((size_t)256 << 20)

typedef struct {
    int w, h;
    uint8_t *px; /* h rows of w RGB triples, no padding */
} mx_image;

/* Pillow's resampling filter numbers (Image.Resampling), as
 * preprocessor_config.json's "resample" holds them. */
enum { MX_RESAMPLE_NEAREST = 0, MX_RESAMPLE_LANCZOS = 1, MX_RESAMPLE_BILINEAR = 2, MX_RESAMPLE_BICUBIC = 3,
       MX_RESAMPLE_BOX = 4, MX_RESAMPLE_HAMMING = 5 };

/* What becomes of transparency: Pillow's convert("RGB") drops it (most HF
 * processors); Idefics3's processor composites convert("RGBA") over white
 * with Image.alpha_composite. */
typedef enum { MX_ALPHA_DROP, MX_ALPHA_WHITE } mx_alpha_mode;

/* Decodes PNG, JPEG or WebP bytes (told apart by their signature) to RGB.
 * max_pixels <= 0 means MX_IMAGE_MAX_PIXELS_DEFAULT. `what` names the input in
 * errors (a path, "image 2"). On error *out is left empty. */
int mx_image_decode(const void *data, size_t len, int64_t max_pixels, const char *what, mx_image *out);
int mx_image_decode_alpha(const void *data, size_t len, int64_t max_pixels, const char *what, mx_alpha_mode alpha,
                          mx_image *out);
/* Reads a file of at most MX_IMAGE_MAX_FILE_BYTES and decodes it. */
int mx_image_load(const char *path, int64_t max_pixels, mx_image *out);
/* An image of w x h with uninitialised pixels (sizes checked). */
int mx_image_alloc(mx_image *im, int w, int h);
void mx_image_free(mx_image *im);

/* The bytes of an image a request names by URL, as an OpenAI image_url part
 * holds it: "data:[type];base64,..." (what clients send); a local file
 * ("file://PATH" or an absolute path) only when allowed_dir is set and the
 * resolved path lies under it; remote URLs are refused (the server does not
 * fetch on a client's behalf). Errors are meant for the client (HTTP 400). */
int mx_image_source_read(const char *url, const char *allowed_dir, char **data, size_t *len);

/* Pillow's Image.resize(size=(w, h), resample=filter) on an RGB image.
 * NEAREST is refused (Pillow runs it through its affine transform, not ported). */
int mx_image_resize(const mx_image *in, int w, int h, int filter, mx_image *out);
/* Pillow's crop: the box may reach outside the image; those pixels are 0. */
int mx_image_crop(const mx_image *in, int x0, int y0, int w, int h, mx_image *out);
const char *mx_resample_name(int filter);
#endif
