/* opts: one option table per command. Parsing, -h/--help, `mlxcel help
 * CMD`, "did you mean" for typos and the README's command reference
 * (`mlxcel help --markdown`) all come from the table, so they cannot
 * disagree. A command's options live in a struct of its own; each entry
 * says where its value goes (offsetof) and the command's init function
 * sets the defaults that help prints. Sampling options come from the
 * runtime's shared table (runtime/sampling_opts.h). */
#ifndef MX_OPTS_H
#define MX_OPTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    OPT_FLAG,   /* bool set to true */
    OPT_UNSET,  /* bool set to false (--no-progress) */
    OPT_STR,    /* const char * */
    OPT_INT,    /* int in [lo, hi] */
    OPT_FLOAT,  /* float in [lo, hi] */
    OPT_CHOICE, /* const char *, one of choices ("text|json") */
    OPT_LIST,   /* mx_strlist: every occurrence appended */
    OPT_IGNORED, /* another server's flag accepted for compatibility: one warning line (its help), no effect;
                    takes a value when meta is set, an optional one of choices when only choices is */
} mx_opt_kind;

enum { OPT_NODEF = 1 /* the default depends on the machine: help does not print it */ };

typedef struct {
    const char *shrt, *lng, *alias; /* "-m", "--model", another long spelling; any may be NULL */
    mx_opt_kind kind;
    const char *meta;               /* value name in help ("DIR") */
    double lo, hi;
    size_t off;
    const char *help;
    const char *choices;
    int flags;
} mx_opt;

/* An environment variable that sets an option (named by its long name)
 * when the command line does not. */
typedef struct {
    const char *opt, *var;
} mx_opt_env;

typedef struct {
    const char **v;
    int n;
} mx_strlist;

typedef struct mx_cmd {
    const char *name, *alias; /* alias: "run" for chat */
    const char *summary;      /* one line for the command list */
    const char *usage;        /* the synopsis after "mlxcel NAME " */
    const char *details;      /* a paragraph for help and the README; may be NULL */
    const mx_opt *opts;       /* ends with {0} */
    size_t size;              /* of the options struct */
    void (*init)(void *o);    /* defaults; may be NULL */
    size_t samp_off;          /* offset of an mx_sampling in the struct, or OPT_NO_SAMPLING */
    const char *pos_meta;     /* positional arguments' name, or NULL when none are taken */
    size_t pos_off;           /* mx_strlist receiving them */
    int (*run)(void *o);
    bool loads_model;         /* takes --no-mmap */
    const mx_opt_env *env;    /* options the environment sets (ends with {0}); may be NULL */
} mx_cmd;
#define OPT_NO_SAMPLING ((size_t)-1)

/* Parses argv[1..argc) (argv[0] is the command name) into o, which the
 * caller allocated with spec->size bytes (zeroed) and ran init on; then
 * the options the command line did not give take their environment
 * variable (mx_cmd.env) when it is set (a flag: 1/true/on/enabled or
 * 0/false/off/disabled).
 * Returns 0 to run, 1 when help was printed (exit 0), 2 on a usage error
 * (printed, with a suggestion for a mistyped option). */
int mx_cmd_parse(const mx_cmd *c, int argc, char **argv, void *o);
/* Per-command help; markdown: a README section. */
void mx_cmd_help(const mx_cmd *c, FILE *f, bool markdown);
void mx_strlist_free(mx_strlist *l);
/* The candidate nearest to word by edit distance, when near enough to be
 * a typo of it; NULL otherwise. */
const char *mx_suggest(const char *word, const char *const *cands, int n);
#endif
