/* cuda_compress.cu — DeepSeek-V4 KV compressor pooling and the attention over window rows plus
 * compressed entries (FP32), the CUDA side of kernels/cpu/cpu_compress.c.
 *
 * compress_pool: one thread per (entry, channel), slots visited in the CPU's order (the previous
 * window's Ca rows, then the window's own rows) with the CPU's operations one by one (no FMA,
 * IEEE division, BF16 steps through nd_numerics.h). The one step that is not the CPU's is exp:
 * it is taken in double and rounded to float, i.e. correctly rounded, where glibc's expf is
 * within 0.502 ulp; the two agree except where a value lies within ~0.002 ulp of a rounding
 * midpoint, so most outputs are bit-identical and the rest differ in the last bits (or, with
 * bf16_steps, where such a difference moves a probability across a BF16 rounding boundary).
 *
 * attention_compressed: one block per (query, group of HB heads). The block first lists the keys
 * the query sees (window rows, then compressed entries that are closed and selected), in
 * increasing order, in shared memory; then per key one warp forms the HB dot products (the key
 * row is read once for the HB heads), and the softmax and the weighted sum run over the list
 * only, as in kernels/cuda/cuda_attention.cu (FP32, fmaf, expf). */
#include "cuda_compressed.cuh"
#include "numerics/nd_bf16_steps.h"
#include <math.h>

/* exp rounded once to float (see the header comment) */
__device__ __forceinline__ float exp_rn(float x) { return (float)exp((double)x); }

__global__ void compress_pool_kernel(const float *__restrict__ kv, const float *__restrict__ gate,
                                     const float *__restrict__ pbias, int64_t n_win, int64_t d, int64_t rate,
                                     int overlap, int bf16_steps, float *__restrict__ out) {
    const int64_t w = overlap ? 2 : 1, width = w * d, total = n_win * d;
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t en = q / d, c = q % d;
        const int prev = overlap && en > 0;
        /* slot z < rate of the previous window (when prev): row (en-1)*rate+z, column c; then slot
         * z of the window: row en*rate+z, column (w-1)*d+c. Position bias row z, same column. */
        float mx = -INFINITY;
        if (prev)
            for (int64_t z = 0; z < rate; z++) {
                const int64_t at = ((en - 1) * rate + z) * width + c;
                mx = fmaxf(mx, __fadd_rn(gate[at], pbias[z * width + c]));
            }
        for (int64_t z = 0; z < rate; z++) {
            const int64_t col = (w - 1) * d + c, at = (en * rate + z) * width + col;
            mx = fmaxf(mx, __fadd_rn(gate[at], pbias[z * width + col]));
        }
        float den = 0.0f;
        if (prev)
            for (int64_t z = 0; z < rate; z++) {
                const int64_t at = ((en - 1) * rate + z) * width + c;
                den = __fadd_rn(den, exp_rn(__fsub_rn(__fadd_rn(gate[at], pbias[z * width + c]), mx)));
            }
        for (int64_t z = 0; z < rate; z++) {
            const int64_t col = (w - 1) * d + c, at = (en * rate + z) * width + col;
            den = __fadd_rn(den, exp_rn(__fsub_rn(__fadd_rn(gate[at], pbias[z * width + col]), mx)));
        }
        float acc = 0.0f;
        for (int pass = prev ? 0 : 1; pass < 2; pass++)
            for (int64_t z = 0; z < rate; z++) {
                const int64_t col = pass ? (w - 1) * d + c : c, row = pass ? en * rate + z : (en - 1) * rate + z;
                const int64_t at = row * width + col;
                float p = __fdiv_rn(exp_rn(__fsub_rn(__fadd_rn(gate[at], pbias[z * width + col]), mx)), den);
                if (bf16_steps) p = nd_bf16_round(p);
                float prod = __fmul_rn(kv[at], p);
                if (bf16_steps) prod = nd_bf16_round(prod);
                acc = __fadd_rn(acc, prod);
            }
        out[q] = acc;
    }
}

int nd_cuda_compress_pool(nd_backend *b, const float *kv, const float *gate, const float *pbias_host, int64_t s,
                          int64_t d, int64_t rate, int overlap, int bf16_steps, float *out, nd_err *e) {
    const char *op = "compress_pool";
    const int64_t w = overlap ? 2 : 1;
    ND_CUDA_SIZES(op, s, w, d);
    ND_CUDA_SIZES(op, rate, w, d);
    if (rate <= 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: compress rate %lld must be positive", op, (long long)rate);
    const int64_t n_win = s / rate;
    if (n_win * d == 0) return 0;
    if (!kv || !gate || !pbias_host || !out) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: NULL buffer", op);
    void *sp;
    const size_t pb_bytes = (size_t)(rate * w * d) * sizeof(float);
    ND_TRY(nd_cuda_scratch(b, pb_bytes, &sp, e));
    ND_TRY(nd_cuda_stage(b, sp, pbias_host, pb_bytes, e));
    compress_pool_kernel<<<nd_cuda_grid(b, n_win * d, 256), 256, 0, nd_cu(b)->stream>>>(
        kv, gate, (const float *)sp, n_win, d, rate, overlap, bf16_steps, out);
    ND_LAUNCHED("compress_pool_kernel");
    return 0;
}

/* ---- attention over window rows + compressed entries ---- */
enum { ATTC_THREADS = 256, ATTC_WARPS = ATTC_THREADS / 32 };

/* Dynamic shared memory: qs [HB*d] | sc [HB*nk] | list [nk] int | mark [nc] bytes (with sel). */
static size_t attc_smem(int hb, int64_t d, int64_t nk, int64_t nc, int with_sel) {
    return ((size_t)hb * (size_t)d + (size_t)hb * (size_t)nk + (size_t)nk) * 4 + (with_sel ? (size_t)nc : 0);
}

template <int HB>
__global__ void __launch_bounds__(ATTC_THREADS)
attc_kernel(const float *__restrict__ q, const float *__restrict__ kv, const float *__restrict__ ckv, int64_t s,
            int64_t nc, int64_t hq, int64_t d, const int32_t *__restrict__ qpos, const int32_t *__restrict__ kpos,
            int64_t window, float scale, const float *__restrict__ sinks, int64_t rate,
            const int32_t *__restrict__ sel, int64_t nsel, int bf16_steps, float *__restrict__ out) {
    extern __shared__ float smem[];
    __shared__ float red[32];
    __shared__ int wcount[ATTC_WARPS];
    const int64_t nk = s + nc, i = blockIdx.x, h0 = (int64_t)blockIdx.y * HB;
    float *qs = smem, *sc = qs + (size_t)HB * d;
    int *list = (int *)(sc + (size_t)HB * nk);
    uint8_t *mark = (uint8_t *)(list + nk);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
    const int64_t qp = qpos[i], ready = (qp + 1) / rate;

    for (int64_t x = tid; x < (int64_t)HB * d; x += ATTC_THREADS) {
        const int64_t h = h0 + x / d;
        qs[x] = h < hq ? q[(i * hq + h) * d + x % d] : 0.0f;
    }
    if (sel) {
        for (int64_t w = tid; w < nc; w += ATTC_THREADS) mark[w] = 0;
        __syncthreads();
        for (int64_t z = tid; z < nsel; z += ATTC_THREADS) {
            const int32_t w = sel[i * nsel + z];
            if (w >= 0 && w < nc) mark[w] = 1;
        }
    }
    __syncthreads();

    /* the visible keys, in increasing order (ballot + per-warp counts per chunk) */
    int total = 0;
    for (int64_t base = 0; base < nk; base += ATTC_THREADS) {
        const int64_t j = base + tid;
        bool vis = false;
        if (j < s) {
            const int64_t kp = kpos[j];
            vis = !(kp > qp || (window > 0 && qp - kp >= window));
        } else if (j < nk) {
            const int64_t w = j - s;
            vis = w < ready && (!sel || mark[w]);
        }
        const unsigned bal = __ballot_sync(0xffffffffu, vis);
        if (lane == 0) wcount[warp] = __popc(bal);
        __syncthreads();
        int off = total, chunk = 0;
        for (int w = 0; w < ATTC_WARPS; w++) {
            if (w < warp) off += wcount[w];
            chunk += wcount[w];
        }
        if (vis) list[off + __popc(bal & ((1u << lane) - 1u))] = (int)j;
        total += chunk;
        __syncthreads();
    }
    const int nvis = total;
    if (nvis == 0) {
        for (int64_t x = tid; x < (int64_t)HB * d; x += ATTC_THREADS) {
            const int64_t h = h0 + x / d;
            if (h < hq) out[(i * hq + h) * d + x % d] = 0.0f;
        }
        return;
    }

    /* scores: one warp per key, HB heads at once */
    float mx[HB];
#pragma unroll
    for (int hb = 0; hb < HB; hb++) mx[hb] = -INFINITY;
    for (int idx = warp; idx < nvis; idx += ATTC_WARPS) {
        const int64_t j = list[idx];
        const float *key = j < s ? kv + j * d : ckv + (j - s) * d;
        float dot[HB];
#pragma unroll
        for (int hb = 0; hb < HB; hb++) dot[hb] = 0.0f;
        for (int64_t c = lane; c < d; c += 32) {
            const float kx = key[c];
#pragma unroll
            for (int hb = 0; hb < HB; hb++) dot[hb] = fmaf(qs[hb * d + c], kx, dot[hb]);
        }
#pragma unroll
        for (int hb = 0; hb < HB; hb++) {
#pragma unroll
            for (int o = 16; o; o >>= 1) dot[hb] += __shfl_xor_sync(0xffffffffu, dot[hb], o);
            const float sj = nd_attn_score(dot[hb], scale, bf16_steps);
            if (lane == 0) sc[hb * nk + idx] = sj;
            mx[hb] = fmaxf(mx[hb], sj);
        }
    }
    float mu[HB], sink[HB];
#pragma unroll
    for (int hb = 0; hb < HB; hb++) {
        mu[hb] = nd_cuda_block_max(mx[hb], red); /* its barriers also publish sc[] */
        const int64_t h = h0 + hb < hq ? h0 + hb : hq - 1;
        sink[hb] = sinks ? sinks[h] : -INFINITY;
        if (sink[hb] > mu[hb]) mu[hb] = sink[hb];
    }
    float part[HB];
#pragma unroll
    for (int hb = 0; hb < HB; hb++) part[hb] = 0.0f;
    for (int idx = tid; idx < nvis; idx += ATTC_THREADS)
#pragma unroll
        for (int hb = 0; hb < HB; hb++) {
            const float p = nd_attn_exp(sc[hb * nk + idx], mu[hb], bf16_steps == 2 && sinks);
            sc[hb * nk + idx] = p;
            part[hb] += p;
        }
    float den[HB];
#pragma unroll
    for (int hb = 0; hb < HB; hb++) {
        den[hb] = nd_cuda_block_sum(part[hb], red); /* also orders the sc[] writes before the reads below */
        if (sinks) den[hb] += nd_attn_exp(sink[hb], mu[hb], bf16_steps == 2);
    }
    if (bf16_steps) { /* BF16 probabilities before p·v (numerics/nd_bf16_steps.h) */
        for (int idx = tid; idx < nvis; idx += ATTC_THREADS)
#pragma unroll
            for (int hb = 0; hb < HB; hb++) sc[hb * nk + idx] = nd_attn_prob(sc[hb * nk + idx], den[hb], 1);
        __syncthreads();
    }
    for (int64_t c = tid; c < d; c += ATTC_THREADS) {
        float acc[HB];
#pragma unroll
        for (int hb = 0; hb < HB; hb++) acc[hb] = 0.0f;
        for (int idx = 0; idx < nvis; idx++) {
            const int64_t j = list[idx];
            const float v = j < s ? kv[j * d + c] : ckv[(j - s) * d + c];
#pragma unroll
            for (int hb = 0; hb < HB; hb++) acc[hb] = fmaf(sc[hb * nk + idx], v, acc[hb]);
        }
#pragma unroll
        for (int hb = 0; hb < HB; hb++)
            if (h0 + hb < hq) out[(i * hq + h0 + hb) * d + c] = bf16_steps ? acc[hb] : acc[hb] / den[hb];
    }
}

int nd_cuda_attention_compressed(nd_backend *b, const float *q, const float *kv, const float *ckv, int64_t t,
                                 int64_t s, int64_t nc, int64_t hq, int64_t d, const int32_t *qpos_host,
                                 const int32_t *kpos_host, int64_t window, float scale, const float *sinks_host,
                                 int64_t rate, const int32_t *sel, int64_t nsel, int bf16_steps, float *out,
                                 nd_err *e) {
    const char *op = "attention_compressed";
    ND_CUDA_SIZES(op, t, hq, d);
    ND_CUDA_SIZES(op, s + nc, d);
    ND_CUDA_SIZES(op, t, nsel);
    if (window < 0 || rate <= 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: window %lld / rate %lld out of range", op, (long long)window,
                       (long long)rate);
    if (t * hq * d == 0) return 0;
    if (!q || !out || !qpos_host || (s > 0 && (!kv || !kpos_host)) || (nc > 0 && !ckv))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: NULL buffer", op);
    const int64_t nk = s + nc;
    if (nk > 2147483647LL || t > 2147483647LL)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: unsupported: %lld queries / %lld keys", op, (long long)t,
                       (long long)nk);
    nd_cuda *cu = nd_cu(b);
    int dev_smem = 0;
    ND_CU(cudaDeviceGetAttribute(&dev_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, cu->device));
    const size_t room = dev_smem > 1024 ? (size_t)dev_smem - 1024 : 0; /* the static red[]/wcount[] */
    int hb = hq >= 4 && attc_smem(4, d, nk, nc, sel != NULL) <= room ? 4 : 1;
    const size_t smem = attc_smem(hb, d, nk, nc, sel != NULL);
    if (smem > room)
        return nd_fail(e, ND_EXIT_INTERNAL,
                       "cuda: %s: unsupported: %lld keys of dimension %lld exceed the shared-memory score buffer", op,
                       (long long)nk, (long long)d);
    const size_t qb = nd_cuda_align256((size_t)t * 4), kb = nd_cuda_align256((size_t)s * 4);
    void *sp;
    ND_TRY(nd_cuda_scratch(b, qb + kb + (size_t)hq * 4, &sp, e));
    int32_t *qpos = (int32_t *)sp, *kpos = (int32_t *)((char *)sp + qb);
    float *sinks = sinks_host ? (float *)((char *)sp + qb + kb) : NULL;
    ND_TRY(nd_cuda_stage(b, qpos, qpos_host, (size_t)t * 4, e));
    if (s > 0) ND_TRY(nd_cuda_stage(b, kpos, kpos_host, (size_t)s * 4, e));
    if (sinks) ND_TRY(nd_cuda_stage(b, sinks, sinks_host, (size_t)hq * 4, e));
    const int64_t groups = (hq + hb - 1) / hb;
    if (groups > 65535) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: unsupported: %lld heads", op, (long long)hq);
    const dim3 grid((unsigned)t, (unsigned)groups);
    if (hb == 4) {
        ND_CU(cudaFuncSetAttribute(attc_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        attc_kernel<4><<<grid, ATTC_THREADS, smem, cu->stream>>>(q, kv, ckv, s, nc, hq, d, qpos, kpos, window, scale,
                                                                 sinks, rate, sel, nsel, bf16_steps, out);
        ND_LAUNCHED("attc_kernel<4>");
    } else {
        ND_CU(cudaFuncSetAttribute(attc_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        attc_kernel<1><<<grid, ATTC_THREADS, smem, cu->stream>>>(q, kv, ckv, s, nc, hq, d, qpos, kpos, window, scale,
                                                                 sinks, rate, sel, nsel, bf16_steps, out);
        ND_LAUNCHED("attc_kernel<1>");
    }
    return 0;
}
