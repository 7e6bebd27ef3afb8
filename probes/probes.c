#include "probes.h"
#include "numerics/nd_cmp_rule.h"
#include <math.h>

double nd_probe_cosine(const nd_cmp *c) {
    if (c->sum_rr == 0 && c->sum_pp == 0) return 1.0;   /* both all-zero: identical */
    if (c->sum_rr == 0 || c->sum_pp == 0) return 0.0;   /* one all-zero: nothing in common */
    return c->sum_rp / sqrt(c->sum_rr * c->sum_pp);
}

double nd_probe_rel_l2(const nd_cmp *c) { return sqrt(nd_cmp_energy_ratio(c->sum_ee, c->sum_rr)); }

/* capped so that identical outputs stay a finite, comparable number in traces */
double nd_probe_sqnr_db(const nd_cmp *c) {
    if (c->sum_ee == 0) return ND_SQNR_CAP_DB;
    if (c->sum_rr == 0) return -ND_SQNR_CAP_DB;
    double v = 10.0 * log10(c->sum_rr / c->sum_ee);
    return v > ND_SQNR_CAP_DB ? ND_SQNR_CAP_DB : v;
}

/* every element has a NaN/Inf on one side: no pair was compared, and cosine 1 / SQNR 200 over
 * an empty set would read as a perfect match (a captured tensor of NaN showed exactly that) */
static int no_finite_pair(const nd_cmp *c) {
    return c->n > 0 && (c->ref_nan + c->ref_inf >= c->n || c->prod_nan + c->prod_inf >= c->n);
}

void nd_probe_fill(nd_row *row, const nd_cmp *c) {
    row->numel = c->n;
    row->ref_amax = c->ref_amax;
    row->prod_amax = c->prod_amax;
    row->ref_nan = c->ref_nan;
    row->prod_nan = c->prod_nan;
    row->ref_inf = c->ref_inf;
    row->prod_inf = c->prod_inf;
    row->cosine = nd_probe_cosine(c);
    row->rel_l2 = nd_probe_rel_l2(c);
    row->sqnr_db = nd_probe_sqnr_db(c);
    row->max_abs_err = c->max_abs_err;
    if (no_finite_pair(c)) row->cosine = row->rel_l2 = row->sqnr_db = row->max_abs_err = NAN;
    row->worst_block = c->worst_block;
    row->worst_block_rel = nd_cmp_energy_ratio(c->worst_block_ee, c->worst_block_rr);
}

void nd_probe_logits(const nd_logits_row *rows, int64_t t, double *kl, double *top1) {
    double kl_sum = 0;
    int64_t agree = 0, counted = 0;
    for (int64_t i = 0; i < t; i++) {
        if (rows[i].top_ref < 0) continue;
        kl_sum += rows[i].kl;
        agree += rows[i].top_ref == rows[i].top_prod;
        counted++;
    }
    *kl = counted ? kl_sum / (double)counted : NAN;
    *top1 = counted ? (double)agree / (double)counted : NAN;
}
