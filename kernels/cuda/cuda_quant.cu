/* cuda_quant.cu — NVFP4 and MXFP4 activation quantization (codes, block scales and statistics in one pass),
 * FP8 fake quantization, and the linear <-> 128x4 swizzled scale layouts. Block rules come from
 * nd_numerics.h, so codes and scales are bit-identical to the CPU backend. */
#include "cuda_results.cuh"

/* max |x| that turns NaN as soon as one element is NaN (a NaN block must get a NaN scale). */
__device__ __forceinline__ float amax_nan(float a, float v) {
    v = fabsf(v);
    if (v != v || a != a) return __int_as_float(0x7fc00000);
    return v > a ? v : a;
}

/* QS_* counters: cuda_results.cuh (a slot of the result buffer). */

/* A thread's count summed over its warp (every lane calls it) and added by lane 0 to *dst. */
__device__ __forceinline__ void warp_count(unsigned long long *dst, unsigned v) {
    v = __reduce_add_sync(0xffffffffu, v);
    if ((threadIdx.x & 31) == 0 && v) atomicAdd(dst, (unsigned long long)v);
}

/* Kept for the kernels below that still use them. */
enum { QT_UNROLL = 4, QT_THREADS = 256 };

/* NVFP4: two threads per 16-element block, eight elements (two float4) each, as FlashInfer's and
 * TensorRT-LLM's FP4 quantizers split it; the block's amax (the max of the |x| bit patterns, in
 * which a NaN is above everything, as the CPU's NaN-propagating amax) through one shuffle; each
 * thread stores its eight codes as one 32-bit word and the even thread the scale byte. The block
 * rule and the codes are nd_numerics.h's (branch-free on the bits), 1/g computed once per thread
 * as nd_nvfp4_block_params does it. Statistics: summed per warp, one atomic per CUDA block and
 * counter into a zeroed result slot. */
enum { Q8_THREADS = 256, Q8_UNROLL = 2 };

template <bool CT, bool STATS>
__global__ void __launch_bounds__(Q8_THREADS) quant_nvfp4_kernel(const float4 *__restrict__ x, float g, int sem,
                                                                 int64_t n8, uint32_t *__restrict__ codes,
                                                                 uint8_t *__restrict__ sf,
                                                                 unsigned long long *__restrict__ stats) {
    unsigned sat = 0, nonzero = 0, zscale = 0, s448 = 0, snan = 0;
    const float inv_g = 1.0f / g;
    const int64_t stride = (int64_t)gridDim.x * Q8_THREADS * Q8_UNROLL;
    for (int64_t i0 = (int64_t)blockIdx.x * Q8_THREADS * Q8_UNROLL; i0 < n8; i0 += stride) {
        float4 v[Q8_UNROLL][2];
#pragma unroll
        for (int u = 0; u < Q8_UNROLL; u++) {
            const int64_t i = i0 + (int64_t)u * Q8_THREADS + threadIdx.x;
            if (i < n8) {
                v[u][0] = __ldcs(x + 2 * i);
                v[u][1] = __ldcs(x + 2 * i + 1);
            } else {
                v[u][0] = v[u][1] = make_float4(0.f, 0.f, 0.f, 0.f);
            }
        }
#pragma unroll
        for (int u = 0; u < Q8_UNROLL; u++) {
            const int64_t i = i0 + (int64_t)u * Q8_THREADS + threadIdx.x;
            const float e[8] = {v[u][0].x, v[u][0].y, v[u][0].z, v[u][0].w, v[u][1].x, v[u][1].y, v[u][1].z, v[u][1].w};
            unsigned ab = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) ab = max(ab, __float_as_uint(e[j]) & 0x7fffffffu);
            ab = max(ab, __shfl_xor_sync(0xffffffffu, ab, 1));
            if (i >= n8) continue;
            const float a = __uint_as_float(ab);
            uint32_t word = 0;
            uint8_t sfb, zs;
            if (!CT) {
                /* nd_nvfp4_block_params' kernel rule, the E4M3 steps by the converter (an
                 * unsigned NaN in, so a NaN block gets 0x7f as on the CPU, and 0x7f back) */
                sfb = nd_cuda_e4m3_satfinite(nd_nan_unsigned(g * (a * (1.0f / 6.0f))));
                const float sfv = nd_cuda_e4m3_to_f32(sfb);
                const float mult = nd_nvfp4_kernel_mult(sfv, inv_g);
                uint32_t uy[8];
#pragma unroll
                for (int j = 0; j < 8; j++) uy[j] = __float_as_uint(e[j] * mult);
                /* a finite amax and multiplier: no product is NaN, so the NaN rule of
                 * nd_e2m1_from_f32 is not needed per element, the signs go on in one step, and
                 * |y| > 6 is the sign of 6 - |y| (never -0 or NaN here), added by one LEA.HI */
                if (ab < 0x7f800000u && (__float_as_uint(mult) & 0x7fffffffu) < 0x7f800000u) {
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        word |= nd_e2m1_mag_code(uy[j] & 0x7fffffffu) << (4 * j);
                        if (STATS) sat += __float_as_uint(ND_E2M1_MAX - fabsf(__uint_as_float(uy[j]))) >> 31;
                    }
                    word |= nd_e2m1_signs8(uy);
                } else {
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        const float y = __uint_as_float(uy[j]);
                        word |= (uint32_t)nd_e2m1_from_f32(y) << (4 * j);
                        if (STATS) sat += fabsf(y) > ND_E2M1_MAX;
                    }
                }
                zs = sfv == 0.0f && a > 0.0f;
            } else {
                const nd_block_q p = nd_nvfp4_block_params(a, g, sem);
                sfb = p.sf;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    word |= (uint32_t)nd_nvfp4_quant_elem(e[j], p, g, sem) << (4 * j);
                    if (STATS) sat += nd_nvfp4_elem_saturates(e[j], p, g, sem);
                }
                zs = p.zero_scale;
            }
            __stcs(codes + i, word); /* element 8i + j in nibble j: byte j/2, low nibble first */
            if ((i & 1) == 0) {
                sf[i >> 1] = sfb;
                if (STATS) {
                    nonzero += a > 0.0f;
                    zscale += zs;
                    s448 += sfb == 0x7eu;
                    snan += (sfb & 0x7fu) == 0x7fu;
                }
            }
        }
    }
    if (!STATS) return;
    __shared__ unsigned long long acc[QS_N];
    if (threadIdx.x < QS_N) acc[threadIdx.x] = 0;
    __syncthreads();
    warp_count(&acc[QS_SAT], sat);
    warp_count(&acc[QS_NONZERO], nonzero);
    warp_count(&acc[QS_ZERO_SCALE], zscale);
    warp_count(&acc[QS_448], s448);
    warp_count(&acc[QS_NAN], snan);
    __syncthreads();
    if (threadIdx.x < QS_N && acc[threadIdx.x]) atomicAdd(&stats[threadIdx.x], acc[threadIdx.x]);
}
template <bool CT, bool STATS>
static int q8_launch(nd_backend *b, const float *x, float g, int sem, int64_t n8, uint8_t *codes, uint8_t *sf,
                     unsigned long long *stats, nd_err *e) {
    static int resident;
    if (!resident && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, quant_nvfp4_kernel<CT, STATS>,
                                                                   Q8_THREADS, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        resident = 1;
    }
    const unsigned grid = nd_cuda_grid_balanced(b, n8, Q8_THREADS * Q8_UNROLL, resident);
    quant_nvfp4_kernel<CT, STATS><<<grid, Q8_THREADS, 0, nd_cu(b)->stream>>>((const float4 *)x, g, sem, n8,
                                                                            (uint32_t *)codes, sf, stats);
    ND_LAUNCHED("quant_nvfp4_kernel");
    return 0;
}

int nd_cuda_quant_nvfp4(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k,
                        uint8_t *codes, uint8_t *sf, nd_qstats *stats_host, nd_err *e) {
    if (rows < 0 || k < 0 || k % 16 != 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_nvfp4: k = %lld is not a multiple of 16", (long long)k);
    if (sem != ND_QSEM_KERNEL && !nd_qsem_is_ct(sem))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_nvfp4: unknown semantics %d", sem);
    if (((uintptr_t)x & 15) || ((uintptr_t)codes & 3))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_nvfp4: x is not 16-byte or codes not 4-byte aligned");
    const int64_t n8 = rows * k / 8;
    unsigned long long *dstats = NULL;
    if (stats_host) {
        void *slot;
        ND_TRY(nd_cuda_result_slot(b, ND_RES_QSTATS, stats_host, rows * k, rows * (k / 16), &slot, NULL, e));
        dstats = (unsigned long long *)slot;
    }
    if (n8 > 0) {
        const int ct = nd_qsem_is_ct(sem);
        if (ct && dstats) ND_TRY((q8_launch<true, true>(b, x, g, sem, n8, codes, sf, dstats, e)));
        else if (ct) ND_TRY((q8_launch<true, false>(b, x, g, sem, n8, codes, sf, dstats, e)));
        else if (dstats) ND_TRY((q8_launch<false, true>(b, x, g, sem, n8, codes, sf, dstats, e)));
        else ND_TRY((q8_launch<false, false>(b, x, g, sem, n8, codes, sf, dstats, e)));
    }
    return stats_host ? nd_cuda_result_queued(b, e) : 0;
}

/* MXFP4: eight threads per 32-element block, one float4 each (the block's amax through three
 * shuffles), 2 code bytes per thread, the E8M0 byte from the block's first thread. The rules are
 * nd_mxfp4_scale_byte / nd_mxfp4_quant_elem, as on the CPU. */
__global__ void __launch_bounds__(QT_THREADS) quant_mxfp4_kernel(const float4 *__restrict__ x, int sem, int64_t n4,
                                                                 uint16_t *__restrict__ codes, uint8_t *__restrict__ sf,
                                                                 unsigned long long *__restrict__ stats) {
    unsigned sat = 0, nonzero = 0, snan = 0;
    const int64_t stride = (int64_t)gridDim.x * QT_THREADS * QT_UNROLL;
    for (int64_t i0 = (int64_t)blockIdx.x * QT_THREADS * QT_UNROLL; i0 < n4; i0 += stride) {
        float4 v[QT_UNROLL];
#pragma unroll
        for (int u = 0; u < QT_UNROLL; u++) {
            const int64_t i = i0 + (int64_t)u * QT_THREADS + threadIdx.x;
            v[u] = i < n4 ? x[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < QT_UNROLL; u++) {
            const int64_t i = i0 + (int64_t)u * QT_THREADS + threadIdx.x;
            float a = amax_nan(amax_nan(amax_nan(amax_nan(0.0f, v[u].x), v[u].y), v[u].z), v[u].w);
            a = amax_nan(a, __shfl_xor_sync(0xffffffffu, a, 1));
            a = amax_nan(a, __shfl_xor_sync(0xffffffffu, a, 2));
            a = amax_nan(a, __shfl_xor_sync(0xffffffffu, a, 4));
            if (i >= n4) continue;
            const uint8_t s = nd_mxfp4_scale_byte(a, sem);
            const uint8_t c0 = nd_mxfp4_quant_elem(v[u].x, s, sem), c1 = nd_mxfp4_quant_elem(v[u].y, s, sem);
            const uint8_t c2 = nd_mxfp4_quant_elem(v[u].z, s, sem), c3 = nd_mxfp4_quant_elem(v[u].w, s, sem);
            codes[i] = (uint16_t)(c0 | (c1 << 4) | (c2 << 8) | (c3 << 12)); /* element 2j in the low nibble */
            sat += nd_mxfp4_elem_saturates(v[u].x, s) + nd_mxfp4_elem_saturates(v[u].y, s) +
                   nd_mxfp4_elem_saturates(v[u].z, s) + nd_mxfp4_elem_saturates(v[u].w, s);
            if ((i & 7) == 0) {
                sf[i >> 3] = s;
                nonzero += a > 0.0f;
                snan += s == ND_E8M0_NAN;
            }
        }
    }
    if (!stats) return;
    warp_count(&stats[QS_SAT], sat);
    warp_count(&stats[QS_NONZERO], nonzero);
    warp_count(&stats[QS_NAN], snan);
}

int nd_cuda_quant_mxfp4(nd_backend *b, const float *x, int sem, int64_t rows, int64_t k, uint8_t *codes,
                        uint8_t *sf, nd_qstats *stats_host, nd_err *e) {
    if (rows < 0 || k < 0 || k % 32 != 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_mxfp4: k = %lld is not a multiple of 32", (long long)k);
    if (sem < 0 || sem >= ND_MXSEM_N) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_mxfp4: unknown semantics %d", sem);
    if (((uintptr_t)x & 15) || ((uintptr_t)codes & 1))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_mxfp4: x is not 16-byte or codes not 2-byte aligned");
    nd_cuda *c = nd_cu(b);
    const int64_t n4 = rows * k / 4;
    unsigned long long *dstats = NULL;
    if (stats_host) {
        void *s;
        ND_TRY(nd_cuda_scratch(b, QS_N * sizeof(unsigned long long), &s, e));
        dstats = (unsigned long long *)s;
        ND_CU(cudaMemsetAsync(dstats, 0, QS_N * sizeof(unsigned long long), c->stream));
    }
    if (n4 > 0) {
        quant_mxfp4_kernel<<<nd_cuda_grid(b, n4, QT_THREADS * QT_UNROLL), QT_THREADS, 0, c->stream>>>((const float4 *)x, sem, n4,
                                                                              (uint16_t *)codes, sf, dstats);
        ND_LAUNCHED("quant_mxfp4_kernel");
    }
    if (stats_host) {
        void *h;
        ND_TRY(nd_cuda_host_scratch(b, QS_N * sizeof(unsigned long long), &h, e));
        ND_CU(cudaMemcpyAsync(h, dstats, QS_N * sizeof(unsigned long long), cudaMemcpyDeviceToHost, c->stream));
        ND_CU(cudaStreamSynchronize(c->stream));
        const unsigned long long *hs = (const unsigned long long *)h;
        memset(stats_host, 0, sizeof *stats_host);
        stats_host->n_elems = rows * k;
        stats_host->n_blocks = rows * (k / 32);
        stats_host->n_saturated = (int64_t)hs[QS_SAT];
        stats_host->n_nonzero_blocks = (int64_t)hs[QS_NONZERO];
        stats_host->n_nan_scale = (int64_t)hs[QS_NAN];
    }
    return 0;
}

/* One warp per (row, group) segment; the last group of a row may be short. */
__global__ void fake_quant_fp8_kernel(const float *__restrict__ x, int64_t rows, int64_t k, int group,
                                      int pow2, float *out) {
    const int64_t gpr = (k + group - 1) / group, nseg = rows * gpr;
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t sgi = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; sgi < nseg; sgi += warps) {
        const int64_t r = sgi / gpr, c0 = (sgi % gpr) * group;
        const int64_t len = c0 + group < k ? group : k - c0;
        const float *xg = x + r * k + c0;
        float *og = out + r * k + c0;
        float a = 0.0f;
        for (int64_t i = lane; i < len; i += 32) a = amax_nan(a, xg[i]);
#pragma unroll
        for (int o = 16; o; o >>= 1) a = amax_nan(a, __shfl_xor_sync(0xffffffffu, a, o));
        if (a == 0.0f) { /* all zeros: nothing to scale (the CPU copies them) */
            for (int64_t i = lane; i < len; i += 32) og[i] = xg[i];
            continue;
        }
        const float s = pow2 ? nd_pow2_scale_ceil(a, 1e-4f) : a / ND_E4M3_MAX;
        for (int64_t i = lane; i < len; i += 32)
            og[i] = nd_e4m3_to_f32(nd_e4m3_from_f32_satfinite(xg[i] / s)) * s;
    }
}

int nd_cuda_fake_quant_fp8(nd_backend *b, const float *x, int64_t rows, int64_t k, int group, int pow2,
                           float *out, nd_err *e) {
    if (group <= 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: fake_quant_fp8: group %d must be positive", group);
    if (rows < 0 || k < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: fake_quant_fp8: negative size");
    const int64_t nseg = rows * ((k + group - 1) / group);
    if (nseg == 0) return 0;
    fake_quant_fp8_kernel<<<nd_cuda_grid(b, nseg, 8), 256, 0, nd_cu(b)->stream>>>(x, rows, k, group, pow2, out);
    ND_LAUNCHED("fake_quant_fp8_kernel");
    return 0;
}

/* FP8 KV cache round trip, one thread per value (nd_kv_fp8: the division and the product are single
 * FP32 operations, the same on both backends). */
__global__ void kv_fp8_kernel(const float *__restrict__ x, int64_t n, float ws, float rs, float *out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = nd_kv_fp8(x[i], ws, rs);
}

int nd_cuda_kv_fp8(nd_backend *b, const float *x, int64_t n, float write_scale, float read_scale, float *out,
                   nd_err *e) {
    if (n < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: kv_fp8: negative size");
    if (n == 0) return 0;
    kv_fp8_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(x, n, write_scale, read_scale, out);
    ND_LAUNCHED("kv_fp8_kernel");
    return 0;
}

/* One thread per swizzled byte: invert nd_sf_swizzle_offset, write the linear scale or the zero
 * padding, so the whole buffer is written in one pass. */
__global__ void swizzle_sf_kernel(const uint8_t *__restrict__ linear, int64_t rows, int64_t kg, int64_t kt,
                                  int64_t total, uint8_t *__restrict__ swz) {
    for (int64_t off = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; off < total;
         off += (int64_t)gridDim.x * blockDim.x) {
        const int64_t tile = off / 512, in = off % 512;
        const int64_t m = (tile / kt) * 128 + ((in / 4) % 4) * 32 + in / 16;
        const int64_t c = (tile % kt) * 4 + in % 4;
        swz[off] = (m < rows && c < kg) ? linear[m * kg + c] : (uint8_t)0;
    }
}

__global__ void unswizzle_sf_kernel(const uint8_t *__restrict__ swz, int64_t rows, int64_t kg, int64_t kt,
                                    uint8_t *__restrict__ linear) {
    const int64_t total = rows * kg;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        linear[i] = swz[nd_sf_swizzle_offset(i / kg, i % kg, kt)];
}

int nd_cuda_swizzle_sf(nd_backend *b, const uint8_t *linear, int64_t rows, int64_t k, uint8_t *swz, nd_err *e) {
    if (rows < 0 || k < 0 || k % 16 != 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: swizzle_sf: k = %lld is not a multiple of 16", (long long)k);
    if (rows * k == 0) return 0;
    const int64_t kg = k / 16, kt = (kg + 3) / 4, total = nd_sf_swizzled_bytes(rows, k);
    swizzle_sf_kernel<<<nd_cuda_grid(b, total, 256), 256, 0, nd_cu(b)->stream>>>(linear, rows, kg, kt, total, swz);
    ND_LAUNCHED("swizzle_sf_kernel");
    return 0;
}

int nd_cuda_unswizzle_sf(nd_backend *b, const uint8_t *swz, int64_t rows, int64_t k, uint8_t *linear, nd_err *e) {
    if (rows < 0 || k < 0 || k % 16 != 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: unswizzle_sf: k = %lld is not a multiple of 16", (long long)k);
    if (rows * k == 0) return 0;
    const int64_t kg = k / 16, kt = (kg + 3) / 4;
    unswizzle_sf_kernel<<<nd_cuda_grid(b, rows * kg, 256), 256, 0, nd_cu(b)->stream>>>(swz, rows, kg, kt, linear);
    ND_LAUNCHED("unswizzle_sf_kernel");
    return 0;
}
