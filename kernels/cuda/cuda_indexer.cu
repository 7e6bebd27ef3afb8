/* cuda_indexer.cu — DeepSeek-V4's Lightning indexer on CUDA: index scores and the top-k entries
 * per query, the CUDA side of kernels/cpu/cpu_indexer.c.
 *
 * The picked set must be exactly the CPU's (torch.topk's), ties included, so both halves follow
 * the CPU step by step:
 *  - scores: each thread forms the score of one (query, entry) pair with the CPU's operations in
 *    the CPU's order (dot products summed in increasing channel, relu, ·scale, ·(wts·wscale),
 *    summed over heads in increasing head; __fmul_rn/__fadd_rn, so no FMA contraction). The
 *    scores are therefore bit-identical to the CPU's. Tiles of 32 entries (their key rows in
 *    shared memory for all heads) x 32 queries (one head's query rows at a time); each thread
 *    keeps 4 queries of one entry.
 *  - selection: one thread per query replays libstdc++'s std::nth_element / heap selection on
 *    (score, index) pairs with the comparator "a > b, NaN first", exactly as the CPU does (the
 *    selection is numerics/nd_topk_select.h, the CPU's own), on an array in scratch.
 *    Same input, same deterministic algorithm: the same picks in the same positions.
 * The selection is sequential per query (O(nc) expected); it is small next to the scores at the
 * model's shapes (64 heads x 128 channels per pair). */
#include "cuda_compressed.cuh"
#include "numerics/nd_topk_select.h"
#include <math.h>

__device__ __forceinline__ int64_t ix_ready(const int32_t *qpos, int64_t i, int64_t rate, int64_t nc) {
    const int64_t r = ((int64_t)qpos[i] + 1) / rate;
    return r > nc ? nc : r;
}

enum { IX_W = 32, IX_R = 8, IX_Q = 4, IX_T = IX_R * IX_Q, IX_THREADS = IX_W * IX_R };

/* Key-row pitch in shared memory: ≡ 1 (mod 32) floats, so the 32 entries of a warp read 32 banks. */
static int64_t ix_pitch(int64_t c) { return c + ((33 - c % 32) % 32); }

/* Dynamic shared memory: ks [IX_W][pitch] | qs [IX_T][c]. */
__global__ void __launch_bounds__(IX_THREADS)
indexer_scores_kernel(const float *__restrict__ q, const float *__restrict__ k, const float *__restrict__ wts,
                      int64_t t, int64_t nc, int64_t h, int64_t c, int64_t kp, float scale, float wscale,
                      const int32_t *__restrict__ qpos, int64_t rate, float *__restrict__ scores) {
    extern __shared__ float smem[];
    float *ks = smem, *qs = smem + IX_W * kp;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * IX_W + tx;
    const int64_t w0 = (int64_t)blockIdx.x * IX_W, i0 = (int64_t)blockIdx.y * IX_T, w = w0 + tx;
    for (int64_t x = tid; x < IX_W * c; x += IX_THREADS) {
        const int64_t r = x / c, col = x % c;
        ks[r * kp + col] = w0 + r < nc ? k[(w0 + r) * c + col] : 0.0f;
    }
    bool live[IX_Q];
    float acc[IX_Q];
#pragma unroll
    for (int r = 0; r < IX_Q; r++) {
        const int64_t i = i0 + ty + r * IX_R;
        live[r] = i < t && w < nc && w < ix_ready(qpos, i < t ? i : 0, rate, nc);
        acc[r] = 0.0f;
    }
    const float *kw = ks + tx * kp;
    for (int64_t hh = 0; hh < h; hh++) {
        __syncthreads(); /* the previous head's qs reads are done (and, first time, ks is written) */
        for (int64_t x = tid; x < IX_T * c; x += IX_THREADS) {
            const int64_t r = x / c, i = i0 + r;
            qs[x] = i < t ? q[(i * h + hh) * c + x % c] : 0.0f;
        }
        __syncthreads();
        float dot[IX_Q];
#pragma unroll
        for (int r = 0; r < IX_Q; r++) dot[r] = 0.0f;
        for (int64_t x = 0; x < c; x++) {
            const float kx = kw[x];
#pragma unroll
            for (int r = 0; r < IX_Q; r++) dot[r] = __fadd_rn(dot[r], __fmul_rn(qs[(ty + r * IX_R) * c + x], kx));
        }
#pragma unroll
        for (int r = 0; r < IX_Q; r++)
            if (live[r]) {
                const int64_t i = i0 + ty + r * IX_R;
                const float rel = __fmul_rn(dot[r] > 0.0f ? dot[r] : 0.0f, scale);
                acc[r] = __fadd_rn(acc[r], __fmul_rn(rel, __fmul_rn(wts[i * h + hh], wscale)));
            }
    }
#pragma unroll
    for (int r = 0; r < IX_Q; r++) {
        const int64_t i = i0 + ty + r * IX_R;
        if (i < t && w < nc) scores[i * nc + w] = acc[r]; /* 0 for entries not yet closed */
    }
}

__global__ void indexer_select_kernel(const float *__restrict__ scores, int64_t t, int64_t nc,
                                      const int32_t *__restrict__ qpos, int64_t rate, int64_t topk,
                                      nd_pick *__restrict__ pool, int32_t *__restrict__ idx) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= t) return;
    const int64_t ready = ix_ready(qpos, i, rate, nc);
    nd_pick *a = pool + i * nc;
    const float *srow = scores + i * nc;
    for (int64_t w = 0; w < nc; w++) a[w] = nd_pick{w < ready ? srow[w] : -INFINITY, (int32_t)w};
    nd_topk_select(a, nc, topk);
    for (int64_t s = 0; s < topk; s++) idx[i * topk + s] = a[s].i < ready ? a[s].i : -1;
}

int nd_cuda_indexer_topk(nd_backend *b, const float *q, const float *k, const float *wts, int64_t t, int64_t nc,
                         int64_t h, int64_t c, float scale, float wscale, const int32_t *qpos_host, int64_t rate,
                         int64_t topk, float *scores, int32_t *idx, nd_err *e) {
    const char *op = "indexer_topk";
    ND_CUDA_SIZES(op, t, h, c);
    ND_CUDA_SIZES(op, nc, c);
    ND_CUDA_SIZES(op, t, nc);
    ND_CUDA_SIZES(op, t, topk);
    if (rate <= 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: compress rate %lld must be positive", op, (long long)rate);
    if (topk > nc)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: top-k %lld exceeds the %lld entries", op, (long long)topk,
                       (long long)nc);
    if (nc > INT32_MAX) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: too many entries", op);
    if (t == 0 || nc == 0) return 0;
    if (!qpos_host || !scores || (topk > 0 && !idx) || (h > 0 && !wts) || (h * c > 0 && (!q || !k)))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: NULL buffer", op);
    nd_cuda *cu = nd_cu(b);
    int dev_smem = 0;
    ND_CU(cudaDeviceGetAttribute(&dev_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, cu->device));
    const int64_t kp = ix_pitch(c);
    const size_t smem = ((size_t)IX_W * (size_t)kp + (size_t)IX_T * (size_t)c) * 4;
    if (smem > (size_t)dev_smem)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: unsupported: head dimension %lld exceeds the shared-memory tiles",
                       op, (long long)c);
    const int64_t gy = (t + IX_T - 1) / IX_T, gx = (nc + IX_W - 1) / IX_W;
    if (gy > 65535 || gx > 2147483647LL)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: unsupported: %lld queries", op, (long long)t);
    const size_t qb = nd_cuda_align256((size_t)t * 4);
    const size_t pool_bytes = topk > 0 ? (size_t)t * (size_t)nc * sizeof(nd_pick) : 0;
    void *sp;
    ND_TRY(nd_cuda_scratch(b, qb + pool_bytes, &sp, e));
    int32_t *qpos = (int32_t *)sp;
    nd_pick *pool = (nd_pick *)((char *)sp + qb);
    ND_TRY(nd_cuda_stage(b, qpos, qpos_host, (size_t)t * 4, e));
    ND_CU(cudaFuncSetAttribute(indexer_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    indexer_scores_kernel<<<dim3((unsigned)gx, (unsigned)gy), dim3(IX_W, IX_R), smem, cu->stream>>>(
        q, k, wts, t, nc, h, c, kp, scale, wscale, qpos, rate, scores);
    ND_LAUNCHED("indexer_scores_kernel");
    if (topk == 0) return 0;
    indexer_select_kernel<<<nd_cuda_blocks(t, 64), 64, 0, cu->stream>>>(scores, t, nc, qpos, rate, topk, pool, idx);
    ND_LAUNCHED("indexer_select_kernel");
    return 0;
}
