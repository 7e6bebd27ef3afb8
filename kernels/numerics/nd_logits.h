/* nd_logits.h — the head probe's per-position figures, shared by the CPU and CUDA logits_kl ops.
 *
 * For one position (a row of V logits, ref a and prod b): the top-1 of each side is the first index
 * of its largest value (NaN never counts as larger); when either maximum is not finite the position
 * is not counted (top indices -1, kl NaN). Otherwise, in double,
 *   la_j = (a_j - max a) - log Σ exp(a_k - max a)     (the same for b)
 *   KL(softmax a || softmax b) = Σ_j exp(la_j) · (la_j - lb_j)
 * and each side's log-normaliser lse = max + log Σ exp(x_k - max) (the next token's negative
 * log-likelihood is lse - x_target: the perplexity of the prompt on each path).
 * A NaN logit makes that position's KL NaN (it is counted). The CPU sums in increasing j; the CUDA
 * op sums in a tree, so the two agree to rounding of the double sums, the top indices exactly. */
#ifndef ND_LOGITS_H
#define ND_LOGITS_H

#include <stdint.h>
#include "nd_numerics.h"

typedef struct nd_logits_row {
    double kl;                 /* KL(ref || prod) of the softmaxes; NaN when not counted */
    double lse_ref, lse_prod;  /* log Σ exp of each side's logits (max + log Σ exp(x - max)): a
                                * token's log-probability is its logit minus this; NaN when not counted */
    int32_t top_ref, top_prod; /* first index of each side's maximum; -1 when not counted */
} nd_logits_row;

/* (v, j) beats the current maximum (m, im): larger, or equal at a lower index (NaN never beats) */
ND_HD int nd_logits_beats(float v, int64_t j, float m, int64_t im) { return v > m || (v == m && j < im); }

/* one position's KL term: la = (a - ma) - lza, lb = (b - mb) - lzb; exp(la) · (la - lb) */
ND_HD double nd_logits_kl_term(float a, float b, double ma, double lza, double mb, double lzb) {
    const double la = (double)a - ma - lza, lb = (double)b - mb - lzb;
    return exp(la) * (la - lb);
}

#endif
