/* cuda_dequant.cu — weight decoding: NVFP4, MXFP4, FP8 (four scale kinds), BF16/F16 -> F32.
 * Every value comes from nd_numerics.h, so the result is bit-identical to the CPU backend. */
#include <stdlib.h>
#include "cuda_common.cuh"

/* One float4 of output per thread step (2 code bytes in, 16 bytes out), so a warp's stores are
 * one contiguous 512-byte run; four steps' loads are issued before any store. Both decodes go
 * through shared tables filled from nd_numerics.h by each CUDA block: the 16 E2M1 values
 * (conflict-free: 16 entries, 16 banks) and the 256 block scales e4m3(b) / global_div, the same
 * function the CPU calls per block, so every value is bit-identical. */
enum { DQ_UNROLL = 4, DQ_THREADS = 256 };

__global__ void __launch_bounds__(DQ_THREADS) dequant_nvfp4_kernel(const uint16_t *__restrict__ packed,
                                                                   const uint8_t *__restrict__ sf, float global_div,
                                                                   int64_t n4, float4 *__restrict__ out) {
    __shared__ float e2m1[16], scale[256];
    scale[threadIdx.x] = nd_nvfp4_block_dequant_scale((uint8_t)threadIdx.x, global_div);
    if (threadIdx.x < 16) e2m1[threadIdx.x] = nd_e2m1_to_f32((uint8_t)threadIdx.x);
    __syncthreads();
    const int64_t stride = (int64_t)gridDim.x * DQ_THREADS;
    for (int64_t base = (int64_t)blockIdx.x * DQ_THREADS * DQ_UNROLL + threadIdx.x; base < n4;
         base += stride * DQ_UNROLL) {
        uint32_t c[DQ_UNROLL], s[DQ_UNROLL];
#pragma unroll
        for (int u = 0; u < DQ_UNROLL; u++) {
            const int64_t q = base + (int64_t)u * DQ_THREADS;
            c[u] = q < n4 ? __ldcs(packed + q) : 0u;
            s[u] = q < n4 ? __ldcs(sf + (q >> 2)) : 0u; /* 4 float4 per 16-element block */
        }
#pragma unroll
        for (int u = 0; u < DQ_UNROLL; u++) {
            const int64_t q = base + (int64_t)u * DQ_THREADS;
            if (q >= n4) break;
            const float sc = scale[s[u]];
            /* low byte holds elements 4q, 4q+1 (low nibble first), high byte 4q+2, 4q+3 */
            out[q] = make_float4(e2m1[c[u] & 15u] * sc, e2m1[(c[u] >> 4) & 15u] * sc, e2m1[(c[u] >> 8) & 15u] * sc,
                                 e2m1[(c[u] >> 12) & 15u] * sc);
        }
    }
}

/* The same decode with wide code loads: a warp takes chunks of 128 float4 outputs (512 elements,
 * 256 code bytes, 32 block scales). Lane L loads the 8 code bytes and the scale of block
 * chunk * 32 + L (one 8-byte and one 1-byte load for four float4 stores, instead of four 2-byte
 * and four 1-byte loads), and in store round j lane L takes, by shuffles, the 2 code bytes and the
 * scale of its float4 j * 32 + L from lane j * 8 + L / 4, so the warp's stores stay one contiguous
 * 512-byte run. DQW_CHUNKS chunks' loads are in flight before any store. Used when the codes are
 * 8-byte aligned; ND_CUDA_DEQUANT_NARROW=1 forces the kernel above (bench/bench_kernels times both). */
enum { DQW_CHUNKS = 4 };

__global__ void __launch_bounds__(DQ_THREADS) dequant_nvfp4_wide_kernel(const uint2 *__restrict__ packed,
                                                                        const uint8_t *__restrict__ sf,
                                                                        float global_div, int64_t n4,
                                                                        float4 *__restrict__ out) {
    __shared__ float e2m1[16], scale[256];
    scale[threadIdx.x] = nd_nvfp4_block_dequant_scale((uint8_t)threadIdx.x, global_div);
    if (threadIdx.x < 16) e2m1[threadIdx.x] = nd_e2m1_to_f32((uint8_t)threadIdx.x);
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int64_t nblk = n4 / 4; /* 16-element blocks: 8 code bytes and one scale each */
    const int64_t nchunk = (n4 + 127) / 128;
    const int64_t warp = (int64_t)blockIdx.x * (DQ_THREADS / 32) + threadIdx.x / 32;
    const int64_t warps = (int64_t)gridDim.x * (DQ_THREADS / 32);
    for (int64_t c0 = warp * DQW_CHUNKS; c0 < nchunk; c0 += warps * DQW_CHUNKS) {
        uint2 c[DQW_CHUNKS];
        uint32_t s[DQW_CHUNKS];
#pragma unroll
        for (int u = 0; u < DQW_CHUNKS; u++) {
            const int64_t blk = (c0 + u) * 32 + lane;
            c[u] = blk < nblk ? __ldcs(packed + blk) : make_uint2(0u, 0u);
            s[u] = blk < nblk ? __ldcs(sf + blk) : 0u;
        }
#pragma unroll
        for (int u = 0; u < DQW_CHUNKS; u++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int src = j * 8 + lane / 4, sub = lane & 3;
                const uint32_t lo = __shfl_sync(0xffffffffu, c[u].x, src), hi = __shfl_sync(0xffffffffu, c[u].y, src);
                const float sc = scale[__shfl_sync(0xffffffffu, s[u], src)];
                const uint32_t w = ((sub & 2) ? hi : lo) >> (16 * (sub & 1)); /* low byte: elements 4q, 4q+1 */
                const int64_t q = (c0 + u) * 128 + j * 32 + lane;
                if (q < n4)
                    __stcs(out + q, make_float4(e2m1[w & 15u] * sc, e2m1[(w >> 4) & 15u] * sc,
                                                e2m1[(w >> 8) & 15u] * sc, e2m1[(w >> 12) & 15u] * sc));
            }
        }
    }
}

int nd_cuda_dequant_nvfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div,
                          int64_t rows, int64_t k, float *out, nd_err *e) {
    if (k % 16 != 0 || rows < 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: dequant_nvfp4: k = %lld is not a multiple of 16", (long long)k);
    if (((uintptr_t)packed & 1) || ((uintptr_t)out & 15))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: dequant_nvfp4: packed/out buffers are not 2/16-byte aligned");
    const int64_t n4 = rows * k / 4;
    if (n4 == 0) return 0;
    if (!((uintptr_t)packed & 7) && !getenv("ND_CUDA_DEQUANT_NARROW")) {
        static int wide_resident;
        if (!wide_resident && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&wide_resident, dequant_nvfp4_wide_kernel,
                                                                            DQ_THREADS, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            wide_resident = 1;
        }
        const int64_t warp_steps = (n4 + 128 * DQW_CHUNKS - 1) / (128 * DQW_CHUNKS);
        dequant_nvfp4_wide_kernel<<<nd_cuda_grid_balanced(b, warp_steps, DQ_THREADS / 32, wide_resident), DQ_THREADS,
                                    0, nd_cu(b)->stream>>>((const uint2 *)packed, sf, global_div, n4, (float4 *)out);
        ND_LAUNCHED("dequant_nvfp4_wide_kernel");
        return 0;
    }
    static int resident; /* CUDA blocks per multiprocessor, asked once */
    if (!resident &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, dequant_nvfp4_kernel, DQ_THREADS, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        resident = 1;
    }
    /* a balanced grid: every block the same number of steps, all resident at once (the capped
     * grid of before left a partial second wave: 2688 steps on 2112 blocks at [1536, 7168]) */
    dequant_nvfp4_kernel<<<nd_cuda_grid_balanced(b, n4, DQ_THREADS * DQ_UNROLL, resident), DQ_THREADS, 0,
                           nd_cu(b)->stream>>>((const uint16_t *)packed, sf, global_div, n4, (float4 *)out);
    ND_LAUNCHED("dequant_nvfp4_kernel");
    return 0;
}

/* MXFP4: one thread per element pair (one byte), scale e8m0 per 32 elements. */
__global__ void dequant_mxfp4_kernel(const uint8_t *__restrict__ packed, const uint8_t *__restrict__ sf,
                                     int64_t rows, int64_t k, float2 *__restrict__ out) {
    const int64_t half = k / 2, n_sf = (k + 31) / 32, total = rows * half;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / half, col = (i % half) * 2;
        const float s = nd_e8m0_to_f32(sf[r * n_sf + col / 32]);
        const uint8_t byte = packed[i];
        out[i] = make_float2(nd_e2m1_to_f32(byte & 15u) * s, nd_e2m1_to_f32(byte >> 4) * s);
    }
}

int nd_cuda_dequant_mxfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, int64_t rows, int64_t k,
                          float *out, nd_err *e) {
    if (k % 32 != 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: dequant_mxfp4: K = %lld is not a multiple of 32", (long long)k);
    if ((uintptr_t)out & 7) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: dequant_mxfp4: out is not 8-byte aligned");
    const int64_t total = rows * (k / 2);
    if (total == 0) return 0;
    dequant_mxfp4_kernel<<<nd_cuda_grid(b, total, 256), 256, 0, nd_cu(b)->stream>>>(packed, sf, rows, k,
                                                                                      (float2 *)out);
    ND_LAUNCHED("dequant_mxfp4_kernel");
    return 0;
}

/* FP8 e4m3 weight times its scale; one thread per element. */
__global__ void dequant_fp8_kernel(const uint8_t *__restrict__ w, const void *__restrict__ scale, int kind,
                                   int bn, int bk, int64_t rows, int64_t k, float *__restrict__ out) {
    const int64_t total = rows * k;
    const int64_t kb = bk > 0 ? (k + bk - 1) / bk : 1;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / k, c = i % k;
        float s;
        switch (kind) {
        case ND_FP8_SCALE_TENSOR: s = ((const float *)scale)[0]; break;
        case ND_FP8_SCALE_CHANNEL: s = ((const float *)scale)[r]; break;
        case ND_FP8_SCALE_BLOCK_F32: s = ((const float *)scale)[(r / bn) * kb + c / bk]; break;
        default: s = nd_e8m0_to_f32(((const uint8_t *)scale)[(r / bn) * kb + c / bk]); break;
        }
        out[i] = nd_e4m3_to_f32(w[i]) * s;
    }
}

int nd_cuda_dequant_fp8(nd_backend *b, const uint8_t *w, const void *scale, int scale_kind, int bn, int bk,
                        int64_t rows, int64_t k, float *out, nd_err *e) {
    if (scale_kind < ND_FP8_SCALE_TENSOR || scale_kind > ND_FP8_SCALE_BLOCK_E8M0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: dequant_fp8: unknown scale kind %d", scale_kind);
    ND_TRY(nd_backend_require(b, ND_OP_dequant_fp8,
                              ND_ODT_E4M3 | (scale_kind == ND_FP8_SCALE_BLOCK_E8M0 ? ND_ODT_E8M0 : ND_ODT_F32), e));
    if ((scale_kind == ND_FP8_SCALE_BLOCK_F32 || scale_kind == ND_FP8_SCALE_BLOCK_E8M0) && (bn <= 0 || bk <= 0))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: dequant_fp8: block sizes %d x %d are not positive", bn, bk);
    const int64_t total = rows * k;
    if (total == 0) return 0;
    dequant_fp8_kernel<<<nd_cuda_grid(b, total, 256), 256, 0, nd_cu(b)->stream>>>(w, scale, scale_kind, bn, bk,
                                                                                    rows, k, out);
    ND_LAUNCHED("dequant_fp8_kernel");
    return 0;
}

__global__ void to_f32_kernel(const void *__restrict__ src, int dt, int64_t n, float *__restrict__ out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (dt == ND_DT_BF16) out[i] = nd_bf16_to_f32(((const uint16_t *)src)[i]);
        else if (dt == ND_DT_F16) out[i] = nd_f16_to_f32(((const uint16_t *)src)[i]);
        else out[i] = ((const float *)src)[i];
    }
}

int nd_cuda_to_f32(nd_backend *b, const void *src, nd_dtype dt, int64_t n, float *out, nd_err *e) {
    ND_TRY(nd_backend_require_dt(b, ND_OP_to_f32, dt, e)); /* F32, BF16, F16 (backend.h) */
    if (n == 0) return 0;
    if (dt == ND_DT_F32) {
        if (src == (const void *)out) return 0;
        ND_CU(cudaMemcpyAsync(out, src, (size_t)n * 4, cudaMemcpyDeviceToDevice, nd_cu(b)->stream));
        return 0;
    }
    to_f32_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(src, (int)dt, n, out);
    ND_LAUNCHED("to_f32_kernel");
    return 0;
}
