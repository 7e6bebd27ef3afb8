/* quality_text.h — printing what NVFP4 costs the model on this prompt (issue 31 item 7): the final logits of
 * the chained production path against the reference path (the BF16 original under
 * --reference-checkpoint: its weights feed the reference path), KL and top-1, and how the error of
 * the layers' outputs grows with depth. Printed under the layer table and kept in trace --json. */
#ifndef ND_QUALITY_TEXT_H
#define ND_QUALITY_TEXT_H
#include <jansson.h>
#include "pipeline/pipeline.h"
#include "trace/trace_quality.h"

/* one wrapped paragraph; vs_original: the reference path ran --reference-checkpoint's weights */
void nd_trace_print_quality(const nd_quality *q, int vs_original, int width);
json_t *nd_trace_quality_json(const nd_quality *q, int vs_original);
#endif
