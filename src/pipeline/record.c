/* record.c — the stage loop's sink (sink.h): what an op hands over becomes a probed, judged row
 * (nd_emit_row), routing records in the trace, calibration amax for the caller, the stage's
 * description for a single-stage replay, and captured activations looked up in --prod-dump. */
#include <string.h>
#include "run.h"
#include "loop.h"
#include "sink.h"
#include "pipeline.h"
#include "trace/trace.h"

static int loop_row(void *user, const nd_stage *st, const nd_result *res, nd_err *e) {
    nd_run *r = user;
    if (res->logits) ND_TRY(nd_head_logits(r, res->ref, res->prod, res->extra, e));
    return nd_emit_row(r, st, res->name, res->op, res->mode, res->ref, res->prod, res->extra, res->quantized, e);
}

static int loop_routing(void *user, const nd_stage *st, const nd_buf *ref, const nd_buf *chain, nd_err *e) {
    nd_run *r = user;
    if (!r->loop->tw) return 0;
    ND_TRY(nd_trace_put_routing(r->loop->tw, st->name, "ref", ref->idx, ref->rows, ref->k, e));
    return nd_trace_put_routing(r->loop->tw, st->name, "prod", chain->idx, chain->rows, chain->k, e);
}

static void loop_amax(void *user, const char *module, double amax) {
    nd_run *r = user;
    r->loop->calib_cb(r->loop->calib_user, module, amax);
}

static nd_stage_info *loop_stage_info(void *user, const char *stage) {
    const nd_trace_opts *o = ((nd_run *)user)->loop->opts;
    return o && o->stage_info && o->only_row && !strcmp(o->only_row, stage) ? o->stage_info : NULL;
}

static nd_buf *loop_captured(void *user, const char *stage, const char *module, const char *suffix, int64_t cols, nd_err *e) {
    return nd_run_captured(user, stage, module, suffix, cols, e);
}

void nd_loop_sink(nd_run *r) {
    nd_sink *s = &r->loop->sink;
    memset(s, 0, sizeof *s);
    s->user = r;
    s->row = loop_row;
    s->routing = loop_routing;
    if (r->loop->calib_cb) s->amax = loop_amax;
    s->stage_info = loop_stage_info;
    if (r->loop->dump) s->captured = loop_captured;
    r->sink = s;
}
