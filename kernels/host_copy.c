/* host_copy.c — nd_memcpy_parallel (host_copy.h). */
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include "host_copy.h"

enum { COPY_THREADS_MAX = 16 };

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t n;
} copy_part;

static void *copy_run(void *arg) {
    const copy_part *p = arg;
    memcpy(p->dst, p->src, p->n);
    return NULL;
}

void nd_memcpy_parallel(void *dst, const void *src, size_t n, int threads) {
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c < 1 ? 1 : (int)c;
    }
    if (threads > COPY_THREADS_MAX) threads = COPY_THREADS_MAX;
    if (n < ((size_t)1 << 20)) threads = 1;
    copy_part part[COPY_THREADS_MAX];
    pthread_t tid[COPY_THREADS_MAX];
    int started[COPY_THREADS_MAX] = {0};
    const size_t per = ((n + (size_t)threads - 1) / (size_t)threads + 4095) & ~(size_t)4095;
    int np = 0;
    for (size_t off = 0; off < n && np < threads; off += per, np++)
        part[np] = (copy_part){(char *)dst + off, (const char *)src + off, n - off < per ? n - off : per};
    for (int t = 1; t < np; t++) started[t] = pthread_create(&tid[t], NULL, copy_run, &part[t]) == 0;
    if (np > 0) copy_run(&part[0]);
    for (int t = 1; t < np; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else copy_run(&part[t]);
    }
}
