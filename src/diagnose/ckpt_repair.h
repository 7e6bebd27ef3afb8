/* ckpt_repair.h — candidate repairs and static facts that need the checkpoint itself, not only what
 * a replay learned of the module (issue 18):
 *   load_orphan_scale       scale_not_loaded: the module's input scale or weight global is absent
 *                           under its format's name and stored under the other format's name
 *                           (ckpt/audit.h): the repair loads the orphan's value under the name the
 *                           loader reads (--override model.<module>.<name>=<orphan value>)
 *   input_scale_from_sibling scale_not_loaded: a routed expert without the input scale its sibling
 *                           experts have: the siblings' smallest multiplier (the largest calibrated
 *                           amax, what a shared MoE input scale would be; no clipping)
 * and the static fact scale_underflow: more than 1/8 of the module's non-zero E4M3 block scales are
 * subnormal (< 2^-6), a precision loss no override of a scalar undoes (re-export the weight with a
 * global that maps amax(W) to 448 x 6). */
#ifndef ND_CKPT_REPAIR_H
#define ND_CKPT_REPAIR_H
#include <stddef.h>
#include "repair.h"

/* The repairs above for the row's module (none when it has all its scales); returns how many were
 * written to out (at most cap). Errors opening the checkpoint leave it at 0. */
int nd_ckpt_repairs_for(const char *ckpt_dir, const nd_row *row, const nd_stage_info *in, nd_repair *out, int cap);
/* "scale_underflow" with a sentence in evidence when the module's block scales are mostly
 * subnormal, or (weight_rel_l2 against the original above 0.5) more than 1/8 of its blocks hold
 * only zero codes; NULL otherwise. */
const char *nd_ckpt_static_cause(const char *ckpt_dir, const nd_stage_info *in, double weight_rel_l2, char *evidence, size_t cap);
/* "nonfinite_weight" (or "nan_weight_scale" for a scale tensor) with a sentence in evidence when a
 * tensor the stage reads -- the tensors of its module (in->module), else those named after the stage
 * itself (a norm's weight) -- holds NaN or Inf values as stored; NULL otherwise. Packed FP4 codes
 * and byte-encoded scales have their own checks and are skipped. */
const char *nd_ckpt_nonfinite_tensor(const char *ckpt_dir, const char *stage, const nd_stage_info *in, char *evidence,
                                     size_t cap);

#endif
