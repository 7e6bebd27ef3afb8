/* cuda_compressed.cuh — the CUDA backend's DeepSeek-V4 compressed-attention ops (cuda_compress.cu,
 * cuda_indexer.cu); declared with the family ops by ND_BACKEND_FAMILY_OPS (backend.h), where their contracts are, references in kernels/cpu/cpu_compress.c and
 * kernels/cpu/cpu_indexer.c. */
#ifndef ND_CUDA_COMPRESSED_CUH
#define ND_CUDA_COMPRESSED_CUH

#include "cuda_common.cuh"


/* 0 when every size is >= 0 and their product fits in int64 (the CPU backend's rule), else fails
 * naming the op. */
static inline int nd_cuda_check_sizes(nd_err *e, const char *op, int n, const int64_t *sizes) {
    int64_t prod = 1;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: negative size %lld (argument %d)", op, (long long)sizes[i], i);
        if (sizes[i] != 0 && prod > INT64_MAX / sizes[i])
            return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: sizes overflow a 64-bit element count", op);
        prod *= sizes[i];
    }
    return 0;
}
#define ND_CUDA_SIZES(op, ...) do { const int64_t nd_s_[] = {__VA_ARGS__}; \
    ND_TRY(nd_cuda_check_sizes(e, (op), (int)(sizeof nd_s_ / sizeof nd_s_[0]), nd_s_)); } while (0)

/* Bytes rounded up to 256, for carving one scratch allocation into aligned parts. */
static inline size_t nd_cuda_align256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

#endif
