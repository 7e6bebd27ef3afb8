/* diagnose.h — verdicts and the first divergence, decided from trace rows alone. */
#ifndef ND_DIAGNOSE_H
#define ND_DIAGNOSE_H
#include "trace/trace.h"
#include "recipe/recipe.h"

/* Set row->verdict to "ok" or a SPEC §7 cause code. */
void nd_diagnose_row(nd_row *row, const nd_thresholds *th);
/* First isolated row whose verdict is not ok (then the first chained one): fills the summary
 * (status, first_divergence, mode, cause, message). Returns the index of that row or -1. */
int64_t nd_diagnose_summary(const nd_row *rows, int64_t n, nd_trace_summary *s);
#endif
