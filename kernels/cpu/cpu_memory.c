/* cpu_memory.c — the CPU backend's memory is host memory: malloc and memcpy. */
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"

void *nd_cpu_alloc(nd_backend *b, size_t bytes, nd_err *e) {
    (void)b;
    void *p = malloc(bytes ? bytes : 1);   /* a zero-byte buffer is still a distinct pointer */
    if (!p) nd_fail(e, ND_EXIT_BADINPUT, "cpu: alloc: out of memory (%zu bytes; the machine's memory or ulimit -v; --max-memory and --layers bound a run)", bytes);
    return p;
}

void nd_cpu_release(nd_backend *b, void *p) { (void)b; free(p); }

static int cpu_memcpy(const char *op, void *dst, const void *src, size_t bytes, nd_err *e) {
    if (bytes == 0) return 0;
    if (!dst || !src) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: NULL pointer", op);
    memmove(dst, src, bytes);
    return 0;
}

int nd_cpu_upload(nd_backend *b, void *dst, const void *src_host, size_t bytes, nd_err *e) {
    (void)b;
    return cpu_memcpy("upload", dst, src_host, bytes, e);
}
int nd_cpu_download(nd_backend *b, void *dst_host, const void *src, size_t bytes, nd_err *e) {
    (void)b;
    return cpu_memcpy("download", dst_host, src, bytes, e);
}
int nd_cpu_copy(nd_backend *b, void *dst, const void *src, size_t bytes, nd_err *e) {
    (void)b;
    return cpu_memcpy("copy", dst, src, bytes, e);
}
int nd_cpu_sync(nd_backend *b, nd_err *e) { (void)b; (void)e; return 0; }

int nd_cpu_copy2d(nd_backend *b, float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t width,
                  int64_t rows, nd_err *e) {
    (void)b;
    if (width < 0 || rows < 0 || dpitch < width || spitch < width)
        return nd_fail(e, ND_EXIT_INTERNAL, "cpu: copy2d: bad shape (width %lld, rows %lld, pitches %lld/%lld)",
                       (long long)width, (long long)rows, (long long)dpitch, (long long)spitch);
    for (int64_t r = 0; r < rows; r++) memmove(dst + r * dpitch, src + r * spitch, sizeof(float) * (size_t)width);
    return 0;
}
