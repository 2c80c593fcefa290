#include "progress.h"
#include <stddef.h>

static const mx_progress_sink *g_sink;

void mx_progress_set_sink(const mx_progress_sink *s) { g_sink = s; }

void *mx_progress_begin(const char *label, uint64_t total, bool bytes) {
    return g_sink ? g_sink->begin(label, total, bytes) : NULL;
}

void mx_progress_update(void *task, uint64_t done) {
    if (g_sink && task) g_sink->update(task, done);
}

void mx_progress_end(void *task, bool ok) {
    if (g_sink && task) g_sink->end(task, ok);
}
