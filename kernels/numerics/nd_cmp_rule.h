/* nd_cmp_rule.h — the compare probe's rules shared by the CPU and CUDA compare ops and the probe
 * figures (probes/probes.c).
 *
 * The worst block of a compare is the one with the largest error energy Σ(ref-prod)²; of equal
 * energies the lowest block index wins (the CPU scans blocks in order, the CUDA op merges partials
 * in any order, so both state the tie the same way). An energy ratio e / r (rel_l2², a block's
 * relative error) is 0 for 0 / 0 and +inf for e / 0 with e > 0. */
#ifndef ND_CMP_RULE_H
#define ND_CMP_RULE_H

#include <stdint.h>
#include "nd_numerics.h"

/* block idx with error energy ee replaces the current worst (best_idx, best_ee); best_idx < 0: none yet */
ND_HD int nd_cmp_block_worse(int64_t idx, double ee, int64_t best_idx, double best_ee) {
    return idx >= 0 && (best_idx < 0 || ee > best_ee || (ee == best_ee && idx < best_idx));
}

/* error energy over reference energy (both >= 0) */
ND_HD double nd_cmp_energy_ratio(double ee, double rr) {
    if (rr > 0) return ee / rr;
    return ee > 0 ? (double)INFINITY : 0.0;
}

#endif
