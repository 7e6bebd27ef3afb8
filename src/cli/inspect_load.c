/* inspect_load.c — see inspect_load.h. */
#include "inspect_load.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline/pipeline.h"

/* NVFP4DBG_INSPECT_LOAD_LIMIT: a byte count (digits only); unset: 4 GiB; anything else is exit 2 */
static int limit_bytes(uint64_t *out, nd_err *e) {
    const char *v = getenv("NVFP4DBG_INSPECT_LOAD_LIMIT");
    *out = (uint64_t)4 << 30;
    if (!v) return 0;
    errno = 0;
    char *end = NULL;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || v[0] == '-' || v[0] == '+' || errno)
        return nd_fail(e, ND_EXIT_BADINPUT, "NVFP4DBG_INSPECT_LOAD_LIMIT=%s: expected a byte count (digits only; 0: never replay)", v);
    *out = (uint64_t)x;
    return 0;
}

int nd_inspect_load_check(const nd_ckpt *c, char *status, size_t cap, nd_err *e) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < nd_ckpt_count(c); i++) bytes += nd_ckpt_at(c, i)->nbytes;
    uint64_t lim;
    ND_TRY(limit_bytes(&lim, e));
    if (bytes > lim) {
        snprintf(status, cap, "not replayed (%.3g GiB of tensors, more than %.3g GiB: trace reads them)",
                 (double)bytes / 1073741824.0, (double)lim / 1073741824.0);
        return 0;
    }
    const int64_t token = 0;
    nd_trace_opts o;
    memset(&o, 0, sizeof o);
    o.ckpt_dir = nd_ckpt_dir(c);
    o.backend = "cpu";
    o.tokens = &token;
    o.ntok = 1;
    o.layer_hi = -1;
    o.modes = ND_MODES_ISOLATED;
    o.allow_unquantized = 1;
    nd_trace_result res;
    const int rc = nd_pipeline_trace(&o, &res, e);
    nd_trace_result_free(&res);
    if (rc) return nd_wrap(e, "%s: trace cannot replay this checkpoint", nd_ckpt_dir(c));
    snprintf(status, cap, "ok (every stage replayed on one token, as trace reads it)");
    return 0;
}
