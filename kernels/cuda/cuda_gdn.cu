/* cuda_gdn.cu — Qwen3-Next's output gate, causal depthwise conv and gated delta rule (backend.h,
 * numerics/nd_gdn.h). The recurrence is a plain sequential kernel, correctness first: one block per
 * value head, one thread per column of the head's state, tokens in order; the per-token norms and
 * coefficients come from one thread in the CPU's order of sums, so the two backends differ only by
 * expf/log1pf ulps. */
#include "cuda_common.cuh"
#include "numerics/nd_gdn.h"

#define GRID_STRIDE(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
                               i += (int64_t)gridDim.x * blockDim.x)

__global__ void gate_mul_kernel(const float *__restrict__ x, const float *__restrict__ g, int64_t n, int64_t cols,
                                int64_t gcols, int64_t grp, int act, int bf16_act, float *out) {
    GRID_STRIDE(i, n) {
        const int64_t r = i / cols, j = i % cols;
        out[i] = nd_gate_elem(x[i], g[r * gcols + j / grp], act, bf16_act);
    }
}

int nd_cuda_gate_mul(nd_backend *b, const float *x, const float *g, int64_t rows, int64_t cols, int64_t gcols, int act,
                     int bf16_act, float *out, nd_err *e) {
    if (rows < 0 || cols < 0 || gcols <= 0 || cols % gcols)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: gate_mul: bad sizes rows %lld cols %lld gate columns %lld",
                       (long long)rows, (long long)cols, (long long)gcols);
    if (act < 0 || act >= ND_GATE_N) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: gate_mul: unknown activation %d", act);
    const int64_t n = rows * cols;
    if (n == 0) return 0;
    gate_mul_kernel<<<nd_cuda_grid(b, n, 256), 256, 0, nd_cu(b)->stream>>>(x, g, n, cols, gcols, cols / gcols, act,
                                                                           bf16_act, out);
    ND_LAUNCHED("gate_mul_kernel");
    return 0;
}

__global__ void causal_conv1d_kernel(const float *__restrict__ x, const float *__restrict__ w, int64_t t, int64_t c,
                                     int64_t kern, int silu, int bf16_steps, float *__restrict__ out) {
    GRID_STRIDE(z, t * c) {
        const int64_t i = z / c, ch = z % c;
        float acc = 0.0f;
        for (int64_t j = 0; j < kern; j++) {
            const int64_t src = i - kern + 1 + j;
            if (src >= 0) acc = __fadd_rn(acc, __fmul_rn(w[ch * kern + j], x[src * c + ch]));
        }
        out[z] = nd_conv_act(acc, silu, bf16_steps);
    }
}

int nd_cuda_causal_conv1d(nd_backend *b, const float *x, const float *w, int64_t t, int64_t c, int64_t kern, int silu,
                          int bf16_steps, float *out, nd_err *e) {
    if (t < 0 || c < 0 || kern <= 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: causal_conv1d: bad sizes t %lld c %lld kernel %lld", (long long)t,
                       (long long)c, (long long)kern);
    if (t * c == 0) return 0;
    causal_conv1d_kernel<<<nd_cuda_grid(b, t * c, 256), 256, 0, nd_cu(b)->stream>>>(x, w, t, c, kern, silu, bf16_steps, out);
    ND_LAUNCHED("causal_conv1d_kernel");
    return 0;
}

/* block h: value head h; S [dk, dv] of the head in global scratch (coalesced over the columns) */
__global__ void gated_delta_rule_kernel(const float *__restrict__ q, const float *__restrict__ k,
                                        const float *__restrict__ v, const float *__restrict__ a,
                                        const float *__restrict__ bb, const float *__restrict__ alog,
                                        const float *__restrict__ dtb, int64_t t, int64_t nk, int64_t nv, int64_t dk,
                                        int64_t dv, float qscale, int bf16_steps, float *S, float *__restrict__ out) {
    extern __shared__ float sh[];
    float *qn = sh, *kn = sh + dk, *coef = sh + 2 * dk;
    const int64_t h = blockIdx.x, kh = h / (nv / nk);
    float *Sh = S + h * dk * dv;
    for (int64_t j = threadIdx.x; j < dv; j += blockDim.x)
        for (int64_t x = 0; x < dk; x++) Sh[x * dv + j] = 0.0f;
    for (int64_t i = 0; i < t; i++) {
        const float *qi = q + (i * nk + kh) * dk, *ki = k + (i * nk + kh) * dk;
        __syncthreads(); /* the previous token is done with qn, kn, coef */
        if (threadIdx.x == 0) {
            coef[0] = nd_l2_inv(qi, dk);
            coef[1] = nd_l2_inv(ki, dk);
            coef[2] = nd_gdn_decay(a[i * nv + h], alog[h], dtb[h]);
            coef[3] = nd_gdn_beta(bb[i * nv + h], bf16_steps);
        }
        __syncthreads();
        for (int64_t x = threadIdx.x; x < dk; x += blockDim.x) {
            qn[x] = __fmul_rn(__fmul_rn(qi[x], coef[0]), qscale);
            kn[x] = __fmul_rn(ki[x], coef[1]);
        }
        __syncthreads();
        const float decay = coef[2], beta = coef[3];
        for (int64_t j = threadIdx.x; j < dv; j += blockDim.x) {
            float kv = 0.0f;
            for (int64_t x = 0; x < dk; x++) {
                const float s = __fmul_rn(Sh[x * dv + j], decay);
                Sh[x * dv + j] = s;
                kv = __fadd_rn(kv, __fmul_rn(s, kn[x]));
            }
            const float delta = __fmul_rn(__fsub_rn(v[(i * nv + h) * dv + j], kv), beta);
            float o = 0.0f;
            for (int64_t x = 0; x < dk; x++) {
                const float s = __fadd_rn(Sh[x * dv + j], __fmul_rn(kn[x], delta));
                Sh[x * dv + j] = s;
                o = __fadd_rn(o, __fmul_rn(s, qn[x]));
            }
            out[(i * nv + h) * dv + j] = o;
        }
    }
}

int nd_cuda_gated_delta_rule(nd_backend *b, const float *q, const float *k, const float *v, const float *a,
                             const float *bb, const float *a_log_host, const float *dt_bias_host, int64_t t, int64_t nk,
                             int64_t nv, int64_t dk, int64_t dv, int bf16_steps, float *out, nd_err *e) {
    if (t < 0 || nk <= 0 || nv <= 0 || nv % nk || dk <= 0 || dv <= 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: gated_delta_rule: bad sizes t %lld heads %lld/%lld dims %lld/%lld",
                       (long long)t, (long long)nk, (long long)nv, (long long)dk, (long long)dv);
    if (dk > 8192 || nv > 2147483647LL) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: gated_delta_rule: key head dim %lld too large", (long long)dk);
    if (t == 0) return 0;
    const size_t sbytes = (size_t)(nv * dk * dv) * sizeof(float), hbytes = (size_t)nv * sizeof(float);
    void *sp;
    ND_TRY(nd_cuda_scratch(b, sbytes + 2 * hbytes, &sp, e));
    float *S = (float *)sp, *alog = (float *)((char *)sp + sbytes), *dtb = alog + nv;
    ND_TRY(nd_cuda_stage(b, alog, a_log_host, hbytes, e));
    ND_TRY(nd_cuda_stage(b, dtb, dt_bias_host, hbytes, e));
    const int threads = dv >= 256 ? 256 : dv >= 128 ? 128 : dv >= 64 ? 64 : 32;
    const size_t shm = (size_t)(2 * dk + 4) * sizeof(float);
    const float qscale = (float)pow((double)dk, -0.5);
    gated_delta_rule_kernel<<<(unsigned)nv, threads, shm, nd_cu(b)->stream>>>(q, k, v, a, bb, alog, dtb, t, nk, nv, dk,
                                                                              dv, qscale, bf16_steps, S, out);
    ND_LAUNCHED("gated_delta_rule_kernel");
    return 0;
}
