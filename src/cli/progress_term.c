/* The CLI's progress sink: a bar redrawn in place on a terminal (at most
 * ten times a second), or one plain line when a task ends otherwise. Tasks
 * shorter than the threshold leave nothing behind, so a model that maps in
 * a millisecond does not print a line. */
#include "cli.h"
#include "../base/base.h"
#include "../base/progress.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char label[96];
    uint64_t total, done;
    bool bytes;
    double t0, last_draw;
    bool drawn;
} task;

static bool g_tty;
static double g_min_s = 1.0;

void cli_fmt_bytes(double b, char *out, size_t n) {
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) { b /= 1000; i++; }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

void cli_fmt_count(double n, char *out, size_t cap) {
    if (n >= 1e9) snprintf(out, cap, "%.2f B", n / 1e9);
    else if (n >= 1e6) snprintf(out, cap, "%.1f M", n / 1e6);
    else if (n >= 1e3) snprintf(out, cap, "%.1f K", n / 1e3);
    else snprintf(out, cap, "%.0f", n);
}

static void *t_begin(const char *label, uint64_t total, bool bytes) {
    task *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->label, sizeof t->label, "%s", label);
    t->total = total;
    t->bytes = bytes;
    t->t0 = mx_now();
    return t;
}

static void amount(const task *t, uint64_t v, char *out, size_t n) {
    if (t->bytes) cli_fmt_bytes((double)v, out, n);
    else snprintf(out, n, "%llu", (unsigned long long)v);
}

static void draw(task *t, double now) {
    char d[32], tot[32], rate[40] = "";
    amount(t, t->done, d, sizeof d);
    amount(t, t->total, tot, sizeof tot);
    double el = now - t->t0;
    if (t->bytes && el > 0.2) {
        char r[32];
        cli_fmt_bytes((double)t->done / el, r, sizeof r);
        snprintf(rate, sizeof rate, " %s/s", r);
    }
    char lab[41];
    snprintf(lab, sizeof lab, "%-40.40s", t->label);
    if (t->total) {
        int w = 24, f = (int)((double)t->done / (double)t->total * w);
        char bar[32];
        for (int i = 0; i < w; i++) bar[i] = i < f ? '#' : '.';
        bar[w] = 0;
        fprintf(stderr, "\r%s [%s] %3d%% %s/%s%s\033[K", lab, bar, (int)(100.0 * (double)t->done / (double)t->total), d, tot, rate);
    } else fprintf(stderr, "\r%s %s%s\033[K", lab, d, rate);
    fflush(stderr);
    t->drawn = true;
    t->last_draw = now;
}

static void t_update(void *p, uint64_t done) {
    task *t = p;
    t->done = done;
    if (!g_tty) return;
    double now = mx_now();
    if (now - t->t0 < 0.25 || now - t->last_draw < 0.1) return; /* quick tasks draw nothing */
    draw(t, now);
}

static void t_end(void *p, bool ok) {
    task *t = p;
    double el = mx_now() - t->t0;
    if (g_tty && t->drawn) fprintf(stderr, "\r\033[K");
    if (ok && el >= g_min_s) {
        char d[32];
        amount(t, t->total ? t->total : t->done, d, sizeof d);
        fprintf(stderr, "%s: %s in %.1f s\n", t->label, d, el);
    }
    fflush(stderr);
    free(t);
}

static const mx_progress_sink g_sink = {t_begin, t_update, t_end};

void cli_progress_init(double min_seconds) {
    g_tty = isatty(2) && getenv("TERM") && strcmp(getenv("TERM"), "dumb");
    g_min_s = min_seconds;
    mx_progress_set_sink(&g_sink);
}

bool cli_progress_tty(void) { return g_tty; }

void cli_progress_force_bar(void) { g_tty = true; }
