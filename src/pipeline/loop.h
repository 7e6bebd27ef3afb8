/* loop.h — what the stage loop keeps of a run (issue 23: ops compute, the loop records): the
 * command's options, the trace writer, the rows, calibration, progress, the capture of a repro,
 * --prod-dump, the two paths' environments and the sink the ops hand their results to. nd_run
 * points here through `loop`, a pointer the ops never open: only the loop's files (run.c,
 * record.c, hooks.c, rowq.c) include this header (tests/pipeline/ops_record_only.sh). */
#ifndef ND_LOOP_H
#define ND_LOOP_H

#include "run.h"
#include "sink.h"
#include "pipeline.h"
#include "trace/trace.h"

struct nd_loop {
    const struct nd_trace_opts *opts; /* the command's options (NULL: calibration) */
    int modes;                 /* ND_MODE_* bits */
    int layer_lo, layer_hi;    /* replayed layers [lo, hi] */
    int64_t *own_tokens;       /* the default token list, when the user gave none */
    nd_env env_ref, env_chain; /* stage outputs by name on the reference and the chained path */
    nd_trace_w *tw;            /* the trace file, or NULL */
    int dump_tensors;
    int32_t next_index;
    nd_row *rows;              /* every row written, for diagnosis and the table */
    int64_t nrows, cap_rows;
    struct nd_rowq *rq;        /* rows pending until their probe figures come back (rowq.h) */
    /* calibration mode: report input amax of linear modules instead of tracing */
    void (*calib_cb)(void *user, const char *module, double amax);
    void *calib_user;
    int progress;              /* print progress on stderr */
    int captured;              /* single-stage replay: the stage that makes the row ran (stop) */
    nd_st_file *dump;          /* --prod-dump file or NULL */
    unsigned char *dump_used;  /* per tensor of dump: 1 once a stage looked it up */
    nd_sink sink;              /* what the ops hand over comes here (record.c) */
};

/* run.c: one stage instance (the definition at `layer`) in `modes`, recorded through the sink */
int nd_loop_stage_body(nd_run *r, const nd_stage_def *def, int layer, int modes, nd_err *e);
/* stage_rec.c: the single-stage replay's record (pipeline.h nd_stage_replay). _watch: collect the
 * override names the stack is asked for; _inputs: copy what stage def is about to read (the
 * collection stops); _made: whether it made the row (not: no replay skips it); _run: the recorded
 * stage alone from its inputs, in the loop's modes. */
void nd_stage_rec_watch(struct nd_stage_rec *rec, nd_stack *s);
int nd_stage_rec_inputs(nd_run *r, struct nd_stage_rec *rec, const nd_stage_def *def, nd_err *e);
void nd_stage_rec_made(nd_run *r, struct nd_stage_rec *rec, const nd_stage_def *def, int layer, int made);
int nd_stage_rec_run(nd_run *r, struct nd_stage_rec *rec, nd_err *e);
/* The host view of buffer b as a stage input named `name`: its floats downloaded into *host (the
 * caller frees it), its routing decision pointed at (valid while b is). */
int nd_stage_input_of(nd_run *r, const nd_buf *b, const char *name, nd_stage_input *in, float **host, nd_err *e);
/* run.c: the stage instance named `stage` makes the row `row` (its name, or a dot-prefix of it:
 * "layers.0.mlp.experts" makes "layers.0.mlp.experts.3.up_proj") */
int nd_stage_makes_row(const char *stage, const char *row);

#endif
