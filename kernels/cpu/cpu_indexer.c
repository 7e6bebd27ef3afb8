/* cpu_indexer.c — DeepSeek-V4's Lightning indexer: per query, the index score of every compressed
 * entry whose window has closed, and the top-k of them (docs/reference-notes.md (d)), FP32.
 *
 * score = Σ_h relu(q_h·k)·scale·wts_h·wscale. Exact ties are common (an entry every head scores
 * <= 0 gets exactly 0), so which tied entry is picked matters. transformers picks with torch.topk
 * on the CPU over all entries, the closed ones scored and the others at -inf; torch's CPU kernel
 * runs libstdc++'s std::nth_element (or std::partial_sort when k*64 <= n) on (score, index) pairs
 * with the comparator "a > b, NaN first". The selection (numerics/nd_topk_select.h, shared with
 * CUDA) replays those algorithms step by step, so the picked set is torch's, ties included
 * (checked against torch.topk on 20000 tie-heavy random vectors); picks past the closed entries
 * become -1 as in transformers. */
#include <math.h>
#include <stdlib.h>
#include "cpu_compressed.h"
#include "numerics/nd_topk_select.h"

int nd_cpu_indexer_topk(nd_backend *b, const float *q, const float *k, const float *wts, int64_t t,
                        int64_t nc, int64_t h, int64_t c, float scale, float wscale, const int32_t *qpos_host,
                        int64_t rate, int64_t topk, float *scores, int32_t *idx, nd_err *e) {
    (void)b;
    const char *op = "indexer_topk";
    ND_CPU_SIZES(e, op, t, h, c);
    ND_CPU_SIZES(e, op, nc, c);
    ND_CPU_SIZES(e, op, t, nc);
    ND_CPU_SIZES(e, op, t, topk);
    ND_CPU_REQUIRE(rate > 0, e, op, "compress rate %lld must be positive", (long long)rate);
    ND_CPU_REQUIRE(topk <= nc, e, op, "top-k %lld exceeds the %lld entries", (long long)topk, (long long)nc);
    ND_CPU_REQUIRE(nc <= INT32_MAX, e, op, "too many entries");
    if (t == 0) return 0;
    ND_CPU_REQUIRE(qpos_host && (nc == 0 || scores) && (topk == 0 || idx) && (nc * h * c == 0 || (q && k && wts)), e, op, "NULL buffer");
    nd_pick *a = malloc((size_t)(nc > 0 ? nc : 1) * sizeof *a);
    if (!a) return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op);
    for (int64_t i = 0; i < t; i++) {
        int64_t ready = (qpos_host[i] + 1) / rate;
        if (ready > nc) ready = nc;
        float *srow = scores + i * nc;
        for (int64_t w = 0; w < nc; w++) {
            float acc = 0.0f;
            for (int64_t hh = 0; hh < h && w < ready; hh++) {
                const float *qh = q + (i * h + hh) * c, *kw = k + w * c;
                float dot = 0.0f;
                for (int64_t x = 0; x < c; x++) dot += qh[x] * kw[x];
                const float rel = (dot > 0.0f ? dot : 0.0f) * scale;
                acc += rel * (wts[i * h + hh] * wscale);
            }
            srow[w] = acc;
            a[w] = (nd_pick){w < ready ? acc : -INFINITY, (int32_t)w};
        }
        if (topk == 0) continue;
        nd_topk_select(a, nc, topk);
        for (int64_t s = 0; s < topk; s++) idx[i * topk + s] = a[s].i < ready ? a[s].i : -1;
    }
    free(a);
    return 0;
}
