/* cpu_indexer.c — DeepSeek-V4's Lightning indexer: per query, the index score of every compressed
 * entry whose window has closed, and the top-k of them (docs/reference-notes.md (d)), FP32.
 *
 * score = Σ_h relu(q_h·k)·scale·wts_h·wscale. Exact ties are common (an entry every head scores
 * <= 0 gets exactly 0), so which tied entry is picked matters. transformers picks with torch.topk
 * on the CPU over all entries, the closed ones scored and the others at -inf; torch's CPU kernel
 * runs libstdc++'s std::nth_element (or std::partial_sort when k*64 <= n) on (score, index) pairs
 * with the comparator "a > b, NaN first". The selection below replays those algorithms step by
 * step, so the picked set is torch's, ties included (checked against torch.topk on 20000 tie-heavy
 * random vectors); picks past the closed entries become -1 as in transformers. */
#include <math.h>
#include <stdlib.h>
#include "cpu_compressed.h"

typedef struct { float v; int32_t i; } pick;

static int gt(pick a, pick b) { return (isnan(a.v) && !isnan(b.v)) || a.v > b.v; }
static void swp(pick *a, int64_t x, int64_t y) { pick t = a[x]; a[x] = a[y]; a[y] = t; }

/* libstdc++ heap helpers (bits/stl_heap.h) */
static void push_heap(pick *a, int64_t hole, int64_t top, pick v) {
    int64_t parent = (hole - 1) / 2;
    while (hole > top && gt(a[parent], v)) { a[hole] = a[parent]; hole = parent; parent = (hole - 1) / 2; }
    a[hole] = v;
}
static void adjust_heap(pick *a, int64_t hole, int64_t len, pick v) {
    const int64_t top = hole;
    int64_t sc = hole;
    while (sc < (len - 1) / 2) {
        sc = 2 * (sc + 1);
        if (gt(a[sc], a[sc - 1])) sc--;
        a[hole] = a[sc];
        hole = sc;
    }
    if ((len & 1) == 0 && sc == (len - 2) / 2) { sc = 2 * (sc + 1); a[hole] = a[sc - 1]; hole = sc - 1; }
    push_heap(a, hole, top, v);
}
static void heap_select(pick *a, int64_t middle, int64_t last) {
    if (middle >= 2)
        for (int64_t parent = (middle - 2) / 2;; parent--) {
            adjust_heap(a, parent, middle, a[parent]);
            if (parent == 0) break;
        }
    for (int64_t i = middle; i < last; i++)
        if (gt(a[i], a[0])) { pick v = a[i]; a[i] = a[0]; adjust_heap(a, 0, middle, v); }
}
/* libstdc++ introselect (bits/stl_algo.h) */
static void median_to_first(pick *a, int64_t r, int64_t x, int64_t y, int64_t z) {
    if (gt(a[x], a[y])) {
        if (gt(a[y], a[z])) swp(a, r, y); else if (gt(a[x], a[z])) swp(a, r, z); else swp(a, r, x);
    } else if (gt(a[x], a[z])) swp(a, r, x);
    else if (gt(a[y], a[z])) swp(a, r, z);
    else swp(a, r, y);
}
static int64_t partition(pick *a, int64_t first, int64_t last, int64_t pivot) {
    for (;;) {
        while (gt(a[first], a[pivot])) first++;
        last--;
        while (gt(a[pivot], a[last])) last--;
        if (!(first < last)) return first;
        swp(a, first, last);
        first++;
    }
}
static void insertion_sort(pick *a, int64_t first, int64_t last) {
    for (int64_t i = first + 1; i < last; i++) {
        pick v = a[i];
        if (gt(v, a[first])) {
            for (int64_t j = i; j > first; j--) a[j] = a[j - 1];
            a[first] = v;
        } else {
            int64_t j = i;
            while (gt(v, a[j - 1])) { a[j] = a[j - 1]; j--; }
            a[j] = v;
        }
    }
}
static void nth_element(pick *a, int64_t n, int64_t nth) {
    int64_t first = 0, last = n, depth = 0;
    for (int64_t m = n; m > 1; m >>= 1) depth++;
    depth = 2 * (depth > 0 ? depth : 0);   /* 2·floor(log2 n) */
    while (last - first > 3) {
        if (depth == 0) { heap_select(a + first, nth + 1 - first, last - first); swp(a, first, nth); return; }
        depth--;
        median_to_first(a, first, first + 1, first + (last - first) / 2, last - 1);
        const int64_t cut = partition(a, first + 1, last, first);
        if (cut <= nth) first = cut; else last = cut;
    }
    insertion_sort(a, first, last);
}

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
    pick *a = malloc((size_t)(nc > 0 ? nc : 1) * sizeof *a);
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
            a[w] = (pick){w < ready ? acc : -INFINITY, (int32_t)w};
        }
        if (topk == 0) continue;
        if (topk * 64 <= nc) heap_select(a, topk, nc);
        else nth_element(a, nc, topk - 1);
        for (int64_t s = 0; s < topk; s++) idx[i * topk + s] = a[s].i < ready ? a[s].i : -1;
    }
    free(a);
    return 0;
}
