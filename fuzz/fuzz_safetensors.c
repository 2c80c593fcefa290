/* libFuzzer target: the safetensors header parser (mx_st_parse) on the input
 * as a whole file. A rejected file must leave a one-line error; an accepted
 * one must have every tensor inside the file, after the header, with
 * nbytes = numel * dtype size, and no two tensors' bytes overlapping. */
#include "base/base.h"
#include "format/safetensors.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    mx_st_file f;
    if (mx_st_parse("fuzz.safetensors", d, n, &f)) {
        const char *m = mx_errmsg();
        if (!m || !*m || strchr(m, '\n')) abort();
        return 0;
    }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)d[i] << (8 * i);
    const uint8_t *data0 = d + 8 + hl;
    for (int i = 0; i < f.n_tensors; i++) {
        const mx_tensor *t = &f.tensors[i];
        if (!t->name || t->data < data0 || t->nbytes > (size_t)(d + n - t->data)) abort();
        if ((uint64_t)t->numel * mx_dtype_size(t->dtype) != t->nbytes) abort();
        if (mx_st_find(&f, t->name) == NULL) abort();
        for (int j = 0; j < i && f.n_tensors < 256; j++) {
            const mx_tensor *u = &f.tensors[j];
            if (t->nbytes && u->nbytes && t->data < u->data + u->nbytes && u->data < t->data + t->nbytes) abort();
        }
    }
    mx_st_close(&f);
    return 0;
}
