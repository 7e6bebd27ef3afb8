/* nd_gdn.h — the elementwise math of Qwen3-Next's Gated DeltaNet and gated attention (ops
 * gate_mul, causal_conv1d, gated_delta_rule of kernels/backend.h), one definition for the CPU and
 * the CUDA backends. Products and sums go through ND_SMUL/ND_SADD (no FMA contraction on the
 * device) so that both backends round the same way; exp/log come from each side's libm.
 *
 * The math follows transformers 5.17's Qwen3NextGatedDeltaNet / Qwen3NextAttention (facts, not
 * code): beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias) in FP32; q and k L2-normalised
 * per head in FP32 (x * rsqrt(Σx² + 1e-6)), q times head_dim^-0.5; the recurrence per value head
 *   S = S * exp(g_t);  delta = (v_t - Sᵀk_t) * beta_t;  S = S + k_t deltaᵀ;  o_t = Sᵀq_t
 * with S [k_dim, v_dim] starting at zero (prefill). transformers' prefill runs the chunked form of
 * the same recurrence (torch_chunk_gated_delta_rule, FP32): equal in exact arithmetic, FP32
 * rounding apart.
 */
#ifndef ND_GDN_H
#define ND_GDN_H

#include "nd_bf16_steps.h"

enum nd_gate_act { ND_GATE_SIGMOID = 0, ND_GATE_SILU = 1, ND_GATE_GELU_TANH = 2, ND_GATE_N };

ND_HD float nd_sigmoidf(float x) { return ND_SDIV(1.0f, ND_SADD(1.0f, expf(-x))); }
ND_HD float nd_siluf(float x) { return ND_SDIV(x, ND_SADD(1.0f, expf(-x))); }
/* GELU, tanh approximation (torch gelu(approximate="tanh"), transformers' gelu_pytorch_tanh: Gemma's MLP):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in FP32 as torch's CPU and CUDA kernels compute it */
ND_HD float nd_gelu_tanhf(float x) {
    const float beta = 0.7978845608028654f, kappa = 0.044715f;
    const float inner = ND_SMUL(beta, ND_SADD(x, ND_SMUL(kappa, ND_SMUL(ND_SMUL(x, x), x))));
    return ND_SMUL(ND_SMUL(0.5f, x), ND_SADD(1.0f, tanhf(inner)));
}
/* torch.nn.functional.softplus (beta 1, threshold 20) */
ND_HD float nd_softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* x · act(g); bf16_act: act(g) rounded to BF16 first (`x * torch.sigmoid(gate)` on BF16 tensors);
 * without it the activation stays FP32 (Qwen3NextRMSNormGated: `h * silu(gate.to(float32))`) */
ND_HD float nd_gate_elem(float x, float g, int act, int bf16_act) {
    float a = act == ND_GATE_SILU ? nd_siluf(g) : act == ND_GATE_GELU_TANH ? nd_gelu_tanhf(g) : nd_sigmoidf(g);
    if (bf16_act) a = nd_bf16_round(a);
    return ND_SMUL(x, a);
}

/* activation after the causal conv (SiLU or none); bf16_steps: the conv output is a BF16 tensor
 * before the activation (F.conv1d on BF16, then ACT2FN on BF16) */
ND_HD float nd_conv_act(float acc, int silu, int bf16_steps) {
    if (bf16_steps) acc = nd_bf16_round(acc);
    return silu ? nd_siluf(acc) : acc;
}

/* the per-token, per-value-head decay factor exp(g) and beta; bf16_steps: beta is the BF16
 * `b.sigmoid()` of a BF16 b (g is FP32 in every model: `A_log.float()`, `a.float() + dt_bias`) */
ND_HD float nd_gdn_decay(float a, float a_log, float dt_bias) {
    const float g = ND_SMUL(-expf(a_log), nd_softplusf(ND_SADD(a, dt_bias)));
    return expf(g);
}
ND_HD float nd_gdn_beta(float b, int bf16_steps) {
    const float s = nd_sigmoidf(b);
    return bf16_steps ? nd_bf16_round(s) : s;
}

/* 1 / sqrt(Σ x_i² + 1e-6) over n values, summed in FP32 in increasing i */
ND_HD float nd_l2_inv(const float *x, int64_t n) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss = ND_SADD(ss, ND_SMUL(x[i], x[i]));
    return ND_SDIV(1.0f, sqrtf(ND_SADD(ss, 1e-6f)));
}

#endif /* ND_GDN_H */
