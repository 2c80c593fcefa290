/* libFuzzer target: the HTTP layer, from raw request bytes and from request
 * JSON to the parsed generation parameters. Byte 0 picks the mode:
 *   0: the rest is raw bytes on a loopback connection to a live in-process
 *      server (libmicrohttpd, the transport, the route table, the routes,
 *      generation on a tiny model), read back until it ends or idles: what
 *      comes back must be an HTTP response, and the server must answer or
 *      close every connection;
 *   1: the rest is a /v1/chat/completions body for mx_chat_parse;
 *   2: the rest is a /v1/completions body for mx_completion_parse.
 * A parsed request must hold parameters in range and prompt ids of the
 * vocabulary; a chat's prompt must hold exactly the special tokens the
 * template wrote (one <|im_start|> per message and one for the reply, one
 * <|im_end|> per finished message), whatever the content says; a refused one
 * a one-line message. The model: tests/server/tinymodel (ChatML, specials
 * 311-313) with the llama fixture's weights, linked into a temporary folder
 * (run from the repo root). Built by `make fuzz` against build/fuzzlib. */
#define _GNU_SOURCE
#include "server/gen.h"
#include "base/base.h"
#include <arpa/inet.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { ENDOFTEXT = 311, IM_START = 312, IM_END = 313 };
static server g_sv;
static int g_port;

static int setup(void) {
    static char dir[PATH_MAX];
    char abs[PATH_MAX], from[PATH_MAX + 64], to[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/mlxcel-fuzz-http-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return -1;
    const char *files[][2] = {{"tests/server/tinymodel", "config.json"}, {"tests/server/tinymodel", "tokenizer.json"},
                              {"tests/server/tinymodel", "tokenizer_config.json"}, {"tests/server/tinymodel", "generation_config.json"},
                              {"tests/fixtures/llama", "model.safetensors"}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        if (!realpath(files[i][0], abs)) { fprintf(stderr, "fuzz_http: run from the repo root (no %s)\n", files[i][0]); return -1; }
        snprintf(from, sizeof from, "%s/%s", abs, files[i][1]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i][1]);
        if (symlink(from, to) != 0) return -1;
    }
    mx_serve_opts_defaults(&g_sv.o);
    g_sv.o.no_request_log = true; /* a line per fuzzed request would drown the fuzzer's output */
    g_sv.o.model_dir = dir;
    g_sv.o.port = 0;
    g_sv.o.parallel = 2;
    g_sv.o.ctx_size = 128;
    g_sv.o.threads = 1;
    g_sv.o.max_body = 1 << 20;
    g_sv.o.header_timeout = g_sv.o.body_timeout = 0.5; /* a request left incomplete costs this */
    g_sv.o.max_conns_per_ip = 0;
    mx_task task;
    if (mx_srv_load(&g_sv, &task)) { fprintf(stderr, "fuzz_http: %s\n", mx_errmsg()); return -1; }
    snprintf(g_sv.name, sizeof g_sv.name, "tiny");
    atomic_store(&g_sv.ready, true);
    mx_srv_transport *t = NULL;
    if (mx_srv_transport_start(&g_sv, &t)) return -1;
    g_port = mx_srv_transport_port(t);
    return g_port > 0 ? 0 : -1;
}

static void raw(const uint8_t *d, size_t n) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) abort();
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, d + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) break; /* the server may close early (413, a bad request line) */
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char head[16] = {0}, buf[4096];
    size_t got = 0;
    double t0 = mx_now();
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) == 0) {
            if (got && mx_now() - t0 > 0.2) break; /* answered and idle: leave (the server sees a client go) */
            if (!got && mx_now() - t0 > 20) abort(); /* never answered, never closed */
            continue;
        }
        t0 = mx_now();
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) break;
        if (got < sizeof head - 1) memcpy(head + got, buf, MX_MIN((size_t)r, sizeof head - 1 - got));
        got += (size_t)r;
    }
    close(fd);
    if (got && strncmp(head, "HTTP/1.", MX_MIN(got, 7))) abort();
}

static int count(const int32_t *ids, int n, int32_t id) {
    int k = 0;
    for (int i = 0; i < n; i++) k += ids[i] == id;
    return k;
}

static void parsed(bool chat, const uint8_t *d, size_t n) {
    json_t *req = json_loadb((const char *)d, n, 0, NULL);
    if (!json_is_object(req)) { json_decref(req); return; }
    mx_gen_params g = {0};
    char err[1024] = "";
    bool ok = chat ? mx_chat_parse(&g_sv, req, n, &g, err, sizeof err) : mx_completion_parse(&g_sv, req, &g, err, sizeof err);
    if (!ok) {
        if (!err[0] || strchr(err, '\n')) abort();
    } else {
        const mx_sampling *s = &g.p.samp;
        if (!(s->temperature >= 0 && s->temperature <= 100 && s->top_p >= 0 && s->top_p <= 1 && s->min_p >= 0 && s->min_p <= 1 && s->top_k >= 0 &&
              s->presence_penalty >= -2 && s->presence_penalty <= 2 && s->frequency_penalty >= -2 && s->frequency_penalty <= 2 &&
              s->repetition_penalty >= 0.01f && s->repetition_penalty <= 100))
            abort();
        if (g.p.max_tokens < 1 || g.p.n_prompt < 1 || !g.prompt || g.p.top_logprobs < -1 || g.p.top_logprobs > MX_MAX_TOP_LOGPROBS) abort();
        if (g.p.n_bias < 0 || g.p.n_bias > 4096 || g.n_stops > 17) abort();
        for (int i = 0; i < g.p.n_bias; i++)
            if (g.bias_ids[i] < 0 || g.bias_ids[i] >= g_sv.tm.e.model.arch.vocab) abort();
        for (int i = 0; i < g.n_stops; i++)
            if (!g.stops[i] || !g.stops[i][0]) abort();
        json_t *p = json_object_get(req, "prompt");
        bool text = chat || json_is_string(p) || json_is_string(json_array_get(p, 0));
        for (int i = 0; i < g.p.n_prompt; i++)
            if (g.prompt[i] < 0 || (text && g.prompt[i] >= mx_tok_vocab_size(g_sv.tm.tok))) abort();
        if (chat) { /* the template's specials, none from the content */
            json_t *m = json_object_get(req, "messages");
            int nm = (int)json_array_size(m);
            json_t *role = json_object_get(json_array_get(m, (size_t)nm - 1), "role");
            int cont = json_is_string(role) && !strcmp(json_string_value(role), "assistant");
            if (count(g.prompt, g.p.n_prompt, IM_START) != nm + !cont || count(g.prompt, g.p.n_prompt, IM_END) != nm - cont ||
                count(g.prompt, g.p.n_prompt, ENDOFTEXT))
                abort();
        }
    }
    mx_gen_params_free(&g);
    json_decref(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static int ready = 0;
    if (!ready) {
        if (setup()) abort();
        ready = 1;
    }
    if (!n) return 0;
    switch (d[0] % 3) {
    case 0: raw(d + 1, n - 1); break;
    case 1: parsed(true, d + 1, n - 1); break;
    default: parsed(false, d + 1, n - 1); break;
    }
    return 0;
}
