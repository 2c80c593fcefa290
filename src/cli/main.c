/* mlxcel command-line front end: dispatches subcommands. */
#include "cli.h"
#include "../format/safetensors.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; int (*fn)(int, char **); const char *help; } g_cmds[] = {
    {"arch", cmd_arch, "list the architectures compiled in (--json)"},
    {"tokenize", cmd_tokenize, "tokenize text with a tokenizer.json / tokenizer.model (ids, tokens, decoded)"},
    {"template", cmd_template, "render a chat template with a JSON context, as HF transformers does"},
    {"generate", cmd_generate, "generate text from a prompt or prompt ids"},
    {"bench", cmd_bench, "prompt processing and generation speed, with memory bandwidth"},
    {"chat", cmd_chat, "interactive multi-turn chat in the terminal"},
    {"run", cmd_chat, "same as chat"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (also: mlxcel-server)"},
    {"convert", cmd_convert, "convert a float checkpoint, optionally quantized, to the layout mlx-lm writes"},
    {"embed", cmd_embed, "sentence embeddings / hidden states of texts or token ids"},
    {"rerank", cmd_rerank, "score documents against a query with a cross-encoder"},
};

static void usage(void) {
    fprintf(stderr, "usage: mlxcel COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) fprintf(stderr, "  %-10s %s\n", g_cmds[i].name, g_cmds[i].help);
    fprintf(stderr, "\nwith every command that loads a model:\n"
                    "  --no-mmap  read the weights into huge-page memory instead of mapping the files\n"
                    "             (also MLXCEL_NO_MMAP=1); slower start, faster decode where page-table\n"
                    "             walks are costly (large MoE checkpoints, VMs)\n");
}

/* --no-mmap is accepted anywhere and removed before the command parses. */
static int take_global_opts(int argc, char **argv) {
    const char *env = getenv("MLXCEL_NO_MMAP");
    if (env && *env && strcmp(env, "0")) mx_st_set_load_mode(MX_LOAD_COPY);
    int o = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) { while (i < argc) argv[o++] = argv[i++]; break; }
        if (!strcmp(argv[i], "--no-mmap")) { mx_st_set_load_mode(MX_LOAD_COPY); continue; }
        argv[o++] = argv[i];
    }
    argv[o] = NULL;
    return o;
}

int main(int argc, char **argv) {
    const char *prog = strrchr(argv[0], '/');
    prog = prog ? prog + 1 : argv[0];
    argc = take_global_opts(argc, argv);
    if (!strcmp(prog, "mlxcel-server")) {
        for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
            if (!strcmp(g_cmds[i].name, "serve")) return g_cmds[i].fn(argc, argv);
    }
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) { usage(); return argc < 2 ? 2 : 0; }
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(g_cmds[i].name, argv[1])) return g_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "mlxcel: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
}
