/* cuda_compare.cu — the fused comparison probe: one read of ref and prod, double accumulation,
 * the worst block of `block` consecutive elements, the result on the host.
 *
 * Same definitions as kernels/cpu/cpu_compare.c: counts see every element; amax sees the finite
 * elements of each side; sums, max_abs_err and block energies see the elements where both are
 * finite; worst block = largest Σ(ref-prod)², ties to the lower index; prod == NULL fills n,
 * ref_amax, ref_nan, ref_inf and sum_rr (finite ref) only, worst_block = -1.
 *
 * Work split: a lane handles VEC consecutive elements (VEC = 4: one 16-byte load per side). When a
 * block spans U <= 32 lanes (U a power of two) one warp covers 32/U blocks at once and reduces each
 * block over its U lanes with xor shuffles (offsets < U stay inside the block); larger blocks take
 * a warp each. Per-CUDA-block partials go to scratch and one more block reduces them, so the
 * result does not depend on scheduling. */
#include "cuda_common.cuh"

struct cmp_part {
    double ramax, pamax, rr, pp, rp, ee, maxerr, bee, brr;
    long long rnan, pnan, rinf, pinf, bidx;
};

__device__ __forceinline__ void part_init(cmp_part &a) {
    a.ramax = a.pamax = a.rr = a.pp = a.rp = a.ee = a.maxerr = a.bee = a.brr = 0.0;
    a.rnan = a.pnan = a.rinf = a.pinf = 0;
    a.bidx = -1;
}

__device__ __forceinline__ void best_take(cmp_part &a, long long idx, double ee, double rr) {
    if (idx >= 0 && (a.bidx < 0 || ee > a.bee || (ee == a.bee && idx < a.bidx))) {
        a.bidx = idx;
        a.bee = ee;
        a.brr = rr;
    }
}

__device__ __forceinline__ void part_merge(cmp_part &a, const cmp_part &o) {
    a.ramax = fmax(a.ramax, o.ramax);
    a.pamax = fmax(a.pamax, o.pamax);
    a.maxerr = fmax(a.maxerr, o.maxerr);
    a.rr += o.rr; a.pp += o.pp; a.rp += o.rp; a.ee += o.ee;
    a.rnan += o.rnan; a.pnan += o.pnan; a.rinf += o.rinf; a.pinf += o.pinf;
    best_take(a, o.bidx, o.bee, o.brr);
}

__device__ __forceinline__ cmp_part part_shfl(const cmp_part &a, int o) {
    cmp_part r;
    const unsigned m = 0xffffffffu;
    r.ramax = __shfl_xor_sync(m, a.ramax, o); r.pamax = __shfl_xor_sync(m, a.pamax, o);
    r.rr = __shfl_xor_sync(m, a.rr, o); r.pp = __shfl_xor_sync(m, a.pp, o);
    r.rp = __shfl_xor_sync(m, a.rp, o); r.ee = __shfl_xor_sync(m, a.ee, o);
    r.maxerr = __shfl_xor_sync(m, a.maxerr, o); r.bee = __shfl_xor_sync(m, a.bee, o);
    r.brr = __shfl_xor_sync(m, a.brr, o);
    r.rnan = __shfl_xor_sync(m, a.rnan, o); r.pnan = __shfl_xor_sync(m, a.pnan, o);
    r.rinf = __shfl_xor_sync(m, a.rinf, o); r.pinf = __shfl_xor_sync(m, a.pinf, o);
    r.bidx = __shfl_xor_sync(m, a.bidx, o);
    return r;
}

/* Reduce a part over the CUDA block; thread 0 returns the total. */
__device__ void part_block_reduce(cmp_part &a) {
    __shared__ cmp_part sh[32];
#pragma unroll
    for (int o = 16; o; o >>= 1) { cmp_part t = part_shfl(a, o); part_merge(a, t); }
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = a;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < (int)(blockDim.x / 32); w++) part_merge(a, sh[w]);
}

/* One element into the thread's part and the current block's (ee, rr). */
__device__ __forceinline__ void elem(cmp_part &a, float rf, const float *prod, float pf, double &bee, double &brr) {
    const double r = rf;
    const bool rfin = isfinite(rf);
    if (isnan(rf)) a.rnan++; else if (!rfin) a.rinf++; else a.ramax = fmax(a.ramax, fabs(r));
    if (!prod) {
        if (rfin) a.rr += r * r;
        return;
    }
    const double p = pf;
    const bool pfin = isfinite(pf);
    if (isnan(pf)) a.pnan++; else if (!pfin) a.pinf++; else a.pamax = fmax(a.pamax, fabs(p));
    if (rfin && pfin) {
        const double d = r - p;
        a.rr += r * r; a.pp += p * p; a.rp += r * p; a.ee += d * d;
        a.maxerr = fmax(a.maxerr, fabs(d));
        bee += d * d;
        brr += r * r;
    }
}

/* Elements [i, i+VEC) clipped to [.., lim). */
template <int VEC>
__device__ __forceinline__ void unit(cmp_part &a, const float *__restrict__ ref, const float *__restrict__ prod,
                                     int64_t i, int64_t lim, double &bee, double &brr) {
    if (VEC == 4 && i + 4 <= lim) {
        const float4 r = *(const float4 *)(ref + i);
        float4 p = make_float4(0.f, 0.f, 0.f, 0.f);
        if (prod) p = *(const float4 *)(prod + i);
        elem(a, r.x, prod, p.x, bee, brr); elem(a, r.y, prod, p.y, bee, brr);
        elem(a, r.z, prod, p.z, bee, brr); elem(a, r.w, prod, p.w, bee, brr);
        return;
    }
    for (int q = 0; q < VEC; q++)
        if (i + q < lim) elem(a, ref[i + q], prod, prod ? prod[i + q] : 0.0f, bee, brr);
}

/* CMP_UNROLL units per lane per step, loads issued before the double-precision work. */
enum { CMP_UNROLL = 4 };

template <int VEC>
__device__ __forceinline__ void load_unit(const float *__restrict__ ref, const float *__restrict__ prod, int64_t i,
                                          int64_t lim, bool ok, float4 &r, float4 &p, bool &full) {
    full = VEC == 4 && ok && i + 4 <= lim;
    if (full) {
        r = *(const float4 *)(ref + i);
        p = prod ? *(const float4 *)(prod + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

template <int VEC>
__device__ __forceinline__ void use_unit(cmp_part &a, const float *__restrict__ ref, const float *__restrict__ prod,
                                         int64_t i, int64_t lim, bool ok, bool full, const float4 &r, const float4 &p,
                                         double &bee, double &brr) {
    if (full) {
        elem(a, r.x, prod, p.x, bee, brr); elem(a, r.y, prod, p.y, bee, brr);
        elem(a, r.z, prod, p.z, bee, brr); elem(a, r.w, prod, p.w, bee, brr);
    } else if (ok) {
        unit<VEC>(a, ref, prod, i, lim, bee, brr);
    }
}

template <int VEC>
__global__ void __launch_bounds__(256) compare_kernel(const float *__restrict__ ref, const float *__restrict__ prod,
                                                      int64_t n, int64_t B, int64_t nb, int seg_units,
                                                      cmp_part *__restrict__ parts) {
    cmp_part a;
    part_init(a);
    const int lane = threadIdx.x & 31;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int64_t tw = (int64_t)gridDim.x * (blockDim.x / 32);
    float4 r[CMP_UNROLL], p[CMP_UNROLL];
    bool full[CMP_UNROLL];
    if (seg_units > 0) {
        /* a warp step covers CMP_UNROLL groups of P = 32/U blocks */
        const int U = seg_units, P = 32 / U;
        for (int64_t it = gw; it * P * CMP_UNROLL < nb; it += tw) {
#pragma unroll
            for (int u = 0; u < CMP_UNROLL; u++) {
                const int64_t pb = (it * CMP_UNROLL + u) * P + lane / U, start = pb * B;
                const int64_t lim = start + B < n ? start + B : n;
                load_unit<VEC>(ref, prod, start + (int64_t)(lane % U) * VEC, lim, pb < nb, r[u], p[u], full[u]);
            }
#pragma unroll
            for (int u = 0; u < CMP_UNROLL; u++) {
                const int64_t pb = (it * CMP_UNROLL + u) * P + lane / U, start = pb * B;
                const int64_t lim = start + B < n ? start + B : n;
                double bee = 0.0, brr = 0.0;
                use_unit<VEC>(a, ref, prod, start + (int64_t)(lane % U) * VEC, lim, pb < nb, full[u], r[u], p[u], bee,
                              brr);
                for (int o = U / 2; o; o >>= 1) {
                    bee += __shfl_xor_sync(0xffffffffu, bee, o);
                    brr += __shfl_xor_sync(0xffffffffu, brr, o);
                }
                if (prod && pb < nb && lane % U == 0) best_take(a, pb, bee, brr);
            }
        }
    } else {
        const int64_t U = (B + VEC - 1) / VEC;
        for (int64_t pb = gw; pb < nb; pb += tw) {
            const int64_t start = pb * B, lim = start + B < n ? start + B : n;
            double bee = 0.0, brr = 0.0;
            for (int64_t u0 = lane; u0 < U; u0 += 32 * CMP_UNROLL) {
#pragma unroll
                for (int u = 0; u < CMP_UNROLL; u++)
                    load_unit<VEC>(ref, prod, start + (u0 + 32 * u) * VEC, lim, u0 + 32 * u < U, r[u], p[u], full[u]);
#pragma unroll
                for (int u = 0; u < CMP_UNROLL; u++)
                    use_unit<VEC>(a, ref, prod, start + (u0 + 32 * u) * VEC, lim, u0 + 32 * u < U, full[u], r[u], p[u],
                                  bee, brr);
            }
#pragma unroll
            for (int o = 16; o; o >>= 1) {
                bee += __shfl_xor_sync(0xffffffffu, bee, o);
                brr += __shfl_xor_sync(0xffffffffu, brr, o);
            }
            if (prod && lane == 0) best_take(a, pb, bee, brr);
        }
    }
    part_block_reduce(a);
    if (threadIdx.x == 0) parts[blockIdx.x] = a;
}

__global__ void compare_final_kernel(const cmp_part *__restrict__ parts, int np, cmp_part *__restrict__ out) {
    cmp_part a;
    part_init(a);
    for (int i = threadIdx.x; i < np; i += blockDim.x) part_merge(a, parts[i]);
    part_block_reduce(a);
    if (threadIdx.x == 0) *out = a;
}

int nd_cuda_compare(nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block, nd_cmp *out_host,
                    nd_err *e) {
    if (block <= 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: compare: block %lld must be positive", (long long)block);
    if (n < 0 || !out_host) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: compare: bad arguments");
    memset(out_host, 0, sizeof *out_host);
    out_host->worst_block = -1;
    if (n == 0) return 0;
    nd_cuda *c = nd_cu(b);
    const int vec = (block % 4 == 0 && !((uintptr_t)ref & 15) && !((uintptr_t)prod & 15)) ? 4 : 1;
    const int64_t units = (block + vec - 1) / vec;
    const int seg = (units <= 32 && (units & (units - 1)) == 0) ? (int)units : 0;
    const int64_t nb = (n + block - 1) / block;
    const int64_t warp_items = seg ? (nb + 32 / seg * CMP_UNROLL - 1) / (32 / seg * CMP_UNROLL) : nb;
    const int threads = 256;
    const unsigned grid = nd_cuda_grid(b, warp_items, threads / 32);
    void *s;
    ND_TRY(nd_cuda_scratch(b, (size_t)(grid + 1) * sizeof(cmp_part), &s, e));
    cmp_part *parts = (cmp_part *)s, *total = parts + grid;
    if (vec == 4) compare_kernel<4><<<grid, threads, 0, c->stream>>>(ref, prod, n, block, nb, seg, parts);
    else compare_kernel<1><<<grid, threads, 0, c->stream>>>(ref, prod, n, block, nb, seg, parts);
    ND_LAUNCHED("compare_kernel");
    compare_final_kernel<<<1, threads, 0, c->stream>>>(parts, (int)grid, total);
    ND_LAUNCHED("compare_final_kernel");
    void *h;
    ND_TRY(nd_cuda_host_scratch(b, sizeof(cmp_part), &h, e));
    ND_CU(cudaMemcpyAsync(h, total, sizeof(cmp_part), cudaMemcpyDeviceToHost, c->stream));
    ND_CU(cudaStreamSynchronize(c->stream));
    const cmp_part *t = (const cmp_part *)h;
    out_host->n = n;
    out_host->ref_amax = t->ramax;
    out_host->ref_nan = t->rnan;
    out_host->ref_inf = t->rinf;
    out_host->sum_rr = t->rr;
    if (prod) {
        out_host->prod_amax = t->pamax;
        out_host->prod_nan = t->pnan;
        out_host->prod_inf = t->pinf;
        out_host->sum_pp = t->pp;
        out_host->sum_rp = t->rp;
        out_host->sum_ee = t->ee;
        out_host->max_abs_err = t->maxerr;
        out_host->worst_block = t->bidx;
        out_host->worst_block_ee = t->bee;
        out_host->worst_block_rr = t->brr;
    }
    return 0;
}
