/* Stored Responses (OpenAI Responses API, `store`): what a finished
 * response was (the object GET /v1/responses/{id} returns) and the
 * conversation it ends (the chat messages, its own reply included) that a
 * later request continues with previous_response_id. Kept for the server's
 * lifetime in a bounded LRU: at most MX_RESP_STORE_COUNT responses and
 * MX_RESP_STORE_BYTES bytes of their JSON; the least recently used goes
 * first. Any thread; entries are copied in and out under the lock. */
#include "resp_store.h"
#include "../base/base.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char id[48];
    json_t *response, *messages;
    size_t bytes;
    struct entry *prev, *next; /* most recently used first */
} entry;

struct mx_resp_store {
    pthread_mutex_t mu;
    entry *head, *tail;
    int n;
    size_t bytes;
};

static size_t json_bytes(const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    size_t n = s ? strlen(s) : 0;
    free(s);
    return n;
}

static void unlink_entry(mx_resp_store *s, entry *e) {
    if (e->prev) e->prev->next = e->next;
    else s->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else s->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(mx_resp_store *s, entry *e) {
    e->next = s->head;
    if (s->head) s->head->prev = e;
    s->head = e;
    if (!s->tail) s->tail = e;
}

static void entry_free(entry *e) {
    json_decref(e->response);
    json_decref(e->messages);
    free(e);
}

/* Out of the list and the counts, and freed; the caller holds mu. */
static void drop(mx_resp_store *s, entry *e) {
    unlink_entry(s, e);
    s->n--;
    s->bytes -= e->bytes;
    entry_free(e);
}

static entry *find(mx_resp_store *s, const char *id) {
    for (entry *e = s->head; e; e = e->next)
        if (!strcmp(e->id, id)) return e;
    return NULL;
}

static mx_resp_store *store_get(server *sv, bool create) {
    static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&init_mu);
    if (!sv->responses && create && (sv->responses = calloc(1, sizeof *sv->responses))) pthread_mutex_init(&sv->responses->mu, NULL);
    mx_resp_store *s = sv->responses;
    pthread_mutex_unlock(&init_mu);
    return s;
}

bool mx_resp_store_put(server *sv, const char *id, json_t *response, json_t *messages) {
    mx_resp_store *s = store_get(sv, true);
    entry *e = s ? calloc(1, sizeof *e) : NULL;
    if (!e || strlen(id) >= sizeof e->id) { free(e); return false; }
    snprintf(e->id, sizeof e->id, "%s", id);
    e->response = json_deep_copy(response);
    e->messages = json_deep_copy(messages);
    e->bytes = json_bytes(response) + json_bytes(messages);
    if (!e->response || !e->messages || e->bytes > MX_RESP_STORE_BYTES) { entry_free(e); return false; }
    pthread_mutex_lock(&s->mu);
    entry *old = find(s, id);
    if (old) drop(s, old);
    push_front(s, e);
    s->n++;
    s->bytes += e->bytes;
    while (s->n > MX_RESP_STORE_COUNT || s->bytes > MX_RESP_STORE_BYTES) drop(s, s->tail); /* the least recently used */
    pthread_mutex_unlock(&s->mu);
    return true;
}

bool mx_resp_store_get(server *sv, const char *id, json_t **response, json_t **messages) {
    mx_resp_store *s = store_get(sv, false);
    if (!s) return false;
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, id);
    if (e) {
        unlink_entry(s, e);
        push_front(s, e);
        if (response) *response = json_deep_copy(e->response);
        if (messages) *messages = json_deep_copy(e->messages);
    }
    pthread_mutex_unlock(&s->mu);
    return e != NULL;
}

bool mx_resp_store_delete(server *sv, const char *id) {
    mx_resp_store *s = store_get(sv, false);
    if (!s) return false;
    pthread_mutex_lock(&s->mu);
    entry *e = find(s, id);
    if (e) drop(s, e);
    pthread_mutex_unlock(&s->mu);
    return e != NULL;
}

void mx_resp_store_free(server *sv) {
    mx_resp_store *s = sv->responses;
    if (!s) return;
    while (s->head) {
        entry *e = s->head;
        s->head = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
    sv->responses = NULL;
}
