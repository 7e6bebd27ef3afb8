/* cpu_elementwise.c — BF16 rounding, the FP16 cast epilogue, RMSNorm, residual add, clamped SwiGLU. */
#include <math.h>
#include "cpu_internal.h"
#include "numerics/nd_numerics.h"
#include "numerics/nd_bf16_steps.h"

int nd_cpu_round_bf16(nd_backend *b, float *x, int64_t n, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "round_bf16", n);
    ND_CPU_REQUIRE(n == 0 || x, e, "round_bf16", "NULL buffer");
    for (int64_t i = 0; i < n; i++) x[i] = nd_bf16_round(x[i]);
    return 0;
}

int nd_cpu_cast_f16_scale(nd_backend *b, float *x, int64_t n, float scale, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "cast_f16_scale", n);
    ND_CPU_REQUIRE(n == 0 || x, e, "cast_f16_scale", "NULL buffer");
    for (int64_t i = 0; i < n; i++) x[i] = nd_f16_round(x[i]) * scale;
    return 0;
}

/* Σx² is accumulated in FP32 as the GPU kernels do; y = (x * r) * w with r = 1/sqrt(mean + eps),
 * with the BF16 steps of `steps` (numerics/nd_bf16_steps.h). */
int nd_cpu_rmsnorm(nd_backend *b, const float *x, const float *w, float eps, int64_t rows, int64_t d,
                   int steps, float *y, nd_err *e) {
    (void)b;
    const char *op = "rmsnorm";
    ND_CPU_SIZES(e, op, rows, d);
    ND_CPU_REQUIRE(d > 0 || rows == 0, e, op, "d must be positive");
    ND_CPU_REQUIRE(rows == 0 || (x && y), e, op, "NULL buffer");
    ND_CPU_REQUIRE(steps >= ND_NORM_FP32 && steps <= ND_NORM_RSQRT_BF16, e, op, "unknown steps %d", steps);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float ss = 0.0f;
        for (int64_t i = 0; i < d; i++) ss += xr[i] * xr[i];
        const float rs = nd_norm_factor(1.0f / sqrtf(ss / (float)d + eps), steps);
        for (int64_t i = 0; i < d; i++) yr[i] = nd_norm_elem(xr[i], rs, w ? w[i] : 1.0f, w != NULL, steps);
    }
    return 0;
}

int nd_cpu_scale(nd_backend *b, float *x, int64_t n, float s, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "scale", n);
    ND_CPU_REQUIRE(n == 0 || x, e, "scale", "NULL buffer");
    for (int64_t i = 0; i < n; i++) x[i] = ND_SMUL(x[i], s);
    return 0;
}

int nd_cpu_add(nd_backend *b, float *y, const float *x, int64_t n, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "add", n);
    ND_CPU_REQUIRE(n == 0 || (x && y), e, "add", "NULL buffer");
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
    return 0;
}

int nd_cpu_add_bias(nd_backend *b, float *y, const float *bias, int64_t rows, int64_t cols, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "add_bias", rows, cols);
    ND_CPU_REQUIRE(rows == 0 || cols == 0 || (y && bias), e, "add_bias", "NULL buffer");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) y[r * cols + c] += bias[c];
    return 0;
}

int nd_cpu_mul_cols(nd_backend *b, const float *x, const float *s, int64_t rows, int64_t cols, float *y, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "mul_cols", rows, cols);
    ND_CPU_REQUIRE(rows == 0 || cols == 0 || (x && s && y), e, "mul_cols", "NULL buffer");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) y[r * cols + c] = x[r * cols + c] * s[c];
    return 0;
}

int nd_cpu_swiglu(nd_backend *b, const float *g, const float *v, int64_t n, float limit, int bf16_steps,
                  float *h, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "swiglu", n);
    ND_CPU_REQUIRE(n == 0 || (g && v && h), e, "swiglu", "NULL buffer");
    for (int64_t i = 0; i < n; i++) h[i] = nd_swiglu_elem(g[i], v[i], limit, bf16_steps);
    return 0;
}

int nd_cpu_swiglu_oai(nd_backend *b, const float *g, const float *v, int64_t n, float alpha, float limit,
                      int bf16_steps, float *h, nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "swiglu_oai", n);
    ND_CPU_REQUIRE(n == 0 || (g && v && h), e, "swiglu_oai", "NULL buffer");
    for (int64_t i = 0; i < n; i++) h[i] = nd_swiglu_oai_elem(g[i], v[i], alpha, limit, bf16_steps);
    return 0;
}
