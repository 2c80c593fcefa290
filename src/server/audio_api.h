/* audio_api: the OpenAI audio routes, transport-independent (audio_api.c). */
#ifndef MX_AUDIO_API_H
#define MX_AUDIO_API_H
#include "../runtime/speech.h"

typedef struct {
    unsigned code;            /* 200, or the HTTP error status */
    const char *content_type; /* of body, when code is 200 */
    mx_buf body;              /* the reply (caller frees) */
    char err[512];            /* the message when code is not 200 */
} mx_audio_reply;

/* One request: ctype is the Content-Type header, body its bytes. Always
 * fills rep (a 400 for bad input); returns MX_OK. */
int mx_audio_api(mx_speech *sp, bool translate, const char *ctype, const char *body, size_t len, mx_audio_reply *rep);
#endif
