/* cuda_moe.cu — MoE router top-k, dispatch (gather rows) and combine (weighted scatter-add).
 *
 * The router runs one thread per token in the CPU reference's order (kernels/cpu/cpu_router.c:
 * ties to the lower index, NaN below every number, groups by the sum of their top-2), so idx
 * differs from the CPU only where expf/log1pf round a last bit differently and two experts are
 * that close. The combine keeps the CPU's order of accumulation exactly: rows that land on the
 * same destination are added in increasing r (a host-built per-destination list), with no FMA. */
#include "cuda_common.cuh"
#include "numerics/nd_router_rule.h"
#include "numerics/nd_bf16_steps.h"
#include <stdlib.h>

/* scratch per token: sc [E], sel [E], ok [E] bytes, gs [G] and gok [G] bytes. */
__global__ void router_kernel(const float *__restrict__ logits, const float *__restrict__ bias, int64_t t, int E,
                              int K, int func, int G, int TG, int norm, float scaling, int bf16, float *sc_all, float *sel_all,
                              float *gs_all, uint8_t *ok_all, uint8_t *gok_all, int32_t *__restrict__ idx,
                              float *__restrict__ w) {
    const int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (r >= t) return;
    const int Gs = G > 0 ? G : 1;
    nd_router_row(logits + r * E, bias, E, K, func, G, TG, norm, scaling, bf16, sc_all + r * E, sel_all + r * E,
                  gs_all + r * Gs, ok_all + r * E, gok_all + r * Gs, idx + r * K, w + r * K);
}

int nd_cuda_router_topk(nd_backend *b, const float *logits, const float *bias, int64_t t, const nd_router_cfg *cfg,
                        int32_t *idx, float *w, nd_err *e) {
    if (!cfg) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: router_topk: NULL config");
    const int E = cfg->n_experts, K = cfg->top_k, G = cfg->n_group, TG = cfg->topk_group;
    if (t < 0 || E <= 0 || K <= 0 || K > E)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: router_topk: top_k %d must be in [1, n_experts %d]", K, E);
    if (cfg->score_func < ND_SCORE_SOFTMAX || cfg->score_func > ND_SCORE_SQRTSOFTPLUS)
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: router_topk: unknown score function %d", cfg->score_func);
    if (G < 0 || TG < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: router_topk: negative group counts %d/%d", G, TG);
    if (G > 0 && (E % G != 0 || TG < 1 || TG > G || (int64_t)TG * (E / G) < K))
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: router_topk: groups %d/%d do not fit %d experts, top_k %d", G, TG, E, K);
    if (t == 0) return 0;
    const int Gs = G > 0 ? G : 1;
    const size_t f = ((size_t)t * E * 4 + 255) & ~(size_t)255, g = ((size_t)t * Gs * 4 + 255) & ~(size_t)255;
    const size_t o = ((size_t)t * E + 255) & ~(size_t)255;
    void *s;
    ND_TRY(nd_cuda_scratch(b, 2 * f + g + o + (size_t)t * Gs, &s, e));
    char *p = (char *)s;
    float *sc = (float *)p, *sel = (float *)(p + f), *gs = (float *)(p + 2 * f);
    uint8_t *ok = (uint8_t *)(p + 2 * f + g), *gok = (uint8_t *)(p + 2 * f + g + o);
    router_kernel<<<nd_cuda_blocks(t, 128), 128, 0, nd_cu(b)->stream>>>(logits, bias, t, E, K, cfg->score_func, G, TG,
                                                                        cfg->norm_topk, cfg->scaling, cfg->bf16_steps, sc,
                                                                        sel, gs, ok,
                                                                        gok, idx, w);
    ND_LAUNCHED("router_kernel");
    return 0;
}

/* ---- dispatch ---- */
__global__ void gather_rows_kernel(const float *__restrict__ x, const int32_t *__restrict__ rows, int64_t nr,
                                   int64_t d, float *__restrict__ out) {
    const int64_t total = nr * d;
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = q / d, c = q % d;
        out[q] = x[(int64_t)rows[r] * d + c];
    }
}

static int check_rows(const char *op, const int32_t *rows_host, int64_t nr, nd_err *e) {
    for (int64_t r = 0; r < nr; r++)
        if (rows_host[r] < 0)
            return nd_fail(e, ND_EXIT_INTERNAL, "cuda: %s: row index %d at %lld is negative", op, rows_host[r],
                           (long long)r);
    return 0;
}

int nd_cuda_gather_rows(nd_backend *b, const float *x, const int32_t *rows_host, int64_t nr, int64_t d, float *out,
                        nd_err *e) {
    if (nr < 0 || d < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: gather_rows: negative size");
    if (nr * d == 0) return 0;
    ND_TRY(check_rows("gather_rows", rows_host, nr, e));
    void *s;
    ND_TRY(nd_cuda_scratch(b, (size_t)nr * 4, &s, e));
    ND_TRY(nd_cuda_stage(b, s, rows_host, (size_t)nr * 4, e));
    gather_rows_kernel<<<nd_cuda_grid(b, nr * d, 256), 256, 0, nd_cu(b)->stream>>>(x, (const int32_t *)s, nr, d, out);
    ND_LAUNCHED("gather_rows_kernel");
    return 0;
}

/* ---- combine ---- */
/* plan: ndst destinations; dst[u] its row; for u, contributors src[off[u] .. off[u+1]) in
 * increasing r, with weights wt[] in the same order. */
__global__ void scatter_add_kernel(float *y, const float *__restrict__ x, int64_t ndst, int64_t d,
                                   const int32_t *__restrict__ dst, const int32_t *__restrict__ off,
                                   const int32_t *__restrict__ src, const float *__restrict__ wt, int bf16_products) {
    const int64_t total = ndst * d;
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t u = q / d, c = q % d;
        float *yp = y + (int64_t)dst[u] * d + c;
        float a = *yp;
        for (int32_t z = off[u]; z < off[u + 1]; z++) a = __fadd_rn(a, nd_combine_term(wt[z], x[(int64_t)src[z] * d + c], bf16_products));
        *yp = a;
    }
}

static int cmp_by_row(const void *pa, const void *pb) {
    const int64_t *a = (const int64_t *)pa, *b = (const int64_t *)pb; /* (row << 32 | r): stable by r */
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

int nd_cuda_scatter_add_rows(nd_backend *b, float *y, const float *x, const int32_t *rows_host, const float *w_host,
                             int64_t nr, int64_t d, int bf16_products, nd_err *e) {
    if (nr < 0 || d < 0) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: scatter_add_rows: negative size");
    if (nr * d == 0) return 0;
    if (nr > 2147483647LL) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: scatter_add_rows: too many rows");
    ND_TRY(check_rows("scatter_add_rows", rows_host, nr, e));
    /* host plan: sort (row, r) pairs, so each destination's contributors stay in increasing r */
    int64_t *key = (int64_t *)malloc((size_t)nr * sizeof *key);
    int32_t *plan = (int32_t *)malloc((size_t)(3 * nr + 1) * sizeof *plan);
    float *wt = (float *)malloc((size_t)nr * sizeof *wt);
    if (!key || !plan || !wt) {
        free(key); free(plan); free(wt);
        return nd_fail(e, ND_EXIT_INTERNAL, "cuda: scatter_add_rows: out of host memory");
    }
    for (int64_t r = 0; r < nr; r++) key[r] = ((int64_t)rows_host[r] << 32) | r;
    qsort(key, (size_t)nr, sizeof *key, cmp_by_row);
    int32_t *dst = plan, *off = plan + nr, *src = plan + 2 * nr + 1;
    int64_t nd = 0;
    for (int64_t z = 0; z < nr; z++) {
        const int32_t row = (int32_t)(key[z] >> 32), r = (int32_t)(key[z] & 0xffffffff);
        if (z == 0 || row != dst[nd - 1]) { dst[nd] = row; off[nd] = (int32_t)z; nd++; }
        src[z] = r;
        wt[z] = w_host[r];
    }
    off[nd] = (int32_t)nr;
    /* device copy: dst [nd], off [nd+1], src [nr], wt [nr] */
    const size_t bd = ((size_t)nd * 4 + 255) & ~(size_t)255, bo = ((size_t)(nd + 1) * 4 + 255) & ~(size_t)255;
    const size_t bs = ((size_t)nr * 4 + 255) & ~(size_t)255;
    void *s;
    int rc = nd_cuda_scratch(b, bd + bo + bs + (size_t)nr * 4, &s, e);
    char *p = (char *)s;
    if (!rc) rc = nd_cuda_stage(b, p, dst, (size_t)nd * 4, e);
    if (!rc) rc = nd_cuda_stage(b, p + bd, off, (size_t)(nd + 1) * 4, e);
    if (!rc) rc = nd_cuda_stage(b, p + bd + bo, src, (size_t)nr * 4, e);
    if (!rc) rc = nd_cuda_stage(b, p + bd + bo + bs, wt, (size_t)nr * 4, e);
    free(key); free(plan); free(wt);
    if (rc) return rc;
    scatter_add_kernel<<<nd_cuda_grid(b, nd * d, 256), 256, 0, nd_cu(b)->stream>>>(
        y, x, nd, d, (const int32_t *)p, (const int32_t *)(p + bd), (const int32_t *)(p + bd + bo),
        (const float *)(p + bd + bo + bs), bf16_products);
    ND_LAUNCHED("scatter_add_kernel");
    return 0;
}
