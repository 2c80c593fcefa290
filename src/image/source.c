/* Image sources of a request (see image.h): data URLs, local files under an
 * allowed folder, no remote fetches. */
#define _GNU_SOURCE
#include "image.h"
#include "../base/base.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static int read_data_url(const char *url, char **data, size_t *len) {
    const char *comma = strchr(url, ',');
    if (!comma) return mx_set_err("image data URL without a ',' before its data");
    const char *meta = url + 5; /* after "data:" */
    size_t ml = (size_t)(comma - meta);
    if (ml < 7 || strncasecmp(comma - 7, ";base64", 7))
        return mx_set_err("image data URLs must be base64 (\"data:image/png;base64,...\")");
    size_t n = strlen(comma + 1);
    if (n / 4 * 3 > MX_IMAGE_MAX_FILE_BYTES) return mx_set_err("image data URL of %zu bytes is too large", n);
    uint8_t *b;
    size_t bl;
    if (mx_b64_decode(comma + 1, n, &b, &bl)) return mx_err_prefix("image data URL");
    *data = (char *)b;
    *len = bl;
    return MX_OK;
}

static int read_local(const char *path, const char *allowed_dir, char **data, size_t *len) {
    if (!allowed_dir) return mx_set_err("local image files are not allowed (the server names a folder for them with --allowed-image-dir)");
    char root[PATH_MAX], real[PATH_MAX];
    if (!realpath(allowed_dir, root)) return mx_set_err("the allowed image folder cannot be resolved");
    if (!realpath(path, real)) return mx_set_err("image file not found");
    size_t rl = strlen(root);
    if (strncmp(real, root, rl) || (real[rl] != '/' && strcmp(root, "/")))
        return mx_set_err("image file is outside the allowed image folder");
    struct stat st;
    if (stat(real, &st) || !S_ISREG(st.st_mode)) return mx_set_err("image path is not a regular file");
    if (mx_read_file(real, MX_IMAGE_MAX_FILE_BYTES, data, len)) return mx_set_err("image file cannot be read");
    return MX_OK;
}

int mx_image_source_read(const char *url, const char *allowed_dir, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    if (!strncasecmp(url, "data:", 5)) return read_data_url(url, data, len);
    if (!strncasecmp(url, "file://", 7)) return read_local(url + 7, allowed_dir, data, len);
    if (url[0] == '/') return read_local(url, allowed_dir, data, len);
    if (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8))
        return mx_set_err("remote image URLs are not fetched; send the image as a data URL (data:image/png;base64,...)");
    return mx_set_err("unsupported image URL (expected a data: URL)");
}
