/* cuda_gemm.cu — y = alpha * x @ w^T through cuBLAS, plain and grouped (strided batched).
 *
 * Row-major x [m,k], w [n,k], y [m,n] are column-major x^T, w^T, y^T to cuBLAS, so
 * y^T = (w^T)^T x^T is one GEMM with op(A) = T on w and op(B) = N on x.
 *  - ND_GEMM_F32 (reference path): FP32 SGEMM with the pedantic FP32 compute type, so neither
 *    TF32 nor any reduced-precision shortcut is used.
 *  - ND_GEMM_BF16_EXACT (production path, dequantized FP4 x e4m3 operands that are exact in BF16):
 *    BF16 tensor cores with FP32 accumulation and FP32 output, either through
 *    CUBLAS_COMPUTE_32F_FAST_16BF on the FP32 operands (small M) or an explicit conversion pass and
 *    a BF16 x BF16 CUBLAS_COMPUTE_32F GEMM (large M); see gemm_any.
 *  - ND_GEMM_ORDERED (the reference path under --ref-numerics transformers): gemm_ordered_kernel,
 *    the CPU's order of every sum (cpu_gemm.c), so the two backends give the same bits. */
#include "cuda_common.cuh"
#include <cuda_bf16.h>
#include <stdlib.h>

/* f32 -> bf16 with the shared RNE conversion: exact for the values ND_GEMM_BF16_EXACT promises. */
__global__ void f32_to_bf16_kernel(const float *__restrict__ src, int64_t n, __nv_bfloat16 *__restrict__ dst) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __ushort_as_bfloat16(nd_bf16_from_f32(src[i]));
}

static int to_bf16(nd_backend *b, const float *src, int64_t n, __nv_bfloat16 *dst, nd_err *e) {
    if (n == 0) return 0;
    f32_to_bf16_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(src, n, dst);
    ND_LAUNCHED("f32_to_bf16_kernel");
    return 0;
}

/* ND_GEMM_ORDERED: y = Σ_k x[m,k] w[n,k] in increasing k, each product and sum rounded alone
 * (__fmul_rn / __fadd_rn: no FMA contraction), then times alpha when alpha != 1 — cpu_gemm.c's
 * definition. A CUDA block computes a 64 x 64 tile, 4 x 4 outputs a thread, K staged in shared
 * memory 16 at a time; only the order of one element's sum matters, never the tiling. Group g
 * (blockIdx.z) reads x + g*gx (row stride ldx), w + g*gw, and writes y + g*gy (row stride ldy). */
enum { OT = 64, OKS = 16 };
__global__ void __launch_bounds__(256) gemm_ordered_kernel(const float *__restrict__ x, const float *__restrict__ w,
                                                           float *__restrict__ y, int64_t m, int64_t n, int64_t k,
                                                           int64_t ldx, int64_t ldy, int64_t gx, int64_t gw,
                                                           int64_t gy, float alpha) {
    __shared__ float xs[OKS][OT + 1], ws[OKS][OT + 1];
    const int64_t g = blockIdx.z;
    x += g * gx;
    w += g * gw;
    y += g * gy;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t n0 = (int64_t)blockIdx.x * OT, mtiles = (m + OT - 1) / OT;
    for (int64_t mt = blockIdx.y; mt < mtiles; mt += gridDim.y) {
        const int64_t m0 = mt * OT;
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
        for (int64_t k0 = 0; k0 < k; k0 += OKS) {
            for (int l = threadIdx.x; l < OT * OKS; l += 256) {
                const int r = l / OKS, kk = l % OKS;
                const int64_t gk = k0 + kk;
                xs[kk][r] = (m0 + r < m && gk < k) ? x[(m0 + r) * ldx + gk] : 0.0f;
                ws[kk][r] = (n0 + r < n && gk < k) ? w[(n0 + r) * k + gk] : 0.0f;
            }
            __syncthreads();
            const int kn = k - k0 < OKS ? (int)(k - k0) : OKS; /* no padded term enters a sum */
            for (int kk = 0; kk < kn; kk++) {
                float xa[4], wb[4];
#pragma unroll
                for (int i = 0; i < 4; i++) xa[i] = xs[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; j++) wb[j] = ws[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(xa[i], wb[j]));
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int64_t r = m0 + ty + 16 * i, c = n0 + tx + 16 * j;
                if (r < m && c < n) y[r * ldy + c] = alpha != 1.0f ? __fmul_rn(acc[i][j], alpha) : acc[i][j];
            }
    }
}

static int gemm_ordered(nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t groups,
                        int64_t n, int64_t k, float alpha, nd_err *e) {
    const int64_t ntiles = (n + OT - 1) / OT, mtiles = (m + OT - 1) / OT;
    if (ntiles > 2147483647LL || groups > 65535)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: gemm (ordered): %lld column tiles or %lld groups beyond the grid",
                       (long long)ntiles, (long long)groups);
    const dim3 grid((unsigned)ntiles, (unsigned)(mtiles < 65535 ? mtiles : 65535), (unsigned)groups);
    const int64_t gx = groups > 1 ? k : 0, gw = groups > 1 ? n * k : 0, gy = groups > 1 ? n : 0;
    gemm_ordered_kernel<<<grid, 256, 0, nd_cu(b)->stream>>>(x, w, y, m, n, k, groups * k, groups * n, gx, gw, gy,
                                                            alpha);
    ND_LAUNCHED("gemm_ordered_kernel");
    return 0;
}

static int gemm_args(const char *op, int64_t m, int64_t g, int64_t n, int64_t k, nd_err *e) {
    if (m < 0 || g < 0 || n < 0 || k < 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: negative size", op);
    const int64_t lim = 2147483647LL;
    if (m > lim || n > lim || k * g > lim || n * g > lim)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: size beyond cuBLAS's 32-bit dimensions", op);
    return 0;
}

static int strided_gemm(nd_backend *b, const void *x, const void *w, cudaDataType_t at, float *y, int64_t m,
                        int64_t groups, int64_t n, int64_t k, float alpha, cublasComputeType_t ct, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    const float beta = 0.0f;
    const int ldw = (int)k, ldx = (int)(groups * k), ldy = (int)(groups * n);
    if (groups == 1) {
        ND_BLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, w, at, ldw, x, at,
                             ldx, &beta, y, CUDA_R_32F, ldy, ct, CUBLAS_GEMM_DEFAULT));
    } else {
        ND_BLAS(cublasGemmStridedBatchedEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, w, at,
                                           ldw, n * k, x, at, ldx, k, &beta, y, CUDA_R_32F, ldy, n, (int)groups, ct,
                                           CUBLAS_GEMM_DEFAULT));
    }
    return 0;
}

static int gemm_any(nd_backend *b, const char *op, const float *x, const float *w, float *y, int64_t m,
                    int64_t groups, int64_t n, int64_t k, float alpha, int mode, nd_err *e) {
    ND_TRY(gemm_args(op, m, groups, n, k, e));
    if (mode < ND_GEMM_F32 || mode > ND_GEMM_ORDERED) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: unknown mode %d", op, mode);
    if (m == 0 || n == 0 || groups == 0) return 0;
    if (k == 0) {
        ND_CU(cudaMemsetAsync(y, 0, (size_t)(m * groups * n) * sizeof(float), nd_cu(b)->stream));
        return 0;
    }
    if (mode == ND_GEMM_ORDERED) return gemm_ordered(b, x, w, y, m, groups, n, k, alpha, e);
    if (mode == ND_GEMM_F32)
        return strided_gemm(b, x, w, CUDA_R_32F, y, m, groups, n, k, alpha, CUBLAS_COMPUTE_32F_PEDANTIC, e);
    /* Two ways to the same products: FAST_16BF lets cuBLAS round the FP32 operands to BF16 as it
     * loads its tiles (exact here: the caller promises BF16-exact values), accumulating in FP32;
     * or an explicit conversion pass and a BF16 x BF16 GEMM. On the H200 (bench/RESULTS.md) the
     * first wins below ~512 rows (no extra pass over the weights), the second above (cuBLAS's
     * FAST_16BF kernels reach only ~55% of the BF16 GEMM). ND_CUDA_GEMM_EXPLICIT_BF16=0/1 forces one. */
    const char *force = getenv("ND_CUDA_GEMM_EXPLICIT_BF16");
    const int explicit_pass = force ? force[0] == '1' : m * groups >= 512;
    if (!explicit_pass)
        return strided_gemm(b, x, w, CUDA_R_32F, y, m, groups, n, k, alpha, CUBLAS_COMPUTE_32F_FAST_16BF, e);
    const int64_t nx = m * groups * k, nw = groups * n * k;
    const size_t xbytes = ((size_t)nx * 2 + 255) & ~(size_t)255;
    void *s;
    ND_TRY(nd_cuda_scratch(b, xbytes + (size_t)nw * 2, &s, e));
    __nv_bfloat16 *xb = (__nv_bfloat16 *)s, *wb = (__nv_bfloat16 *)((char *)s + xbytes);
    ND_TRY(to_bf16(b, x, nx, xb, e));
    ND_TRY(to_bf16(b, w, nw, wb, e));
    return strided_gemm(b, xb, wb, CUDA_R_16BF, y, m, groups, n, k, alpha, CUBLAS_COMPUTE_32F, e);
}

int nd_cuda_gemm(nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t n, int64_t k,
                 float alpha, int mode, nd_err *e) {
    if (mode == ND_GEMM_BF16_EXACT) ND_TRY(nd_backend_require(b, ND_OP_gemm, ND_ODT_BF16, e));
    return gemm_any(b, "gemm", x, w, y, m, 1, n, k, alpha, mode, e);
}

int nd_cuda_gemm_grouped(nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t groups,
                         int64_t n, int64_t k, float alpha, int mode, nd_err *e) {
    if (mode == ND_GEMM_BF16_EXACT) ND_TRY(nd_backend_require(b, ND_OP_gemm_grouped, ND_ODT_BF16, e));
    return gemm_any(b, "gemm_grouped", x, w, y, m, groups, n, k, alpha, mode, e);
}
