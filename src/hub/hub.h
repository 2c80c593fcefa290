/* hub: models by their Hugging Face hub id (org/name[:revision]) through
 * the same on-disk cache as huggingface_hub, so both tools share files:
 *
 *   CACHE/models--ORG--NAME/refs/REVISION          the commit a branch/tag points to
 *   CACHE/models--ORG--NAME/blobs/ETAG             the files, named by the hub's ETag
 *                                                  (sha256 for LFS files, git blob sha1 otherwise)
 *   CACHE/models--ORG--NAME/snapshots/COMMIT/PATH  relative symlinks to ../../blobs/ETAG
 *   CACHE/.locks/models--ORG--NAME/ETAG.lock       held while a blob is written
 *
 * CACHE is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
 * (XDG_CACHE_HOME honoured). Downloads use the hub's HTTP API at
 * $HF_ENDPOINT: GET /api/models/REPO/revision/REV for the commit and the
 * file list, HEAD /REPO/resolve/COMMIT/PATH for a file's ETag, size and
 * location (X-Linked-Etag / X-Linked-Size for LFS files, which redirect to
 * a CDN), then GET with Range to resume a .incomplete blob. The token is
 * $HF_TOKEN or the file $HF_HOME/token; HF_HUB_OFFLINE=1 forbids network. */
#ifndef MX_HUB_H
#define MX_HUB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *cache, *endpoint, *token;
    bool offline;
} mx_hub;

/* Reads the environment; MX_ERR only when out of memory or no home. */
int mx_hub_init(mx_hub *h);
void mx_hub_free(mx_hub *h);

/* "org/name" or "org/name:revision" with hub-valid names: repo and rev get
 * the parts (rev "main" when absent). False for anything else. */
bool mx_hub_parse_id(const char *s, char *repo, size_t repo_n, char *rev, size_t rev_n);
/* CACHE/models--org--name (malloc'd). */
char *mx_hub_repo_dir(const mx_hub *h, const char *repo);
/* The snapshot folder of repo at rev when the cache holds it with a
 * config.json and every shard its index names; NULL (no error) otherwise. */
char *mx_hub_cached(const mx_hub *h, const char *repo, const char *rev);

typedef struct {
    const char *const *include; /* glob patterns ('*' also crosses '/'); none = every file */
    int n_include;
} mx_hub_filter;

/* Downloads the files of repo@rev that the filter selects into the cache
 * (files already there are kept) and returns the snapshot folder. Errors
 * name the HTTP status and what it means (401: a token is needed; 404: no
 * such repository, revision or file) or a checksum mismatch. */
int mx_hub_download(const mx_hub *h, const char *repo, const char *rev, const mx_hub_filter *f, char **snapshot);

/* The answer to GET /api/models/REPO/revision/REV: its commit ("sha", 40
 * hex digits) and file names ("siblings"[].rfilename), each checked to be
 * a safe relative path. Bad input is refused with one line. */
typedef struct {
    char commit[41];
    char **files;
    int n_files;
} mx_hub_revision;
int mx_hub_parse_revision(const char *json, size_t len, mx_hub_revision *out);
void mx_hub_revision_free(mx_hub_revision *r);
/* A path from the hub is safe to create under a folder. */
bool mx_hub_safe_path(const char *p);

/* Cached repositories. */
typedef struct {
    char repo[256];     /* org/name */
    uint64_t bytes;     /* blobs on disk */
    char commit[41];    /* refs/main, else the newest snapshot; "" when none */
    char *snapshot;     /* that snapshot's folder or NULL */
} mx_hub_entry;
int mx_hub_list(const mx_hub *h, mx_hub_entry **out, int *n);
void mx_hub_list_free(mx_hub_entry *e, int n);
/* Removes the repository's cache folder and its locks; *freed: bytes. */
int mx_hub_remove(const mx_hub *h, const char *repo, uint64_t *freed);
#endif
