#include "opts.h"
#include "../base/base.h"
#include "../runtime/sampling_opts.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An option of the command: its own table's entry or a shared sampling field. */
typedef struct {
    mx_opt o;
    const mx_samp_field *sf;
    char env[96];    /* its environment variables (mx_cmd.env), comma-separated; "" when none */
} ent;

#define MAX_ENTS 96

static int collect(const mx_cmd *c, ent *e) {
    int n = 0;
    for (const mx_opt *o = c->opts; o && (o->shrt || o->lng); o++) {
        e[n] = (ent){*o, NULL, ""};
        for (const mx_opt_env *v = c->env; v && v->opt && o->lng; v++) {
            size_t l = strlen(e[n].env);
            if (!strcmp(v->opt, o->lng)) snprintf(e[n].env + l, sizeof e[n].env - l, "%s%s", l ? ", " : "", v->var);
        }
        n++;
    }
    if (c->samp_off != OPT_NO_SAMPLING)
        for (int i = 0; i < mx_n_samp_fields && n < MAX_ENTS; i++) {
            const mx_samp_field *f = &mx_samp_fields[i];
            e[n++] = (ent){{f->cli_short, f->cli, f->cli_alias, OPT_FLOAT, f->meta, f->lo, f->hi, 0, f->help, NULL, 0}, f, ""};
        }
    return n;
}

static bool is(const char *a, const char *name) { return name && !strcmp(a, name); }

void mx_strlist_free(mx_strlist *l) {
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            size_t m = sub < del ? sub : del;
            m = m < ins ? m : ins;
            /* a swap of two neighbours counts as one edit */
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < m) m = d[i - 2][j - 2] + 1;
            d[i][j] = m;
        }
    return d[la][lb];
}

const char *mx_suggest(const char *word, const char *const *cands, int n) {
    const char *best = NULL;
    size_t bd = 99, lw = strlen(word);
    for (int i = 0; i < n; i++) {
        if (!cands[i]) continue;
        size_t d = edit_distance(word, cands[i]);
        /* a prefix of a long option ("--max") points at it too */
        if (lw >= 4 && !strncmp(cands[i], word, lw) && d > 1) d = 2;
        if (d < bd) { bd = d; best = cands[i]; }
    }
    size_t limit = lw <= 4 ? 1 : lw <= 8 ? 2 : 3;
    return bd <= limit ? best : NULL;
}

static void unknown(const mx_cmd *c, const ent *e, int n, const char *arg) {
    const char *names[3 * MAX_ENTS + 2];
    int k = 0;
    for (int i = 0; i < n; i++) { names[k++] = e[i].o.shrt; names[k++] = e[i].o.lng; names[k++] = e[i].o.alias; }
    names[k++] = "--help";
    char word[128];
    snprintf(word, sizeof word, "%s", arg);
    char *eq = strchr(word, '=');
    if (eq && word[1] == '-') *eq = 0;
    const char *s = mx_suggest(word, names, k);
    fprintf(stderr, "mlxcel %s: unknown option '%s'", c->name, word);
    if (s) fprintf(stderr, "; did you mean '%s'?", s);
    fprintf(stderr, " (mlxcel %s --help lists the options)\n", c->name);
}

static int append(mx_strlist *l, const char *v) {
    const char **nv = realloc(l->v, sizeof(char *) * (size_t)(l->n + 1));
    if (!nv) { fprintf(stderr, "mlxcel: out of memory\n"); return 2; }
    l->v = nv;
    l->v[l->n++] = v;
    return 0;
}

static int set_value(const mx_cmd *c, const ent *e, const char *opt, const char *v, void *o) {
    void *p = (char *)o + e->o.off;
    if (e->sf) {
        if (mx_samp_set_str((mx_sampling *)((char *)o + c->samp_off), e->sf, v, opt)) {
            fprintf(stderr, "mlxcel %s: %s\n", c->name, mx_errmsg());
            return 2;
        }
        return 0;
    }
    char *end;
    errno = 0;
    switch (e->o.kind) {
    case OPT_STR: *(const char **)p = v; return 0;
    case OPT_LIST: return append((mx_strlist *)p, v);
    case OPT_CHOICE: {
        size_t lv = strlen(v);
        for (const char *s = e->o.choices; *s;) {
            size_t l = strcspn(s, "|");
            if (l == lv && !strncmp(s, v, l)) { *(const char **)p = v; return 0; }
            s += l + (s[l] == '|');
        }
        fprintf(stderr, "mlxcel %s: %s: '%s' is not one of %s\n", c->name, opt, v, e->o.choices);
        return 2;
    }
    case OPT_INT: {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < e->o.lo || x > e->o.hi) {
            fprintf(stderr, "mlxcel %s: %s: '%s' is not an integer in [%.0f, %.0f]\n", c->name, opt, v, e->o.lo, e->o.hi);
            return 2;
        }
        *(int *)p = (int)x;
        return 0;
    }
    case OPT_FLOAT: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= e->o.lo && x <= e->o.hi)) {
            fprintf(stderr, "mlxcel %s: %s: '%s' is not a number in [%.10g, %.10g]\n", c->name, opt, v, e->o.lo, e->o.hi);
            return 2;
        }
        *(float *)p = (float)x;
        return 0;
    }
    case OPT_IGNORED:
        fprintf(stderr, "mlxcel %s: warning: %s%s%s is ignored: %s\n", c->name, opt, v ? " " : "", v ? v : "", e->o.help);
        return 0;
    default: return 2;
    }
}

/* An optional value of an OPT_IGNORED option: one of its choices. */
static bool is_choice(const mx_opt *o, const char *v) {
    size_t lv = strlen(v);
    for (const char *s = o->choices; s && *s;) {
        size_t l = strcspn(s, "|");
        if (l == lv && !strncmp(s, v, l)) return true;
        s += l + (s[l] == '|');
    }
    return false;
}

/* The options the command line left unset take their environment variable
 * (the first of the command's table that is set, for an option with several). */
static int from_env(const mx_cmd *c, const ent *e, int n, bool *given, void *o) {
    for (const mx_opt_env *ev = c->env; ev && ev->opt; ev++) {
        int k = 0;
        while (k < n && !(e[k].o.lng && !strcmp(e[k].o.lng, ev->opt))) k++;
        const char *v = k < n && !given[k] ? getenv(ev->var) : NULL;
        if (!v) continue;
        given[k] = true;
        mx_opt_kind kind = e[k].o.kind;
        if (kind == OPT_FLAG || kind == OPT_UNSET || (kind == OPT_IGNORED && !e[k].o.meta)) {
            bool on = !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on") || !strcmp(v, "enabled");
            bool off = !strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off") || !strcmp(v, "disabled");
            if (kind == OPT_IGNORED && (on || off || is_choice(&e[k].o, v))) {
                set_value(c, &e[k], ev->var, v, o);
                continue;
            }
            if (!on && !off) {
                fprintf(stderr, "mlxcel %s: %s='%s' is not one of 1, true, on, enabled, 0, false, off, disabled\n", c->name, ev->var, v);
                return 2;
            }
            *(bool *)((char *)o + e[k].o.off) = (kind == OPT_FLAG) == on;
            continue;
        }
        int rc = set_value(c, &e[k], ev->var, v, o);
        if (rc) return rc;
    }
    return 0;
}

int mx_cmd_parse(const mx_cmd *c, int argc, char **argv, void *o) {
    ent e[MAX_ENTS];
    int n = collect(c, e);
    bool only_pos = false, given[MAX_ENTS] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool opt = !only_pos && a[0] == '-' && a[1] && strcmp(a, "-");
        if (opt && !strcmp(a, "--")) { only_pos = true; continue; }
        if (!opt) {
            if (!c->pos_meta) {
                fprintf(stderr, "mlxcel %s: unexpected argument '%s' (mlxcel %s --help)\n", c->name, a, c->name);
                return 2;
            }
            if (append((mx_strlist *)((char *)o + c->pos_off), a)) return 2;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { mx_cmd_help(c, stdout, false); return 1; }
        /* --name=value */
        char name[128];
        const char *val = NULL, *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t ln = eq ? (size_t)(eq - a) : strlen(a);
        if (ln >= sizeof name) ln = sizeof name - 1;
        memcpy(name, a, ln);
        name[ln] = 0;
        if (eq) val = eq + 1;
        const ent *m = NULL;
        for (int k = 0; k < n && !m; k++)
            if (is(name, e[k].o.shrt) || is(name, e[k].o.lng) || is(name, e[k].o.alias)) m = &e[k];
        if (!m) { unknown(c, e, n, a); return 2; }
        given[m - e] = true;
        if (!m->sf && m->o.kind == OPT_IGNORED && !m->o.meta) {
            /* a flag, or an optional value that is one of its choices */
            if (!val && i + 1 < argc && is_choice(&m->o, argv[i + 1])) val = argv[++i];
            set_value(c, m, name, val, o);
            continue;
        }
        if (!m->sf && (m->o.kind == OPT_FLAG || m->o.kind == OPT_UNSET)) {
            if (val) { fprintf(stderr, "mlxcel %s: %s takes no value\n", c->name, name); return 2; }
            *(bool *)((char *)o + m->o.off) = m->o.kind == OPT_FLAG;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) { fprintf(stderr, "mlxcel %s: option %s needs a value (%s)\n", c->name, name, m->o.meta ? m->o.meta : "VALUE"); return 2; }
            val = argv[++i];
        }
        int rc = set_value(c, m, name, val, o);
        if (rc) return rc;
    }
    return from_env(c, e, n, given, o);
}

/* ---- help ---- */

static void names_of(const ent *e, char *out, size_t n, bool md) {
    const char *q = md ? "`" : "";
    int k = 0;
    const char *parts[3] = {e->o.shrt, e->o.lng, e->o.alias};
    out[0] = 0;
    for (int i = 0; i < 3; i++) {
        if (!parts[i]) continue;
        k += snprintf(out + k, n - (size_t)k, "%s%s%s%s", k ? ", " : "", q, parts[i], q);
        if ((size_t)k >= n) return;
    }
    if (!md && !e->sf && e->o.kind == OPT_IGNORED && !e->o.meta) {
        if (e->o.choices) snprintf(out + k, n - (size_t)k, " [%s]", e->o.choices);
        return;
    }
    bool flag = !e->sf && (e->o.kind == OPT_FLAG || e->o.kind == OPT_UNSET);
    if (!flag && !md) snprintf(out + k, n - (size_t)k, " %s", e->o.kind == OPT_CHOICE ? e->o.choices : e->o.meta ? e->o.meta : "VALUE");
}

/* The default as set by init, "" when there is none to show. */
static void default_of(const mx_cmd *c, const ent *e, const void *o, char *out, size_t n) {
    out[0] = 0;
    if (e->o.flags & OPT_NODEF) return;
    if (e->sf) { mx_samp_format((const mx_sampling *)((const char *)o + c->samp_off), e->sf, out, n); return; }
    const void *p = (const char *)o + e->o.off;
    switch (e->o.kind) {
    case OPT_STR:
    case OPT_CHOICE:
        if (*(const char *const *)p) snprintf(out, n, "%s", *(const char *const *)p);
        break;
    case OPT_INT:
        if (*(const int *)p) snprintf(out, n, "%d", *(const int *)p);
        break;
    case OPT_FLOAT: snprintf(out, n, "%g", (double)*(const float *)p); break;
    default: break;
    }
}

static void range_of(const ent *e, char *out, size_t n) {
    out[0] = 0;
    bool num = e->sf || e->o.kind == OPT_INT || e->o.kind == OPT_FLOAT;
    if (!num) return;
    if (e->sf && e->sf->kind == MX_SF_SEED) snprintf(out, n, "[0, 2^63-1]");
    else snprintf(out, n, "[%.10g, %.10g]", e->o.lo, e->o.hi);
}

static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else fputc(*s, f);
    }
}

/* Writes text wrapped at width 100 with every line indented by ind. */
static void wrapped(FILE *f, const char *s, int col, int ind) {
    while (*s) {
        size_t len = strcspn(s, " ");
        if (col > ind && col + 1 + (int)len > 100) { fprintf(f, "\n%*s", ind, ""); col = ind; }
        else if (col > ind) { fputc(' ', f); col++; }
        fwrite(s, 1, len, f);
        col += (int)len;
        s += len;
        while (*s == ' ') s++;
    }
}

void mx_cmd_help(const mx_cmd *c, FILE *f, bool md) {
    ent e[MAX_ENTS];
    int n = collect(c, e);
    void *o = calloc(1, c->size ? c->size : 1);
    if (o && c->init) c->init(o);
    if (md) {
        fprintf(f, "### `mlxcel %s`%s%s%s\n\n%c%s.", c->name, c->alias ? " (also `mlxcel " : "", c->alias ? c->alias : "", c->alias ? "`)" : "",
                toupper((unsigned char)c->summary[0]), c->summary + 1);
        if (c->details) fprintf(f, " %s", c->details);
        fprintf(f, "\n\n```\nmlxcel %s %s\n```\n\n", c->name, c->usage);
        if (n) fprintf(f, "| option | value | default | meaning |\n|---|---|---|---|\n");
    } else {
        fprintf(f, "usage: mlxcel %s %s\n\n", c->name, c->usage);
        char line[1024];
        snprintf(line, sizeof line, "%c%s.%s%s", toupper((unsigned char)c->summary[0]), c->summary + 1, c->details ? " " : "",
                 c->details ? c->details : "");
        wrapped(f, line, 0, 0);
        fprintf(f, "\n");
        if (n) fprintf(f, "\noptions:\n");
    }
    bool samp_head = false;
    for (int i = 0; i < n; i++) {
        char nm[160], def[96], rng[64];
        names_of(&e[i], nm, sizeof nm, md);
        default_of(c, &e[i], o, def, sizeof def);
        range_of(&e[i], rng, sizeof rng);
        if (md) {
            fputs("| ", f);
            fputs(nm, f);
            fputs(" | ", f);
            bool flag = !e[i].sf && (e[i].o.kind == OPT_FLAG || e[i].o.kind == OPT_UNSET);
            if (!e[i].sf && e[i].o.kind == OPT_IGNORED && !e[i].o.meta) {
                if (e[i].o.choices) { fputs("[", f); md_cell(f, e[i].o.choices); fputs("]", f); }
            } else if (!flag) {
                md_cell(f, e[i].o.kind == OPT_CHOICE && !e[i].sf ? e[i].o.choices : e[i].o.meta ? e[i].o.meta : "VALUE");
                if (rng[0]) fprintf(f, " in %s", rng);
            }
            fputs(" | ", f);
            md_cell(f, def);
            fputs(" | ", f);
            md_cell(f, e[i].o.help ? e[i].o.help : "");
            if (e[i].o.kind == OPT_IGNORED) fputs(" (accepted with a warning, no effect)", f);
            if (e[i].env[0]) fprintf(f, " (env %s)", e[i].env);
            fputs(" |\n", f);
            continue;
        }
        if (e[i].sf && !samp_head) { fprintf(f, "\nsampling (the same fields and ranges as the server's requests):\n"); samp_head = true; }
        int col = fprintf(f, "  %s", nm);
        if (col < 30) col += fprintf(f, "%*s", 30 - col, "");
        else { fprintf(f, "\n%30s", ""); col = 30; }
        char h[512];
        int k = snprintf(h, sizeof h, "%s", e[i].o.help ? e[i].o.help : "");
        if (rng[0]) k += snprintf(h + k, sizeof h - (size_t)k, " %s", rng);
        if (def[0]) k += snprintf(h + k, sizeof h - (size_t)k, " (default %s)", def);
        if (e[i].o.kind == OPT_IGNORED) k += snprintf(h + k, sizeof h - (size_t)k, " (accepted with a warning, no effect)");
        if (e[i].env[0] && k < (int)sizeof h) snprintf(h + k, sizeof h - (size_t)k, " (env %s)", e[i].env);
        wrapped(f, h, col, 30);
        fputc('\n', f);
    }
    if (c->loads_model) {
        if (md) fprintf(f, "| `--no-mmap` | | | read the weights into huge-page memory instead of mapping the files (also `MLXCEL_NO_MMAP=1`) |\n");
        else fprintf(f, "  --no-mmap                   read the weights into huge-page memory instead of mapping the files\n"
                        "                              (also MLXCEL_NO_MMAP=1)\n");
    }
    if (md) fputc('\n', f);
    free(o);
}
