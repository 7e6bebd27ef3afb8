/* nd_bf16_steps.h — the BF16 roundings transformers' eager forward of a BF16 model takes inside
 * a stage, for the reference path's `transformers` numerics (nvfp4dbg trace --ref-numerics
 * transformers). The default reference path (SPEC §4) computes a stage in FP32 and rounds its
 * output once; these helpers are the intermediate roundings, one definition for the CPU and the
 * CUDA backends. Each mirrors a line of transformers 5.25 (named at each helper); a tensor op on
 * BF16 tensors there computes in FP32 and rounds its result to BF16 once (torch's opmath).
 */
#ifndef ND_BF16_STEPS_H
#define ND_BF16_STEPS_H

#include "nd_numerics.h"

/* single rounded operations (no FMA contraction on the device, as the CUDA kernels write them) */
#ifdef __CUDA_ARCH__
#define ND_SADD(a, b) __fadd_rn((a), (b))
#define ND_SSUB(a, b) __fsub_rn((a), (b))
#define ND_SMUL(a, b) __fmul_rn((a), (b))
#define ND_SDIV(a, b) __fdiv_rn((a), (b))
#else
#define ND_SADD(a, b) ((a) + (b))
#define ND_SSUB(a, b) ((a) - (b))
#define ND_SMUL(a, b) ((a) * (b))
#define ND_SDIV(a, b) ((a) / (b))
#endif

/* ---- RMSNorm: y = norm(x) with r = rsqrt(mean x² + eps) ------------------------------- */
enum nd_norm_steps {
    ND_NORM_FP32 = 0,        /* (x·r)·w in FP32; the caller rounds once (SPEC §4; DeepseekV4RMSNorm,
                              * whose `(weight * h).to(dtype)` rounds once too) */
    ND_NORM_BF16_THEN_W = 1, /* LlamaRMSNorm / DeepseekV3RMSNorm: `weight * h.to(bf16)`: bf16(x·r), then
                              * the product with the BF16 weight rounded again */
    ND_NORM_RSQRT_BF16 = 2,  /* DeepseekV4UnweightedRMSNorm: `x * rsqrt(...).to(bf16)`: r rounded to
                              * BF16, the product rounded (w, if any, multiplies after, in FP32) */
};

/* the per-row factor as a variant uses it */
ND_HD float nd_norm_factor(float r, int steps) { return steps == ND_NORM_RSQRT_BF16 ? nd_bf16_round(r) : r; }

/* one element given the row's factor (already through nd_norm_factor); w_i = 1 without a weight */
ND_HD float nd_norm_elem(float x, float r, float w_i, int has_w, int steps) {
    if (steps == ND_NORM_BF16_THEN_W) {
        const float h = nd_bf16_round(ND_SMUL(x, r));
        return has_w ? nd_bf16_round(ND_SMUL(h, w_i)) : h;
    }
    if (steps == ND_NORM_RSQRT_BF16) {
        const float h = nd_bf16_round(ND_SMUL(x, r));
        return has_w ? ND_SMUL(h, w_i) : h;
    }
    return has_w ? ND_SMUL(ND_SMUL(x, r), w_i) : ND_SMUL(x, r);
}

/* ---- rotary embedding ------------------------------------------------------------------- */
enum nd_rope_steps {
    ND_ROPE_FP32 = 0,         /* FP32 cos/sin and rotation (SPEC §4) */
    ND_ROPE_BF16_TRIG = 1,    /* DeepseekV4 apply_rotary_pos_emb: cos/sin rounded to BF16 (the rotary
                               * module returns `cos.to(x.dtype)`), rotation in FP32 (`rope.float()`) */
    ND_ROPE_BF16_PRODUCTS = 2 /* Llama / DeepseekV3: cos/sin in BF16 and `q*cos`, `rotate_half(q)*sin`
                               * and their sum each rounded to BF16 (V3's interleaved variant
                               * `q1*cos - q2*sin` rounds the same three times) */
};

ND_HD float nd_rope_trig(float v, int steps) { return steps == ND_ROPE_FP32 ? v : nd_bf16_round(v); }

/* rotate the pair (a, b) by the angle whose (already stepped) cos is c and sin s:
 * a' = a·c - b·s, b' = a·s + b·c */
ND_HD void nd_rope_pair(float a, float b, float c, float s, int steps, float *ya, float *yb) {
    if (steps == ND_ROPE_BF16_PRODUCTS) {
        *ya = nd_bf16_round(ND_SSUB(nd_bf16_round(ND_SMUL(a, c)), nd_bf16_round(ND_SMUL(b, s))));
        *yb = nd_bf16_round(ND_SADD(nd_bf16_round(ND_SMUL(b, c)), nd_bf16_round(ND_SMUL(a, s))));
        return;
    }
    *ya = ND_SSUB(ND_SMUL(a, c), ND_SMUL(b, s));
    *yb = ND_SADD(ND_SMUL(a, s), ND_SMUL(b, c));
}

/* ---- eager attention: `matmul(q, k^T) * scaling`, softmax in FP32 `.to(bf16)`, `matmul(p, v)` */
/* score from the FP32 dot product (bf16_steps: the BF16 matmul result, then the BF16 product) */
ND_HD float nd_attn_score(float dot, float scale, int bf16_steps) {
    return bf16_steps ? nd_bf16_round(ND_SMUL(nd_bf16_round(dot), scale)) : ND_SMUL(dot, scale);
}
/* exp(s - mu) of a score or a sink. With sinks, GptOssAttention's eager attention subtracts the max of
 * the concatenated logits on BF16 tensors (`combined_logits - combined_logits.max(...)`): bf16_sub
 * rounds the difference to BF16 before the exponential (attention bf16_steps == 2; the DeepSeek-V4
 * fixture's forward does not, bf16_steps == 1) */
ND_HD float nd_attn_exp(float s, float mu, int bf16_sub) {
    const float d = ND_SSUB(s, mu);
    return expf(bf16_sub ? nd_bf16_round(d) : d);
}
/* probability exp(s - mu) / den as the p·v matmul reads it */
ND_HD float nd_attn_prob(float ex, float den, int bf16_steps) {
    return bf16_steps ? nd_bf16_round(ND_SDIV(ex, den)) : ND_SDIV(ex, den);
}

/* ---- SwiGLU: `act_fn(gate) * up` on BF16 tensors: silu rounded, then the product ---------- */
ND_HD float nd_swiglu_elem(float g, float v, float limit, int bf16_steps) {
    if (limit > 0.0f) {
        g = fminf(g, limit);              /* gate: upper clamp only */
        v = fminf(fmaxf(v, -limit), limit);
    }
    const float s = ND_SDIV(g, ND_SADD(1.0f, expf(-g))); /* silu(g) = g * sigmoid(g) */
    return ND_SMUL(bf16_steps ? nd_bf16_round(s) : s, v);
}

/* ---- gpt-oss SwiGLU (GptOssExperts._apply_gate): `gate.clamp(max=limit)`, `up.clamp(-limit, limit)`,
 * `glu = gate * sigmoid(gate * alpha)`, `(up + 1) * glu`. bf16_steps: α·g, the sigmoid, g·σ and up + 1
 * each rounded to BF16 (the caller rounds the product). */
ND_HD float nd_swiglu_oai_elem(float g, float v, float alpha, float limit, int bf16_steps) {
    if (limit > 0.0f) {
        g = fminf(g, limit);
        v = fminf(fmaxf(v, -limit), limit);
    }
    float ag = ND_SMUL(g, alpha);
    if (bf16_steps) ag = nd_bf16_round(ag);
    float sg = ND_SDIV(1.0f, ND_SADD(1.0f, expf(-ag)));
    if (bf16_steps) sg = nd_bf16_round(sg);
    float glu = ND_SMUL(g, sg), u = ND_SADD(v, 1.0f);
    if (bf16_steps) { glu = nd_bf16_round(glu); u = nd_bf16_round(u); }
    return ND_SMUL(u, glu);
}

/* ---- DeepSeek-V4 hyper-connection post: `post.to(bf16) * y + matmul(comb.to(bf16)^T, X)` ----
 * bf16_steps: post and comb rounded to BF16, the product post·y rounded, the mix Σ_i comb·X (a BF16
 * matmul: FP32 sum) rounded, and their sum rounded by the caller. */
ND_HD float nd_hc_post_coef(float v, int bf16_steps) { return bf16_steps ? nd_bf16_round(v) : v; }
ND_HD float nd_hc_post_join(float py, float mix, int bf16_steps) {
    return bf16_steps ? ND_SADD(nd_bf16_round(py), nd_bf16_round(mix)) : ND_SADD(py, mix);
}

/* ---- MoE combine: `proj_out * sample_weights` is a BF16 product when the weights are BF16
 * (DeepSeek-V4's router), an FP32 one when they are FP32 (V3's); the sum over the top-k is FP32 */
ND_HD float nd_combine_term(float w, float x, int bf16_products) {
    return bf16_products ? nd_bf16_round(ND_SMUL(w, x)) : ND_SMUL(w, x);
}

#endif /* ND_BF16_STEPS_H */
