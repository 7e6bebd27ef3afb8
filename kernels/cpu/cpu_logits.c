/* cpu_logits.c — the head probe's per-position KL and top-1 (numerics/nd_logits.h), sums in
 * increasing index. */
#include <math.h>
#include "cpu_internal.h"
#include "numerics/nd_logits.h"

int nd_cpu_logits_kl(nd_backend *b, const float *ref, const float *prod, int64_t rows, int64_t cols,
                     nd_logits_row *out_host, nd_err *e) {
    (void)b;
    const char *op = "logits_kl";
    ND_CPU_SIZES(e, op, rows, cols);
    ND_CPU_REQUIRE(out_host && (rows * cols == 0 || (ref && prod)), e, op, "NULL buffer");
    for (int64_t i = 0; i < rows; i++) {
        const float *a = ref + i * cols, *p = prod + i * cols;
        float ma = -INFINITY, mb = -INFINITY;
        int64_t ia = 0, ib = 0;
        for (int64_t j = 0; j < cols; j++) {
            if (a[j] > ma) { ma = a[j]; ia = j; }
            if (p[j] > mb) { mb = p[j]; ib = j; }
        }
        nd_logits_row *o = &out_host[i];
        if (!isfinite(ma) || !isfinite(mb)) { o->kl = o->lse_ref = o->lse_prod = NAN; o->top_ref = o->top_prod = -1; continue; }
        double za = 0, zb = 0;
        for (int64_t j = 0; j < cols; j++) { za += exp(a[j] - (double)ma); zb += exp(p[j] - (double)mb); }
        const double lza = log(za), lzb = log(zb);
        double k = 0;
        for (int64_t j = 0; j < cols; j++) k += nd_logits_kl_term(a[j], p[j], ma, lza, mb, lzb);
        o->kl = k;
        o->lse_ref = (double)ma + lza;
        o->lse_prod = (double)mb + lzb;
        o->top_ref = (int32_t)ia;
        o->top_prod = (int32_t)ib;
    }
    return 0;
}
