/* verdict.h — whether one row diverged, decided from its figures (the pipeline judges every row
 * as it is produced). The code a row carries is what its figures suggest; the cause a user is
 * told comes from the diagnosis above the pipeline (src/diagnose), which proves it by repair. */
#ifndef ND_VERDICT_H
#define ND_VERDICT_H
#include <stddef.h>
#include "trace/trace.h"
#include "recipe/recipe.h"

/* Set row->verdict to "ok" or a SPEC §7 code suggested by the figures. */
void nd_verdict_row(nd_row *row, const nd_thresholds *th);
/* 1 when the figures say the row diverged (verdict not "ok"). */
int nd_row_diverged(const nd_row *row);
/* The first row that names a divergence: isolated (and captured) rows first, then chained rows
 * where NaN/Inf appears first. Fills status/first_divergence/mode/cause/message from the figures.
 * Returns its index or -1. */
int64_t nd_first_divergence(const nd_row *rows, int64_t n, nd_trace_summary *s);
/* One sentence on the figures of a diverged row (never "cosine 1" alone for an all-zero or
 * non-finite output). */
void nd_row_evidence(const nd_row *r, char *out, size_t cap);
#endif
