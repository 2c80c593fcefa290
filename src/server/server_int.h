/* Internal to server/: the server state and reply helpers shared by the
 * generation routes (http.c) and the embedding routes (embed_routes.c). */
#ifndef MX_SERVER_INT_H
#define MX_SERVER_INT_H
#include "server.h"
#include "../runtime/embed.h"
#include "../runtime/scheduler.h"
#include "../runtime/textmodel.h"
#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>

typedef struct mx_embed_batcher mx_embed_batcher;

typedef struct {
    mx_serve_opts o;
    mx_textmodel tm;          /* generation mode */
    mx_sched *sched;
    mx_pool *vpool;           /* encodes request images (vision-language models) */
    mx_embed_batcher *emb;    /* embedding / rerank mode */
    struct mx_speech *speech; /* speech-to-text mode (the /v1/audio routes) */
    char name[256];           /* model id */
    const mx_tokenizer *tok;  /* for /tokenize and /detokenize; may be NULL */
    atomic_bool ready;
    atomic_ullong n_http, n_errors, n_completions;
} server;

enum MHD_Result mx_srv_send_json(struct MHD_Connection *c, unsigned code, json_t *j);
enum MHD_Result mx_srv_send_error(server *sv, struct MHD_Connection *c, unsigned code, const char *type, const char *msg);
enum MHD_Result mx_srv_bad_request(server *sv, struct MHD_Connection *c, const char *fmt, ...) MX_PRINTF(3, 4);

/* Embedding mode: a worker that runs the queued inputs of all waiting
 * requests as one batch. */
int mx_embed_batcher_new(const char *dir, int threads, mx_embed_batcher **out);
void mx_embed_batcher_free(mx_embed_batcher *b);
bool mx_embed_batcher_reranks(const mx_embed_batcher *b);
const mx_tokenizer *mx_embed_batcher_tokenizer(const mx_embed_batcher *b);
enum MHD_Result mx_route_embeddings(server *sv, struct MHD_Connection *c, json_t *req);
enum MHD_Result mx_route_rerank(server *sv, struct MHD_Connection *c, json_t *req);
#endif
