/* probes.h — per-stage figures from a fused (ref, prod) comparison (SPEC §6). Each probe is a
 * small function of one nd_cmp; the backend computes the nd_cmp in one pass over both tensors. */
#ifndef ND_PROBES_H
#define ND_PROBES_H
#include "backend.h"
#include "trace/trace.h"

/* numel, amax, NaN/Inf counts, cosine, rel_l2, sqnr_db, max_abs_err, worst block */
void nd_probe_fill(nd_row *row, const nd_cmp *c);
double nd_probe_cosine(const nd_cmp *c);
double nd_probe_rel_l2(const nd_cmp *c);
double nd_probe_sqnr_db(const nd_cmp *c);
/* Mean KL(ref || prod) and top-1 agreement of next-token distributions over the t positions the
 * backend's logits_kl op counted (numerics/nd_logits.h); NaN when it counted none. */
void nd_probe_logits(const nd_logits_row *rows, int64_t t, double *kl, double *top1);

#define ND_SQNR_CAP_DB 200.0
#endif
