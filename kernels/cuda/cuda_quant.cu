/* cuda_quant.cu — NVFP4 and MXFP4 activation quantization (codes, block scales and statistics in one pass),
 * FP8 fake quantization, and the linear <-> 128x4 swizzled scale layouts. Block rules come from
 * nd_numerics.h, so codes and scales are bit-identical to the CPU backend. */
#include "cuda_common.cuh"

/* max |x| that turns NaN as soon as one element is NaN (a NaN block must get a NaN scale). */
__device__ __forceinline__ float amax_nan(float a, float v) {
    v = fabsf(v);
    if (v != v || a != a) return __int_as_float(0x7fc00000);
    return v > a ? v : a;
}

enum { QS_SAT, QS_NONZERO, QS_ZERO_SCALE, QS_448, QS_NAN, QS_N };

/* Four threads per 16-element block, one float4 each: coalesced 16-byte loads, the block's amax
 * through two shuffles, 2 code bytes per thread, the scale from the block's first thread. Each
 * thread loads QT_UNROLL float4s (a CUDA block covers QT_UNROLL * 256 consecutive ones) before
 * computing, so several loads are in flight. */
enum { QT_UNROLL = 4, QT_THREADS = 256 };

__global__ void __launch_bounds__(QT_THREADS) quant_nvfp4_kernel(const float4 *__restrict__ x, float g, int sem,
                                                                 int64_t n4, uint16_t *__restrict__ codes,
                                                                 uint8_t *__restrict__ sf,
                                                                 unsigned long long *__restrict__ stats) {
    unsigned sat = 0, nonzero = 0, zscale = 0, s448 = 0, snan = 0;
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
            if (i >= n4) continue;
            const nd_block_q p = nd_nvfp4_block_params(a, g, sem);
            const uint8_t c0 = nd_nvfp4_quant_elem(v[u].x, p, g, sem), c1 = nd_nvfp4_quant_elem(v[u].y, p, g, sem);
            const uint8_t c2 = nd_nvfp4_quant_elem(v[u].z, p, g, sem), c3 = nd_nvfp4_quant_elem(v[u].w, p, g, sem);
            codes[i] = (uint16_t)(c0 | (c1 << 4) | (c2 << 8) | (c3 << 12)); /* element 2j in the low nibble */
            sat += nd_nvfp4_elem_saturates(v[u].x, p, g, sem) + nd_nvfp4_elem_saturates(v[u].y, p, g, sem) +
                   nd_nvfp4_elem_saturates(v[u].z, p, g, sem) + nd_nvfp4_elem_saturates(v[u].w, p, g, sem);
            if ((i & 3) == 0) {
                sf[i >> 2] = p.sf;
                nonzero += a > 0.0f;
                zscale += p.zero_scale;
                s448 += p.sf == 0x7eu;
                snan += (p.sf & 0x7fu) == 0x7fu;
            }
        }
    }
    if (!stats) return;
    sat = __reduce_add_sync(0xffffffffu, sat);
    nonzero = __reduce_add_sync(0xffffffffu, nonzero);
    zscale = __reduce_add_sync(0xffffffffu, zscale);
    s448 = __reduce_add_sync(0xffffffffu, s448);
    snan = __reduce_add_sync(0xffffffffu, snan);
    if ((threadIdx.x & 31) == 0) {
        if (sat) atomicAdd(&stats[QS_SAT], (unsigned long long)sat);
        if (nonzero) atomicAdd(&stats[QS_NONZERO], (unsigned long long)nonzero);
        if (zscale) atomicAdd(&stats[QS_ZERO_SCALE], (unsigned long long)zscale);
        if (s448) atomicAdd(&stats[QS_448], (unsigned long long)s448);
        if (snan) atomicAdd(&stats[QS_NAN], (unsigned long long)snan);
    }
}

int nd_cuda_quant_nvfp4(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k,
                        uint8_t *codes, uint8_t *sf, nd_qstats *stats_host, nd_err *e) {
    if (rows < 0 || k < 0 || k % 16 != 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_nvfp4: k = %lld is not a multiple of 16", (long long)k);
    if (sem != ND_QSEM_KERNEL && !nd_qsem_is_ct(sem))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_nvfp4: unknown semantics %d", sem);
    if (((uintptr_t)x & 15) || ((uintptr_t)codes & 1))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: quant_nvfp4: x is not 16-byte or codes not 2-byte aligned");
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
        quant_nvfp4_kernel<<<nd_cuda_grid(b, n4, QT_THREADS * QT_UNROLL), QT_THREADS, 0, c->stream>>>((const float4 *)x, g, sem, n4,
                                                                              (uint16_t *)codes, sf, dstats);
        ND_LAUNCHED("quant_nvfp4_kernel");
    }
    if (stats_host) {
        void *h;
        ND_TRY(nd_cuda_host_scratch(b, QS_N * sizeof(unsigned long long), &h, e));
        ND_CU(cudaMemcpyAsync(h, dstats, QS_N * sizeof(unsigned long long), cudaMemcpyDeviceToHost, c->stream));
        ND_CU(cudaStreamSynchronize(c->stream));
        const unsigned long long *hs = (const unsigned long long *)h;
        stats_host->n_elems = rows * k;
        stats_host->n_blocks = rows * (k / 16);
        stats_host->n_saturated = (int64_t)hs[QS_SAT];
        stats_host->n_nonzero_blocks = (int64_t)hs[QS_NONZERO];
        stats_host->n_zero_scale = (int64_t)hs[QS_ZERO_SCALE];
        stats_host->n_scale_448 = (int64_t)hs[QS_448];
        stats_host->n_nan_scale = (int64_t)hs[QS_NAN];
    }
    return 0;
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
    sat = __reduce_add_sync(0xffffffffu, sat);
    nonzero = __reduce_add_sync(0xffffffffu, nonzero);
    snan = __reduce_add_sync(0xffffffffu, snan);
    if ((threadIdx.x & 31) == 0) {
        if (sat) atomicAdd(&stats[QS_SAT], (unsigned long long)sat);
        if (nonzero) atomicAdd(&stats[QS_NONZERO], (unsigned long long)nonzero);
        if (snan) atomicAdd(&stats[QS_NAN], (unsigned long long)snan);
    }
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
