/* nd_topk_select.h — the top-k selection of DeepSeek-V4's Lightning indexer, shared by the CPU
 * backend (kernels/cpu/cpu_indexer.c, a loop over queries) and the CUDA backend
 * (kernels/cuda/cuda_indexer.cu, one thread per query), so both pick the same entries in the same
 * positions, ties included.
 *
 * transformers picks with torch.topk on the CPU; torch's CPU kernel runs libstdc++'s
 * std::partial_sort (a heap selection) when k*64 <= n, else std::nth_element (introselect), on
 * (score, index) pairs with the comparator "a > b, NaN first". The functions below replay those
 * algorithms step by step (bits/stl_heap.h, bits/stl_algo.h); checked against torch.topk on 20000
 * tie-heavy random vectors (tests/kernels/test_ops_compress.c). */
#ifndef ND_TOPK_SELECT_H
#define ND_TOPK_SELECT_H

#include "nd_numerics.h"

typedef struct nd_pick { float v; int32_t i; } nd_pick;

ND_HD int nd_pick_gt(nd_pick a, nd_pick b) { return (isnan(a.v) && !isnan(b.v)) || a.v > b.v; }
ND_HD void nd_pick_swap(nd_pick *a, int64_t x, int64_t y) { nd_pick t = a[x]; a[x] = a[y]; a[y] = t; }

/* libstdc++ heap helpers (bits/stl_heap.h) */
ND_HD void nd_sel_push_heap(nd_pick *a, int64_t hole, int64_t top, nd_pick v) {
    int64_t parent = (hole - 1) / 2;
    while (hole > top && nd_pick_gt(a[parent], v)) { a[hole] = a[parent]; hole = parent; parent = (hole - 1) / 2; }
    a[hole] = v;
}
ND_HD void nd_sel_adjust_heap(nd_pick *a, int64_t hole, int64_t len, nd_pick v) {
    const int64_t top = hole;
    int64_t sc = hole;
    while (sc < (len - 1) / 2) {
        sc = 2 * (sc + 1);
        if (nd_pick_gt(a[sc], a[sc - 1])) sc--;
        a[hole] = a[sc];
        hole = sc;
    }
    if ((len & 1) == 0 && sc == (len - 2) / 2) { sc = 2 * (sc + 1); a[hole] = a[sc - 1]; hole = sc - 1; }
    nd_sel_push_heap(a, hole, top, v);
}
ND_HD void nd_sel_heap_select(nd_pick *a, int64_t middle, int64_t last) {
    if (middle >= 2)
        for (int64_t parent = (middle - 2) / 2;; parent--) {
            nd_sel_adjust_heap(a, parent, middle, a[parent]);
            if (parent == 0) break;
        }
    for (int64_t i = middle; i < last; i++)
        if (nd_pick_gt(a[i], a[0])) { nd_pick v = a[i]; a[i] = a[0]; nd_sel_adjust_heap(a, 0, middle, v); }
}
/* libstdc++ introselect (bits/stl_algo.h) */
ND_HD void nd_sel_median_to_first(nd_pick *a, int64_t r, int64_t x, int64_t y, int64_t z) {
    if (nd_pick_gt(a[x], a[y])) {
        if (nd_pick_gt(a[y], a[z])) nd_pick_swap(a, r, y);
        else if (nd_pick_gt(a[x], a[z])) nd_pick_swap(a, r, z);
        else nd_pick_swap(a, r, x);
    } else if (nd_pick_gt(a[x], a[z])) nd_pick_swap(a, r, x);
    else if (nd_pick_gt(a[y], a[z])) nd_pick_swap(a, r, z);
    else nd_pick_swap(a, r, y);
}
ND_HD int64_t nd_sel_partition(nd_pick *a, int64_t first, int64_t last, int64_t pivot) {
    for (;;) {
        while (nd_pick_gt(a[first], a[pivot])) first++;
        last--;
        while (nd_pick_gt(a[pivot], a[last])) last--;
        if (!(first < last)) return first;
        nd_pick_swap(a, first, last);
        first++;
    }
}
ND_HD void nd_sel_insertion_sort(nd_pick *a, int64_t first, int64_t last) {
    for (int64_t i = first + 1; i < last; i++) {
        nd_pick v = a[i];
        if (nd_pick_gt(v, a[first])) {
            for (int64_t j = i; j > first; j--) a[j] = a[j - 1];
            a[first] = v;
        } else {
            int64_t j = i;
            while (nd_pick_gt(v, a[j - 1])) { a[j] = a[j - 1]; j--; }
            a[j] = v;
        }
    }
}
ND_HD void nd_sel_nth_element(nd_pick *a, int64_t n, int64_t nth) {
    int64_t first = 0, last = n, depth = 0;
    for (int64_t m = n; m > 1; m >>= 1) depth++;
    depth = 2 * (depth > 0 ? depth : 0);   /* 2·floor(log2 n) */
    while (last - first > 3) {
        if (depth == 0) { nd_sel_heap_select(a + first, nth + 1 - first, last - first); nd_pick_swap(a, first, nth); return; }
        depth--;
        nd_sel_median_to_first(a, first, first + 1, first + (last - first) / 2, last - 1);
        const int64_t cut = nd_sel_partition(a, first + 1, last, first);
        if (cut <= nth) first = cut; else last = cut;
    }
    nd_sel_insertion_sort(a, first, last);
}

/* a[0..k) (k >= 1) as torch.topk's CPU kernel leaves the top k of a[0..n) (unsorted). */
ND_HD void nd_topk_select(nd_pick *a, int64_t n, int64_t k) {
    if (k * 64 <= n) nd_sel_heap_select(a, k, n);
    else nd_sel_nth_element(a, n, k - 1);
}

#endif
