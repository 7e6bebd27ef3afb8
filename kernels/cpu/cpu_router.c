/* cpu_router.c — MoE router: scores, biased selection with optional expert groups, weights.
 *
 * score = softmax over all experts | sigmoid | sqrt(softplus) (torch softplus: x > 20 -> x);
 * selection ranks score + bias (bias NULL = 0), highest first, ties to the lower expert index,
 * NaN below every number. Groups (DeepSeek-V3): experts split into n_group contiguous groups,
 * group score = sum of its top-2 selection scores (top-1 if a group has one expert), the
 * topk_group best groups (ties to the lower group) stay eligible, the others are excluded.
 * Weights are the unbiased scores of the picked experts, divided by (their sum + 1e-20) when
 * norm_topk, then times scaling. idx/w are in descending selection order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_internal.h"
#include "numerics/nd_numerics.h"

/* 1 if (a, ia) ranks before (b, ib). */
static int ranks_before(float a, int64_t ia, float bv, int64_t ib) {
    const int na = a != a, nb = bv != bv;
    if (na || nb) return na && nb ? ia < ib : nb;
    return a > bv || (a == bv && ia < ib);
}


int nd_cpu_router_topk(nd_backend *b, const float *logits, const float *bias, int64_t t,
                       const nd_router_cfg *cfg, int32_t *idx, float *w, nd_err *e) {
    (void)b;
    const char *op = "router_topk";
    ND_CPU_REQUIRE(cfg, e, op, "NULL config");
    const int E = cfg->n_experts, K = cfg->top_k, G = cfg->n_group, TG = cfg->topk_group;
    ND_CPU_SIZES(e, op, t, E);
    ND_CPU_REQUIRE(E > 0 && K > 0 && K <= E, e, op, "top_k %d must be in [1, n_experts %d]", K, E);
    ND_CPU_REQUIRE(cfg->score_func >= ND_SCORE_SOFTMAX && cfg->score_func <= ND_SCORE_SQRTSOFTPLUS, e, op,
                   "unknown score function %d", cfg->score_func);
    ND_CPU_REQUIRE(G >= 0 && TG >= 0, e, op, "negative group counts %d/%d", G, TG);
    if (G > 0) {
        ND_CPU_REQUIRE(E % G == 0, e, op, "n_experts %d not divisible by n_group %d", E, G);
        ND_CPU_REQUIRE(TG >= 1 && TG <= G, e, op, "topk_group %d must be in [1, n_group %d]", TG, G);
        ND_CPU_REQUIRE((int64_t)TG * (E / G) >= K, e, op, "topk_group %d x group size %d < top_k %d", TG, E / G, K);
    }
    if (t == 0) return 0;
    ND_CPU_REQUIRE(logits && idx && w, e, op, "NULL buffer");
    float *sc = malloc((size_t)E * sizeof *sc), *sel = malloc((size_t)E * sizeof *sel);
    float *gs = malloc((size_t)(G > 0 ? G : 1) * sizeof *gs);
    unsigned char *ok = malloc((size_t)E), *gok = malloc((size_t)(G > 0 ? G : 1));
    if (!sc || !sel || !gs || !ok || !gok) {
        free(sc); free(sel); free(gs); free(ok); free(gok);
        return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op);
    }
    for (int64_t r = 0; r < t; r++) {
        const float *lg = logits + r * E;
        if (cfg->score_func == ND_SCORE_SOFTMAX) {
            float mx = -INFINITY, sum = 0.0f;
            for (int x = 0; x < E; x++) if (lg[x] > mx) mx = lg[x];
            for (int x = 0; x < E; x++) { sc[x] = expf(lg[x] - mx); sum += sc[x]; }
            for (int x = 0; x < E; x++) sc[x] /= sum;
        } else {
            for (int x = 0; x < E; x++) sc[x] = nd_router_score(lg[x], cfg->score_func, 0.0f); /* one definition: nd_numerics.h */
        }
        for (int x = 0; x < E; x++) { sel[x] = sc[x] + (bias ? bias[x] : 0.0f); ok[x] = 1; }
        if (G > 0) {
            const int gsz = E / G;
            for (int g = 0; g < G; g++) {       /* sum of the group's top-2 selection scores */
                int b1 = -1, b2 = -1;
                for (int x = g * gsz; x < (g + 1) * gsz; x++) {
                    if (b1 < 0 || ranks_before(sel[x], x, sel[b1], b1)) { b2 = b1; b1 = x; }
                    else if (b2 < 0 || ranks_before(sel[x], x, sel[b2], b2)) b2 = x;
                }
                gs[g] = sel[b1] + (b2 >= 0 ? sel[b2] : 0.0f);
                gok[g] = 0;
            }
            for (int p = 0; p < TG; p++) {
                int best = -1;
                for (int g = 0; g < G; g++)
                    if (!gok[g] && (best < 0 || ranks_before(gs[g], g, gs[best], best))) best = g;
                if (best >= 0) gok[best] = 1; /* TG <= G is checked above; keeps the compiler sure */
            }
            for (int x = 0; x < E; x++) ok[x] = gok[x / gsz];
        }
        int32_t *ir = idx + r * K;
        float *wr = w + r * K;
        for (int p = 0; p < K; p++) {
            int best = -1;
            for (int x = 0; x < E; x++)
                if (ok[x] && (best < 0 || ranks_before(sel[x], x, sel[best], best))) best = x;
            ok[best] = 0;
            ir[p] = best;
            wr[p] = sc[best];
        }
        if (cfg->norm_topk) {
            float sum = 0.0f;
            for (int p = 0; p < K; p++) sum += wr[p];
            sum += 1e-20f;
            for (int p = 0; p < K; p++) wr[p] /= sum;
        }
        for (int p = 0; p < K; p++) wr[p] *= cfg->scaling;
    }
    free(sc); free(sel); free(gs); free(ok); free(gok);
    return 0;
}
