/* trace_quality.h — what NVFP4 costs the model on a run's prompt (issue 31 item 7), from a trace's
 * rows: the final logits of the chained production path against the reference path (the BF16
 * original when the run had --reference-checkpoint: its weights fed the reference path), KL and
 * top-1, and the layers' output error along the depth. `trace` prints it on a healthy run and keeps it
 * in --json; `report` shows it in the summary. */
#ifndef ND_TRACE_QUALITY_H
#define ND_TRACE_QUALITY_H
#include <stdint.h>
#include "trace/trace.h"

#define ND_QUALITY_POINTS 5
typedef struct nd_quality {
    int have;                 /* 0: no chained logits row (a layer subset, isolated mode) */
    double kl, top1;          /* mean KL(ref || prod) per position (nats), share of positions agreeing */
    int64_t positions;
    double ppl_ref, ppl_prod; /* the prompt's perplexity on each path: exp of the mean next-token NLL
                               * (NaN with fewer than 2 tokens or in traces written before it existed) */
    int npoints;              /* layer outputs sampled along the depth: first, quarters, last */
    int layer[ND_QUALITY_POINTS];
    double rel_l2[ND_QUALITY_POINTS];
} nd_quality;

/* ntok: the prompt's positions (0: the 16 built-in ids) */
void nd_quality_of(const nd_row *rows, int64_t nrows, int64_t ntok, nd_quality *q);
#endif
