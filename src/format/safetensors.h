/* safetensors: mmap'd reading and writing of .safetensors files.
 * The header is validated completely on open (size, JSON, dtypes, shapes,
 * offsets in bounds and not overlapping), so a tensor's data pointer can be
 * used without further checks. Data may be unaligned (MLX does not pad the
 * header): read elements with memcpy or unaligned loads. */
#ifndef MX_SAFETENSORS_H
#define MX_SAFETENSORS_H
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>

typedef enum {
    MX_DT_F32, MX_DT_F16, MX_DT_BF16, MX_DT_F64, MX_DT_I64, MX_DT_I32, MX_DT_I16, MX_DT_I8,
    MX_DT_U64, MX_DT_U32, MX_DT_U16, MX_DT_U8, MX_DT_BOOL, MX_DT_F8_E4M3, MX_DT_F8_E5M2, MX_DT_COUNT
} mx_dtype;

size_t mx_dtype_size(mx_dtype t);
const char *mx_dtype_name(mx_dtype t);
int mx_dtype_parse(const char *s, mx_dtype *out); /* MX_ERR for unknown */

#define MX_MAX_DIMS 8
typedef struct {
    char *name;
    mx_dtype dtype;
    int ndim;
    int64_t shape[MX_MAX_DIMS];
    int64_t numel;
    const uint8_t *data; /* into the mapping */
    size_t nbytes;
    int file_index;      /* which shard (set by the checkpoint layer) */
    bool used;           /* claimed by the model loader */
} mx_tensor;

typedef struct {
    char *path;
    void *map;
    size_t map_len;        /* the file's size */
    size_t alloc_len;      /* bytes to unmap (>= map_len when copied) */
    mx_tensor *tensors;
    int n_tensors;
    char *metadata_format; /* __metadata__.format, or NULL */
} mx_st_file;

/* How mx_st_open places the file: mapped in place (default), or read into
 * anonymous memory advised for transparent huge pages. The copy costs one
 * read of the file at load and leaves the page cache to the kernel; it pays
 * where 4 KiB page-table entries are expensive (large MoE working sets, VMs
 * with shadow paging). The process RSS is the same either way. */
typedef enum { MX_LOAD_MMAP, MX_LOAD_COPY } mx_load_mode;
void mx_st_set_load_mode(mx_load_mode m);
mx_load_mode mx_st_load_mode(void);
/* Gives back the whole pages of [p, p+n), which must lie inside a file
 * opened by mx_st_open, to the page cache: mapped files drop them from the
 * process, copied ones map the file's pages over the copy. The bytes read
 * the same afterwards (a later read faults them back in). False when the
 * range is not such a file's. */
bool mx_st_release(const void *p, size_t n);

int mx_st_open(const char *path, mx_st_file *out);
void mx_st_close(mx_st_file *f);
/* Parses header bytes that lie in [buf, buf+len) (used by open and by fuzzing). */
int mx_st_parse(const char *path, const uint8_t *buf, size_t len, mx_st_file *out);
const mx_tensor *mx_st_find(const mx_st_file *f, const char *name);

/* Writing: collect tensors then write header + data in one pass. */
typedef struct {
    const char *name;
    mx_dtype dtype;
    int ndim;
    int64_t shape[MX_MAX_DIMS];
    const void *data;
    size_t nbytes;
} mx_st_out;
int mx_st_write(const char *path, const mx_st_out *ts, int n, const char *metadata_json);
/* Writes the header for ts (data ignored) and returns the file open at the
 * start of the data section, for writers that stream the tensors' bytes in
 * order; NULL with the error set. */
FILE *mx_st_create(const char *path, const mx_st_out *ts, int n, const char *metadata_json);

/* Reads an F32/F16/BF16 (or I64 -> float) tensor into dst[numel]. */
int mx_tensor_to_f32(const mx_tensor *t, float *dst);
#endif
