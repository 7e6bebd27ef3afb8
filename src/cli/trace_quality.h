/* trace_quality.h — what NVFP4 costs the model on this prompt (issue 31 item 7): the final logits of
 * the chained production path against the reference path (the BF16 original under
 * --reference-checkpoint: its weights feed the reference path), KL and top-1, and how the error of
 * the layers' outputs grows with depth. Printed under the layer table and kept in trace --json. */
#ifndef ND_TRACE_QUALITY_H
#define ND_TRACE_QUALITY_H
#include <jansson.h>
#include "pipeline/pipeline.h"

#define ND_QUALITY_POINTS 5
typedef struct nd_quality {
    int have;                 /* 0: no chained logits row (layers subset, isolated mode) */
    double kl, top1;          /* mean KL(ref || prod) per position (nats), share of positions agreeing */
    int64_t positions;
    int npoints;              /* layer outputs sampled along the depth: first, quarters, last */
    int layer[ND_QUALITY_POINTS];
    double rel_l2[ND_QUALITY_POINTS];
} nd_quality;

void nd_trace_quality(const nd_trace_result *res, int64_t ntok, nd_quality *q);
/* one wrapped paragraph; vs_original: the reference path ran --reference-checkpoint's weights */
void nd_trace_print_quality(const nd_quality *q, int vs_original, int width);
json_t *nd_trace_quality_json(const nd_quality *q, int vs_original);
#endif
