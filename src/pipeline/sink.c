/* sink.c — the op side of sink.h: hand a result to the loop's sink, when it takes it. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "sink.h"

int nd_put_row(nd_run *r, const nd_stage *st, const nd_result *res, nd_err *e) {
    if (r->silent || !r->sink || !r->sink->row) return 0;
    return r->sink->row(r->sink->user, st, res, e);
}

int nd_put_routing(nd_run *r, const nd_stage *st, const nd_buf *ref, const nd_buf *chain, nd_err *e) {
    if (r->silent || !r->sink || !r->sink->routing) return 0;
    return r->sink->routing(r->sink->user, st, ref, chain, e);
}

void nd_put_amax(nd_run *r, const char *module, double amax) {
    if (r->sink && r->sink->amax) r->sink->amax(r->sink->user, module, amax);
}

int nd_sink_calibrating(const nd_run *r) { return r->sink && r->sink->amax; }

nd_stage_info *nd_sink_stage_info(nd_run *r, const char *stage) {
    if (r->silent || !r->sink || !r->sink->stage_info) return NULL;
    return r->sink->stage_info(r->sink->user, stage);
}

nd_stage_info *nd_sink_describe(nd_run *r, const nd_stage *st) {
    nd_stage_info *in = nd_sink_stage_info(r, st->name);
    if (!in) return NULL;
    memset(in, 0, sizeof *in);
    in->found = 1;
    in->routed_scaling = -1;
    in->in_amax = in->weight_div_fit = in->orig_amax = in->group_orig_amax = in->sf_max = NAN;
    snprintf(in->module, sizeof in->module, "%s", st->module);
    return in;
}

int nd_sink_capturing(const nd_run *r) { return !r->silent && r->sink && r->sink->captured; }

nd_buf *nd_sink_captured(nd_run *r, const char *stage, const char *module, const char *suffix, int64_t cols, nd_err *e) {
    if (!nd_sink_capturing(r)) return NULL;
    return r->sink->captured(r->sink->user, stage, module, suffix, cols, e);
}
