/* Internal to server/: the stored responses of the OpenAI Responses API
 * (resp_store.c), a bounded LRU kept for the server's lifetime. */
#ifndef MX_SERVER_RESP_STORE_H
#define MX_SERVER_RESP_STORE_H
#include "server_int.h"

#define MX_RESP_STORE_COUNT 1024          /* responses kept */
#define MX_RESP_STORE_BYTES (64u << 20)   /* bytes of their JSON kept */

/* Stores copies of a finished response object and the conversation it ends
 * (chat messages, its reply included) under id, evicting the least recently
 * used past the bounds; false when it cannot be kept (too big, no memory). */
bool mx_resp_store_put(server *sv, const char *id, json_t *response, json_t *messages);
/* Copies of what id holds (either out may be NULL); false when unknown. */
bool mx_resp_store_get(server *sv, const char *id, json_t **response, json_t **messages);
bool mx_resp_store_delete(server *sv, const char *id);
void mx_resp_store_free(server *sv);
#endif
