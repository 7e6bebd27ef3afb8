/* cpu_gdn.c — Qwen3-Next's gated attention output gate, the causal depthwise conv and the gated
 * delta rule of Gated DeltaNet (backend.h, numerics/nd_gdn.h): the reference of the CUDA kernels. */
#include <math.h>
#include <stdlib.h>
#include "cpu_internal.h"
#include "numerics/nd_gdn.h"

int nd_cpu_gate_mul(nd_backend *b, const float *x, const float *g, int64_t rows, int64_t cols, int64_t gcols, int act,
                    int bf16_act, float *out, nd_err *e) {
    (void)b;
    const char *op = "gate_mul";
    ND_CPU_SIZES(e, op, rows, cols);
    ND_CPU_REQUIRE(gcols > 0 && cols % gcols == 0, e, op, "gate columns %lld do not divide %lld", (long long)gcols,
                   (long long)cols);
    ND_CPU_REQUIRE(act >= 0 && act < ND_GATE_N, e, op, "unknown activation %d", act);
    ND_CPU_REQUIRE(rows == 0 || cols == 0 || (x && g && out), e, op, "NULL buffer");
    const int64_t grp = cols / gcols;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            out[r * cols + j] = nd_gate_elem(x[r * cols + j], g[r * gcols + j / grp], act, bf16_act);
    return 0;
}

int nd_cpu_causal_conv1d(nd_backend *b, const float *x, const float *w, int64_t t, int64_t c, int64_t kern, int silu,
                         int bf16_steps, float *out, nd_err *e) {
    (void)b;
    const char *op = "causal_conv1d";
    ND_CPU_SIZES(e, op, t, c, kern);
    ND_CPU_REQUIRE(kern > 0, e, op, "kernel size must be positive");
    ND_CPU_REQUIRE(t == 0 || c == 0 || (x && w && out), e, op, "NULL buffer");
    for (int64_t i = 0; i < t; i++)
        for (int64_t ch = 0; ch < c; ch++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < kern; j++) {
                const int64_t src = i - kern + 1 + j;
                if (src >= 0) acc = ND_SADD(acc, ND_SMUL(w[ch * kern + j], x[src * c + ch]));
            }
            out[i * c + ch] = nd_conv_act(acc, silu, bf16_steps);
        }
    return 0;
}

int nd_cpu_gated_delta_rule(nd_backend *b, const float *q, const float *k, const float *v, const float *a,
                            const float *bb, const float *a_log_host, const float *dt_bias_host, int64_t t, int64_t nk,
                            int64_t nv, int64_t dk, int64_t dv, int bf16_steps, float *out, nd_err *e) {
    (void)b;
    const char *op = "gated_delta_rule";
    ND_CPU_SIZES(e, op, t, nv, dk, dv);
    ND_CPU_SIZES(e, op, t, nk, dk);
    ND_CPU_REQUIRE(nk > 0 && nv > 0 && nv % nk == 0, e, op, "value heads %lld are not a multiple of key heads %lld",
                   (long long)nv, (long long)nk);
    ND_CPU_REQUIRE(dk > 0 && dv > 0, e, op, "head dims must be positive");
    ND_CPU_REQUIRE(t == 0 || (q && k && v && a && bb && a_log_host && dt_bias_host && out), e, op, "NULL buffer");
    float *S = calloc((size_t)(dk * dv), sizeof *S), *qn = malloc(sizeof(float) * (size_t)dk),
          *kn = malloc(sizeof(float) * (size_t)dk);
    if (!S || !qn || !kn) { free(S); free(qn); free(kn); return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op); }
    const int64_t r = nv / nk;
    const float qscale = (float)pow((double)dk, -0.5); /* transformers: `query * dk ** -0.5` (a double) */
    for (int64_t h = 0; h < nv; h++) {
        const int64_t kh = h / r;
        for (int64_t z = 0; z < dk * dv; z++) S[z] = 0.0f;
        for (int64_t i = 0; i < t; i++) {
            const float *qi = q + (i * nk + kh) * dk, *ki = k + (i * nk + kh) * dk;
            const float iq = nd_l2_inv(qi, dk), ik = nd_l2_inv(ki, dk);
            for (int64_t x = 0; x < dk; x++) {
                qn[x] = ND_SMUL(ND_SMUL(qi[x], iq), qscale);
                kn[x] = ND_SMUL(ki[x], ik);
            }
            const float decay = nd_gdn_decay(a[i * nv + h], a_log_host[h], dt_bias_host[h]);
            const float beta = nd_gdn_beta(bb[i * nv + h], bf16_steps);
            for (int64_t j = 0; j < dv; j++) {
                float kv = 0.0f;
                for (int64_t x = 0; x < dk; x++) {
                    S[x * dv + j] = ND_SMUL(S[x * dv + j], decay);
                    kv = ND_SADD(kv, ND_SMUL(S[x * dv + j], kn[x]));
                }
                const float delta = ND_SMUL(ND_SSUB(v[(i * nv + h) * dv + j], kv), beta);
                float o = 0.0f;
                for (int64_t x = 0; x < dk; x++) {
                    S[x * dv + j] = ND_SADD(S[x * dv + j], ND_SMUL(kn[x], delta));
                    o = ND_SADD(o, ND_SMUL(S[x * dv + j], qn[x]));
                }
                out[(i * nv + h) * dv + j] = o;
            }
        }
    }
    free(S); free(qn); free(kn);
    return 0;
}
