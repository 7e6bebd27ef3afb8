/* cuda_attention.cu — causal attention with sliding window, grouped KV heads and sinks (FP32).
 *
 * Same function as the CPU reference: s_j = scale * (q·k_j) over visible keys,
 * μ = max(max_j s_j, sink_h), out = Σ_j e^{s_j-μ} v_j / (Σ_j e^{s_j-μ} + e^{sink_h-μ}); a query
 * with no visible key gets zeros. One block per (query, head); the scores live in shared memory,
 * so s is bounded by the shared-memory limit (checked). This is the replay's attention, not a
 * flash kernel: its cost is small next to the GEMMs at the lengths nvfp4dbg traces. */
#include "cuda_common.cuh"
#include "numerics/nd_bf16_steps.h"
#include <math.h>

enum { ATT_THREADS = 256 };

__global__ void attention_kernel(const float *__restrict__ q, const float *__restrict__ k,
                                 const float *__restrict__ v, int64_t s, int64_t hq, int64_t hkv, int64_t d,
                                 int64_t dv, const int32_t *__restrict__ qpos, const int32_t *__restrict__ kpos,
                                 int64_t window, float scale, const float *__restrict__ sinks, int bf16_steps,
                                 float *__restrict__ out) {
    extern __shared__ float sc[]; /* [s] scores, then probabilities */
    __shared__ float red[32];
    __shared__ int nvis_s;
    __shared__ long long jlo_s, jhi_s; /* the visible keys lie in [jlo, jhi] */
    const int64_t ih = blockIdx.x, i = ih / hq, h = ih % hq, kh = h / (hq / hkv);
    const float *qh = q + ih * d;
    float *o = out + ih * dv;
    const int64_t qp = qpos[i];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    if (threadIdx.x == 0) { nvis_s = 0; jlo_s = s; jhi_s = -1; }
    __syncthreads();
    float mx = -INFINITY;
    int nvis = 0;
    long long jlo = s, jhi = -1;
    for (int64_t j = warp; j < s; j += nw) {
        const int64_t kp = kpos[j];
        const bool vis = !(kp > qp || (window > 0 && qp - kp >= window));
        if (!vis) {
            if (lane == 0) sc[j] = -INFINITY;
            continue;
        }
        const float *kj = k + (j * hkv + kh) * d;
        float dot = 0.0f;
        for (int64_t c = lane; c < d; c += 32) dot = fmaf(qh[c], kj[c], dot);
#pragma unroll
        for (int o2 = 16; o2; o2 >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o2);
        const float sj = nd_attn_score(dot, scale, bf16_steps);
        if (lane == 0) sc[j] = sj;
        mx = fmaxf(mx, sj);
        nvis++;
        if (j < jlo) jlo = j;
        jhi = j;
    }
    if (lane == 0 && nvis) {
        atomicAdd(&nvis_s, nvis);
        atomicMin(&jlo_s, jlo);
        atomicMax(&jhi_s, jhi);
    }
    float mu = nd_cuda_block_max(mx, red); /* includes the __syncthreads that publishes sc[] and nvis_s */
    if (nvis_s == 0) {
        for (int64_t c = threadIdx.x; c < dv; c += blockDim.x) o[c] = 0.0f;
        return;
    }
    const float sink = sinks ? sinks[h] : -INFINITY;
    if (sink > mu) mu = sink;
    float part = 0.0f;
    for (int64_t j = threadIdx.x; j < s; j += blockDim.x) {
        const float p = sc[j] == -INFINITY ? 0.0f : nd_attn_exp(sc[j], mu, bf16_steps == 2 && sinks);
        sc[j] = p;
        part += p;
    }
    float den = nd_cuda_block_sum(part, red); /* also orders the sc[] writes before the reads below */
    if (sinks) den += nd_attn_exp(sink, mu, bf16_steps == 2);
    if (bf16_steps) { /* BF16 probabilities before p·v (numerics/nd_bf16_steps.h) */
        for (int64_t j = threadIdx.x; j < s; j += blockDim.x) sc[j] = nd_attn_prob(sc[j], den, 1);
        __syncthreads();
    }
    /* p·v over the visible span only: the keys outside it have p = 0 and were skipped anyway, so
     * the sum and its order are unchanged (a sliding window of 128 in 4096 keys costs 128, not 4096) */
    const float *vh = v + kh * dv;
    const int64_t j0 = jlo_s, j1 = jhi_s;
    for (int64_t c = threadIdx.x; c < dv; c += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = j0; j <= j1; j++) {
            const float p = sc[j];
            if (p != 0.0f) acc = fmaf(p, vh[j * hkv * dv + c], acc);
        }
        o[c] = bf16_steps ? acc : acc / den;
    }
}

int nd_cuda_attention(nd_backend *b, const float *q, const float *k, const float *v, int64_t t, int64_t s,
                      int64_t hq, int64_t hkv, int64_t d, int64_t dv, const int32_t *qpos_host,
                      const int32_t *kpos_host, int64_t window, float scale, const float *sinks_host,
                      int bf16_steps, float *out, nd_err *e) {
    if (t < 0 || s < 0 || d < 0 || dv < 0 || window < 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: attention: negative size or window");
    if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: attention: query heads %lld not a positive multiple of kv heads %lld",
                       (long long)hq, (long long)hkv);
    if (t * dv == 0) return 0;
    nd_cuda *c = nd_cu(b);
    int dev_smem = 0;
    ND_CU(cudaDeviceGetAttribute(&dev_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device));
    const size_t smem = (size_t)(s > 0 ? s : 1) * sizeof(float);
    if (smem + 1024 > (size_t)dev_smem)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: attention: unsupported: %lld keys exceed the shared-memory score buffer",
                       (long long)s);
    if (t * hq > 2147483647LL) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: attention: too many (query, head) pairs");
    ND_CU(cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const size_t qb = ((size_t)t * 4 + 255) & ~(size_t)255, kb = ((size_t)s * 4 + 255) & ~(size_t)255;
    void *sp;
    ND_TRY(nd_cuda_scratch(b, qb + kb + (size_t)hq * 4, &sp, e));
    int32_t *qpos = (int32_t *)sp, *kpos = (int32_t *)((char *)sp + qb);
    float *sinks = sinks_host ? (float *)((char *)sp + qb + kb) : NULL;
    ND_TRY(nd_cuda_stage(b, qpos, qpos_host, (size_t)t * 4, e));
    ND_TRY(nd_cuda_stage(b, kpos, kpos_host, (size_t)s * 4, e));
    if (sinks) ND_TRY(nd_cuda_stage(b, sinks, sinks_host, (size_t)hq * 4, e));
    attention_kernel<<<(unsigned)(t * hq), ATT_THREADS, smem, c->stream>>>(q, k, v, s, hq, hkv, d, dv, qpos, kpos,
                                                                          window, scale, sinks, bf16_steps, out);
    ND_LAUNCHED("attention_kernel");
    return 0;
}
