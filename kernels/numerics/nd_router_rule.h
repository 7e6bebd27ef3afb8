/* nd_router_rule.h — the MoE router's selection rule for one token, shared by the CPU backend
 * (a loop over tokens) and the CUDA backend (one thread per token), so both pick the same experts
 * in the same order from the same scores.
 *
 * scores: softmax over all experts, sigmoid, or sqrt(softplus) (nd_router_score); selection on
 * score + bias; with groups (DeepSeek-V3), a group's score is the sum of its top-2 selection
 * scores and only the best topk_group groups stay eligible; top-k by selection score, ties to the
 * lower index, NaN below every number; weights are the picked scores, divided by their sum
 * (+1e-20) when norm is set, then times scaling. Every sum and product is a single rounded
 * operation (no FMA contraction) on both backends.
 * bf16 (the reference path's transformers numerics, DeepseekV4TopKRouter / HashRouter on a BF16
 * model): the logits are BF16 already (the caller rounds the gate GEMM), each score function step
 * is rounded to BF16 (softplus, then sqrt; sigmoid; softmax's result), selection adds the FP32
 * bias to the BF16 score, and the weights are BF16 tensor ops: the sum of the picked scores, the
 * +1e-20, the division and the scaling each rounded. */
#ifndef ND_ROUTER_RULE_H
#define ND_ROUTER_RULE_H

#include "nd_numerics.h"

#ifdef __CUDA_ARCH__ /* device code: the intrinsics forbid FMA contraction */
#define ND_RADD(a, b) __fadd_rn((a), (b))
#define ND_RMUL(a, b) __fmul_rn((a), (b))
#define ND_RDIV(a, b) __fdiv_rn((a), (b))
#else
#define ND_RADD(a, b) ((a) + (b))
#define ND_RMUL(a, b) ((a) * (b))
#define ND_RDIV(a, b) ((a) / (b))
#endif

/* a ranks before b: larger first, ties to the lower index, NaN last */
ND_HD int nd_router_ranks_before(float a, int ia, float b, int ib) {
    const int na = a != a, nb = b != b;
    if (na || nb) return na && nb ? ia < ib : nb;
    return a > b || (a == b && ia < ib);
}

/* score of one logit with the BF16 steps when bf16 is set (softmax: exp(x - max) here, the
 * division by the row sum is the caller's) */
ND_HD float nd_router_score_steps(float x, int func, float row_max, int bf16) {
    if (!bf16 || func == 0) return nd_router_score(x, func, row_max);
    if (func == 1) return nd_bf16_round(1.0f / (1.0f + expf(-x)));
    return nd_bf16_round(sqrtf(nd_bf16_round(x > 20.0f ? x : log1pf(expf(x)))));
}

/* the picked scores w [K] -> routing weights: normalised (norm) and scaled, rounded to BF16 at
 * every step when bf16 is set */
ND_HD void nd_router_weights(float *w, int K, int norm, float scaling, int bf16) {
    if (norm) {
        float sum = 0.0f;
        for (int p = 0; p < K; p++) sum = ND_RADD(sum, w[p]);
        if (bf16) sum = nd_bf16_round(sum);
        sum = ND_RADD(sum, 1e-20f);
        if (bf16) sum = nd_bf16_round(sum);
        for (int p = 0; p < K; p++) w[p] = bf16 ? nd_bf16_round(ND_RDIV(w[p], sum)) : ND_RDIV(w[p], sum);
    }
    for (int p = 0; p < K; p++) w[p] = bf16 ? nd_bf16_round(ND_RMUL(w[p], scaling)) : ND_RMUL(w[p], scaling);
}

/* One token. lg [E] logits, bias [E] or NULL; scratch sc, sel [E], gs [G], ok [E], gok [G];
 * out idx [K], w [K]. The caller has validated E, K, G, TG (backend.h's nd_router_cfg rules). */
ND_HD void nd_router_row(const float *lg, const float *bias, int E, int K, int func, int G, int TG, int norm,
                         float scaling, int bf16, float *sc, float *sel, float *gs, unsigned char *ok, unsigned char *gok,
                         int32_t *idx, float *w) {
    if (func == 0) { /* softmax */
        float mx = -INFINITY, sum = 0.0f;
        for (int x = 0; x < E; x++) if (lg[x] > mx) mx = lg[x];
        for (int x = 0; x < E; x++) { sc[x] = nd_router_score(lg[x], 0, mx); sum = ND_RADD(sum, sc[x]); }
        for (int x = 0; x < E; x++) sc[x] = bf16 ? nd_bf16_round(ND_RDIV(sc[x], sum)) : ND_RDIV(sc[x], sum);
    } else {
        for (int x = 0; x < E; x++) sc[x] = nd_router_score_steps(lg[x], func, 0.0f, bf16);
    }
    for (int x = 0; x < E; x++) { sel[x] = ND_RADD(sc[x], bias ? bias[x] : 0.0f); ok[x] = 1; }
    if (G > 0) {
        const int gsz = E / G;
        for (int g = 0; g < G; g++) {
            int b1 = -1, b2 = -1;
            for (int x = g * gsz; x < (g + 1) * gsz; x++) {
                if (b1 < 0 || nd_router_ranks_before(sel[x], x, sel[b1], b1)) { b2 = b1; b1 = x; }
                else if (b2 < 0 || nd_router_ranks_before(sel[x], x, sel[b2], b2)) b2 = x;
            }
            gs[g] = ND_RADD(sel[b1], b2 >= 0 ? sel[b2] : 0.0f);
            gok[g] = 0;
        }
        for (int p = 0; p < TG; p++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!gok[g] && (best < 0 || nd_router_ranks_before(gs[g], g, gs[best], best))) best = g;
            if (best >= 0) gok[best] = 1;
        }
        for (int x = 0; x < E; x++) ok[x] = gok[x / gsz];
    }
    for (int p = 0; p < K; p++) {
        int best = -1;
        for (int x = 0; x < E; x++)
            if (ok[x] && (best < 0 || nd_router_ranks_before(sel[x], x, sel[best], best))) best = x;
        if (best < 0) best = 0; /* unreachable: K <= eligible experts is validated by the caller */
        ok[best] = 0;
        idx[p] = best;
        w[p] = sc[best];
    }
    nd_router_weights(w, K, norm, scaling, bf16);
}

#endif
