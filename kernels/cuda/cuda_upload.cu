/* cuda_upload.cu — host -> device copies of checkpoint bytes, staged through two pinned buffers.
 *
 * Checkpoint tensors live in mmap'd (pageable) files. A pageable cudaMemcpy copies through the
 * driver's own small staging buffer and waits for each piece; here the host copy of chunk i+1
 * into one pinned buffer overlaps the DMA of chunk i out of the other, so an upload runs at the
 * speed of the slower of the two, not of their sum. The host copy (reading the mapping, page
 * faults included) is the slower one for a single thread, so each chunk is split over threads. */
#include "cuda_common.cuh"
#include "nd_cuda.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

static const size_t STAGE_CHUNK = (size_t)64 << 20, DIRECT_BELOW = (size_t)1 << 20;
enum { COPY_THREADS_MAX = 16 };

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t n;
} copy_part;

static void *copy_run(void *arg) {
    const copy_part *p = (const copy_part *)arg;
    memcpy(p->dst, p->src, p->n);
    return NULL;
}

/* memcpy of n bytes split over up to `threads` threads (4 KiB-aligned parts). */
static void copy_parallel(char *dst, const char *src, size_t n, int threads) {
    copy_part part[COPY_THREADS_MAX];
    pthread_t tid[COPY_THREADS_MAX];
    int started[COPY_THREADS_MAX] = {0};
    const size_t per = ((n + (size_t)threads - 1) / (size_t)threads + 4095) & ~(size_t)4095;
    int np = 0;
    for (size_t off = 0; off < n && np < threads; off += per, np++)
        part[np] = (copy_part){dst + off, src + off, n - off < per ? n - off : per};
    for (int t = 1; t < np; t++) started[t] = pthread_create(&tid[t], NULL, copy_run, &part[t]) == 0;
    copy_run(&part[0]);
    for (int t = 1; t < np; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else copy_run(&part[t]); /* no thread: the same part inline */
    }
}

static int copy_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > COPY_THREADS_MAX ? COPY_THREADS_MAX : (int)n;
}

static int stage_init(nd_cuda *c, nd_err *e) {
    if (c->stage[0]) return 0;
    for (int i = 0; i < 2; i++) {
        ND_CU(cudaMallocHost(&c->stage[i], STAGE_CHUNK));
        ND_CU(cudaEventCreateWithFlags(&c->stage_done[i], cudaEventDisableTiming));
    }
    return 0;
}

void nd_cuda_stage_free(nd_cuda *c) {
    for (int i = 0; i < 2; i++) {
        if (c->stage_done[i]) (void)cudaEventDestroy(c->stage_done[i]);
        if (c->stage[i]) (void)cudaFreeHost(c->stage[i]);
        c->stage_done[i] = NULL;
        c->stage[i] = NULL;
    }
}

int nd_cuda_upload(nd_backend *b, void *dst, const void *src_host, size_t bytes, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    if (bytes == 0) return 0;
    if (bytes < DIRECT_BELOW) {
        ND_CU(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream));
        ND_CU(cudaStreamSynchronize(c->stream));
        return 0;
    }
    ND_TRY(stage_init(c, e));
    const int threads = copy_threads();
    const char *src = (const char *)src_host;
    char *d = (char *)dst;
    int buf = 0;
    for (size_t off = 0; off < bytes; off += STAGE_CHUNK, buf ^= 1) {
        const size_t n = bytes - off < STAGE_CHUNK ? bytes - off : STAGE_CHUNK;
        /* the copy that last read this buffer (two chunks ago) must be done before it is refilled */
        ND_CU(cudaEventSynchronize(c->stage_done[buf]));
        copy_parallel((char *)c->stage[buf], src + off, n, threads);
        ND_CU(cudaMemcpyAsync(d + off, c->stage[buf], n, cudaMemcpyHostToDevice, c->stream));
        ND_CU(cudaEventRecord(c->stage_done[buf], c->stream));
    }
    /* complete on return: the caller may release the mapping's pages right after */
    ND_CU(cudaStreamSynchronize(c->stream));
    return 0;
}
