/* cpu_backend.c — nd_backend_cpu_create: the reference backend's op table. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu_internal.h"
#include "cpu_compressed.h"

static void cpu_destroy(nd_backend *b) { free(b); }
/* results are written by each op at once: nothing is ever deferred */
static int cpu_flush_results(nd_backend *b, nd_err *e) { (void)b; (void)e; return 0; }

int nd_backend_cpu_create(nd_backend **out, nd_err *e) {
    if (!out) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: create: NULL output pointer");
    *out = NULL;
    nd_backend *b = calloc(1, sizeof *b);
    if (!b) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: create: out of memory");
    b->name = "cpu";
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(b->device, sizeof b->device, "host CPU (%ld cores online)", ncpu > 0 ? ncpu : 1L);
    b->destroy = cpu_destroy;
    b->alloc = nd_cpu_alloc;
    b->release = nd_cpu_release;
    b->host_alloc = nd_cpu_alloc; /* host memory is all the same to this backend */
    b->host_free = nd_cpu_release;
    b->staging_pays = 0;
    b->upload = nd_cpu_upload;
    b->download = nd_cpu_download;
    b->copy = nd_cpu_copy;
#define ND_OP_IMPL(name) nd_cpu_##name
    ND_BACKEND_ALL_OPS(ND_BACKEND_SET_OP) /* the reference: every op, every dtype the list declares */
#undef ND_OP_IMPL
    b->sync = nd_cpu_sync;
    b->flush_results = cpu_flush_results;
    *out = b;
    return 0;
}

int nd_cpu_check_sizes(nd_err *e, const char *op, int nsizes, const int64_t *sizes) {
    int64_t prod = 1;
    for (int i = 0; i < nsizes; i++) {
        if (sizes[i] < 0)
            return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: negative size %lld (argument %d)", op,
                           (long long)sizes[i], i);
        if (sizes[i] != 0 && prod > INT64_MAX / sizes[i])
            return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: sizes overflow a 64-bit element count", op);
        prod *= sizes[i];
    }
    return 0;
}
