/* sink.h — how an op hands what it found to the loop that runs it (issue 23: ops compute, the stage
 * loop records).
 *
 * An op computes its outputs and the figures only it knows; it never writes the trace, the row
 * table, routing records or calibration state itself. Each of those goes to the stage context's
 * sink (r->sink), a small table of functions the caller supplies: run.c's stage loop turns a row
 * into probes, a verdict and a trace row, a routing decision into the trace's /routing group and
 * an amax into the calibration callback; a unit test's sink just keeps what it is handed. Any
 * entry may be NULL (nothing recorded). While r->silent > 0 (an internal recomputation) no row,
 * routing decision, stage description or captured activation is handed on. ops_*.c reach the loop only through the nd_put_* and nd_sink_* functions below
 * (scripts/check-ops.sh enforces it). */
#ifndef ND_SINK_H
#define ND_SINK_H

#include "run.h"
#include "pipeline.h"

/* One result row: the reference and production outputs of a stage (or of one module inside it)
 * in one mode, with the figures the op measured (extra: NULL for none). */
typedef struct nd_result {
    const char *name, *op;
    int mode;                  /* ND_MODE_ISOLATED, _CHAINED or _CAPTURED */
    const nd_buf *ref, *prod;
    nd_row *extra;             /* the loop may add figures to it (logits below) */
    int quantized;
    int logits;                /* head: the loop also measures KL divergence and top-1 agreement */
} nd_result;

typedef struct nd_sink {
    void *user;
    int (*row)(void *user, const nd_stage *st, const nd_result *res, nd_err *e);
    /* a routing decision (expert or entry ids [rows, k]) on the reference and the chained path */
    int (*routing)(void *user, const nd_stage *st, const nd_buf *ref, const nd_buf *chain, nd_err *e);
    /* calibration: the input amax of a module; set only while calibrating (ops then run the
     * reference path alone) */
    void (*amax)(void *user, const char *module, double amax);
    /* single-stage replay: where to describe the stage named `stage`, or NULL */
    nd_stage_info *(*stage_info)(void *user, const char *stage);
    /* a serving stack's captured activation of a stage or module (suffix "" or ".input"), NULL when
     * there is none (e->code set on a real error); the entry itself is NULL without a capture file */
    nd_buf *(*captured)(void *user, const char *stage, const char *module, const char *suffix, int64_t cols, nd_err *e);
} nd_sink;

/* The op side: each does nothing (returns 0 / NULL) without the sink entry or while r->silent. */
int nd_put_row(nd_run *r, const nd_stage *st, const nd_result *res, nd_err *e);
int nd_put_routing(nd_run *r, const nd_stage *st, const nd_buf *ref, const nd_buf *chain, nd_err *e);
void nd_put_amax(nd_run *r, const char *module, double amax);
/* 1 while calibrating: the ops compute the reference path only */
int nd_sink_calibrating(const nd_run *r);
nd_stage_info *nd_sink_stage_info(nd_run *r, const char *stage);
/* The same for stage st, cleared and started: found, the stage's module, no routed scaling (-1),
 * no input amax or weight fit (NaN); NULL when the stage is not being described. */
nd_stage_info *nd_sink_describe(nd_run *r, const nd_stage *st);
/* 1 when captured activations can be asked for */
int nd_sink_capturing(const nd_run *r);
nd_buf *nd_sink_captured(nd_run *r, const char *stage, const char *module, const char *suffix, int64_t cols, nd_err *e);

#endif
