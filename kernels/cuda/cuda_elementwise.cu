/* cuda_elementwise.cu — BF16 rounding, the FP16 cast epilogue, a scale, RMSNorm, residual add, clamped SwiGLU, rotary embedding.
 * Products and sums are written with __fmul_rn/__fadd_rn where the CPU's order of rounding can be
 * kept exactly (no FMA contraction); what still differs is stated per op in the cross-backend test. */
#include "cuda_common.cuh"
#include "numerics/nd_bf16_steps.h"

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
                               i += (int64_t)gridDim.x * blockDim.x)

__global__ void round_bf16_kernel(float *x, int64_t n) {
    GRID_STRIDE(i, n) x[i] = nd_bf16_round(x[i]);
}

int nd_cuda_round_bf16(nd_backend *b, float *x, int64_t n, nd_err *e) {
    if (n < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: round_bf16: negative size");
    if (n == 0) return 0;
    round_bf16_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(x, n);
    ND_LAUNCHED("round_bf16_kernel");
    return 0;
}

__global__ void cast_f16_scale_kernel(float *x, int64_t n, float scale) {
    GRID_STRIDE(i, n) x[i] = __fmul_rn(nd_f16_round(x[i]), scale);
}

int nd_cuda_cast_f16_scale(nd_backend *b, float *x, int64_t n, float scale, nd_err *e) {
    if (n < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: cast_f16_scale: negative size");
    if (n == 0) return 0;
    cast_f16_scale_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(x, n, scale);
    ND_LAUNCHED("cast_f16_scale_kernel");
    return 0;
}

__global__ void scale_kernel(float *x, int64_t n, float s) {
    GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], s);
}

int nd_cuda_scale(nd_backend *b, float *x, int64_t n, float s, nd_err *e) {
    if (n < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: scale: negative size");
    if (n == 0) return 0;
    scale_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(x, n, s);
    ND_LAUNCHED("scale_kernel");
    return 0;
}

__global__ void add_kernel(float *y, const float *__restrict__ x, int64_t n) {
    GRID_STRIDE(i, n) y[i] = __fadd_rn(y[i], x[i]);
}

int nd_cuda_add(nd_backend *b, float *y, const float *x, int64_t n, nd_err *e) {
    if (n < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: add: negative size");
    if (n == 0) return 0;
    add_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(y, x, n);
    ND_LAUNCHED("add_kernel");
    return 0;
}

__global__ void add_bias_kernel(float *y, const float *__restrict__ bias, int64_t n, int64_t cols) {
    GRID_STRIDE(i, n) y[i] = __fadd_rn(y[i], bias[i % cols]);
}

int nd_cuda_add_bias(nd_backend *b, float *y, const float *bias, int64_t rows, int64_t cols, nd_err *e) {
    if (rows < 0 || cols < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: add_bias: negative size");
    const int64_t n = rows * cols;
    if (n == 0) return 0;
    add_bias_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(y, bias, n, cols);
    ND_LAUNCHED("add_bias_kernel");
    return 0;
}

__global__ void mul_cols_kernel(const float *__restrict__ x, const float *__restrict__ s, int64_t n, int64_t cols,
                                float *y) {
    GRID_STRIDE(i, n) y[i] = __fmul_rn(x[i], s[i % cols]);
}

int nd_cuda_mul_cols(nd_backend *b, const float *x, const float *s, int64_t rows, int64_t cols, float *y, nd_err *e) {
    if (rows < 0 || cols < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: mul_cols: negative size");
    const int64_t n = rows * cols;
    if (n == 0) return 0;
    mul_cols_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(x, s, n, cols, y);
    ND_LAUNCHED("mul_cols_kernel");
    return 0;
}

__global__ void swiglu_kernel(const float *__restrict__ g, const float *__restrict__ v, int64_t n, float limit,
                              int bf16_steps, float *__restrict__ h) {
    GRID_STRIDE(i, n) h[i] = nd_swiglu_elem(g[i], v[i], limit, bf16_steps);
}

int nd_cuda_swiglu(nd_backend *b, const float *g, const float *v, int64_t n, float limit, int bf16_steps, float *h,
                   nd_err *e) {
    if (n < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: swiglu: negative size");
    if (n == 0) return 0;
    swiglu_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(g, v, n, limit, bf16_steps, h);
    ND_LAUNCHED("swiglu_kernel");
    return 0;
}

__global__ void swiglu_oai_kernel(const float *__restrict__ g, const float *__restrict__ v, int64_t n, float alpha,
                                  float limit, int bf16_steps, float *__restrict__ h) {
    GRID_STRIDE(i, n) h[i] = nd_swiglu_oai_elem(g[i], v[i], alpha, limit, bf16_steps);
}

int nd_cuda_swiglu_oai(nd_backend *b, const float *g, const float *v, int64_t n, float alpha, float limit,
                       int bf16_steps, float *h, nd_err *e) {
    if (n < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: swiglu_oai: negative size");
    if (n == 0) return 0;
    swiglu_oai_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(g, v, n, alpha, limit, bf16_steps, h);
    ND_LAUNCHED("swiglu_oai_kernel");
    return 0;
}

/* One block per row: Σx² in FP32 (per-thread partial sums, then a tree), y = (x * r) * w. */
__global__ void rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, float eps, int64_t d,
                               int steps, float *__restrict__ y) {
    __shared__ float part[32];
    const float *xr = x + blockIdx.x * d;
    float *yr = y + blockIdx.x * d;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss = __fadd_rn(ss, __fmul_rn(xr[i], xr[i]));
#pragma unroll
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        ss = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
#pragma unroll
        for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (threadIdx.x == 0) part[0] = ss;
    }
    __syncthreads();
    const float rs = nd_norm_factor(1.0f / sqrtf(part[0] / (float)d + eps), steps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = nd_norm_elem(xr[i], rs, w ? w[i] : 1.0f, w != NULL, steps);
}

int nd_cuda_rmsnorm(nd_backend *b, const float *x, const float *w, float eps, int64_t rows, int64_t d, int steps,
                    float *y, nd_err *e) {
    if (rows < 0 || d < 0 || (d == 0 && rows > 0))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: rmsnorm: bad sizes rows %lld d %lld", (long long)rows, (long long)d);
    if (steps < ND_NORM_FP32 || steps > ND_NORM_RSQRT_BF16) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: rmsnorm: unknown steps %d", steps);
    if (rows == 0) return 0;
    if (rows > 2147483647LL) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: rmsnorm: too many rows");
    const int threads = d >= 4096 ? 1024 : d >= 1024 ? 512 : 256;
    rmsnorm_kernel<<<(unsigned)rows, threads, 0, nd_cu(b)->stream>>>(x, w, eps, d, steps, y);
    ND_LAUNCHED("rmsnorm_kernel");
    return 0;
}

/* One thread per (row, head, pair). pos and inv_freq were staged into device scratch. */
__global__ void rope_kernel(float *x, int64_t rows, int64_t heads, int64_t d, int64_t rot_off, int64_t half,
                            const int32_t *__restrict__ pos, const float *__restrict__ inv_freq, int interleaved,
                            int inverse, int steps, float mscale) {
    const int64_t total = rows * heads * half;
    GRID_STRIDE(t, total) {
        const int64_t i = t % half, rh = t / half, r = rh / heads;
        const float ang = __fmul_rn((float)pos[r], inv_freq[i]);
        const float c = nd_rope_trig(__fmul_rn(cosf(ang), mscale), steps), sn = nd_rope_trig(__fmul_rn(sinf(ang), mscale), steps);
        const float s = inverse ? -sn : sn;
        const int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
        float *xh = x + rh * d + rot_off;
        float ya, yb;
        nd_rope_pair(xh[i0], xh[i1], c, s, steps, &ya, &yb);
        xh[i0] = ya;
        xh[i1] = yb;
    }
}

int nd_cuda_rope(nd_backend *b, float *x, int64_t rows, int64_t heads, int64_t d, int64_t rot_off,
                 int64_t rot_dim, const int32_t *pos_host, const float *inv_freq_host, int interleaved,
                 int inverse, int steps, float mscale, nd_err *e) {
    if (steps < ND_ROPE_FP32 || steps > ND_ROPE_BF16_PRODUCTS) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: rope: unknown steps %d", steps);
    if (rows < 0 || heads < 0 || d < 0 || rot_off < 0 || rot_dim < 0 || rot_off + rot_dim > d)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: rope: rotary slice [%lld, %lld) outside head dim %lld",
                       (long long)rot_off, (long long)(rot_off + rot_dim), (long long)d);
    if (rot_dim % 2) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: rope: rot_dim %lld is odd", (long long)rot_dim);
    const int64_t half = rot_dim / 2;
    if (rows * heads * half == 0) return 0;
    const size_t pbytes = ((size_t)rows * 4 + 255) & ~(size_t)255;
    void *s;
    ND_TRY(nd_cuda_scratch(b, pbytes + (size_t)half * 4, &s, e));
    int32_t *pos = (int32_t *)s;
    float *f = (float *)((char *)s + pbytes);
    ND_TRY(nd_cuda_stage(b, pos, pos_host, (size_t)rows * 4, e));
    ND_TRY(nd_cuda_stage(b, f, inv_freq_host, (size_t)half * 4, e));
    const int64_t total = rows * heads * half;
    rope_kernel<<<nd_cuda_grid(b, total, 256), 256, 0, nd_cu(b)->stream>>>(x, rows, heads, d, rot_off, half, pos, f,
                                                                            interleaved, inverse, steps, mscale);
    ND_LAUNCHED("rope_kernel");
    return 0;
}
