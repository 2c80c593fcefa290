/* progress: long operations (loading a checkpoint, converting, downloading)
 * report what they have done through one hook. The library only calls
 * these; a front end installs the sink that draws them (the CLI: a bar on
 * a terminal, plain lines otherwise). Without a sink they cost nothing. */
#ifndef MX_PROGRESS_H
#define MX_PROGRESS_H
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    void *(*begin)(const char *label, uint64_t total, bool bytes); /* total 0: unknown */
    void (*update)(void *task, uint64_t done);
    void (*end)(void *task, bool ok);
} mx_progress_sink;

void mx_progress_set_sink(const mx_progress_sink *s); /* NULL: off */
/* A task: label is copied by the sink if it keeps it. */
void *mx_progress_begin(const char *label, uint64_t total, bool bytes);
void mx_progress_update(void *task, uint64_t done);
void mx_progress_end(void *task, bool ok);
#endif
