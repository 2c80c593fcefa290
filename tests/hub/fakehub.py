#!/usr/bin/env python3
"""An imitation of the Hugging Face hub's file API for tests/cli/hub.sh.

Serves the folders under ROOT/<org>/<name>/ as repositories at one commit:
  GET  /api/models/<org>/<name>/revision/<rev>   {"id", "sha", "siblings": [{"rfilename"}]}
  HEAD /<org>/<name>/resolve/<rev>/<path>        X-Repo-Commit and ETag (git blob sha1) for small
                                                 files; *.safetensors are "LFS": 302 to the CDN
                                                 (another origin: http://localhost vs 127.0.0.1)
                                                 with X-Linked-Etag (sha256) / X-Linked-Size
  GET  /<org>/<name>/resolve/<rev>/<path>        the file
  GET  /cdn/<org>/<name>/<path>                  the LFS content, honouring Range
Special repositories: org/private needs "Authorization: Bearer secret" (401 otherwise);
org/corrupt's safetensors content does not match its sha256; the first CDN GET of
org/tiny's model.safetensors stops after half the bytes (a resumed download must
follow). Every request is logged to LOG as one JSON line.
"""
import hashlib, http.server, json, os, sys, threading

ROOT, PORT, LOG = sys.argv[1], int(sys.argv[2]), sys.argv[3]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
cut_done = set()
lock = threading.Lock()


def files_of(repo):
    base = os.path.join(ROOT, repo)
    out = []
    for d, _, fs in os.walk(base):
        for f in fs:
            out.append(os.path.relpath(os.path.join(d, f), base))
    return sorted(out)


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def log(self, status):
        with lock, open(LOG, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, "status": status,
                                "range": self.headers.get("Range"), "host": self.headers.get("Host"),
                                "auth": self.headers.get("Authorization")}) + "\n")

    def send(self, status, body=b"", headers=(), head=False):
        self.log(status)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def repo_ok(self, repo, head=False):
        if not os.path.isdir(os.path.join(ROOT, repo)):
            self.send(404, b'{"error":"Repository not found"}', [("X-Error-Code", "RepoNotFound")], head)
            return False
        if repo == "org/private" and self.headers.get("Authorization") != "Bearer secret":
            self.send(401, b'{"error":"Invalid credentials"}', [], head)
            return False
        return True

    def resolve(self, head):
        parts = self.path.split("/")  # '', org, name, 'resolve', rev, path...
        repo, path = parts[1] + "/" + parts[2], "/".join(parts[5:])
        if not self.repo_ok(repo, head):
            return
        fp = os.path.join(ROOT, repo, path)
        if not os.path.isfile(fp):
            self.send(404, b"", [("X-Repo-Commit", COMMIT), ("X-Error-Code", "EntryNotFound")], head)
            return
        data = open(fp, "rb").read()
        if path.endswith(".safetensors"):
            sha = hashlib.sha256(data).hexdigest()
            cdn = "http://localhost:%d/cdn/%s/%s" % (PORT, repo, path)
            self.send(302, b"", [("Location", cdn), ("X-Repo-Commit", COMMIT), ("X-Linked-Etag", '"%s"' % sha),
                                 ("X-Linked-Size", str(len(data))), ("ETag", '"pointer"')], head)
            return
        self.send(200, data, [("X-Repo-Commit", COMMIT), ("ETag", '"%s"' % git_sha1(data))], head)

    def cdn(self):
        rest = self.path[len("/cdn/"):]
        repo, path = "/".join(rest.split("/")[:2]), "/".join(rest.split("/")[2:])
        data = open(os.path.join(ROOT, repo, path), "rb").read()
        if repo == "org/corrupt":
            data = data[:-1] + bytes([data[-1] ^ 1])
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
        body = data[start:]
        status = 206 if rng else 200
        hdrs = [("Content-Length", str(len(body)))]
        if rng:
            hdrs.append(("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data))))
        key = (repo, path)
        if repo == "org/tiny" and path == "model.safetensors" and key not in cut_done:
            cut_done.add(key)  # send half, then drop the connection
            self.log(status)
            self.send_response(status)
            for k, v in hdrs:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.send(status, body, hdrs)

    def do_HEAD(self):
        if "/resolve/" in self.path:
            return self.resolve(True)
        self.send(404, b"", [], True)

    def do_GET(self):
        if self.path.startswith("/api/models/"):
            p = self.path[len("/api/models/"):].split("/")
            repo, rev = p[0] + "/" + p[1], p[3] if len(p) > 3 else ""
            if not self.repo_ok(repo):
                return
            if rev not in ("main", COMMIT):
                self.send(404, b'{"error":"Invalid rev id"}', [("X-Error-Code", "RevisionNotFound")])
                return
            body = json.dumps({"id": repo, "sha": COMMIT, "siblings": [{"rfilename": f} for f in files_of(repo)]}).encode()
            self.send(200, body, [("Content-Type", "application/json")])
        elif "/resolve/" in self.path:
            self.resolve(False)
        elif self.path.startswith("/cdn/"):
            self.cdn()
        else:
            self.send(404)


http.server.ThreadingHTTPServer.allow_reuse_address = True
srv = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), H)
print("ready", flush=True)
srv.serve_forever()
