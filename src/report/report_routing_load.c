/* report_routing_load.c — the expert picks of every router stage, from /routing in the trace. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"

int nd_report_routing_load(const char *trace_path, const nd_trace *t, nd_report_routing *out, nd_err *e) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    for (int64_t i = 0; i < t->nrows; i++) {
        const nd_row *r = &t->rows[i];
        if (strcmp(r->op, "router") && !isfinite(r->topk_agree)) continue;
        int seen = 0;   /* one entry per stage, not per mode */
        for (int j = 0; j < out->n && !seen; j++) seen = !strcmp(out->picks[j].stage, r->name);
        if (seen) continue;
        if (out->n == cap) {
            int nc = cap ? cap * 2 : 16;
            void *np = realloc(out->picks, (size_t)nc * sizeof *out->picks);
            if (!np) { nd_report_routing_free(out); return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", trace_path); }
            out->picks = np;
            cap = nc;
        }
        nd_report_pick *p = &out->picks[out->n];
        memset(p, 0, sizeof *p);
        snprintf(p->stage, sizeof p->stage, "%s", r->name);
        snprintf(p->op, sizeof p->op, "%s", r->op);
        p->layer = r->layer;
        int64_t tr = 0, kr = 0, tp = 0, kp = 0;
        /* a missing path is not an error: traces written before /routing existed have none; one that is
         * there and cannot be read (corrupt, or a lie about its size) is */
        int rc = 0;
        if (nd_trace_has_routing(trace_path, r->name, "ref")) rc = nd_trace_read_routing_of(trace_path, t, r->name, "ref", &p->ref, &tr, &kr, e);
        if (!rc && nd_trace_has_routing(trace_path, r->name, "prod"))
            rc = nd_trace_read_routing_of(trace_path, t, r->name, "prod", &p->prod, &tp, &kp, e);
        if (rc) {
            free(p->ref);
            free(p->prod);
            nd_report_routing_free(out);
            return rc;
        }
        if (p->ref && p->prod && (tr != tp || kr != kp)) {
            nd_fail(e, ND_EXIT_BADINPUT, "%s: /routing/%s: ref is [%lld, %lld] but prod is [%lld, %lld]", trace_path, r->name,
                    (long long)tr, (long long)kr, (long long)tp, (long long)kp);
            free(p->ref);
            free(p->prod);
            nd_report_routing_free(out);
            return ND_EXIT_BADINPUT;
        }
        p->t = p->ref ? tr : tp;
        p->k = p->ref ? kr : kp;
        out->n++;   /* kept while loading, so a stage's second mode is seen; dropped below */
    }
    int kept = 0;
    for (int j = 0; j < out->n; j++) {
        if (!out->picks[j].ref && !out->picks[j].prod) { out->nmissing++; continue; }
        out->picks[kept++] = out->picks[j];
    }
    out->n = kept;
    return 0;
}

void nd_report_routing_free(nd_report_routing *r) {
    for (int i = 0; i < r->n; i++) { free(r->picks[i].ref); free(r->picks[i].prod); }
    free(r->picks);
    memset(r, 0, sizeof *r);
}
