/* rowq.h — trace rows kept pending until their probe figures come back (issue 20).
 *
 * nd_emit_row queues a row with the compare of its two outputs; figures an op measures for a row
 * but only reports (the floor SQNR, the input's non-finite count) are queued for that row the
 * same way (nd_rows_figure, bound to the nd_row the op later hands to nd_emit_row). The backend
 * runs those compares with b->defer_results set, so on CUDA they cost no round trip each: their
 * results come back in one copy when the rows are flushed (at the end of every layer, at the end
 * of the run, when many rows are pending, and before anything reads the rows). The flush then
 * fills the figures, judges every row (verdict, the chained row that looks back at its isolated
 * row) and appends them to r->rows and the trace in the order they were emitted: the rows are
 * the same as without deferral. A compare whose figure an op needs at once (an amax that sets a
 * scale) runs without deferral, which on CUDA also brings back everything queued before it.
 *
 * NVFP4DBG_NO_DEFER=1 turns deferral off (every row flushed as it is emitted).
 * NVFP4DBG_TEST_DEFER_EMULATE=1 (tests): every queued result lands in a private copy and its
 * target holds garbage (all bytes zero: no elements, no NaN, no sums) until the flush, on any backend; the CPU backend writes
 * results at once, so this is how the tests prove that nothing reads a figure before its flush. */
#ifndef ND_ROWQ_H
#define ND_ROWQ_H

#include "run.h"

enum nd_fig_kind {
    ND_FIG_IN_NONFINITE = 1, /* row.in_nonfinite = NaN + Inf count of `ref` (prod NULL) */
    ND_FIG_FLOOR_SQNR,       /* row.floor_sqnr_db = 10 log10(|ref|² / |ref - prod|²), +Inf when equal */
};

/* 1 when nd_emit_row records rows in this run (not silent, not calibrating, probes on). */
int nd_rows_recorded(const nd_run *r);
/* Queue a figure of the row `owner` (the nd_row the op passes to nd_emit_row as `extra`). Does
 * nothing when rows are not recorded. */
int nd_rows_figure(nd_run *r, const nd_row *owner, int kind, const nd_buf *ref, const nd_buf *prod, nd_err *e);
/* (nd_emit_row) Queue `row` (its names, index, mode and the op's figures set) with the compare of
 * ref and prod; the figures queued for `owner` become this row's. Flushes at once when deferral
 * is off, and when enough rows are pending. */
int nd_rows_queue(nd_run *r, const nd_row *row, const nd_row *owner, const nd_buf *ref, const nd_buf *prod, nd_err *e);
/* (nd_emit_row, rows not recorded) drop the figures queued for `owner`. */
void nd_rows_drop(nd_run *r, const nd_row *owner);
/* Bring back every queued result, judge the pending rows and append them in order. */
int nd_rows_flush(nd_run *r, nd_err *e);
void nd_rows_free(nd_run *r);

#endif
