#define _GNU_SOURCE
/* Downloading into the cache over the hub's HTTP API (libcurl). */
#include "hub.h"
#include "sha.h"
#include "../base/base.h"
#include "../base/version.h"
#include "../base/progress.h"
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>


typedef struct {
    long status;
    char etag[160], linked_etag[160], linked_size[32], length[32], commit[64], location[2048];
} hdrs;

static void copy_val(char *dst, size_t n, const char *v, size_t len) {
    while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' ')) len--;
    while (len && *v == ' ') { v++; len--; }
    if (len >= n) len = n - 1;
    memcpy(dst, v, len);
    dst[len] = 0;
}

static size_t on_header(char *b, size_t sz, size_t nm, void *ud) {
    hdrs *h = ud;
    size_t n = sz * nm;
    if (n >= 5 && !strncmp(b, "HTTP/", 5)) { /* a new response (after a redirect): forget the last one's */
        long st = h->status;
        memset(h, 0, sizeof *h);
        h->status = st;
        return n;
    }
    const char *colon = memchr(b, ':', n);
    if (!colon) return n;
    size_t kl = (size_t)(colon - b);
    const char *v = colon + 1;
    size_t vl = n - kl - 1;
    static const struct { const char *k; size_t off, cap; } keys[] = {
        {"etag", offsetof(hdrs, etag), sizeof(((hdrs *)0)->etag)},
        {"x-linked-etag", offsetof(hdrs, linked_etag), sizeof(((hdrs *)0)->linked_etag)},
        {"x-linked-size", offsetof(hdrs, linked_size), sizeof(((hdrs *)0)->linked_size)},
        {"content-length", offsetof(hdrs, length), sizeof(((hdrs *)0)->length)},
        {"x-repo-commit", offsetof(hdrs, commit), sizeof(((hdrs *)0)->commit)},
        {"location", offsetof(hdrs, location), sizeof(((hdrs *)0)->location)},
    };
    for (size_t i = 0; i < MX_ARRAY_LEN(keys); i++)
        if (strlen(keys[i].k) == kl && !strncasecmp(b, keys[i].k, kl)) copy_val((char *)h + keys[i].off, keys[i].cap, v, vl);
    return n;
}

/* Percent-encodes s; '/' stays when keep_slash (file paths), not in a revision. */
static char *quote(const char *s, bool keep_slash) {
    mx_buf b = {0};
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || strchr("-._~", c) || (keep_slash && c == '/')) mx_buf_append(&b, s, 1);
        else mx_buf_printf(&b, "%%%02X", c);
    }
    if (mx_buf_append(&b, "", 1)) { mx_buf_free(&b); return NULL; }
    return b.data;
}

/* scheme://host[:port] of a URL, to tell a CDN redirect from the hub itself */
static size_t origin_len(const char *url) {
    const char *p = strstr(url, "://");
    if (!p) return 0;
    p += 3;
    return (size_t)(p - url) + strcspn(p, "/?#");
}

static bool same_origin(const char *a, const char *b) {
    size_t la = origin_len(a), lb = origin_len(b);
    return la && la == lb && !strncasecmp(a, b, la);
}

typedef struct {
    mx_buf *buf;
    size_t max;
    FILE *file;
    long resume;
    uint64_t done;
    void *task;
    hdrs *h;
    bool started, overflow;
} sink;

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    sink *s = ud;
    size_t n = sz * nm;
    if (s->buf) {
        if (s->buf->len + n > s->max) { s->overflow = true; return 0; }
        return mx_buf_append(s->buf, p, n) ? 0 : n;
    }
    if (!s->started) {
        s->started = true;
        /* a server that ignores Range sends the whole file again */
        if (s->resume && s->h->status == 200) {
            if (ftruncate(fileno(s->file), 0) || fseek(s->file, 0, SEEK_SET)) return 0;
            s->done -= (uint64_t)s->resume;
            s->resume = 0;
        }
    }
    if (fwrite(p, 1, n, s->file) != n) return 0;
    s->done += n;
    mx_progress_update(s->task, s->done);
    return n;
}

static struct curl_slist *headers(const mx_hub *h, bool auth) {
    struct curl_slist *l = curl_slist_append(NULL, "User-Agent: mlxcel/" MX_VERSION);
    l = curl_slist_append(l, "Accept-Encoding: identity");
    if (auth && h->token) {
        char *a = mx_asprintf("Authorization: Bearer %s", h->token);
        if (a) l = curl_slist_append(l, a);
        free(a);
    }
    return l;
}

/* One request; follow: redirects (downloads). Returns the curl code. */
static CURLcode request(const mx_hub *h, const char *url, bool head, bool follow, bool auth, sink *s, hdrs *hd, char *err) {
    CURL *c = curl_easy_init();
    if (!c) return CURLE_OUT_OF_MEMORY;
    struct curl_slist *hl = headers(h, auth);
    memset(hd, 0, sizeof *hd);
    s->h = hd;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_NOBODY, head ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a transfer stalled for 30 s fails (and is resumed) */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, hd);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    if (s->resume > 0) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)s->resume);
    err[0] = 0;
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &hd->status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return rc;
}

static int net_err(const mx_hub *h, const char *url, CURLcode rc, const char *err) {
    (void)h;
    return mx_set_err("%s: %s", url, err[0] ? err : curl_easy_strerror(rc));
}

/* The meaning of an error status, for the repository or one file. */
static int status_err(const mx_hub *h, long st, const char *what) {
    if (st == 401)
        return mx_set_err("%s: 401 Unauthorized: the repository is private or gated, or does not exist; %s", what,
                          h->token ? "the token (HF_TOKEN or HF_HOME/token) was refused" : "set HF_TOKEN to a token that can read it");
    if (st == 403) return mx_set_err("%s: 403 Forbidden: the token may not read it (a gated model needs its terms accepted on the hub)", what);
    if (st == 404) return mx_set_err("%s: 404 Not Found", what);
    return mx_set_err("%s: HTTP %ld from the hub", what, st);
}

static int mkdirs(const char *path, bool last_too) {
    char *p = mx_strdup(path);
    if (!p) return MX_ERR;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) { int rc = mx_set_err("%s: cannot create: %s", p, strerror(errno)); free(p); return rc; }
        *s = '/';
    }
    if (last_too && mkdir(p, 0755) && errno != EEXIST) { int rc = mx_set_err("%s: cannot create: %s", p, strerror(errno)); free(p); return rc; }
    free(p);
    return MX_OK;
}

static int write_ref(const char *rdir, const char *rev, const char *commit) {
    char *ref = mx_asprintf("%s/refs/%s", rdir, rev), *tmp = ref ? mx_asprintf("%s.tmp%d", ref, (int)getpid()) : NULL;
    int rc = MX_ERR;
    if (!tmp || mkdirs(ref, false)) goto out;
    FILE *f = fopen(tmp, "wb");
    if (!f || fputs(commit, f) < 0 || fclose(f) || rename(tmp, ref)) {
        rc = mx_set_err("%s: cannot write: %s", ref, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = MX_OK;
out:
    free(tmp);
    free(ref);
    return rc;
}

/* The hub's ETag as a file name: W/ and quotes stripped, then only
 * [A-Za-z0-9._-] (it names a blob on disk). */
static bool normalize_etag(const char *in, char *out, size_t n) {
    if (!strncmp(in, "W/", 2)) in += 2;
    size_t l = strlen(in);
    while (l && *in == '"') { in++; l--; }
    while (l && in[l - 1] == '"') l--;
    if (!l || l >= n || (l <= 2 && in[0] == '.')) return false;
    for (size_t i = 0; i < l; i++)
        if (!isalnum((unsigned char)in[i]) && !strchr("._-", in[i])) return false;
    memcpy(out, in, l);
    out[l] = 0;
    return true;
}

static bool all_hex(const char *s, size_t n) {
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

/* The content against the ETag: sha256 (64 hex), git blob sha1 (40 hex);
 * other ETags cannot be checked and only the size is. */
static int verify(const char *path, const char *file, const char *etag, uint64_t size) {
    bool s256 = all_hex(etag, 64), s1 = all_hex(etag, 40);
    if (!s256 && !s1) return MX_OK;
    FILE *f = fopen(path, "rb");
    if (!f) return mx_set_err("%s: cannot read back: %s", path, strerror(errno));
    mx_sha *s = s256 ? mx_sha256_new() : mx_sha1_new();
    if (!s) { fclose(f); return MX_ERR; }
    if (!s256) {
        char head[48];
        int k = snprintf(head, sizeof head, "blob %llu", (unsigned long long)size);
        mx_sha_update(s, head, (size_t)k + 1);
    }
    char buf[1 << 16];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) mx_sha_update(s, buf, r);
    fclose(f);
    char hex[65];
    mx_sha_hex_free(s, hex);
    if (strcasecmp(hex, etag))
        return mx_set_err("%s: checksum mismatch: the download's %s is %s, the hub's ETag is %s; the file was removed", file,
                          s256 ? "sha256" : "git blob sha1", hex, etag);
    return MX_OK;
}

/* Downloads url into blob (via blob.incomplete, resumed where it stopped). */
static int fetch_blob(const mx_hub *h, const char *url, bool auth, const char *blob, const char *file, const char *etag, uint64_t size) {
    char *inc = mx_asprintf("%s.incomplete", blob);
    if (!inc) return MX_ERR;
    int rc = MX_ERR;
    char label[128];
    snprintf(label, sizeof label, "downloading %s", file);
    void *task = mx_progress_begin(label, size, true);
    for (int attempt = 0; attempt < 6; attempt++) {
        struct stat st;
        long have = stat(inc, &st) ? 0 : (long)st.st_size;
        if ((uint64_t)have > size) { unlink(inc); have = 0; }
        if ((uint64_t)have == size && size) break;
        FILE *f = fopen(inc, "ab");
        if (!f) { rc = mx_set_err("%s: cannot write: %s", inc, strerror(errno)); goto out; }
        sink s = {.file = f, .resume = have, .done = (uint64_t)have, .task = task};
        hdrs hd;
        char err[CURL_ERROR_SIZE];
        CURLcode cr = request(h, url, false, true, auth, &s, &hd, err);
        if (fclose(f)) cr = CURLE_WRITE_ERROR;
        if (cr == CURLE_OK && hd.status >= 400 && hd.status != 416) { rc = status_err(h, hd.status, file); goto out; }
        if (cr == CURLE_OK && hd.status == 416) { unlink(inc); continue; } /* the range is wrong: start over */
        if (cr == CURLE_OK) break;
        if (cr == CURLE_WRITE_ERROR || cr == CURLE_OUT_OF_MEMORY || cr == CURLE_COULDNT_RESOLVE_HOST || cr == CURLE_COULDNT_CONNECT) {
            rc = net_err(h, url, cr, err);
            goto out;
        }
        if (attempt == 5) { rc = net_err(h, url, cr, err); goto out; }
        sleep(attempt ? 1 : 0); /* then resume */
    }
    struct stat st;
    if (stat(inc, &st) || (uint64_t)st.st_size != size) {
        rc = mx_set_err("%s: the download has %lld bytes, the hub says %llu", file, stat(inc, &st) ? 0LL : (long long)st.st_size,
                        (unsigned long long)size);
        unlink(inc);
        goto out;
    }
    if (verify(inc, file, etag, size)) { unlink(inc); goto out; }
    if (rename(inc, blob)) { rc = mx_set_err("%s: cannot rename: %s", blob, strerror(errno)); goto out; }
    rc = MX_OK;
out:
    mx_progress_end(task, rc == MX_OK);
    free(inc);
    return rc;
}

/* snapshots/COMMIT/FILE -> ../../blobs/ETAG (one more ../ per folder in FILE) */
static int link_pointer(const char *snap, const char *file, const char *etag) {
    char *ptr = mx_asprintf("%s/%s", snap, file);
    mx_buf t = {0};
    int rc = MX_ERR;
    if (!ptr || mkdirs(ptr, false)) goto out;
    mx_buf_puts(&t, "../../");
    for (const char *s = file; *s; s++)
        if (*s == '/') mx_buf_puts(&t, "../");
    if (mx_buf_printf(&t, "blobs/%s", etag)) goto out;
    unlink(ptr);
    if (symlink(t.data, ptr)) { rc = mx_set_err("%s: cannot create the link: %s", ptr, strerror(errno)); goto out; }
    rc = MX_OK;
out:
    mx_buf_free(&t);
    free(ptr);
    return rc;
}

/* One file of the snapshot, as hf_hub_download does it. */
static int fetch_file(const mx_hub *h, const char *repo, const char *rdir, const char *commit, const char *file, int *fetched) {
    char *snap = mx_asprintf("%s/snapshots/%s", rdir, commit), *ptr = snap ? mx_asprintf("%s/%s", snap, file) : NULL;
    char *qr = quote(repo, true), *qf = quote(file, true);
    char *url = qr && qf ? mx_asprintf("%s/%s/resolve/%s/%s", h->endpoint, qr, commit, qf) : NULL;
    char *blob = NULL, *lockp = NULL;
    int rc = MX_ERR, lockfd = -1;
    struct stat st;
    if (!url || !ptr) goto out;
    if (!stat(ptr, &st)) { rc = MX_OK; goto out; } /* already in the snapshot */
    /* HEAD without following a CDN redirect; a relative one (a renamed repository) is followed */
    hdrs hd;
    char err[CURL_ERROR_SIZE], *loc = mx_strdup(url);
    for (int hop = 0; loc; hop++) {
        sink s = {0};
        CURLcode cr = request(h, loc, true, false, true, &s, &hd, err);
        if (cr != CURLE_OK) { rc = net_err(h, loc, cr, err); free(loc); goto out; }
        if (hd.status >= 300 && hd.status < 400 && hd.location[0] == '/' && hop < 5) {
            char *next = mx_asprintf("%.*s%s", (int)origin_len(loc), loc, hd.location);
            free(loc);
            loc = next;
            continue;
        }
        break;
    }
    if (!loc) goto out;
    if (hd.status >= 400) { rc = status_err(h, hd.status, file); free(loc); goto out; }
    char etag[160];
    const char *raw = hd.linked_etag[0] ? hd.linked_etag : hd.etag;
    const char *sz = hd.linked_size[0] ? hd.linked_size : hd.length;
    char *end;
    errno = 0;
    unsigned long long size = strtoull(sz, &end, 10);
    if (!hd.commit[0]) { rc = mx_set_err("%s: the answer has no X-Repo-Commit header: is HF_ENDPOINT (%s) a hub?", file, h->endpoint); free(loc); goto out; }
    if (!raw[0] || !normalize_etag(raw, etag, sizeof etag)) { rc = mx_set_err("%s: the hub sent no usable ETag ('%.60s')", file, raw); free(loc); goto out; }
    if (!sz[0] || errno || *end || end == sz) { rc = mx_set_err("%s: the hub sent no file size", file); free(loc); goto out; }
    /* a redirect to another host (the CDN) is fetched without the token */
    const char *dl = hd.status >= 300 && hd.status < 400 && hd.location[0] ? hd.location : loc;
    bool auth = same_origin(dl, h->endpoint);
    char *dlc = mx_strdup(dl);
    free(loc);
    if (!dlc) goto out;
    blob = mx_asprintf("%s/blobs/%s", rdir, etag);
    const char *base = strrchr(rdir, '/');
    lockp = mx_asprintf("%s/.locks/%s/%s.lock", h->cache, base ? base + 1 : rdir, etag);
    if (!blob || !lockp || mkdirs(blob, false) || mkdirs(lockp, false)) { free(dlc); goto out; }
    lockfd = open(lockp, O_RDWR | O_CREAT, 0644);
    if (lockfd < 0 || flock(lockfd, LOCK_EX)) { rc = mx_set_err("%s: cannot lock: %s", lockp, strerror(errno)); free(dlc); goto out; }
    if (stat(blob, &st) || (uint64_t)st.st_size != size) {
        rc = fetch_blob(h, dlc, auth, blob, file, etag, size);
        if (!rc) (*fetched)++;
    } else rc = MX_OK;
    free(dlc);
    if (!rc) rc = link_pointer(snap, file, etag);
out:
    if (lockfd >= 0) close(lockfd);
    free(lockp); free(blob); free(url); free(qr); free(qf); free(ptr); free(snap);
    return rc;
}

static bool selected(const mx_hub_filter *f, const char *file) {
    if (!f || !f->n_include) return true;
    for (int i = 0; i < f->n_include; i++)
        if (!fnmatch(f->include[i], file, 0)) return true;
    return false;
}

int mx_hub_download(const mx_hub *h, const char *repo, const char *rev, const mx_hub_filter *f, char **snapshot) {
    *snapshot = NULL;
    if (h->offline) return mx_set_err("%s: HF_HUB_OFFLINE is set, so it cannot be downloaded", repo);
    static bool inited;
    if (!inited) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT)) return mx_set_err("libcurl failed to start");
        inited = true;
    }
    char *qr = quote(repo, true), *qv = quote(rev, false);
    char *url = qr && qv ? mx_asprintf("%s/api/models/%s/revision/%s", h->endpoint, qr, qv) : NULL;
    char *rdir = mx_hub_repo_dir(h, repo);
    mx_buf body = {0};
    mx_hub_revision r = {0};
    int rc = MX_ERR;
    if (!url || !rdir) goto out;
    sink s = {.buf = &body, .max = 64u << 20};
    hdrs hd;
    char err[CURL_ERROR_SIZE];
    CURLcode cr = request(h, url, false, true, true, &s, &hd, err);
    if (s.overflow) { rc = mx_set_err("%s: the answer is over 64 MB", url); goto out; }
    if (cr != CURLE_OK) { rc = net_err(h, url, cr, err); goto out; }
    if (hd.status != 200) {
        char what[400];
        snprintf(what, sizeof what, "%s (revision %s)", repo, rev);
        rc = status_err(h, hd.status, what);
        goto out;
    }
    if (mx_hub_parse_revision(body.data ? body.data : "", body.len, &r)) goto out;
    int n_sel = 0, fetched = 0;
    for (int i = 0; i < r.n_files; i++) n_sel += selected(f, r.files[i]);
    if (!n_sel) { rc = mx_set_err("%s: no file of the repository matches --include", repo); goto out; }
    if (mkdirs(rdir, true) || (strcmp(rev, r.commit) && write_ref(rdir, rev, r.commit))) goto out;
    char *snap = mx_asprintf("%s/snapshots/%s", rdir, r.commit);
    if (!snap || mkdirs(snap, true)) { free(snap); goto out; }
    for (int i = 0; i < r.n_files; i++)
        if (selected(f, r.files[i]) && fetch_file(h, repo, rdir, r.commit, r.files[i], &fetched)) {
            mx_err_prefix("%s", repo);
            free(snap);
            goto out;
        }
    *snapshot = snap;
    rc = MX_OK;
out:
    mx_hub_revision_free(&r);
    mx_buf_free(&body);
    free(rdir); free(url); free(qr); free(qv);
    return rc;
}
