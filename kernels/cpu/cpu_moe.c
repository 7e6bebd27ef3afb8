/* cpu_moe.c — MoE dispatch (gather rows) and combine (weighted scatter-add, in row order). */
#include <string.h>
#include "cpu_internal.h"
#include "numerics/nd_bf16_steps.h"

/* The ops are not told how many rows x (gather) or y (scatter) has, so only negative indices
 * can be rejected here; the caller owns the upper bound. */
int nd_cpu_gather_rows(nd_backend *b, const float *x, const int32_t *rows_host, int64_t nr, int64_t d,
                       float *out, nd_err *e) {
    (void)b;
    const char *op = "gather_rows";
    ND_CPU_SIZES(e, op, nr, d);
    if (nr * d == 0) return 0;
    ND_CPU_REQUIRE(x && rows_host && out, e, op, "NULL buffer");
    for (int64_t r = 0; r < nr; r++)
        ND_CPU_REQUIRE(rows_host[r] >= 0, e, op, "row index %d at %lld is negative", rows_host[r], (long long)r);
    for (int64_t r = 0; r < nr; r++)
        memcpy(out + r * d, x + (int64_t)rows_host[r] * d, (size_t)d * sizeof *out);
    return 0;
}

int nd_cpu_scatter_add_rows(nd_backend *b, float *y, const float *x, const int32_t *rows_host,
                            const float *w_host, int64_t nr, int64_t d, int bf16_products, nd_err *e) {
    (void)b;
    const char *op = "scatter_add_rows";
    ND_CPU_SIZES(e, op, nr, d);
    if (nr * d == 0) return 0;
    ND_CPU_REQUIRE(y && x && rows_host && w_host, e, op, "NULL buffer");
    for (int64_t r = 0; r < nr; r++)
        ND_CPU_REQUIRE(rows_host[r] >= 0, e, op, "row index %d at %lld is negative", rows_host[r], (long long)r);
    for (int64_t r = 0; r < nr; r++) {
        float *yr = y + (int64_t)rows_host[r] * d;
        const float *xr = x + r * d;
        const float wr = w_host[r];
        for (int64_t c = 0; c < d; c++) yr[c] += nd_combine_term(wr, xr[c], bf16_products);
    }
    return 0;
}
