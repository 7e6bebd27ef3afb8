/* cpu_compare.c — the fused comparison probe: one pass, double accumulation.
 *
 * Counts (NaN, Inf) see every element; amax sees the finite elements of each side; the sums,
 * max_abs_err and the per-block energies see the elements where both sides are finite. The
 * worst block is the one with the largest Σ(ref-prod)², ties to the lower block index.
 * With prod == NULL: n, ref_amax, ref_nan, ref_inf and sum_rr (over finite ref) are filled,
 * everything else is 0 and worst_block is -1.
 */
#include <math.h>
#include <string.h>
#include "cpu_internal.h"
#include "numerics/nd_cmp_rule.h"

int nd_cpu_compare(nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block,
                   nd_cmp *out_host, nd_err *e) {
    (void)b;
    const char *op = "compare";
    ND_CPU_SIZES(e, op, n);
    ND_CPU_REQUIRE(block > 0, e, op, "block %lld must be positive", (long long)block);
    ND_CPU_REQUIRE(out_host && (n == 0 || ref), e, op, "NULL buffer");
    nd_cmp c;
    memset(&c, 0, sizeof c);
    c.n = n;
    c.worst_block = -1;
    double blk_ee = 0.0, blk_rr = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double r = ref[i];
        const int rf = isfinite(ref[i]);
        if (isnan(ref[i])) c.ref_nan++; else if (!rf) c.ref_inf++;
        else if (fabs(r) > c.ref_amax) c.ref_amax = fabs(r);
        if (!prod) { if (rf) c.sum_rr += r * r; continue; }
        const double p = prod[i];
        const int pf = isfinite(prod[i]);
        if (isnan(prod[i])) c.prod_nan++; else if (!pf) c.prod_inf++;
        else if (fabs(p) > c.prod_amax) c.prod_amax = fabs(p);
        if (rf && pf) {
            const double d = r - p;
            c.sum_rr += r * r; c.sum_pp += p * p; c.sum_rp += r * p; c.sum_ee += d * d;
            if (fabs(d) > c.max_abs_err) c.max_abs_err = fabs(d);
            blk_ee += d * d; blk_rr += r * r;
        }
        if ((i + 1) % block == 0 || i + 1 == n) {   /* a block closes (the last may be short) */
            if (nd_cmp_block_worse(i / block, blk_ee, c.worst_block, c.worst_block_ee)) {
                c.worst_block = i / block;
                c.worst_block_ee = blk_ee;
                c.worst_block_rr = blk_rr;
            }
            blk_ee = blk_rr = 0.0;
        }
    }
    *out_host = c;
    return 0;
}
