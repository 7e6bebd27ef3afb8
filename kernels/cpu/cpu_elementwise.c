/* cpu_elementwise.c — BF16 rounding, RMSNorm, residual add, clamped SwiGLU. */
#include <math.h>
#include "cpu_internal.h"
#include "numerics/nd_numerics.h"

int nd_cpu_round_bf16(nd_backend *b, float *x, int64_t n, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "round_bf16", n);
    ND_CPU_REQUIRE(n == 0 || x, e, "round_bf16", "NULL buffer");
    for (int64_t i = 0; i < n; i++) x[i] = nd_bf16_round(x[i]);
    return 0;
}

/* Σx² is accumulated in FP32 as the GPU kernels do; y = (x * r) * w with r = 1/sqrt(mean + eps). */
int nd_cpu_rmsnorm(nd_backend *b, const float *x, const float *w, float eps, int64_t rows, int64_t d,
                   float *y, nd_err *e) {
    (void)b;
    const char *op = "rmsnorm";
    ND_CPU_SIZES(e, op, rows, d);
    ND_CPU_REQUIRE(d > 0 || rows == 0, e, op, "d must be positive");
    ND_CPU_REQUIRE(rows == 0 || (x && y), e, op, "NULL buffer");
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float ss = 0.0f;
        for (int64_t i = 0; i < d; i++) ss += xr[i] * xr[i];
        const float rs = 1.0f / sqrtf(ss / (float)d + eps);
        for (int64_t i = 0; i < d; i++) yr[i] = w ? (xr[i] * rs) * w[i] : xr[i] * rs;
    }
    return 0;
}

int nd_cpu_add(nd_backend *b, float *y, const float *x, int64_t n, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "add", n);
    ND_CPU_REQUIRE(n == 0 || (x && y), e, "add", "NULL buffer");
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
    return 0;
}

int nd_cpu_swiglu(nd_backend *b, const float *g, const float *v, int64_t n, float limit, float *h,
                  nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "swiglu", n);
    ND_CPU_REQUIRE(n == 0 || (g && v && h), e, "swiglu", "NULL buffer");
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i], vi = v[i];
        if (limit > 0.0f) {
            gi = fminf(gi, limit);              /* gate: upper clamp only */
            vi = fminf(fmaxf(vi, -limit), limit);
        }
        h[i] = gi / (1.0f + expf(-gi)) * vi;     /* silu(g) = g * sigmoid(g) */
    }
    return 0;
}
