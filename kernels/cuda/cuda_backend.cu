/* cuda_backend.cu — the CUDA backend object: device selection, stream, cuBLAS handle, memory,
 * scratch, error text, and the op table (each op lives in its own file). */
#include "cuda_common.cuh"
#include "cuda_compressed.cuh"
#include "cuda_results.cuh"
#include "nd_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nd_cuda_fail_rt(nd_err *e, const char *file, int line, const char *call, cudaError_t rc) {
    return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s:%d: %s: %s", nd_cuda_base(file), line, call,
                   cudaGetErrorString(rc));
}

int nd_cuda_fail_blas(nd_err *e, const char *file, int line, const char *call, cublasStatus_t rc) {
    return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s:%d: %s: %s", nd_cuda_base(file), line, call,
                   cublasGetStatusString(rc));
}

int nd_cuda_scratch(nd_backend *b, size_t bytes, void **out, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    if (bytes == 0) bytes = 256;
    if (bytes > c->scratch_bytes) {
        if (c->scratch) {
            ND_CU(cudaStreamSynchronize(c->stream)); /* earlier ops may still read it */
            ND_CU(cudaFree(c->scratch));
            c->scratch = NULL;
            c->scratch_bytes = 0;
        }
        size_t want = bytes + bytes / 4;
        ND_CU(cudaMalloc(&c->scratch, want));
        c->scratch_bytes = want;
    }
    *out = c->scratch;
    return 0;
}

int nd_cuda_host_scratch(nd_backend *b, size_t bytes, void **out, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    if (bytes == 0) bytes = 64;
    if (bytes > c->host_scratch_bytes) {
        if (c->host_scratch) {
            ND_CU(cudaStreamSynchronize(c->stream));
            ND_CU(cudaFreeHost(c->host_scratch));
            c->host_scratch = NULL;
            c->host_scratch_bytes = 0;
        }
        ND_CU(cudaMallocHost(&c->host_scratch, bytes));
        c->host_scratch_bytes = bytes;
    }
    *out = c->host_scratch;
    return 0;
}

/* The copy is complete when this returns (CUDA only says a pageable async copy "might be"
 * synchronous), so the caller's host array may go away right after the op. */
int nd_cuda_stage(nd_backend *b, void *dev_dst, const void *host, size_t bytes, nd_err *e) {
    if (bytes == 0) return 0;
    ND_CU(cudaMemcpyAsync(dev_dst, host, bytes, cudaMemcpyHostToDevice, nd_cu(b)->stream));
    ND_CU(cudaStreamSynchronize(nd_cu(b)->stream));
    return 0;
}

/* ---- memory ---- */
static void *cu_alloc(nd_backend *b, size_t bytes, nd_err *e) {
    void *p = NULL;
    /* stream-ordered: every op runs on the one stream, and the pool (cu_init) keeps freed blocks,
     * so the weights of one expert after another reuse the same memory instead of paying
     * cudaMalloc/cudaFree (which synchronizes the device) for each */
    cudaError_t rc = cudaMallocAsync(&p, bytes ? bytes : 1, nd_cu(b)->stream);
    if (rc != cudaSuccess) {
        nd_fail(e, ND_EXIT_INTERNAL, "cuda: cuda_backend.cu:%d: cudaMallocAsync(%zu bytes): %s", __LINE__, bytes,
                cudaGetErrorString(rc));
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        return NULL;
    }
    return p;
}

static void cu_release(nd_backend *b, void *p) {
    if (p) (void)cudaFreeAsync(p, nd_cu(b)->stream);
}

static int cu_download(nd_backend *b, void *dst_host, const void *src, size_t bytes, nd_err *e) {
    if (bytes == 0) return 0;
    ND_CU(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, nd_cu(b)->stream));
    ND_CU(cudaStreamSynchronize(nd_cu(b)->stream));
    return 0;
}

static int cu_copy(nd_backend *b, void *dst, const void *src, size_t bytes, nd_err *e) {
    if (bytes == 0) return 0;
    ND_CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nd_cu(b)->stream));
    return 0;
}

/* Rows of `width` floats between pitched layouts; same checks as the CPU backend. */
int nd_cuda_copy2d(nd_backend *b, float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t width,
                     int64_t rows, nd_err *e) {
    if (width < 0 || rows < 0 || dpitch < width || spitch < width)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: copy2d: bad shape (width %lld, rows %lld, pitches %lld/%lld)",
                       (long long)width, (long long)rows, (long long)dpitch, (long long)spitch);
    if (width == 0 || rows == 0) return 0;
    ND_CU(cudaMemcpy2DAsync(dst, (size_t)dpitch * 4, src, (size_t)spitch * 4, (size_t)width * 4, (size_t)rows,
                            cudaMemcpyDeviceToDevice, nd_cu(b)->stream));
    return 0;
}

static int cu_sync(nd_backend *b, nd_err *e) {
    ND_CU(cudaStreamSynchronize(nd_cu(b)->stream));
    ND_CU(cudaGetLastError());
    return 0;
}

static void cu_destroy(nd_backend *b) {
    if (!b) return;
    nd_cuda *c = nd_cu(b);
    if (c) {
        (void)cudaStreamSynchronize(c->stream);
        if (c->blas) cublasDestroy(c->blas);
        if (c->scratch) cudaFree(c->scratch);
        if (c->host_scratch) cudaFreeHost(c->host_scratch);
        nd_cuda_results_free(c);
        nd_cuda_stage_free(c);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(b);
}

extern "C" void *nd_backend_cuda_stream(const nd_backend *b) {
    if (!b || !b->name || strcmp(b->name, "cuda") != 0) return NULL;
    return (void *)((const nd_cuda *)b->impl)->stream;
}

extern "C" int nd_backend_cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

static int cu_init(nd_backend *b, nd_cuda *c, int device, nd_err *e) {
    ND_CU(cudaSetDevice(device));
    cudaDeviceProp p;
    ND_CU(cudaGetDeviceProperties(&p, device));
    c->n_sm = p.multiProcessorCount;
    snprintf(b->device, sizeof b->device, "%.64s (cuda device %d, sm_%d%d, %.0f GiB)", p.name, device, p.major,
             p.minor, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    ND_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    /* the default pool keeps what is freed (no release at synchronization points) */
    cudaMemPool_t pool;
    ND_CU(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep = UINT64_MAX;
    ND_CU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    ND_BLAS(cublasCreate(&c->blas));
    ND_BLAS(cublasSetStream(c->blas, c->stream));
    /* Default math never uses TF32 for FP32 GEMMs (that needs CUBLAS_TF32_TENSOR_OP_MATH or a
     * _FAST_TF32 compute type); the FP32 reference GEMM additionally asks for the pedantic compute
     * type in cuda_gemm.cu. */
    ND_BLAS(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    return 0;
}

extern "C" int nd_backend_cuda_create(nd_backend **out, int device, nd_err *e) {
    *out = NULL;
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        /* no driver or no device is the machine, not a fault of ours: exit 2 (SPEC §3) */
        return nd_fail(e, ND_EXIT_BADINPUT, "cuda: no CUDA device (%s); use --backend cpu or auto",
                       rc != cudaSuccess ? cudaGetErrorString(rc) : "none visible");
    }
    if (device < 0 || device >= n)
        return nd_fail(e, ND_EXIT_BADINPUT, "cuda: --device %d: this machine has %d CUDA device%s", device, n,
                       n == 1 ? "" : "s");
    nd_backend *b = (nd_backend *)calloc(1, sizeof *b);
    nd_cuda *c = (nd_cuda *)calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: out of host memory");
    }
    b->impl = c;
    c->device = device;
    b->name = "cuda";
    int r = cu_init(b, c, device, e);
    if (r) {
        cu_destroy(b);
        return r;
    }
    b->destroy = cu_destroy;
    b->alloc = cu_alloc;
    b->release = cu_release;
    b->upload = nd_cuda_upload;
    b->host_alloc = nd_cuda_host_alloc;
    b->host_free = nd_cuda_host_free;
    b->staging_pays = 1;
    b->download = cu_download;
    b->copy = cu_copy;
    b->sync = cu_sync;
    b->flush_results = nd_cuda_flush_results;
#define ND_OP_IMPL(name) nd_cuda_##name
    ND_BACKEND_ALL_OPS(ND_BACKEND_SET_OP) /* every op and every dtype the list declares, as the CPU */
#undef ND_OP_IMPL
    *out = b;
    return 0;
}
