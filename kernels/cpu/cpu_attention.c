/* cpu_attention.c — causal attention with a sliding window, grouped KV heads and sinks, FP32.
 *
 * Per (query i, head h): s_j = scale * (q·k_j) over visible keys, μ = max(max_j s_j, sink_h),
 * out = Σ_j exp(s_j - μ) v_j / (Σ_j exp(s_j - μ) + exp(sink_h - μ)). Taking the sink into μ
 * is the same softmax (transformers concatenates the sink logit) and cannot overflow when the
 * sink is far above the scores. A query with no visible key gets zeros, sink or not.
 * bf16_steps: s_j = bf16(bf16(q·k_j) · scale) and p_j = bf16(exp(s_j - μ) / den) before p·v (2, with
 * sinks: s_j - μ and sink_h - μ rounded to BF16 first, nd_attn_exp: gpt-oss), as
 * transformers' eager attention of a BF16 model (numerics/nd_bf16_steps.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"
#include "numerics/nd_bf16_steps.h"

int nd_cpu_attention(nd_backend *b, const float *q, const float *k, const float *v, int64_t t,
                     int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t dv,
                     const int32_t *qpos_host, const int32_t *kpos_host, int64_t window, float scale,
                     const float *sinks_host, int bf16_steps, float *out, nd_err *e) {
    (void)b;
    const char *op = "attention";
    ND_CPU_SIZES(e, op, t, hq, d);
    ND_CPU_SIZES(e, op, t, hq, dv);
    ND_CPU_SIZES(e, op, s, hkv, d);
    ND_CPU_SIZES(e, op, s, hkv, dv);
    ND_CPU_REQUIRE(window >= 0, e, op, "negative window %lld", (long long)window);
    ND_CPU_REQUIRE(hq > 0 && hkv > 0 && hq % hkv == 0, e, op,
                   "query heads %lld not a positive multiple of kv heads %lld", (long long)hq, (long long)hkv);
    if (t * dv == 0) return 0;
    ND_CPU_REQUIRE(out && qpos_host && (s == 0 || (k && v && kpos_host)) && (d == 0 || q), e, op, "NULL buffer");
    float *sc = malloc((size_t)(s > 0 ? s : 1) * sizeof *sc);
    float *acc = malloc((size_t)dv * sizeof *acc);
    if (!sc || !acc) { free(sc); free(acc); return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op); }
    const int64_t rep = hq / hkv;
    for (int64_t i = 0; i < t; i++) {
        const int64_t qp = qpos_host[i];
        for (int64_t h = 0; h < hq; h++) {
            const float *qh = q + (i * hq + h) * d;
            const int64_t kh = h / rep;
            float *o = out + (i * hq + h) * dv;
            float mu = -INFINITY;
            int64_t nvis = 0;
            for (int64_t j = 0; j < s; j++) {
                const int64_t kp = kpos_host[j];
                if (kp > qp || (window > 0 && qp - kp >= window)) { sc[j] = NAN; continue; }
                const float *kj = k + (j * hkv + kh) * d;
                float dot = 0.0f;
                for (int64_t c = 0; c < d; c++) dot += qh[c] * kj[c];
                sc[j] = nd_attn_score(dot, scale, bf16_steps);
                if (sc[j] > mu) mu = sc[j];
                nvis++;
            }
            if (nvis == 0) { memset(o, 0, (size_t)dv * sizeof *o); continue; }
            const float sink = sinks_host ? sinks_host[h] : -INFINITY;
            if (sink > mu) mu = sink;
            const int bsub = bf16_steps == 2 && sinks_host; /* the max subtracted in BF16 (nd_attn_exp) */
            float den = sinks_host ? nd_attn_exp(sink, mu, bsub) : 0.0f;
            for (int64_t c = 0; c < dv; c++) acc[c] = 0.0f;
            if (bf16_steps) /* the probabilities are rounded, so the denominator comes first */
                for (int64_t j = 0; j < s; j++)
                    if (sc[j] == sc[j]) den += nd_attn_exp(sc[j], mu, bsub);
            for (int64_t j = 0; j < s; j++) {
                const int64_t kp = kpos_host[j];
                if (kp > qp || (window > 0 && qp - kp >= window)) continue;
                const float ex = nd_attn_exp(sc[j], mu, bsub);
                const float p = bf16_steps ? nd_attn_prob(ex, den, 1) : ex;
                if (!bf16_steps) den += ex;
                const float *vj = v + (j * hkv + kh) * dv;
                for (int64_t c = 0; c < dv; c++) acc[c] += p * vj[c];
            }
            for (int64_t c = 0; c < dv; c++) o[c] = bf16_steps ? acc[c] : acc[c] / den;
        }
    }
    free(sc);
    free(acc);
    return 0;
}
