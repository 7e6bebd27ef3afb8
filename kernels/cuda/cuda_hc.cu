/* cuda_hc.cu — DeepSeek-V4 hyper-connections: hc_pre (mixer GEMM, RMS factor, sigmoid gates,
 * Sinkhorn), hc_post and hc_head. Index conventions as kernels/cpu/cpu_hc.c: X [t, n, dm],
 * comb[i,j] = weight of source stream i in destination stream j, softmax over j, Sinkhorn ends on
 * a column normalisation; rho multiplies the GEMM result; u uses the un-normalised X.
 * The mixer GEMM is an FP32 SGEMM (pedantic, no TF32); the small per-token math runs on one
 * thread per token in the CPU's order, with __f*_rn so no FMA changes a rounding. */
#include "cuda_common.cuh"
#include "numerics/nd_bf16_steps.h"

enum { HC_MAX_N = 16 };

__device__ __forceinline__ float sigm(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }

/* rho per token: one block per token, Σx² over n*dm in FP32. */
__global__ void hc_rho_kernel(const float *__restrict__ X, int64_t nd, float rms_eps, float *__restrict__ rho) {
    __shared__ float part[32];
    const float *x = X + blockIdx.x * nd;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < nd; i += blockDim.x) ss = __fadd_rn(ss, __fmul_rn(x[i], x[i]));
    ss = nd_cuda_block_sum(ss, part);  /* the warps' sums added in warp order */
    if (threadIdx.x == 0) rho[blockIdx.x] = 1.0f / sqrtf(ss / (float)nd + rms_eps);
}

/* One thread per token: gates and Sinkhorn, in the CPU's order of operations. mm [t, mix] holds
 * fn @ x (not yet scaled by rho). pre_out [t, n]. post/comb NULL for hc_head. */
__global__ void hc_gates_kernel(const float *__restrict__ mm, const float *__restrict__ rho, int64_t t, int64_t n,
                                int64_t mix, const float *__restrict__ base, float s0, float s1, float s2, int iters,
                                float hc_eps, float *__restrict__ pre_out, float *__restrict__ post,
                                float *__restrict__ comb) {
    const int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (r >= t) return;
    const float rh = rho[r];
    const float *m0 = mm + r * mix;
#define M(c) __fmul_rn(m0[(c)], rh)
    for (int64_t i = 0; i < n; i++) pre_out[r * n + i] = __fadd_rn(sigm(__fadd_rn(__fmul_rn(s0, M(i)), base[i])), hc_eps);
    if (!post) return;
    for (int64_t i = 0; i < n; i++)
        post[r * n + i] = __fmul_rn(2.0f, sigm(__fadd_rn(__fmul_rn(s1, M(n + i)), base[n + i])));
    float *C = comb + r * n * n;
    for (int64_t i = 0; i < n; i++) {
        float *Ci = C + i * n, mx = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            Ci[j] = __fadd_rn(__fmul_rn(s2, M(2 * n + i * n + j)), base[2 * n + i * n + j]);
            if (Ci[j] > mx) mx = Ci[j];
        }
        for (int64_t j = 0; j < n; j++) { Ci[j] = expf(Ci[j] - mx); sum = __fadd_rn(sum, Ci[j]); }
        for (int64_t j = 0; j < n; j++) Ci[j] = __fadd_rn(__fdiv_rn(Ci[j], sum), hc_eps);
    }
#undef M
    for (int it = 0; it < iters; it++) {
        if (it > 0)
            for (int64_t i = 0; i < n; i++) {
                float s = 0.0f;
                for (int64_t j = 0; j < n; j++) s = __fadd_rn(s, C[i * n + j]);
                for (int64_t j = 0; j < n; j++) C[i * n + j] = __fdiv_rn(C[i * n + j], __fadd_rn(s, hc_eps));
            }
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int64_t i = 0; i < n; i++) s = __fadd_rn(s, C[i * n + j]);
            for (int64_t i = 0; i < n; i++) C[i * n + j] = __fdiv_rn(C[i * n + j], __fadd_rn(s, hc_eps));
        }
    }
}

/* u[r, c] = Σ_i pre[r, i] X[r, i, c], summed in increasing i from 0. */
__global__ void hc_collapse_kernel(const float *__restrict__ X, const float *__restrict__ pre, int64_t t, int64_t n,
                                   int64_t dm, float *__restrict__ u) {
    const int64_t total = t * dm;
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = q / dm, c = q % dm;
        const float *Xr = X + r * n * dm + c;
        float a = 0.0f;
        for (int64_t i = 0; i < n; i++) a = __fadd_rn(a, __fmul_rn(pre[r * n + i], Xr[i * dm]));
        u[q] = a;
    }
}

/* Xout[r, j, c] = post[r, j] y[r, c] + Σ_i comb[r, i, j] X[r, i, c]; one thread per (r, c) reads
 * every stream first, so Xout may alias X. */
__global__ void hc_post_kernel(const float *X, const float *__restrict__ y, const float *__restrict__ post,
                               const float *__restrict__ comb, int64_t t, int64_t n, int64_t dm, int bf16_steps,
                               float *Xout) {
    const int64_t total = t * dm;
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = q / dm, c = q % dm;
        float xs[HC_MAX_N];
        for (int64_t i = 0; i < n; i++) xs[i] = X[(r * n + i) * dm + c];
        const float yc = y[q];
        const float *C = comb + r * n * n;
        for (int64_t j = 0; j < n; j++) {
            if (!bf16_steps) { /* FP32: one running sum starting from post·y, as the CPU */
                float a = __fmul_rn(post[r * n + j], yc);
                for (int64_t i = 0; i < n; i++) a = __fadd_rn(a, __fmul_rn(C[i * n + j], xs[i]));
                Xout[(r * n + j) * dm + c] = a;
                continue;
            }
            const float py = __fmul_rn(nd_hc_post_coef(post[r * n + j], 1), yc);
            float mix = 0.0f;
            for (int64_t i = 0; i < n; i++) mix = __fadd_rn(mix, __fmul_rn(nd_hc_post_coef(C[i * n + j], 1), xs[i]));
            Xout[(r * n + j) * dm + c] = nd_hc_post_join(py, mix, 1);
        }
    }
}

static int hc_args(const char *op, int64_t t, int64_t n, int64_t dm, nd_err *e) {
    if (t < 0 || n <= 0 || dm <= 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: n = %lld and dm = %lld must be positive", op, (long long)n,
                       (long long)dm);
    if (n > HC_MAX_N) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: unsupported: n = %lld streams (at most %d)", op,
                                     (long long)n, HC_MAX_N);
    if (t > 2147483647LL || n * dm > 2147483647LL)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: sizes beyond 32-bit GEMM dimensions", op);
    return 0;
}

/* mm = X @ fn^T ([t, mix]) and rho [t] into scratch; returns pointers into it. */
static int hc_mix(nd_backend *b, const float *X, const float *fn, int64_t t, int64_t n, int64_t dm, int64_t mix,
                  float rms_eps, size_t extra_floats, float **mm, float **rho, float **extra, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    const int64_t nd = n * dm;
    const size_t a = ((size_t)(t * mix) * 4 + 255) & ~(size_t)255, r = ((size_t)t * 4 + 255) & ~(size_t)255;
    void *s;
    ND_TRY(nd_cuda_scratch(b, a + r + extra_floats * 4, &s, e));
    *mm = (float *)s;
    *rho = (float *)((char *)s + a);
    *extra = (float *)((char *)s + a + r);
    const float one = 1.0f, zero = 0.0f;
    ND_BLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)mix, (int)t, (int)nd, &one, fn, CUDA_R_32F, (int)nd, X,
                         CUDA_R_32F, (int)nd, &zero, *mm, CUDA_R_32F, (int)mix, CUBLAS_COMPUTE_32F_PEDANTIC,
                         CUBLAS_GEMM_DEFAULT));
    hc_rho_kernel<<<(unsigned)t, 256, 0, c->stream>>>(X, nd, rms_eps, *rho);
    ND_LAUNCHED("hc_rho_kernel");
    return 0;
}

int nd_cuda_hc_pre(nd_backend *b, const float *X, const float *fn, const float *base, const float *scale_host,
                   int64_t t, int64_t n, int64_t dm, int iters, float rms_eps, float hc_eps, float *u, float *post,
                   float *comb, nd_err *e) {
    ND_TRY(hc_args("hc_pre", t, n, dm, e));
    if (iters < 1) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: hc_pre: Sinkhorn iterations %d must be >= 1", iters);
    if (t == 0) return 0;
    nd_cuda *c = nd_cu(b);
    float *mm, *rho, *pre;
    ND_TRY(hc_mix(b, X, fn, t, n, dm, (2 + n) * n, rms_eps, (size_t)(t * n), &mm, &rho, &pre, e));
    hc_gates_kernel<<<nd_cuda_blocks(t, 128), 128, 0, c->stream>>>(mm, rho, t, n, (2 + n) * n, base, scale_host[0],
                                                                   scale_host[1], scale_host[2], iters, hc_eps, pre,
                                                                   post, comb);
    ND_LAUNCHED("hc_gates_kernel");
    hc_collapse_kernel<<<nd_cuda_grid(b, t * dm, 256), 256, 0, c->stream>>>(X, pre, t, n, dm, u);
    ND_LAUNCHED("hc_collapse_kernel");
    return 0;
}

int nd_cuda_hc_head(nd_backend *b, const float *X, const float *fn, const float *base, const float *scale_host,
                    int64_t t, int64_t n, int64_t dm, float rms_eps, float hc_eps, float *u, nd_err *e) {
    ND_TRY(hc_args("hc_head", t, n, dm, e));
    if (t == 0) return 0;
    nd_cuda *c = nd_cu(b);
    float *mm, *rho, *pre;
    ND_TRY(hc_mix(b, X, fn, t, n, dm, n, rms_eps, (size_t)(t * n), &mm, &rho, &pre, e));
    hc_gates_kernel<<<nd_cuda_blocks(t, 128), 128, 0, c->stream>>>(mm, rho, t, n, n, base, scale_host[0], 0.0f, 0.0f,
                                                                   0, hc_eps, pre, NULL, NULL);
    ND_LAUNCHED("hc_gates_kernel");
    hc_collapse_kernel<<<nd_cuda_grid(b, t * dm, 256), 256, 0, c->stream>>>(X, pre, t, n, dm, u);
    ND_LAUNCHED("hc_collapse_kernel");
    return 0;
}

int nd_cuda_hc_post(nd_backend *b, const float *X, const float *y, const float *post, const float *comb, int64_t t,
                    int64_t n, int64_t dm, int bf16_steps, float *Xout, nd_err *e) {
    ND_TRY(hc_args("hc_post", t, n, dm, e));
    if (t == 0) return 0;
    hc_post_kernel<<<nd_cuda_grid(b, t * dm, 256), 256, 0, nd_cu(b)->stream>>>(X, y, post, comb, t, n, dm, bf16_steps, Xout);
    ND_LAUNCHED("hc_post_kernel");
    return 0;
}
