/* fuzz_trace.c — the HDF5 trace reader (nd_trace_read on a file), then what `compare`, `report`
 * and repro do with an accepted trace: compare it with itself, read the first stage's tensors
 * and routing. An accepted trace has rows with a name and a mode, and a trace compared with
 * itself has no regression. */
#include <stdlib.h>
#include "trace/trace.h"
#include "fuzz_common.h"

static int load(const char *path, void *out, nd_err *e) { return nd_trace_read(path, out, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nd_trace *t = NULL;
    const char *p = fz_parse("trace.h5", data, size, load, &t);
    if (!p) return 0;
    nd_err e = {0};
    FZ_ASSERT(t->nrows >= 0 && (t->nrows == 0 || t->rows) && t->ntokens >= 0, "counts");
    for (int64_t i = 0; i < t->nrows; i++) FZ_ASSERT(t->rows[i].name[0] && t->rows[i].mode[0], "row %lld", (long long)i);
    nd_tolerances tol;
    nd_tolerances_default(&tol);
    nd_cmp_result r;
    int rc = nd_trace_compare(t, t, &tol, &r, &e);
    fz_check_err(rc, &e, p);
    if (!rc) {
        FZ_ASSERT(r.nregressions == 0, "a trace compared with itself has %d regressions", r.nregressions);
        nd_cmp_result_free(&r);
    }
    if (t->nrows > 0) {
        float *x = NULL;
        int nd = 0;
        int64_t shape[ND_TRACE_MAXDIM];
        rc = nd_trace_read_tensor(p, t->rows[0].name, "ref", &x, &nd, shape, &e);
        fz_check_err(rc, &e, p);
        free(x);
        int32_t *idx = NULL;
        int64_t tt, k;
        rc = nd_trace_read_routing(p, t->rows[0].name, "prod", &idx, &tt, &k, &e);
        fz_check_err(rc, &e, p);
        free(idx);
    }
    nd_trace_free(t);
    return 0;
}
