/* repair.h — the candidate repairs of one diverged stage (issue 13). A repair is a small named
 * transform of what the stage reads or of one kernel parameter, written as --override
 * assignments, so the same text that is replayed on the stage applies it to the whole run. */
#ifndef ND_REPAIR_H
#define ND_REPAIR_H
#include "trace/trace.h"
#include "pipeline/pipeline.h"

#define ND_REPAIR_MAX_OVR 4
#define ND_REPAIR_MAX 24

typedef struct nd_repair {
    char name[40];                          /* input_scale_reciprocal, input_scale_pow2, ... */
    char cause[ND_VERDICT_LEN];             /* the cause it proves when it restores the stage */
    char what[200];                         /* the change in words ("... 0.000372 -> 2688") */
    int n_ovr;
    char ovr[ND_REPAIR_MAX_OVR][320];       /* NAME=VALUE, as --override takes them */
} nd_repair;

/* The candidates for the row, from what a single-stage replay learned of its module (info).
 * Returns how many were written to out (at most cap). Rows of stages without a module get none. */
int nd_repairs_for(const nd_row *row, const nd_stage_info *info, nd_repair *out, int cap);

/* The on-disk value of an input scale whose meaning is the multiplier `mult` (2688/amax):
 * compressed-tensors stores the multiplier, ModelOpt its reciprocal. Same for weight divisors. */
double nd_repair_file_value(const nd_stage_info *info, double mult);

#endif
