/* cuda_common.cuh — what every CUDA backend file shares: the backend's private state, the
 * checked-call macros (errors as values, "cuda: file.cu:LINE: call: reason"), scratch memory and
 * the launch helper. Op launchers are `int nd_cuda_<op>(nd_backend *b, ..., nd_err *e)` declared
 * here and installed into the nd_backend table by cuda_backend.cu. */
#ifndef ND_CUDA_COMMON_CUH
#define ND_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdint.h>
#include <stddef.h>

extern "C" {
#include "backend.h"
}
#include "numerics/nd_numerics.h"
#include "cuda_fp8_cvt.cuh"

typedef struct nd_cuda_results nd_cuda_results; /* cuda_results.cu */

/* Backend-private state, b->impl. All work runs on one stream, in order, so one scratch area is
 * reused by consecutive ops without races. */
typedef struct nd_cuda {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *scratch;           /* device scratch, grown on demand */
    size_t scratch_bytes;
    void *host_scratch;      /* pinned host staging for small results */
    size_t host_scratch_bytes;
    void *stage[2];          /* pinned double buffer of checkpoint uploads (cuda_upload.cu) */
    cudaEvent_t stage_done[2];
    int n_sm;
    nd_cuda_results *res;    /* probe results kept on the device (cuda_results.cuh) */
} nd_cuda;

static inline nd_cuda *nd_cu(nd_backend *b) { return (nd_cuda *)b->impl; }

/* Basename of __FILE__ so messages read "cuda: quant.cu:88: ..." whatever the build directory. */
static inline const char *nd_cuda_base(const char *f) {
    const char *s = f;
    for (const char *p = f; *p; p++) if (*p == '/') s = p + 1;
    return s;
}

int nd_cuda_fail_rt(nd_err *e, const char *file, int line, const char *call, cudaError_t rc);
int nd_cuda_fail_blas(nd_err *e, const char *file, int line, const char *call, cublasStatus_t rc);

#define ND_CU(call) do { cudaError_t nd_cu_rc_ = (call); \
    if (nd_cu_rc_ != cudaSuccess) return nd_cuda_fail_rt(e, __FILE__, __LINE__, #call, nd_cu_rc_); } while (0)
#define ND_BLAS(call) do { cublasStatus_t nd_bl_rc_ = (call); \
    if (nd_bl_rc_ != CUBLAS_STATUS_SUCCESS) return nd_cuda_fail_blas(e, __FILE__, __LINE__, #call, nd_bl_rc_); } while (0)
/* After every kernel launch: launch-configuration errors and earlier asynchronous faults. */
#define ND_LAUNCHED(what) do { cudaError_t nd_cu_rc_ = cudaGetLastError(); \
    if (nd_cu_rc_ != cudaSuccess) return nd_cuda_fail_rt(e, __FILE__, __LINE__, what, nd_cu_rc_); } while (0)

/* Scratch of at least `bytes` on the device (contents undefined; valid until the next call). */
int nd_cuda_scratch(nd_backend *b, size_t bytes, void **out, nd_err *e);
/* Pinned host staging of at least `bytes`. */
int nd_cuda_host_scratch(nd_backend *b, size_t bytes, void **out, nd_err *e);
/* Copy small host arrays (positions, row lists) into device memory; complete on return. */
int nd_cuda_stage(nd_backend *b, void *dev_dst, const void *host, size_t bytes, nd_err *e);
/* The backend's upload: checkpoint bytes through the pinned double buffer (cuda_upload.cu). */
int nd_cuda_upload(nd_backend *b, void *dst, const void *src_host, size_t bytes, nd_err *e);
void nd_cuda_stage_free(nd_cuda *c);
void *nd_cuda_host_alloc(nd_backend *b, size_t bytes, nd_err *e);
void nd_cuda_host_free(nd_backend *b, void *p);

static inline unsigned nd_cuda_blocks(int64_t work, int per_block) {
    int64_t nb = (work + per_block - 1) / per_block;
    if (nb < 1) nb = 1;
    if (nb > 2147483647LL) nb = 2147483647LL;
    return (unsigned)nb;
}
/* Grid size for grid-stride loops: enough blocks to fill the chip, no more than the work needs. */
static inline unsigned nd_cuda_grid(nd_backend *b, int64_t work, int per_block) {
    int64_t nb = (work + per_block - 1) / per_block;
    int64_t cap = (int64_t)nd_cu(b)->n_sm * 16;
    if (nb > cap) nb = cap;
    if (nb < 1) nb = 1;
    return (unsigned)nb;
}

/* Grid for a grid-stride loop over `work` items of `per_block` each, balanced: at most
 * `resident` blocks per multiprocessor (what the kernel's occupancy allows), and every block gets
 * the same number of steps (no second wave for a few blocks). */
static inline unsigned nd_cuda_grid_balanced(nd_backend *b, int64_t work, int per_block, int resident) {
    const int64_t steps_total = (work + per_block - 1) / per_block;
    const int64_t cap = (int64_t)nd_cu(b)->n_sm * (resident > 0 ? resident : 1);
    if (steps_total <= cap) return (unsigned)(steps_total < 1 ? 1 : steps_total);
    const int64_t per = (steps_total + cap - 1) / cap;  /* steps per block */
    return (unsigned)((steps_total + per - 1) / per);
}

/* cuda_results.cu: write every deferred probe result to its host destination (one copy). */
extern "C" int nd_cuda_flush_results(nd_backend *b, nd_err *e);

/* ---- op launchers (one file each group) ---- */
/* cuda_dequant.cu */
/* cuda_quant.cu */
/* cuda_gemm.cu */
/* cuda_elementwise.cu */
/* cuda_attention.cu */
/* cuda_hc.cu */
/* cuda_moe.cu */
/* cuda_compare.cu */

/* every compute op of kernels/backend.h's ND_BACKEND_ALL_OPS, as nd_cuda_<name> */
#define ND_CUDA_DECL(name, dtypes, params) int nd_cuda_##name params;
ND_BACKEND_ALL_OPS(ND_CUDA_DECL)
#undef ND_CUDA_DECL

/* Max and sum of v over the whole block (blockDim.x a multiple of 32; red: blockDim.x / 32 floats
 * of shared memory). Warps reduce by shuffles, then every thread combines the warps' results in
 * warp order, so all threads return the same value. Each call begins and ends with barriers. */
__device__ __forceinline__ float nd_cuda_block_max(float v, float *red) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < (int)(blockDim.x / 32); w++) r = fmaxf(r, red[w]);
    return r;
}

/* the sum for float and double alike (red: blockDim.x / 32 elements of T) */
template <typename T> __device__ __forceinline__ T nd_cuda_block_sum(T v, T *red) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    T r = T(0);
    for (int w = 0; w < (int)(blockDim.x / 32); w++) r += red[w];
    return r;
}

#endif
