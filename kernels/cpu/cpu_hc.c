/* cpu_hc.c — DeepSeek-V4 manifold-constrained hyper-connections: hc_pre (with Sinkhorn),
 * hc_post and hc_head (research/model-arch.md §3.2, §3.12, §3.16).
 *
 * Index conventions: X [t, n, dm] (stream i of token t at X + (t*n + i)*dm); comb [t, n, n]
 * with comb[i,j] the weight of source stream i in destination stream j, from the mixer slot
 * 2n + i*n + j; the softmax runs over j (rows), Sinkhorn ends on a column normalisation, so
 * Σ_i comb[i,j] ≈ 1. The RMS factor rho (over all n*dm values) multiplies the GEMM result; the
 * collapse u = Σ_i pre_i X_i uses the un-normalised X.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"
#include "numerics/nd_bf16_steps.h"

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* mm[t, mix] = rho_t * (fn @ x_t), x_t the flattened streams of token t. */
static int hc_mix(const float *X, const float *fn, int64_t t, int64_t nd, int64_t mix, float rms_eps,
                  float **mm_out, nd_err *e, const char *op) {
    float *mm = malloc((size_t)(t * mix > 0 ? t * mix : 1) * sizeof *mm);
    if (!mm) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op);
    nd_cpu_gemm_strided(X, nd, fn, nd, mm, mix, t, mix, nd, 1.0f);
    for (int64_t r = 0; r < t; r++) {
        const float *x = X + r * nd;
        float ss = 0.0f;
        for (int64_t i = 0; i < nd; i++) ss += x[i] * x[i];
        const float rho = 1.0f / sqrtf(ss / (float)nd + rms_eps);
        for (int64_t c = 0; c < mix; c++) mm[r * mix + c] *= rho;
    }
    *mm_out = mm;
    return 0;
}

/* u = Σ_i pre_i X_i for one token. */
static void hc_collapse(const float *X, const float *pre, int64_t n, int64_t dm, float *u) {
    for (int64_t c = 0; c < dm; c++) {
        float a = 0.0f;
        for (int64_t i = 0; i < n; i++) a += pre[i] * X[i * dm + c];
        u[c] = a;
    }
}

static int hc_common_args(const char *op, int64_t t, int64_t n, int64_t dm, nd_err *e) {
    ND_CPU_SIZES(e, op, t, n, dm);
    ND_CPU_SIZES(e, op, n + 2, n, n, dm);
    ND_CPU_REQUIRE(n > 0 && dm > 0, e, op, "n = %lld and dm = %lld must be positive", (long long)n, (long long)dm);
    return 0;
}

int nd_cpu_hc_pre(nd_backend *b, const float *X, const float *fn, const float *base,
                  const float *scale_host, int64_t t, int64_t n, int64_t dm, int iters, float rms_eps,
                  float hc_eps, float *u, float *post, float *comb, nd_err *e) {
    (void)b;
    const char *op = "hc_pre";
    ND_TRY(hc_common_args(op, t, n, dm, e));
    ND_CPU_REQUIRE(iters >= 1, e, op, "Sinkhorn iterations %d must be >= 1", iters);
    if (t == 0) return 0;
    ND_CPU_REQUIRE(X && fn && base && scale_host && u && post && comb, e, op, "NULL buffer");
    const int64_t mix = (2 + n) * n, nd = n * dm;
    float *mm, *pre = malloc((size_t)n * sizeof *pre);
    if (!pre) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op);
    int rc = hc_mix(X, fn, t, nd, mix, rms_eps, &mm, e, op);
    if (rc) { free(pre); return rc; }
    for (int64_t r = 0; r < t; r++) {
        const float *m = mm + r * mix;
        float *C = comb + r * n * n;
        for (int64_t i = 0; i < n; i++) {
            pre[i] = sigmoidf(scale_host[0] * m[i] + base[i]) + hc_eps;
            post[r * n + i] = 2.0f * sigmoidf(scale_host[1] * m[n + i] + base[n + i]);
        }
        for (int64_t i = 0; i < n; i++) {            /* softmax over j of row i, then + eps */
            float *Ci = C + i * n, mx = -INFINITY, sum = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                Ci[j] = scale_host[2] * m[2 * n + i * n + j] + base[2 * n + i * n + j];
                if (Ci[j] > mx) mx = Ci[j];
            }
            for (int64_t j = 0; j < n; j++) { Ci[j] = expf(Ci[j] - mx); sum += Ci[j]; }
            for (int64_t j = 0; j < n; j++) Ci[j] = Ci[j] / sum + hc_eps;
        }
        for (int it = 0; it < iters; it++) {
            if (it > 0)                               /* row normalisation (not in round 0) */
                for (int64_t i = 0; i < n; i++) {
                    float s = 0.0f;
                    for (int64_t j = 0; j < n; j++) s += C[i * n + j];
                    for (int64_t j = 0; j < n; j++) C[i * n + j] /= s + hc_eps;
                }
            for (int64_t j = 0; j < n; j++) {         /* column normalisation */
                float s = 0.0f;
                for (int64_t i = 0; i < n; i++) s += C[i * n + j];
                for (int64_t i = 0; i < n; i++) C[i * n + j] /= s + hc_eps;
            }
        }
        hc_collapse(X + r * nd, pre, n, dm, u + r * dm);
    }
    free(mm);
    free(pre);
    return 0;
}

int nd_cpu_hc_post(nd_backend *b, const float *X, const float *y, const float *post, const float *comb,
                   int64_t t, int64_t n, int64_t dm, int bf16_steps, float *Xout, nd_err *e) {
    (void)b;
    const char *op = "hc_post";
    ND_TRY(hc_common_args(op, t, n, dm, e));
    if (t == 0) return 0;
    ND_CPU_REQUIRE(X && y && post && comb && Xout, e, op, "NULL buffer");
    /* Xout may be X: each token's result goes through a scratch row set first */
    float *tmp = malloc((size_t)(n * dm) * sizeof *tmp);
    if (!tmp) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op);
    for (int64_t r = 0; r < t; r++) {
        const float *Xr = X + r * n * dm, *yr = y + r * dm, *C = comb + r * n * n;
        for (int64_t j = 0; j < n; j++)
            for (int64_t c = 0; c < dm; c++) {
                const float py = nd_hc_post_coef(post[r * n + j], bf16_steps) * yr[c];
                if (!bf16_steps) { /* FP32: one running sum starting from post·y */
                    float a = py;
                    for (int64_t i = 0; i < n; i++) a += C[i * n + j] * Xr[i * dm + c];
                    tmp[j * dm + c] = a;
                    continue;
                }
                float mix = 0.0f;
                for (int64_t i = 0; i < n; i++) mix += nd_hc_post_coef(C[i * n + j], 1) * Xr[i * dm + c];
                tmp[j * dm + c] = nd_hc_post_join(py, mix, 1);
            }
        memcpy(Xout + r * n * dm, tmp, (size_t)(n * dm) * sizeof *tmp);
    }
    free(tmp);
    return 0;
}

int nd_cpu_hc_head(nd_backend *b, const float *X, const float *fn, const float *base,
                   const float *scale_host, int64_t t, int64_t n, int64_t dm, float rms_eps,
                   float hc_eps, float *u, nd_err *e) {
    (void)b;
    const char *op = "hc_head";
    ND_TRY(hc_common_args(op, t, n, dm, e));
    if (t == 0) return 0;
    ND_CPU_REQUIRE(X && fn && base && scale_host && u, e, op, "NULL buffer");
    const int64_t nd = n * dm;
    float *mm, *pre = malloc((size_t)n * sizeof *pre);
    if (!pre) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op);
    int rc = hc_mix(X, fn, t, nd, n, rms_eps, &mm, e, op);
    if (rc) { free(pre); return rc; }
    for (int64_t r = 0; r < t; r++) {
        for (int64_t i = 0; i < n; i++) pre[i] = sigmoidf(scale_host[0] * mm[r * n + i] + base[i]) + hc_eps;
        hc_collapse(X + r * nd, pre, n, dm, u + r * dm);
    }
    free(mm);
    free(pre);
    return 0;
}
