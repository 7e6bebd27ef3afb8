/* fuzz_tolerances.c — compare's tolerance YAML (nd_tolerances_load on a file). Every tolerance an
 * accepted file yields must be a finite number >= 0, for any stage and op looked up. */
#include <math.h>
#include "trace/trace.h"
#include "fuzz_common.h"

static int load(const char *path, void *out, nd_err *e) { return nd_tolerances_load(path, out, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nd_tolerances t;
    if (!fz_parse("tolerances.yaml", data, size, load, &t)) return 0;
    static const char *const stages[] = {"layers.0.self_attn.q_a_proj", "head", "embed", ""};
    static const char *const ops[] = {"linear", "rmsnorm", "moe", ""};
    for (int i = 0; i < 4; i++)
        for (int fig = 0; fig < ND_NFIG; fig++) {
            nd_tol tol = nd_tolerance_for(&t, stages[i], ops[i], fig);
            FZ_ASSERT(isfinite(tol.abs) && tol.abs >= 0 && isfinite(tol.rel) && tol.rel >= 0, "tolerance %g %g",
                      tol.abs, tol.rel);
        }
    for (int i = 0; i < t.nrules; i++) FZ_ASSERT(t.rules[i].key[0], "rule %d without a key", i);
    nd_tolerances_free(&t);
    return 0;
}
