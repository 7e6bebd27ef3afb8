/* prefetch.h — the next routed expert's checkpoint bytes, copied into backend host staging
 * (pinned memory on CUDA) on a host thread while the current expert uploads and computes; the
 * upload then takes them from there (one DMA) instead of copying out of the mapped file.
 * Two slots: the one being filled for the next expert, and the one the current expert reads. */
#ifndef ND_PREFETCH_H
#define ND_PREFETCH_H

#include <pthread.h>
#include <stddef.h>
#include "ckpt/ckpt.h"

enum { ND_PREFETCH_MAX = 8 };

typedef struct nd_prefetch_slot {
    pthread_t tid;
    int running;                          /* a copy thread was started and not yet joined */
    int n;                                /* staged views */
    nd_tview views[ND_PREFETCH_MAX];      /* what each copies (and whose pages it then releases) */
    size_t off[ND_PREFETCH_MAX];
    const nd_ckpt *ck;
    char *area;                           /* backend host staging, cap bytes */
    size_t cap;
} nd_prefetch_slot;

typedef struct nd_prefetch {
    nd_prefetch_slot slot[2];
    int next;                             /* the slot the next prefetch fills */
} nd_prefetch;

struct nd_run;

/* Start copying the weight and block-scale bytes of these modules (canonical paths) into the
 * slot not read by the current expert. Does nothing when the backend's uploads do not gain from
 * staging; a module that does not bind is skipped (its stage reports the error when it runs). */
void nd_prefetch_modules(struct nd_run *r, const char *const *modules, int n);
/* The staged copy of t's bytes, or NULL when t was not prefetched (waits for its copy). */
const void *nd_prefetch_take(struct nd_run *r, const nd_tview *t);
/* Wait for the threads and free the staging. */
void nd_prefetch_close(struct nd_run *r);

#endif
