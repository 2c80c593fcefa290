/* mlxcel command-line front end: dispatches subcommands; `help`, --version. */
#include "cli.h"
#include "../base/base.h"
#include "../base/version.h"
#include "../base/cpu.h"
#include "../format/safetensors.h"
#include "../kernels/policy.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MX_GIT_COMMIT
#define MX_GIT_COMMIT "unknown"
#endif
#ifndef MX_BUILD_FLAGS
#define MX_BUILD_FLAGS "unknown"
#endif

static const mx_cmd *const g_cmds[] = {
    &mx_cmd_generate, &mx_cmd_chat, &mx_cmd_serve, &mx_cmd_download, &mx_cmd_list, &mx_cmd_rm, &mx_cmd_inspect, &mx_cmd_detect,
    &mx_cmd_convert, &mx_cmd_split_mtp, &mx_cmd_bench, &mx_cmd_embed, &mx_cmd_rerank, &mx_cmd_transcribe, &mx_cmd_tokenize, &mx_cmd_template,
    &mx_cmd_arch,
};
#define N_CMDS ((int)MX_ARRAY_LEN(g_cmds))

static void usage(FILE *f) {
    fprintf(f, "usage: mlxcel COMMAND [options]     (mlxcel COMMAND --help, or mlxcel help COMMAND)\n\ncommands:\n");
    for (int i = 0; i < N_CMDS; i++) fprintf(f, "  %-10s %s\n", g_cmds[i]->name, g_cmds[i]->summary);
    fprintf(f, "  %-10s %s\n\n", "help", "this list; help COMMAND for a command's options; help --markdown for the README's reference");
    fprintf(f, "  --version  version, git commit, build flags and the CPU features detected\n"
               "  --no-mmap  (any command that loads a model) read the weights into huge-page memory instead of\n"
               "             mapping the files (also MLXCEL_NO_MMAP=1)\n");
}

static const mx_cmd *find_cmd(const char *name) {
    for (int i = 0; i < N_CMDS; i++)
        if (!strcmp(g_cmds[i]->name, name) || (g_cmds[i]->alias && !strcmp(g_cmds[i]->alias, name))) return g_cmds[i];
    return NULL;
}

static int unknown_cmd(const char *name) {
    const char *names[2 * N_CMDS + 1];
    int k = 0;
    for (int i = 0; i < N_CMDS; i++) { names[k++] = g_cmds[i]->name; names[k++] = g_cmds[i]->alias; }
    names[k++] = "help";
    const char *s = mx_suggest(name, names, k);
    fprintf(stderr, "mlxcel: unknown command '%s'", name);
    if (s) fprintf(stderr, "; did you mean '%s'?", s);
    fprintf(stderr, " (mlxcel help lists the commands)\n");
    return 2;
}

static int version(void) {
    const mx_cpu_info *c = mx_cpu();
    printf("mlxcel %s (commit %s)\nbuilt with: %s\n", MX_VERSION, MX_GIT_COMMIT, MX_BUILD_FLAGS);
    printf("CPU: kernels at %s level;%s%s%s%s%s\n", mx_cpu_name(c->level), c->fma ? " fma" : "", c->f16c ? " f16c" : "",
           c->avx512_vnni ? " avx512-vnni" : "", c->avx512_bf16 ? " avx512-bf16" : "", c->avx512_vbmi ? " avx512-vbmi" : "");
    return 0;
}

/* The README's command reference: `mlxcel help --markdown`. */
static void markdown(void) {
    for (int i = 0; i < N_CMDS; i++) mx_cmd_help(g_cmds[i], stdout, true);
}

static int help(int argc, char **argv) {
    if (argc < 2) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--markdown")) { markdown(); return 0; }
    const mx_cmd *c = find_cmd(argv[1]);
    if (!c) return unknown_cmd(argv[1]);
    mx_cmd_help(c, stdout, false);
    return 0;
}

/* --no-mmap is accepted anywhere and removed before the command parses.
 * The kernel policy is read from the environment here, once, and is every
 * model's from then on (kernels/policy.h). */
static int take_global_opts(int argc, char **argv) {
    mx_kpolicy kp = mx_kpolicy_default();
    mx_kpolicy_env(&kp);
    mx_kpolicy_set_default(&kp);
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

static int run(const mx_cmd *c, int argc, char **argv) {
    void *o = calloc(1, c->size ? c->size : 1);
    if (!o) { fprintf(stderr, "mlxcel: out of memory\n"); return 1; }
    if (c->init) c->init(o);
    int rc = mx_cmd_parse(c, argc, argv, o);
    if (rc == 1) rc = 0;
    else if (rc == 0) rc = c->run(o);
    if (c->pos_meta) mx_strlist_free((mx_strlist *)((char *)o + c->pos_off));
    /* list options are freed with the struct: their strings are argv's */
    for (const mx_opt *p = c->opts; p && (p->shrt || p->lng); p++)
        if (p->kind == OPT_LIST) mx_strlist_free((mx_strlist *)((char *)o + p->off));
    free(o);
    return rc;
}

int main(int argc, char **argv) {
    const char *prog = strrchr(argv[0], '/');
    prog = prog ? prog + 1 : argv[0];
    argc = take_global_opts(argc, argv);
    cli_progress_init(1.0);
    if (!strcmp(prog, "mlxcel-server")) return run(&mx_cmd_serve, argc, argv);
    if (argc < 2) { usage(stderr); return 2; }
    const char *a = argv[1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
    if (!strcmp(a, "--version") || !strcmp(a, "-V")) return version();
    if (!strcmp(a, "help")) return help(argc - 1, argv + 1);
    const mx_cmd *c = find_cmd(a);
    if (!c) return unknown_cmd(a);
    return run(c, argc - 1, argv + 1);
}
