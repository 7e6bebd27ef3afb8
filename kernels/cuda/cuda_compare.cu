/* cuda_compare.cu — the fused comparison probe: one read of ref and prod, one kernel, the total in
 * a result slot (cuda_results.cuh) that reaches the host at once or, while results are deferred,
 * with the layer's other probes in one copy.
 *
 * Same definitions as kernels/cpu/cpu_compare.c: counts see every element; amax sees the finite
 * elements of each side; sums, max_abs_err and block energies see the elements where both are
 * finite; worst block = largest Σ(ref-prod)², ties to the lower index; prod == NULL fills n,
 * ref_amax, ref_nan, ref_inf and sum_rr (finite ref) only, worst_block = -1.
 *
 * Per element: amax on the float's bits (|x| bits order as the values; amax is exact as a float);
 * NaN/Inf counts on a branch taken only when one side is not finite (the pair then zeroed in
 * FP32, so nothing non-finite reaches a sum); then four double FMAs
 * (Σprod², Σref·prod and the block's Σd², Σref²) and the max |d|; Σref² and Σd² of the whole
 * tensor are the sums of the blocks' (the same elements), so they cost nothing per element.
 *
 * Work split: a lane handles VEC consecutive elements (VEC = 4: one 16-byte load per side). When a
 * block spans U <= 32 lanes (U a power of two) one warp covers 32/U blocks at once and reduces each
 * block over its U lanes with xor shuffles (offsets < U stay inside the block); larger blocks take
 * a warp each, or, when there are too few of them to give every resident warp one (a probe of a
 * few long rows), a CUDA block each. Each CUDA block writes its partial to scratch; the last block
 * to finish (a ticket counter) merges them in a fixed order, so the result does not depend on
 * scheduling; a grid of one CUDA block skips the merge. The reductions inside a block use
 * __reduce_*_sync for counts and amax and exchange a worst block only between threads that can
 * hold one (a lane per U, a warp's lane 0, or a CUDA block's thread 0). */
#include "cuda_results.cuh"
#include "numerics/nd_cmp_rule.h"

/* a thread's running figures: 32-bit counts and amax bits, double sums */
struct cmp_thr {
    double pp, rp, rr, ee, maxerr, bee, brr;
    long long bidx;
    unsigned rnan, pnan, rinf, pinf, ramax, pamax;
};

__device__ __forceinline__ void thr_init(cmp_thr &a) {
    a.pp = a.rp = a.rr = a.ee = a.maxerr = a.bee = a.brr = 0.0;
    a.bidx = -1;
    a.rnan = a.pnan = a.rinf = a.pinf = a.ramax = a.pamax = 0u;
}

/* block idx (energies ee, rr) becomes a's worst block by nd_cmp_block_worse; P: cmp_part or cmp_thr */
template <typename P> __device__ __forceinline__ void best_take(P &a, long long idx, double ee, double rr) {
    if (nd_cmp_block_worse(idx, ee, a.bidx, a.bee)) {
        a.bidx = idx;
        a.bee = ee;
        a.brr = rr;
    }
}

__device__ __forceinline__ void part_merge(cmp_part &a, const cmp_part &o) {
    a.ramax = max(a.ramax, o.ramax);
    a.pamax = max(a.pamax, o.pamax);
    a.maxerr = fmax(a.maxerr, o.maxerr);
    a.rr += o.rr; a.pp += o.pp; a.rp += o.rp; a.ee += o.ee;
    a.rnan += o.rnan; a.pnan += o.pnan; a.rinf += o.rinf; a.pinf += o.pinf;
    best_take(a, o.bidx, o.bee, o.brr);
}

__device__ __forceinline__ cmp_part part_shfl(const cmp_part &a, int o) {
    cmp_part r;
    const unsigned m = 0xffffffffu;
    r.rr = __shfl_xor_sync(m, a.rr, o); r.pp = __shfl_xor_sync(m, a.pp, o);
    r.rp = __shfl_xor_sync(m, a.rp, o); r.ee = __shfl_xor_sync(m, a.ee, o);
    r.maxerr = __shfl_xor_sync(m, a.maxerr, o); r.bee = __shfl_xor_sync(m, a.bee, o);
    r.brr = __shfl_xor_sync(m, a.brr, o); r.bidx = __shfl_xor_sync(m, a.bidx, o);
    r.rnan = __shfl_xor_sync(m, a.rnan, o); r.pnan = __shfl_xor_sync(m, a.pnan, o);
    r.rinf = __shfl_xor_sync(m, a.rinf, o); r.pinf = __shfl_xor_sync(m, a.pinf, o);
    r.ramax = __shfl_xor_sync(m, a.ramax, o); r.pamax = __shfl_xor_sync(m, a.pamax, o);
    return r;
}

__device__ __forceinline__ void part_zero(cmp_part &m) {
    m.rr = m.pp = m.rp = m.ee = m.maxerr = m.bee = m.brr = 0.0;
    m.bidx = -1;
    m.rnan = m.pnan = m.rinf = m.pinf = 0;
    m.ramax = m.pamax = 0;
}

/* A warp's running figures summed into lane 0, over the first `width` lanes (a power of two; the
 * others hold zeros). Counts and amax: one __reduce_*_sync each (32-bit: the host keeps a CUDA
 * block's share of the elements below 2^32); sums and max |d| by an xor tree (a fixed order, the
 * same every run); the worst block over the lanes that can hold one — lanes at multiples of
 * `holder` (32: lane 0 only, nothing to exchange). */
__device__ __forceinline__ void thr_warp_reduce(cmp_thr &t, int width, int holder) {
    const unsigned m = 0xffffffffu;
    t.rnan = __reduce_add_sync(m, t.rnan); t.pnan = __reduce_add_sync(m, t.pnan);
    t.rinf = __reduce_add_sync(m, t.rinf); t.pinf = __reduce_add_sync(m, t.pinf);
    t.ramax = __reduce_max_sync(m, t.ramax); t.pamax = __reduce_max_sync(m, t.pamax);
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        if (o >= width) continue;
        t.rr += __shfl_xor_sync(m, t.rr, o); t.pp += __shfl_xor_sync(m, t.pp, o);
        t.rp += __shfl_xor_sync(m, t.rp, o); t.ee += __shfl_xor_sync(m, t.ee, o);
        t.maxerr = fmax(t.maxerr, __shfl_xor_sync(m, t.maxerr, o));
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        if (o >= width || o < holder) continue;
        const long long bi = __shfl_xor_sync(m, t.bidx, o);
        const double be = __shfl_xor_sync(m, t.bee, o), br = __shfl_xor_sync(m, t.brr, o);
        best_take(t, bi, be, br);
    }
}

/* The CUDA block's total in thread 0: each warp into its lane 0, then warp 0 over the warps'
 * figures (through shared memory). holder: as thr_warp_reduce, counted in threads of the block
 * (>= blockDim.x: thread 0 alone holds a worst block). */
__device__ __forceinline__ void thr_block_reduce(cmp_thr &t, int holder) {
    __shared__ cmp_thr sh[32];
    thr_warp_reduce(t, 32, holder < 32 ? holder : 32);
    const int nw = (int)(blockDim.x / 32);
    if (nw == 1) return;
    __syncthreads(); /* sh may still be read by an earlier call */
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = t;
    __syncthreads();
    if (threadIdx.x < 32) {
        if ((int)threadIdx.x < nw) t = sh[threadIdx.x];
        else thr_init(t);
        thr_warp_reduce(t, nw, holder >= (int)blockDim.x ? 32 : 1);
    }
}

/* a and b summed over the CUDA block, the total in every thread (a fixed order) */
__device__ __forceinline__ void block_sum2(double &a, double &b, double2 *red) {
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = make_double2(a, b);
    __syncthreads();
    a = b = 0.0;
    for (int w = 0; w < (int)(blockDim.x / 32); w++) {
        const double2 v = red[w];
        a += v.x;
        b += v.y;
    }
}

/* One element. Counts and amax on the bits; the sums see the pair only when both are finite
 * (else both are zeroed before the conversion, so nothing non-finite reaches a sum). */
template <bool P>
__device__ __forceinline__ void elem(cmp_thr &a, float rf, float pf, double &bee, double &brr) {
    const unsigned ur = __float_as_uint(rf) & 0x7fffffffu, up = P ? __float_as_uint(pf) & 0x7fffffffu : 0u;
    if (max(ur, up) >= 0x7f800000u) { /* rare: a NaN or Inf on either side */
        a.rnan += ur > 0x7f800000u;
        a.rinf += ur == 0x7f800000u;
        if (ur < 0x7f800000u) a.ramax = max(a.ramax, ur);
        if (P) {
            a.pnan += up > 0x7f800000u;
            a.pinf += up == 0x7f800000u;
            if (up < 0x7f800000u) a.pamax = max(a.pamax, up);
        }
        rf = pf = 0.0f; /* the sums see finite pairs only */
    } else {
        a.ramax = max(a.ramax, ur);
        if (P) a.pamax = max(a.pamax, up);
    }
    const double r = rf;
    brr = fma(r, r, brr);
    if (!P) return;
    const double p = pf, d = r - p;
    bee = fma(d, d, bee);
    a.pp = fma(p, p, a.pp);
    a.rp = fma(r, p, a.rp);
    a.maxerr = fmax(a.maxerr, fabs(d));
}

/* units a lane loads before it uses them: two in the lanes-per-block path (its shuffles keep more
 * registers live), four where a warp or a CUDA block walks a long block (more bytes in flight:
 * block=row [4096, 7168] 72% -> 78% of copy on the H200, bench/RESULTS.md) */
enum { CMP_UNROLL_SEG = 2, CMP_UNROLL_ROW = 4, CMP_THREADS = 256 };

/* Elements [i, i+VEC) clipped to [.., lim): loaded as one float4 per side when whole. */
template <int VEC, bool P>
__device__ __forceinline__ void load_unit(const float *__restrict__ ref, const float *__restrict__ prod, int64_t i,
                                          int64_t lim, bool ok, float4 &r, float4 &p, bool &full) {
    full = VEC == 4 && ok && i + 4 <= lim;
    if (full) {
        r = __ldcs((const float4 *)(ref + i));
        if (P) p = __ldcs((const float4 *)(prod + i));
    }
}

template <int VEC, bool P>
__device__ __forceinline__ void use_unit(cmp_thr &a, const float *__restrict__ ref, const float *__restrict__ prod,
                                         int64_t i, int64_t lim, bool ok, bool full, const float4 &r, const float4 &p,
                                         double &bee, double &brr) {
    if (full) {
        elem<P>(a, r.x, P ? p.x : 0.f, bee, brr); elem<P>(a, r.y, P ? p.y : 0.f, bee, brr);
        elem<P>(a, r.z, P ? p.z : 0.f, bee, brr); elem<P>(a, r.w, P ? p.w : 0.f, bee, brr);
    } else if (ok) {
        for (int q = 0; q < VEC; q++)
            if (i + q < lim) elem<P>(a, ref[i + q], P ? prod[i + q] : 0.0f, bee, brr);
    }
}

/* the three work splits of the header comment; one kernel each, so that each gets the registers
 * its own loop needs (the long-block paths hold twice the loads in flight) */
enum { PATH_LANES = 0, PATH_WARP = 1, PATH_CUDA_BLOCK = 2 };
/* threads per CUDA block: 512 where a CUDA block walks one compare block, so that a row of 7168
 * floats is one round of loads (3.5 units a thread) instead of two dependent ones */
template <int PATH> __host__ __device__ constexpr int cmp_threads() { return PATH == PATH_CUDA_BLOCK ? 512 : CMP_THREADS; }

template <int VEC, bool P, int PATH>
__global__ void __launch_bounds__(cmp_threads<PATH>()) compare_kernel(const float *__restrict__ ref,
                                                              const float *__restrict__ prod, int64_t n, int64_t B,
                                                              int64_t nb, int seg_units,
                                                              cmp_part *__restrict__ parts,
                                                              cmp_part *__restrict__ total, unsigned *ticket) {
    cmp_thr t;
    thr_init(t);
    const int lane = threadIdx.x & 31;
    const int64_t gw = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int64_t tw = (int64_t)gridDim.x * (blockDim.x / 32);
    constexpr int UNR = PATH == PATH_LANES ? CMP_UNROLL_SEG : CMP_UNROLL_ROW;
    float4 r[UNR], p[UNR];
    bool full[UNR];
    if (PATH == PATH_LANES) {
        /* a warp step covers CMP_UNROLL_SEG groups of P = 32/U blocks */
        const int U = seg_units, PB = 32 / U;
        for (int64_t it = gw; it * PB * CMP_UNROLL_SEG < nb; it += tw) {
#pragma unroll
            for (int u = 0; u < CMP_UNROLL_SEG; u++) {
                const int64_t pb = (it * CMP_UNROLL_SEG + u) * PB + lane / U, start = pb * B;
                const int64_t lim = start + B < n ? start + B : n;
                load_unit<VEC, P>(ref, prod, start + (int64_t)(lane % U) * VEC, lim, pb < nb, r[u], p[u], full[u]);
            }
#pragma unroll
            for (int u = 0; u < CMP_UNROLL_SEG; u++) {
                const int64_t pb = (it * CMP_UNROLL_SEG + u) * PB + lane / U, start = pb * B;
                const int64_t lim = start + B < n ? start + B : n;
                double bee = 0.0, brr = 0.0;
                use_unit<VEC, P>(t, ref, prod, start + (int64_t)(lane % U) * VEC, lim, pb < nb, full[u], r[u], p[u],
                                 bee, brr);
                t.rr += brr;
                if (!P) continue;
                t.ee += bee;
                for (int o = U / 2; o; o >>= 1) bee += __shfl_xor_sync(0xffffffffu, bee, o);
                /* a block's Σref² only matters when it becomes its lane's worst, which after the
                 * first few blocks is rare: summed (the same butterfly) only when a lane needs it */
                const bool take = pb < nb && lane % U == 0 && nd_cmp_block_worse(pb, bee, t.bidx, t.bee);
                if (__any_sync(0xffffffffu, take))
                    for (int o = U / 2; o; o >>= 1) brr += __shfl_xor_sync(0xffffffffu, brr, o);
                if (take) {
                    t.bidx = pb;
                    t.bee = bee;
                    t.brr = brr;
                }
            }
        }
    } else if (PATH == PATH_CUDA_BLOCK) {
        /* few large blocks: a CUDA block per compare block, its threads striding through it (a
         * warp alone would walk a long chain of dependent loads); the block's energies summed
         * over the CUDA block in a fixed order */
        constexpr int NT = cmp_threads<PATH>();
        __shared__ double2 red[NT / 32];
        const int64_t U = (B + VEC - 1) / VEC;
        for (int64_t pb = blockIdx.x; pb < nb; pb += gridDim.x) {
            const int64_t start = pb * B, lim = start + B < n ? start + B : n;
            double bee = 0.0, brr = 0.0;
            for (int64_t u0 = threadIdx.x; u0 < U; u0 += (int64_t)NT * CMP_UNROLL_ROW) {
#pragma unroll
                for (int u = 0; u < CMP_UNROLL_ROW; u++)
                    load_unit<VEC, P>(ref, prod, start + (u0 + NT * u) * VEC, lim,
                                      u0 + NT * u < U, r[u], p[u], full[u]);
#pragma unroll
                for (int u = 0; u < CMP_UNROLL_ROW; u++)
                    use_unit<VEC, P>(t, ref, prod, start + (u0 + NT * u) * VEC, lim,
                                     u0 + NT * u < U, full[u], r[u], p[u], bee, brr);
            }
            t.rr += brr;
            if (!P) continue;
            t.ee += bee;
            block_sum2(bee, brr, red);
            if (threadIdx.x == 0) best_take(t, pb, bee, brr);
        }
    } else {
        const int64_t U = (B + VEC - 1) / VEC;
        for (int64_t pb = gw; pb < nb; pb += tw) {
            const int64_t start = pb * B, lim = start + B < n ? start + B : n;
            double bee = 0.0, brr = 0.0;
            for (int64_t u0 = lane; u0 < U; u0 += 32 * CMP_UNROLL_ROW) {
#pragma unroll
                for (int u = 0; u < CMP_UNROLL_ROW; u++)
                    load_unit<VEC, P>(ref, prod, start + (u0 + 32 * u) * VEC, lim, u0 + 32 * u < U, r[u], p[u],
                                      full[u]);
#pragma unroll
                for (int u = 0; u < CMP_UNROLL_ROW; u++)
                    use_unit<VEC, P>(t, ref, prod, start + (u0 + 32 * u) * VEC, lim, u0 + 32 * u < U, full[u], r[u],
                                     p[u], bee, brr);
            }
            t.rr += brr;
            if (!P) continue;
            t.ee += bee;
#pragma unroll
            for (int o = 16; o; o >>= 1) {
                bee += __shfl_xor_sync(0xffffffffu, bee, o);
                brr += __shfl_xor_sync(0xffffffffu, brr, o);
            }
            if (lane == 0) best_take(t, pb, bee, brr);
        }
    }
    thr_block_reduce(t, PATH == PATH_LANES ? seg_units : PATH == PATH_WARP ? 32 : cmp_threads<PATH>());
    cmp_part a;
    if (threadIdx.x == 0) {
        a.rr = t.rr; a.pp = t.pp; a.rp = t.rp; a.ee = t.ee; a.maxerr = t.maxerr;
        a.bee = t.bee; a.brr = t.brr; a.bidx = t.bidx;
        a.rnan = t.rnan; a.pnan = t.pnan; a.rinf = t.rinf; a.pinf = t.pinf; a.ramax = t.ramax; a.pamax = t.pamax;
    }
    if (gridDim.x == 1) { /* small inputs: one CUDA block, no partials to merge */
        if (threadIdx.x == 0) *total = a;
        return;
    }
    /* the last block to finish merges every block's partial: warp 0, lane i the partials i, i+32,
     * ... in order, then an xor tree (the same order every run, whichever block is last) */
    __shared__ bool last;
    if (threadIdx.x == 0) {
        parts[blockIdx.x] = a;
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last || threadIdx.x >= 32) return;
    __threadfence();
    cmp_part m;
    part_zero(m);
    for (int i = threadIdx.x; i < (int)gridDim.x; i += 32) {
        /* read past L1 (other blocks wrote these) */
        unsigned long long w[sizeof(cmp_part) / 8];
        const unsigned long long *src = (const unsigned long long *)&parts[i];
#pragma unroll
        for (int j = 0; j < (int)(sizeof(cmp_part) / 8); j++) w[j] = __ldcg(src + j);
        cmp_part o;
        memcpy(&o, w, sizeof o);
        part_merge(m, o);
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) { cmp_part x = part_shfl(m, o); part_merge(m, x); }
    if (threadIdx.x == 0) {
        *total = m;
        *ticket = 0u; /* ready for the next kernel on the stream */
    }
}

/* Resident CUDA blocks per multiprocessor of one compare kernel, asked once. */
template <int VEC, bool P, int PATH>
static int cmp_resident() {
    static int n;
    if (!n && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, compare_kernel<VEC, P, PATH>, cmp_threads<PATH>(), 0) !=
                  cudaSuccess) {
        (void)cudaGetLastError();
        n = 1;
    }
    return n > 0 ? n : 1;
}

template <int VEC, bool P, int PATH>
static int launch_path(nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block, int64_t nb,
                       int seg, int64_t items, int per_block, cmp_part *slot, unsigned *ticket, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    const unsigned grid = nd_cuda_grid_balanced(b, items, per_block, cmp_resident<VEC, P, PATH>());
    /* a CUDA block sums its counts in 32 bits (thr_warp_reduce): grid steps are balanced, so a
     * block's share stays near n / grid; 2^31 on average leaves room for the uneven last step */
    if (n > ((int64_t)grid << 31))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: compare: %lld elements over %u CUDA blocks exceed its 32-bit counters",
                       (long long)n, grid);
    void *s;
    ND_TRY(nd_cuda_scratch(b, (size_t)grid * sizeof(cmp_part), &s, e));
    compare_kernel<VEC, P, PATH><<<grid, cmp_threads<PATH>(), 0, c->stream>>>(ref, prod, n, block, nb, seg, (cmp_part *)s,
                                                                      slot, ticket);
    ND_LAUNCHED("compare_kernel");
    return 0;
}

template <int VEC, bool P>
static int launch(nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block, int64_t nb, int seg,
                  int64_t warp_items, cmp_part *slot, unsigned *ticket, nd_err *e) {
    if (seg) return launch_path<VEC, P, PATH_LANES>(b, ref, prod, n, block, nb, seg, warp_items, CMP_THREADS / 32, slot, ticket, e);
    /* long blocks, too few to give every resident warp one: a CUDA block each */
    const int64_t warps = (int64_t)nd_cu(b)->n_sm * cmp_resident<VEC, P, PATH_WARP>() * (CMP_THREADS / 32);
    if (nb < warps) return launch_path<VEC, P, PATH_CUDA_BLOCK>(b, ref, prod, n, block, nb, seg, nb, 1, slot, ticket, e);
    return launch_path<VEC, P, PATH_WARP>(b, ref, prod, n, block, nb, seg, warp_items, CMP_THREADS / 32, slot, ticket, e);
}

int nd_cuda_compare(nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block, nd_cmp *out_host,
                    nd_err *e) {
    if (block <= 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: compare: block %lld must be positive", (long long)block);
    if (n < 0 || !out_host) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: compare: bad arguments");
    if (n == 0) {
        memset(out_host, 0, sizeof *out_host);
        out_host->worst_block = -1;
        return 0;
    }
    const int vec = (block % 4 == 0 && !((uintptr_t)ref & 15) && !((uintptr_t)prod & 15)) ? 4 : 1;
    const int64_t units = (block + vec - 1) / vec;
    const int seg = (units <= 32 && (units & (units - 1)) == 0) ? (int)units : 0;
    const int64_t nb = (n + block - 1) / block;
    const int64_t warp_items = seg ? (nb + 32 / seg * CMP_UNROLL_SEG - 1) / (32 / seg * CMP_UNROLL_SEG) : nb;
    void *slot;
    unsigned *ticket;
    ND_TRY(nd_cuda_result_slot(b, ND_RES_CMP, out_host, n, prod != NULL, &slot, &ticket, e));
    cmp_part *t = (cmp_part *)slot;
    if (vec == 4 && prod) ND_TRY((launch<4, true>(b, ref, prod, n, block, nb, seg, warp_items, t, ticket, e)));
    else if (vec == 4) ND_TRY((launch<4, false>(b, ref, prod, n, block, nb, seg, warp_items, t, ticket, e)));
    else if (prod) ND_TRY((launch<1, true>(b, ref, prod, n, block, nb, seg, warp_items, t, ticket, e)));
    else ND_TRY((launch<1, false>(b, ref, prod, n, block, nb, seg, warp_items, t, ticket, e)));
    return nd_cuda_result_queued(b, e);
}
