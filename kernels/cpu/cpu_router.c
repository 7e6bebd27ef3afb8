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
#include "numerics/nd_router_rule.h"



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
    for (int64_t r = 0; r < t; r++) /* the rule itself: numerics/nd_router_rule.h, shared with CUDA */
        nd_router_row(logits + r * E, bias, E, K, cfg->score_func, G, TG, cfg->norm_topk, cfg->scaling, cfg->bf16_steps, sc, sel, gs,
                      ok, gok, idx + r * K, w + r * K);
    free(sc); free(sel); free(gs); free(ok); free(gok);
    return 0;
}
