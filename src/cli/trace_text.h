/* trace_text.h — the text `trace` prints (issue 22): summary first, every row on --table. */
#ifndef ND_TRACE_TEXT_H
#define ND_TRACE_TEXT_H
#include "pipeline/pipeline.h"
#include "diagnose/diagnose.h"

/* --stage PATTERN: a glob (fnmatch) when it holds * ? or [, else a substring of the name; NULL
 * or "" matches every name. */
int nd_trace_stage_match(const char *pattern, const char *name);
/* checkpoint, recipe, format, stack, backend; the tokens and layers replayed */
void nd_trace_print_header(const nd_trace_opts *o, const nd_trace_result *res, int width);
/* every row (or those --stage matches); first: the row of the first divergence, -1 none.
 * width: terminal columns, 0 no limit. */
void nd_trace_print_table(const nd_row *rows, int64_t nrows, int64_t first, int color, const char *stage, int width);
/* one line per layer (and one for the rows before the layers, one for the head): its worst stage
 * (a diverged row first, else the isolated row furthest below its floor), cosine, rel L2, the most
 * NaN/Inf of a production output in the layer, the verdict */
void nd_trace_print_layers(const nd_trace_result *res, int64_t first, int color, int width);
/* the closing line (res->summary.message) and the diagnoses under it: cause, what it means (once),
 * evidence, next command; full (--table): also every repair tried */
void nd_trace_print_verdict(const nd_trace_result *res, const nd_diagnosis *d, int n, int full, int width);
#endif
