/* The huge-page arena of the weights repacked at load (the int8 kernels'
 * copies, BF16's rows in lanes). */
#define _GNU_SOURCE
#include "weight.h"
#include "../base/base.h"
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Repacked weights live in shared 64 MiB huge-page chunks (a model's
 * matrices are repacked one after another as it loads): one mapping per
 * matrix would either round each up to 2 MiB (a quarter more memory for a
 * 1B model) or take 4 KiB page faults, which cost several microseconds each
 * on VMs. A chunk is unmapped when its last matrix is freed. Portable C:
 * mx_weight_free releases on every CPU. */
#define ARENA_CHUNK ((size_t)64 << 20)
typedef struct arena_chunk { uint8_t *base; size_t size, used; int live; } arena_chunk;
static arena_chunk *g_cur;
static pthread_mutex_t g_arena_mu = PTHREAD_MUTEX_INITIALIZER;

static uint8_t *tmpl_arena_alloc(size_t n, void **chunk) {
    n = (n + 63) & ~(size_t)63;
    if (!g_cur || g_cur->size - g_cur->used < n) {
        size_t huge = (size_t)2 << 20, size = MX_MAX(ARENA_CHUNK, (n + huge - 1) & ~(huge - 1));
        uint8_t *raw = mmap(NULL, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) return NULL;
        uint8_t *base = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
        if (base > raw) munmap(raw, (size_t)(base - raw));
        if (base + size < raw + size + huge) munmap(base + size, (size_t)(raw + size + huge - (base + size)));
#ifdef MADV_HUGEPAGE
        madvise(base, size, MADV_HUGEPAGE);
#endif
        arena_chunk *c = calloc(1, sizeof *c);
        if (!c) { munmap(base, size); return NULL; }
        c->base = base;
        c->size = size;
        if (g_cur && g_cur->live == 0) { munmap(g_cur->base, g_cur->size); free(g_cur); }
        g_cur = c;
    }
    uint8_t *p = g_cur->base + g_cur->used;
    g_cur->used += n;
    g_cur->live++;
    *chunk = g_cur;
    return p;
}

uint8_t *mx_arena_alloc(size_t n, void **chunk) {
    pthread_mutex_lock(&g_arena_mu);
    uint8_t *p = tmpl_arena_alloc(n, chunk);
    pthread_mutex_unlock(&g_arena_mu);
    return p;
}

void mx_arena_free(void *chunk) {
    arena_chunk *c = chunk;
    pthread_mutex_lock(&g_arena_mu);
    if (--c->live == 0) {
        if (c == g_cur) c->used = 0; /* empty: reuse its pages */
        else {
            munmap(c->base, c->size);
            free(c);
        }
    }
    pthread_mutex_unlock(&g_arena_mu);
}

