/* mlxcel serve (also run as mlxcel-server): the OpenAI-compatible server. */
#include "cli.h"
#include "args.h"
#include "../base/threadpool.h"
#include "../server/server.h"
#include <stdio.h>
#include <string.h>

int cmd_serve(int argc, char **argv) {
    mx_serve_opts o = {.host = "127.0.0.1", .port = 8080, .parallel = 4, .ctx_size = 4096, .step_tokens = 256,
                       .threads = mx_default_threads(), .max_body = 8u << 20};
    int body_mb = 8;
    mx_args a = {"serve", argc, 1, argv};
    for (; a.i < argc; a.i++) {
        bool ok = true;
        if (mx_arg_is(&a, "-m", "--model")) ok = (o.model_dir = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--host", NULL)) ok = (o.host = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--port", NULL)) ok = mx_arg_int(&a, 0, 65535, &o.port);
        else if (mx_arg_is(&a, "-np", "--parallel")) ok = mx_arg_int(&a, 1, 256, &o.parallel);
        else if (mx_arg_is(&a, "-c", "--ctx-size")) ok = mx_arg_int(&a, 16, 1 << 22, &o.ctx_size);
        else if (mx_arg_is(&a, "--step-tokens", NULL)) ok = mx_arg_int(&a, 1, 1 << 16, &o.step_tokens);
        else if (mx_arg_is(&a, "-t", "--threads")) ok = mx_arg_int(&a, 1, 1024, &o.threads);
        else if (mx_arg_is(&a, "--api-key", NULL)) ok = (o.api_key = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--max-body-mb", NULL)) ok = mx_arg_int(&a, 1, 4096, &body_mb);
        else if (mx_arg_is(&a, "--chat-template", NULL)) ok = (o.chat_template = mx_arg_val(&a)) != NULL;
        else if (mx_arg_is(&a, "--chat-template-file", NULL)) ok = (o.chat_template_file = mx_arg_val(&a)) != NULL;
        else return mx_arg_unknown(&a);
        if (!ok) return 2;
    }
    if (!o.model_dir) { fprintf(stderr, "mlxcel serve: -m DIR is required\n"); return 2; }
    if (o.chat_template && o.chat_template_file) { fprintf(stderr, "mlxcel serve: give --chat-template or --chat-template-file, not both\n"); return 2; }
    o.max_body = (size_t)body_mb << 20;
    return mx_serve(&o);
}
