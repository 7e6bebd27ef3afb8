/* cuda_results.cu — the device buffer of probe results (cuda_results.cuh): slots, the one
 * device-to-host copy per flush, and the conversion into nd_cmp / nd_qstats. */
#include "cuda_results.cuh"

#include <stdlib.h>
#include <string.h>

struct nd_cuda_results {
    void *dev, *host;        /* ND_RES_SLOTS slots each; host pinned */
    unsigned *ticket;        /* last-block election counter, kept at 0 between kernels */
    int n;                   /* slots handed out since the last flush */
    struct pending {
        int kind;
        void *dst;
        int64_t a, b;
    } *pend;
};

static int res_init(nd_backend *b, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    if (c->res) return 0;
    nd_cuda_results *r = (nd_cuda_results *)calloc(1, sizeof *r);
    if (!r) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: results: out of host memory");
    c->res = r;
    r->pend = (nd_cuda_results::pending *)calloc(ND_RES_SLOTS, sizeof *r->pend);
    if (!r->pend) return nd_fail(e, ND_EXIT_INTERNAL, "cuda: results: out of host memory");
    ND_CU(cudaMalloc(&r->dev, (size_t)ND_RES_SLOTS * ND_RES_SLOT_BYTES + 256));
    r->ticket = (unsigned *)((char *)r->dev + (size_t)ND_RES_SLOTS * ND_RES_SLOT_BYTES);
    ND_CU(cudaMallocHost(&r->host, (size_t)ND_RES_SLOTS * ND_RES_SLOT_BYTES));
    ND_CU(cudaMemsetAsync(r->dev, 0, (size_t)ND_RES_SLOTS * ND_RES_SLOT_BYTES + 256, c->stream));
    return 0;
}

static void fill_cmp(nd_cmp *o, const cmp_part *t, int64_t n, int has_prod) {
    memset(o, 0, sizeof *o);
    o->n = n;
    o->worst_block = -1;
    if (n == 0) return;
    float f;
    memcpy(&f, &t->ramax, 4);
    o->ref_amax = f;
    o->ref_nan = (int64_t)t->rnan;
    o->ref_inf = (int64_t)t->rinf;
    o->sum_rr = t->rr;
    if (!has_prod) return;
    memcpy(&f, &t->pamax, 4);
    o->prod_amax = f;
    o->prod_nan = (int64_t)t->pnan;
    o->prod_inf = (int64_t)t->pinf;
    o->sum_pp = t->pp;
    o->sum_rp = t->rp;
    o->sum_ee = t->ee;
    o->max_abs_err = t->maxerr;
    o->worst_block = t->bidx;
    o->worst_block_ee = t->bee;
    o->worst_block_rr = t->brr;
}

static void fill_qstats(nd_qstats *o, const unsigned long long *hs, int64_t n_elems, int64_t n_blocks) {
    memset(o, 0, sizeof *o);
    o->n_elems = n_elems;
    o->n_blocks = n_blocks;
    o->n_saturated = (int64_t)hs[QS_SAT];
    o->n_nonzero_blocks = (int64_t)hs[QS_NONZERO];
    o->n_zero_scale = (int64_t)hs[QS_ZERO_SCALE];
    o->n_scale_448 = (int64_t)hs[QS_448];
    o->n_nan_scale = (int64_t)hs[QS_NAN];
}

static int cu_flush_results(nd_backend *b, nd_err *e) {
    nd_cuda *c = nd_cu(b);
    nd_cuda_results *r = c->res;
    if (!r || r->n == 0) return 0;
    const size_t bytes = (size_t)r->n * ND_RES_SLOT_BYTES;
    ND_CU(cudaMemcpyAsync(r->host, r->dev, bytes, cudaMemcpyDeviceToHost, c->stream));
    ND_CU(cudaMemsetAsync(r->dev, 0, bytes, c->stream)); /* slots are handed out zeroed */
    ND_CU(cudaStreamSynchronize(c->stream));
    for (int i = 0; i < r->n; i++) {
        const void *s = (const char *)r->host + (size_t)i * ND_RES_SLOT_BYTES;
        const nd_cuda_results::pending *p = &r->pend[i];
        if (p->kind == ND_RES_CMP) fill_cmp((nd_cmp *)p->dst, (const cmp_part *)s, p->a, (int)p->b);
        else fill_qstats((nd_qstats *)p->dst, (const unsigned long long *)s, p->a, p->b);
    }
    r->n = 0;
    return 0;
}

extern "C" int nd_cuda_flush_results(nd_backend *b, nd_err *e) { return cu_flush_results(b, e); }

int nd_cuda_result_slot(nd_backend *b, int kind, void *host_dst, int64_t a, int64_t b_, void **slot,
                        unsigned **ticket, nd_err *e) {
    static_assert(sizeof(cmp_part) <= ND_RES_SLOT_BYTES, "a compare total fits a slot");
    ND_TRY(res_init(b, e));
    nd_cuda_results *r = nd_cu(b)->res;
    if (r->n == ND_RES_SLOTS) ND_TRY(cu_flush_results(b, e));
    r->pend[r->n].kind = kind;
    r->pend[r->n].dst = host_dst;
    r->pend[r->n].a = a;
    r->pend[r->n].b = b_;
    *slot = (char *)r->dev + (size_t)r->n * ND_RES_SLOT_BYTES;
    if (ticket) *ticket = r->ticket;
    r->n++;
    return 0;
}

int nd_cuda_result_queued(nd_backend *b, nd_err *e) {
    return b->defer_results ? 0 : cu_flush_results(b, e);
}

void nd_cuda_results_free(nd_cuda *c) {
    nd_cuda_results *r = c->res;
    if (!r) return;
    if (r->dev) cudaFree(r->dev);
    if (r->host) cudaFreeHost(r->host);
    free(r->pend);
    free(r);
    c->res = NULL;
}
