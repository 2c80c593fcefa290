/* mlxcel serve (also run as mlxcel-server): the OpenAI-compatible server. */
#include "cli.h"
#include "../server/server.h"
#include "../dist/dist.h"
#include "../runtime/textmodel.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mx_serve_opts s;
    int body_mb;
    int tp, pp, pp_micro; /* a distributed model (src/dist/) */
    mx_sampling samp; /* request defaults */
    mx_strlist alias; /* --alias, each a name or a comma list */
    bool jinja;       /* llama-server's --jinja: templates are always Jinja here */
    cli_kv_opts kv;
    bool fast;
    const char *kv_memory; /* --kv-memory SIZE */
    const char *cache_ram; /* --cache-ram MiB or SIZE */
} serve_opts;

static void serve_init(void *p) {
    serve_opts *o = p;
    mx_serve_opts_defaults(&o->s);
    o->body_mb = 8;
    o->tp = o->pp = 1;
    mx_sampling_defaults(&o->samp); /* OpenAI's defaults: temperature 1, a new seed per request */
    o->samp.temperature = 1.0f;
    o->samp.seed = MX_SEED_RANDOM;
}

#define S(f) offsetof(serve_opts, s.f)
static const mx_opt serve_tab[] = {
    OPT_MODEL(serve_opts, s.model_dir),
    {NULL, "--host", NULL, OPT_STR, "ADDR", 0, 0, S(host), "address to listen on (an IPv4 or IPv6 address, or localhost)", NULL, 0},
    {NULL, "--port", NULL, OPT_INT, "PORT", 0, 65535, S(port), "port to listen on", NULL, 0},
    {"-np", "--parallel", NULL, OPT_INT, "N", 1, 256, S(parallel), "requests generated at once (slots)", NULL, 0},
    {"-c", "--ctx-size", NULL, OPT_INT, "N", 16, 1 << 22, S(ctx_size),
     "context size of each slot (llama-server's -c is the total, divided across -np slots)", NULL, 0},
    {"-ub", "--step-tokens", "--ubatch-size", OPT_INT, "N", 1, 1 << 16, S(step_tokens), "at most N tokens in one forward pass (decode + prompt chunks)",
     NULL, 0},
    OPT_THREADS(serve_opts, s.threads),
    {NULL, "--tp", NULL, OPT_INT, "T", 1, 4096, offsetof(serve_opts, tp),
     "tensor parallelism over T processes (under mpirun; rank 0 serves HTTP; see Distributed runs)", NULL, 0},
    {NULL, "--pp", NULL, OPT_INT, "P", 1, 4096, offsetof(serve_opts, pp), "pipeline parallelism over P stages (under mpirun)", NULL, 0},
    {NULL, "--pp-micro", NULL, OPT_INT, "N", 1, 64, offsetof(serve_opts, pp_micro), "micro-batches per pass under --pp: each stage computes one while the next stage takes the one before (default: --pp, twice as many for a pass of 256 tokens or more; 1: none)", NULL, 0},
    OPT_KV(serve_opts, kv),
    {NULL, "--state-snapshots", NULL, OPT_INT, "N", 0, 64, S(state_snapshots),
     "models with recurrent state (hybrids, SSMs): snapshots of it kept per slot, so a prompt sharing a prefix reuses the cache "
     "(the latest prompt's end and its first --snapshot-every boundaries); 0: off",
     NULL, 0},
    {NULL, "--snapshot-every", NULL, OPT_INT, "N", 1, 1 << 20, S(snapshot_every), "prompt tokens between state snapshots", NULL, 0},
    {NULL, "--kv-memory", NULL, OPT_STR, "SIZE", 0, 0, offsetof(serve_opts, kv_memory),
     "memory all slots' KV caches may take together (bytes, or with K, M, G: binary units); requests wait for room, idle slots' caches are released",
     NULL, 0},
    {"-cram", "--cache-ram", NULL, OPT_STR, "N", 0, 0, offsetof(serve_opts, cache_ram),
     "prompt cache: caches of earlier prompts kept after their slot moves on, reused by any later prompt starting the same way "
     "(MiB as llama-server's, or a size such as 2G; default 8192; -1: no bound; 0: off)",
     NULL, 0},
    OPT_FAST(serve_opts, fast),
    {NULL, "--lookup-ngram", NULL, OPT_INT, "N", 0, 64, S(lookup_ngram),
     "speculative decoding by prompt lookup in every slot: draft what followed the last earlier match of the last N..1 tokens", NULL, 0},
    {"-md", "--draft-model", "--model-draft", OPT_STR, "DIR", 0, 0, S(draft_dir),
     "speculative decoding with this draft model in every slot (the target's tokenizer; its own cache per slot), or a next-n module split-mtp wrote", NULL, 0},
    {NULL, "--draft-max", NULL, OPT_INT, "N", 1, 64, S(draft_max), "tokens drafted per step and slot (with --lookup-ngram or --draft-model)", NULL, 0},
    {NULL, "--api-key", NULL, OPT_STR, "KEY", 0, 0, S(api_key), "require 'Authorization: Bearer KEY' (or 'x-api-key: KEY')", NULL, 0},
    {"-a", "--alias", NULL, OPT_LIST, "NAME", 0, 0, offsetof(serve_opts, alias),
     "the model's id in the API (repeatable or a comma list: the first is the id, all are listed by /v1/models)", NULL, 0},
    {NULL, "--max-body-mb", NULL, OPT_INT, "M", 1, 4096, offsetof(serve_opts, body_mb), "refuse request bodies over M MB (413)", NULL, 0},
    OPT_TEMPLATES(serve_opts, s.chat_template, s.chat_template_file),
    {NULL, "--jinja", NULL, OPT_FLAG, NULL, 0, 0, offsetof(serve_opts, jinja), "accepted (llama-server): chat templates are always Jinja here",
     NULL, 0},
    {NULL, "--allowed-image-dir", NULL, OPT_STR, "DIR", 0, 0, S(image_dir),
     "chat image parts may name local files (file:// or absolute paths) under DIR; otherwise only data: URLs", NULL, 0},
    /* limits against hostile clients (docs/security.md) */
    {NULL, "--max-conns-per-ip", NULL, OPT_INT, "N", 0, 1 << 20, S(max_conns_per_ip), "open connections per client address (0: no limit)", NULL, 0},
    {NULL, "--rate-limit", NULL, OPT_FLOAT, "R", 0, 1e6, S(rate_limit), "requests per second per client address, in bursts of R (429); 0: off", NULL, 0},
    {NULL, "--max-queue", NULL, OPT_INT, "N", 0, 1 << 20, S(max_queue), "requests waiting beyond the --parallel running ones (503 past it)", NULL, 0},
    {NULL, "--header-timeout", NULL, OPT_FLOAT, "S", 0.1, 3600, S(header_timeout), "seconds for a request's headers to arrive", NULL, 0},
    {NULL, "--body-timeout", NULL, OPT_FLOAT, "S", 0.1, 3600, S(body_timeout), "seconds for a request's body to arrive", NULL, 0},
    {NULL, "--max-messages", NULL, OPT_INT, "N", 1, 1 << 24, S(max_messages), "messages per chat request", NULL, 0},
    {NULL, "--prompt-budget", NULL, OPT_FLOAT, "S", 0.01, 3600, S(prompt_budget), "seconds of template rendering and tokenizing per request", NULL, 0},
    {NULL, "--shutdown-grace", NULL, OPT_FLOAT, "S", 0, 3600, S(shutdown_grace), "seconds requests in flight get after SIGTERM before they are ended", NULL, 0},
    {NULL, "--cors", NULL, OPT_STR, "ORIGIN", 0, 0, S(cors), "allow browser pages from ORIGIN (or *) to call the API (CORS); off by default", NULL, 0},
    {NULL, "--no-request-log", NULL, OPT_FLAG, NULL, 0, 0, S(no_request_log), "no line per request on stderr (method, path, status, tokens, ms)", NULL, 0},
    {NULL, "--allow-special-in-content", NULL, OPT_FLAG, NULL, 0, 0, S(allow_special_in_content),
     "read special tokens in message content (unsafe with untrusted clients)", NULL, 0},
    /* llama-server's flags for GPUs and its own memory management: accepted so its scripts run */
    {"-ngl", "--n-gpu-layers", "--gpu-layers", OPT_IGNORED, "N", 0, 0, 0, "layers on the GPU (llama-server): mlxcel runs on the CPU", NULL, 0},
    {"-fa", "--flash-attn", NULL, OPT_IGNORED, NULL, 0, 0, 0, "flash attention (llama-server): not a setting in mlxcel",
     "on|off|auto", 0},
    {"-sm", "--split-mode", NULL, OPT_IGNORED, "MODE", 0, 0, 0, "multi-GPU split (llama-server): mlxcel runs on the CPU", NULL, 0},
    {"-ts", "--tensor-split", NULL, OPT_IGNORED, "SPLIT", 0, 0, 0, "multi-GPU split (llama-server): mlxcel runs on the CPU", NULL, 0},
    {"-mg", "--main-gpu", NULL, OPT_IGNORED, "I", 0, 0, 0, "main GPU (llama-server): mlxcel runs on the CPU", NULL, 0},
    {"-dev", "--device", NULL, OPT_IGNORED, "DEV", 0, 0, 0, "devices (llama-server): mlxcel runs on the CPU", NULL, 0},
    {"-nkvo", "--no-kv-offload", NULL, OPT_IGNORED, NULL, 0, 0, 0, "KV offload (llama-server): the cache is in CPU memory", NULL, 0},
    {NULL, "--mlock", NULL, OPT_IGNORED, NULL, 0, 0, 0, "lock the weights in RAM (llama-server): not done; --no-mmap copies them instead", NULL, 0},
    {"-b", "--batch-size", NULL, OPT_IGNORED, "N", 0, 0, 0, "logical batch (llama-server): prompts go in chunks of --step-tokens", NULL, 0},
    {"-cb", "--cont-batching", NULL, OPT_IGNORED, NULL, 0, 0, 0, "continuous batching (llama-server): always on", NULL, 0},
    {NULL, "--metrics", NULL, OPT_IGNORED, NULL, 0, 0, 0, "the /metrics route (llama-server): always served", NULL, 0},
    {NULL, "--slots", NULL, OPT_IGNORED, NULL, 0, 0, 0, "the /slots route (llama-server): always served", NULL, 0},
    {0},
};
#undef S

/* llama-server's environment variables for the options both have */
static const mx_opt_env serve_env[] = {
    {"--model", "LLAMA_ARG_MODEL"}, {"--host", "LLAMA_ARG_HOST"}, {"--port", "LLAMA_ARG_PORT"},
    {"--parallel", "LLAMA_ARG_N_PARALLEL"}, {"--ctx-size", "LLAMA_ARG_CTX_SIZE"}, {"--step-tokens", "LLAMA_ARG_UBATCH"},
    {"--threads", "LLAMA_ARG_THREADS"}, {"--api-key", "LLAMA_API_KEY"}, {"--api-key", "LLAMA_ARG_API_KEY"}, {"--alias", "LLAMA_ARG_ALIAS"},
    {"--chat-template", "LLAMA_ARG_CHAT_TEMPLATE"}, {"--chat-template-file", "LLAMA_ARG_CHAT_TEMPLATE_FILE"}, {"--jinja", "LLAMA_ARG_JINJA"},
    {"--n-gpu-layers", "LLAMA_ARG_N_GPU_LAYERS"}, {"--flash-attn", "LLAMA_ARG_FLASH_ATTN"}, {"--split-mode", "LLAMA_ARG_SPLIT_MODE"},
    {"--tensor-split", "LLAMA_ARG_TENSOR_SPLIT"}, {"--main-gpu", "LLAMA_ARG_MAIN_GPU"}, {"--device", "LLAMA_ARG_DEVICE"},
    {"--no-kv-offload", "LLAMA_ARG_NO_KV_OFFLOAD"}, {"--mlock", "LLAMA_ARG_MLOCK"}, {"--batch-size", "LLAMA_ARG_BATCH"},
    {"--draft-max", "LLAMA_ARG_DRAFT_MAX"}, {"--draft-model", "LLAMA_ARG_MODEL_DRAFT"}, {"--cont-batching", "LLAMA_ARG_CONT_BATCHING"}, {"--metrics", "LLAMA_ARG_ENDPOINT_METRICS"}, {"--slots", "LLAMA_ARG_ENDPOINT_SLOTS"}, {"--cache-ram", "LLAMA_ARG_CACHE_RAM"},
    {0},
};

/* "512M", "3G", "1.5G", "1048576": bytes (K, M, G, T: powers of 1024) */
static int parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double u = 1;
    switch (*end) {
    case 'K': case 'k': u = 1024.0; end++; break;
    case 'M': case 'm': u = 1048576.0; end++; break;
    case 'G': case 'g': u = 1073741824.0; end++; break;
    case 'T': case 't': u = 1099511627776.0; end++; break;
    default: break;
    }
    if (*end == 'i' && u > 1) end++;
    if ((*end == 'B' || *end == 'b') && end[-1] != 0) end++;
    if (errno || end == s || *end || !(v > 0) || v * u > 1e18) return -1;
    *out = (size_t)(v * u);
    return 0;
}

static int serve_run(void *p) {
    serve_opts *o = p;
    if (!o->s.model_dir) { fprintf(stderr, "mlxcel serve: -m MODEL is required\n"); return 2; }
    if (o->s.chat_template && o->s.chat_template_file) { fprintf(stderr, "mlxcel serve: give --chat-template or --chat-template-file, not both\n"); return 2; }
    o->s.max_body = (size_t)o->body_mb << 20;
    if (o->kv_memory && parse_size(o->kv_memory, &o->s.kv_memory)) {
        fprintf(stderr, "mlxcel serve: --kv-memory '%s': give a size such as 2G, 512M or a number of bytes\n", o->kv_memory);
        return 2;
    }
    if (o->cache_ram) { /* a plain number is MiB (llama-server's unit) */
        char *end;
        errno = 0;
        long long v = strtoll(o->cache_ram, &end, 10);
        size_t b;
        if (!errno && end != o->cache_ram && !*end && v >= -1 && v <= ((long long)1 << 40)) o->s.cache_ram = v < 0 ? -1 : (int64_t)v << 20;
        else if (!parse_size(o->cache_ram, &b)) o->s.cache_ram = (int64_t)b;
        else {
            fprintf(stderr, "mlxcel serve: --cache-ram '%s': give MiB (-1: no bound, 0: off) or a size such as 2G\n", o->cache_ram);
            return 2;
        }
    }
    cli_fast_apply(o->fast);
    if (cli_kv_apply("serve", &o->kv)) return 2;
    if (o->s.draft_dir && o->s.lookup_ngram) { fprintf(stderr, "mlxcel serve: give --draft-model or --lookup-ngram, not both\n"); return 2; }
    char *dir = cli_model_dir("serve", o->s.model_dir), *ddir = NULL;
    if (!dir) return 1;
    if (o->s.draft_dir && !(ddir = cli_model_dir("serve", o->s.draft_dir))) { free(dir); return 1; }
    o->s.draft_dir = ddir;
    o->s.model_name = strcmp(dir, o->s.model_dir) ? o->s.model_dir : NULL; /* a hub id is the model's id */
    o->s.model_dir = dir;
    o->s.sampling = &o->samp;
    /* llama-server's names for the loopback address */
    if (!strcmp(o->s.host, "localhost")) o->s.host = "127.0.0.1";
    /* --alias: repeated, or comma lists; the first name is the model's id */
    char *names = NULL;
    const char **aliases = NULL;
    size_t len = 0;
    for (int i = 0; i < o->alias.n; i++) len += strlen(o->alias.v[i]) + 1;
    if (len && (!(names = malloc(len)) || !(aliases = calloc(len, sizeof *aliases)))) {
        free(names);
        free(dir); free(ddir);
        fprintf(stderr, "mlxcel serve: out of memory\n");
        return 1;
    }
    char *w = names;
    for (int i = 0; i < o->alias.n; i++) {
        for (const char *a = o->alias.v[i];;) {
            size_t l = strcspn(a, ",");
            if (l) {
                memcpy(w, a, l);
                w[l] = 0;
                aliases[o->s.n_aliases++] = w;
                w += l + 1;
            }
            if (!a[l]) break;
            a += l + 1;
        }
    }
    if (o->alias.n && !o->s.n_aliases) {
        free(names); free(aliases); free(dir); free(ddir);
        fprintf(stderr, "mlxcel serve: --alias: no name given\n");
        return 2;
    }
    o->s.aliases = aliases;
    if (o->s.n_aliases) o->s.model_name = aliases[0];
    if (o->s.parallel > 1)
        fprintf(stderr, "mlxcel serve: note: -c/--ctx-size is per slot here: %d slots x %d positions (llama-server divides -c across -np slots)\n",
                o->s.parallel, o->s.ctx_size);
    mx_dist_micro(o->pp_micro);
    if (mx_dist_start(o->tp, o->pp, o->s.threads)) {
        if (mx_dist_rank() == 0) fprintf(stderr, "mlxcel serve: %s\n", mx_errmsg());
        mx_dist_finish();
        free(aliases); free(names); free(dir); free(ddir);
        return 2;
    }
    int rc;
    if (mx_dist_rank() != 0) { /* a distributed run: rank 0 serves HTTP and drives, this process serves its part of each pass */
        mx_textmodel tm;
        rc = mx_textmodel_open(dir, &tm) ? 1 : mx_dist_worker(&tm.e.model) ? 1 : 0;
        if (!rc) mx_textmodel_close(&tm);
    } else rc = mx_serve(&o->s);
    mx_dist_finish();
    free(aliases);
    free(names);
    free(dir);
    free(ddir);
    return rc;
}

const mx_cmd mx_cmd_serve = {
    .name = "serve",
    .summary = "OpenAI-compatible HTTP server (also: mlxcel-server)",
    .usage = "-m MODEL [options]",
    .details = "Routes and request fields are listed under \"Server API\" below; the sampling options set what a request's "
               "absent sampling fields take (a field the request gives wins). A hub id given to -m is the model's id. "
               "llama-server's flags and LLAMA_ARG_* variables are read as the table \"llama-server flags\" says; "
               "the command line wins over the environment.",
    .opts = serve_tab,
    .size = sizeof(serve_opts),
    .init = serve_init,
    .samp_off = offsetof(serve_opts, samp),
    .run = serve_run,
    .loads_model = true,
    .env = serve_env,
};
