/* cuda_upload.cu — host -> device copies of checkpoint bytes, staged through two pinned buffers.
 *
 * Checkpoint tensors live in mmap'd (pageable) files. A pageable cudaMemcpy copies through the
 * driver's own small staging buffer and waits for each piece; here the host copy of chunk i+1
 * into one pinned buffer overlaps the DMA of chunk i out of the other, so an upload runs at the
 * speed of the slower of the two, not of their sum. The host copy (reading the mapping, page
 * faults included) is the slower one for a single thread, so each chunk is split over threads. */
#include "cuda_common.cuh"
#include "nd_cuda.h"

#include "host_copy.h"

static const size_t STAGE_CHUNK = (size_t)64 << 20, DIRECT_BELOW = (size_t)1 << 20;
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

void *nd_cuda_host_alloc(nd_backend *b, size_t bytes, nd_err *e) {
    (void)b;
    void *p = NULL;
    cudaError_t rc = cudaMallocHost(&p, bytes ? bytes : 1);
    if (rc != cudaSuccess) {
        nd_cuda_fail_rt(e, __FILE__, __LINE__, "cudaMallocHost", rc);
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

void nd_cuda_host_free(nd_backend *b, void *p) {
    (void)b;
    if (p) (void)cudaFreeHost(p);
}

/* Pinned (page-locked, CUDA-allocated or registered) host memory: DMA straight from it. */
static int is_pinned(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeHost;
}

int nd_cuda_upload(nd_backend *b, void *dst, const void *src_host, size_t bytes, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    if (bytes == 0) return 0;
    if (bytes < DIRECT_BELOW || is_pinned(src_host)) {
        ND_CU(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream));
        ND_CU(cudaStreamSynchronize(c->stream));
        return 0;
    }
    ND_TRY(stage_init(c, e));
    const char *src = (const char *)src_host;
    char *d = (char *)dst;
    int buf = 0;
    for (size_t off = 0; off < bytes; off += STAGE_CHUNK, buf ^= 1) {
        const size_t n = bytes - off < STAGE_CHUNK ? bytes - off : STAGE_CHUNK;
        /* the copy that last read this buffer (two chunks ago) must be done before it is refilled */
        ND_CU(cudaEventSynchronize(c->stage_done[buf]));
        nd_memcpy_parallel(c->stage[buf], src + off, n, 0);
        ND_CU(cudaMemcpyAsync(d + off, c->stage[buf], n, cudaMemcpyHostToDevice, c->stream));
        ND_CU(cudaEventRecord(c->stage_done[buf], c->stream));
    }
    /* complete on return: the caller may release the mapping's pages right after */
    ND_CU(cudaStreamSynchronize(c->stream));
    return 0;
}
