/* cuda_logits.cu — the head probe's per-position KL and top-1 (numerics/nd_logits.h) on the device:
 * one CUDA block per position, three passes over its V logits (the maxima and their first indices,
 * the two softmax normalisers, the KL sum), double sums reduced in a fixed tree
 * (nd_cuda_block_sum); only rows x 16 bytes come back, instead of both [rows, V] tensors. */
#include "cuda_common.cuh"
#include "numerics/nd_logits.h"

#define LOGITS_THREADS 256

/* (m, im) <- the better of (m, im) and (v, iv): larger value, ties to the lower index */
__device__ __forceinline__ void arg_take(float &m, long long &im, float v, long long iv) {
    if (nd_logits_beats(v, iv, m, im)) { m = v; im = iv; }
}

/* block-wide argmax; every thread returns the result */
__device__ void block_argmax(float &m, long long &im, float *shm, long long *shi) {
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, m, o);
        const long long iv = __shfl_xor_sync(0xffffffffu, im, o);
        arg_take(m, im, v, iv);
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) { shm[threadIdx.x / 32] = m; shi[threadIdx.x / 32] = im; }
    __syncthreads();
    m = shm[0]; im = shi[0];
    for (int w = 1; w < LOGITS_THREADS / 32; w++) arg_take(m, im, shm[w], shi[w]);
}

__global__ void __launch_bounds__(LOGITS_THREADS) logits_kl_kernel(const float *__restrict__ ref, const float *__restrict__ prod,
                                                                   int64_t cols, nd_logits_row *out) {
    __shared__ float shm[LOGITS_THREADS / 32];
    __shared__ long long shi[LOGITS_THREADS / 32];
    __shared__ double shd[LOGITS_THREADS / 32];
    const float *a = ref + (int64_t)blockIdx.x * cols, *p = prod + (int64_t)blockIdx.x * cols;
    float ma = -INFINITY, mb = -INFINITY;
    long long ia = LLONG_MAX, ib = LLONG_MAX;
    for (int64_t j = threadIdx.x; j < cols; j += LOGITS_THREADS) {
        arg_take(ma, ia, a[j], j);
        arg_take(mb, ib, p[j], j);
    }
    block_argmax(ma, ia, shm, shi);
    block_argmax(mb, ib, shm, shi);
    if (!isfinite(ma) || !isfinite(mb)) {
        const double qnan = __longlong_as_double(0x7ff8000000000000LL);
        if (threadIdx.x == 0) out[blockIdx.x] = nd_logits_row{qnan, qnan, qnan, -1, -1};
        return;
    }
    double za = 0, zb = 0;
    for (int64_t j = threadIdx.x; j < cols; j += LOGITS_THREADS) { za += exp(a[j] - (double)ma); zb += exp(p[j] - (double)mb); }
    za = nd_cuda_block_sum(za, shd);
    zb = nd_cuda_block_sum(zb, shd);
    const double lza = log(za), lzb = log(zb);
    double k = 0;
    for (int64_t j = threadIdx.x; j < cols; j += LOGITS_THREADS) k += nd_logits_kl_term(a[j], p[j], ma, lza, mb, lzb);
    k = nd_cuda_block_sum(k, shd);
    if (threadIdx.x == 0) out[blockIdx.x] = nd_logits_row{k, (double)ma + lza, (double)mb + lzb, (int32_t)ia, (int32_t)ib};
}

int nd_cuda_logits_kl(nd_backend *b, const float *ref, const float *prod, int64_t rows, int64_t cols,
                      nd_logits_row *out_host, nd_err *e) {
    if (rows < 0 || cols < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: logits_kl: negative size");
    if (!out_host || (rows * cols > 0 && (!ref || !prod))) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: logits_kl: NULL buffer");
    if (cols > INT32_MAX) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: logits_kl: %lld columns exceed int32 indices", (long long)cols);
    if (rows == 0) return 0;
    if (rows > INT32_MAX) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: logits_kl: %lld rows exceed one grid", (long long)rows);
    void *s;
    ND_TRY(nd_cuda_scratch(b, sizeof(nd_logits_row) * (size_t)rows, &s, e));
    cudaStream_t st = nd_cu(b)->stream;
    logits_kl_kernel<<<(unsigned)rows, LOGITS_THREADS, 0, st>>>(ref, prod, cols, (nd_logits_row *)s);
    ND_LAUNCHED("logits_kl_kernel");
    ND_CU(cudaMemcpyAsync(out_host, s, sizeof(nd_logits_row) * (size_t)rows, cudaMemcpyDeviceToHost, st));
    ND_CU(cudaStreamSynchronize(st));
    return 0;
}
