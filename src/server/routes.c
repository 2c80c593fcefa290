/* The route table: method + path -> handler. A new route is a handler in
 * its own file (an mx_route_fn) plus one declaration and one entry here;
 * the transport (transport.c) does auth, limits and JSON for every route. */
#include "server_int.h"
#include <string.h>

mx_route_fn mx_route_health, mx_route_models, mx_route_metrics;
mx_route_fn mx_route_chat, mx_route_completions;
mx_route_fn mx_route_tokenize, mx_route_detokenize;
mx_route_fn mx_route_embeddings, mx_route_rerank;
mx_route_fn mx_route_messages, mx_route_count_tokens, mx_route_responses, mx_route_response_id;
mx_route_fn mx_route_transcriptions, mx_route_translations;
mx_route_fn mx_route_llama_completion, mx_route_llama_infill, mx_route_llama_props, mx_route_llama_slots, mx_route_llama_apply_template;

static const mx_http_route g_routes[] = {
    {{"/health"}, MX_HTTP_GET, MX_RT_OPEN, mx_route_health},
    {{"/v1/models", "/models"}, MX_HTTP_GET, 0, mx_route_models},
    {{"/metrics"}, MX_HTTP_GET, 0, mx_route_metrics},
    {{"/v1/chat/completions", "/chat/completions"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_chat},
    {{"/v1/completions", "/completions"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_completions},
    {{"/v1/messages"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_messages},
    {{"/v1/messages/count_tokens"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_count_tokens},
    {{"/v1/responses", "/responses"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_responses},
    {{"/v1/responses/*", "/responses/*"}, MX_HTTP_GET | MX_HTTP_DELETE, MX_RT_GENERATES, mx_route_response_id},
    /* llama-server's own (route_llama.c) */
    {{"/completion"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_llama_completion},
    {{"/infill"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_llama_infill},
    {{"/props"}, MX_HTTP_GET, MX_RT_GENERATES, mx_route_llama_props},
    {{"/slots"}, MX_HTTP_GET, MX_RT_GENERATES, mx_route_llama_slots},
    {{"/apply-template"}, MX_HTTP_POST, MX_RT_GENERATES, mx_route_llama_apply_template},
    {{"/tokenize"}, MX_HTTP_POST, 0, mx_route_tokenize},
    {{"/detokenize"}, MX_HTTP_POST, 0, mx_route_detokenize},
    {{"/v1/embeddings", "/embeddings"}, MX_HTTP_POST, MX_RT_EMBEDS, mx_route_embeddings},
    {{"/v1/rerank", "/rerank", "/v2/rerank"}, MX_HTTP_POST, MX_RT_EMBEDS, mx_route_rerank},
    {{"/v1/audio/transcriptions", "/audio/transcriptions"}, MX_HTTP_POST, MX_RT_SPEECH | MX_RT_RAW_BODY, mx_route_transcriptions},
    {{"/v1/audio/translations", "/audio/translations"}, MX_HTTP_POST, MX_RT_SPEECH | MX_RT_RAW_BODY, mx_route_translations},
};

const mx_http_route *mx_route_find(const char *url) {
    for (size_t i = 0; i < sizeof g_routes / sizeof g_routes[0]; i++)
        for (int k = 0; k < 4 && g_routes[i].paths[k]; k++)
            if (!strcmp(url, g_routes[i].paths[k])) return &g_routes[i];
    /* prefix routes: a path ending in a star holds every path one non-empty segment below it */
    for (size_t i = 0; i < sizeof g_routes / sizeof g_routes[0]; i++)
        for (int k = 0; k < 4 && g_routes[i].paths[k]; k++) {
            const char *p = g_routes[i].paths[k];
            size_t n = strlen(p);
            if (n >= 2 && !strcmp(p + n - 2, "/*") && !strncmp(url, p, n - 1) && url[n - 1] && !strchr(url + n - 1, '/')) return &g_routes[i];
        }
    return NULL;
}
